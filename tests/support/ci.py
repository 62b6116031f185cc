"""Skips on CI: where ``CI=true`` a skipped test fails, unless what it needs cannot exist there.

CI runs on a machine that ``make test`` set up in full: the C++ toolchain,
Julia and its system image, gfortran, the Julia packages, Keras, TensorFlow.
A test that skips there because one of them is missing hides a broken
set-up, so tests/conftest.py turns every skip into a failure when
:func:`on_ci` is true.  The exceptions are skips raised through
:func:`skip_unavailable` (or the ``unavailable_if`` mark): a feature this
kind of machine cannot have at all (a CPU kernel TensorFlow ships for GPUs
only, a second CPU on a one-CPU machine).  Use them for nothing else.
"""
from __future__ import annotations

import os
from typing import Mapping, NoReturn, Optional

import pytest

#: The values of CI that mean "this is a CI run" (GitHub, GitLab and this project's .ci/run set "true").
CI_VALUES = ("true", "1", "yes")


def on_ci(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this run is CI's (the environment variable CI is true)."""
    return (environ if environ is not None else os.environ).get("CI", "").strip().lower() in CI_VALUES


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` is the skip of :func:`skip_unavailable`."""
    return isinstance(exc, pytest.skip.Exception) and getattr(exc, "unavailable", False)


def skip_unavailable(reason: str) -> NoReturn:
    """Skip, saying ``reason``, because the machine cannot have the feature (see the module doc)."""
    exc = pytest.skip.Exception(reason, _use_item_location=True)
    exc.unavailable = True   # an attribute, not a subclass: pytest reports the skip as any other
    raise exc
