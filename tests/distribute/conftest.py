"""Fixtures of the distributed tests: the module's loopback cluster."""
from __future__ import annotations

import pytest

from support.cluster import local_cluster


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """One cluster of `tfbridge server` processes for the module's tests, on
    loopback ports picked for it, stopped when the module ends, pass or fail:
    its jobs from the module's ``CLUSTER`` (job -> task count), its started
    tasks from ``STARTED`` where some are left out (all by default)."""
    jobs = getattr(request.module, "CLUSTER", None)
    assert jobs, f"{request.module.__name__} uses the cluster fixture without a CLUSTER"
    with local_cluster(jobs, tmp_path_factory.mktemp("cluster"),
                       start=getattr(request.module, "STARTED", None)) as c:
        yield c
