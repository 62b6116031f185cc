"""The same synchronous data-parallel training on the bridge's cluster and on
stock TensorFlow's: one ps, two workers, a small MLP fed deterministic
batches, in-graph replication (one tower per worker, gradients averaged on
the ps, one apply).

(a) the bridge: `tfbridge server` processes (tests/support/cluster.py) and
this process as the client; (b) stock TensorFlow: `tf.compat.v1.train.Server`
processes and a tf.compat.v1 client, all started by
tests/oracle/distributed_training.py in processes of their own (no Julia
anywhere near them).  The loss trajectories and the final variables agree to
1e-12.
"""
from __future__ import annotations

import numpy as np
import pytest

from bridge import distribute

from support.sync_mlp import NAMES, build, feed_of, make_case

WORKERS, STEPS = 2, 20
CASES = [("GradientDescent", 0.2), ("Adam", 0.05)]

#: The module's loopback cluster (the `cluster` fixture, tests/distribute/conftest.py).
CLUSTER = {"ps": 1, "worker": WORKERS}


@pytest.fixture(scope="module")
def stock_tf(oracle):
    """Every case trained on one stock-TF cluster (one oracle run; its answer is cached)."""
    cases = [make_case(*c, workers=WORKERS, steps=STEPS) for c in CASES]
    return oracle("distributed_training", {"workers": WORKERS, "cases": cases}, timeout=300)["results"]


def _bridge_run(request: dict, cluster) -> dict:
    g, init, loss, train, feeds, variables = build(request, WORKERS)
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=60) as sess:
        sess.run(init)  # the ps's variables of an earlier case are overwritten
        losses = []
        for batch in request["batches"]:
            losses.append(sess.run([loss, train], feed_of(feeds, batch))[0])
        final = dict(zip(NAMES, sess.run([v.value() for v in variables]), strict=True))
    devices = {op.name: op.device for op in g.get_operations()}
    return {"losses": np.array(losses), "final": final, "devices": devices}


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_sync_training_matches_stock_tf_servers(index, cluster, stock_tf):
    request = make_case(*CASES[index], workers=WORKERS, steps=STEPS)
    want = stock_tf[index]
    got = _bridge_run(request, cluster)

    # The same placement on both sides: the towers' forward and gradient ops on their workers.
    for i in range(WORKERS):
        for side in (got, want):
            assert side["devices"][f"tower_{i}/MatMul"] == f"/job:worker/task:{i}"
        assert {d for n, d in got["devices"].items() if "gradients" in n and f"tower_{i}/" in n} \
            == {f"/job:worker/task:{i}"}
    assert got["devices"]["w1"] == want["devices"]["w1"] == "/job:ps/task:0"

    assert np.all(np.isfinite(got["losses"])) and len(got["losses"]) == STEPS
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-12, atol=0)
    assert got["losses"][-5:].mean() < 0.8 * got["losses"][:5].mean()      # it trains
    for name in NAMES:
        np.testing.assert_allclose(got["final"][name], want["final"][name], rtol=1e-12, atol=1e-14, err_msg=name)
    assert not np.array_equal(got["final"]["w1"], request["init"]["w1"])
