"""The same synchronous data-parallel training on the bridge's cluster and on
stock TensorFlow's: one ps, two workers, a small MLP fed deterministic
batches, in-graph replication (one tower per worker, gradients averaged on
the ps, one apply).

(a) the bridge: `tfbridge server` processes (tests/cluster_support.py) and
this process as the client; (b) stock TensorFlow: `tf.compat.v1.train.Server`
processes and a tf.compat.v1 client, all started by
tests/oracle/distributed_training.py in processes of their own (no Julia
anywhere near them).  The loss trajectories and the final variables agree to
1e-12.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import distribute, ops

from cluster_support import local_cluster

NAMES = ("w1", "b1", "w2", "b2")
WORKERS, STEPS, BATCH = 2, 20, 16


CASES = [("GradientDescent", 0.2), ("Adam", 0.05)]


def _case(optimizer: str, learning_rate: float) -> dict:
    rng = np.random.default_rng(7)
    init = {"w1": rng.standard_normal((8, 16)) / np.sqrt(8.0), "b1": 0.1 * rng.standard_normal(16),
            "w2": rng.standard_normal((16, 1)) / 4.0, "b2": np.zeros(1)}
    teacher = rng.standard_normal((8, 1)) / np.sqrt(8.0)
    batches = []
    for _ in range(STEPS):
        step = []
        for _ in range(WORKERS):
            x = rng.standard_normal((BATCH, 8))
            step.append((x, np.tanh(x @ teacher)))
        batches.append(step)
    return {"learning_rate": learning_rate, "optimizer": optimizer, "init": init, "batches": batches}


def _build(request: dict, workers: int = WORKERS):
    """The oracle's graph, with the bridge's API."""
    g = bridge.Graph()
    with g.as_default():
        with bridge.device("/job:ps/task:0"):
            variables = [bridge.Variable(request["init"][n], name=n) for n in NAMES]
        w1, b1, w2, b2 = variables
        if request["optimizer"] == "Adam":
            opt = bridge.train.AdamOptimizer(request["learning_rate"])
        else:
            opt = bridge.train.GradientDescentOptimizer(request["learning_rate"])
        tower_grads, tower_losses, feeds = [], [], []
        for i in range(workers):
            with bridge.device(f"/job:worker/task:{i}"), g.name_scope(f"tower_{i}"):
                x = bridge.placeholder(bridge.float64, list(request["batches"][0][i][0].shape), name="x")
                y = bridge.placeholder(bridge.float64, list(request["batches"][0][i][1].shape), name="y")
                h = ops.tanh(ops.add_v2(ops.mat_mul(x, w1.value()), b1.value()))
                pred = ops.add_v2(ops.mat_mul(h, w2.value()), b2.value())
                loss = ops.mean(ops.square(ops.sub(pred, y)), [0, 1])
                grads = opt.compute_gradients(loss, variables, colocate_gradients_with_ops=True)
            tower_grads.append([gr for gr, _ in grads])
            tower_losses.append(loss)
            feeds.append((x, y))
        with bridge.device("/job:ps/task:0"), g.name_scope("average"):
            scale = bridge.constant(1.0 / workers, bridge.float64)
            averaged = [ops.mul(ops.add_n(list(gs)), scale) for gs in zip(*tower_grads)]
            mean_loss = ops.mul(ops.add_n(tower_losses), scale)
            train = opt.apply_gradients(list(zip(averaged, variables)))
        init = bridge.global_variables_initializer()
    return g, init, mean_loss, train, feeds, variables


@pytest.fixture(scope="module")
def stock_tf(oracle):
    """Every case trained on one stock-TF cluster (one oracle run; its answer is cached)."""
    return oracle("distributed_training", {"workers": WORKERS, "cases": [_case(*c) for c in CASES]},
                  timeout=300)["results"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster({"ps": 1, "worker": WORKERS}, tmp_path_factory.mktemp("cluster")) as c:
        yield c


def _bridge_run(request: dict, cluster) -> dict:
    g, init, loss, train, feeds, variables = _build(request)
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=60) as sess:
        sess.run(init)  # the ps's variables of an earlier case are overwritten
        losses = []
        for batch in request["batches"]:
            feed = {t: v for (x, y), (xv, yv) in zip(feeds, batch) for t, v in ((x, xv), (y, yv))}
            losses.append(sess.run([loss, train], feed)[0])
        final = dict(zip(NAMES, sess.run([v.value() for v in variables])))
    devices = {op.name: op.device for op in g.get_operations()}
    return {"losses": np.array(losses), "final": final, "devices": devices}


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_sync_training_matches_stock_tf_servers(index, cluster, stock_tf):
    request = _case(*CASES[index])
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
