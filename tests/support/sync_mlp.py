"""Synchronous data-parallel training of a small MLP on a cluster, built by
hand with the bridge's public API (in-graph replication, TF1's multi-tower
pattern): the variables on ``/job:ps/task:0``, one tower per worker under
``/job:worker/task:i`` fed its own batch, each tower's gradients computed
with ``colocate_gradients_with_ops=True``, averaged on the ps (``AddN`` times
``1/workers``), one ``apply_gradients``.

tests/oracle/distributed_training.py builds the same graph with stock
TensorFlow; tests/distribute/test_stock_tf.py and
bench/bench_distributed_step.py use both.
"""
from __future__ import annotations

import numpy as np

import bridge
from bridge import ops

NAMES = ("w1", "b1", "w2", "b2")


def make_case(optimizer: str, learning_rate: float, workers: int = 2, steps: int = 20, batch: int = 16,
              seed: int = 7) -> dict:
    """Initial values and ``steps`` x ``workers`` batches (x, tanh(x @ teacher)), from ``seed``."""
    rng = np.random.default_rng(seed)
    init = {"w1": rng.standard_normal((8, 16)) / np.sqrt(8.0), "b1": 0.1 * rng.standard_normal(16),
            "w2": rng.standard_normal((16, 1)) / 4.0, "b2": np.zeros(1)}
    teacher = rng.standard_normal((8, 1)) / np.sqrt(8.0)
    batches = []
    for _ in range(steps):
        step = []
        for _ in range(workers):
            x = rng.standard_normal((batch, 8))
            step.append((x, np.tanh(x @ teacher)))
        batches.append(step)
    return {"learning_rate": learning_rate, "optimizer": optimizer, "init": init, "batches": batches}


def feed_of(feeds: list, batch: list) -> dict:
    """The feed dict of one step: each tower's (x, y) placeholders and its batch."""
    return {t: v for (x, y), (xv, yv) in zip(feeds, batch, strict=True) for t, v in ((x, xv), (y, yv))}


def build(request: dict, workers: int):
    """The graph; returns (graph, init, mean loss, train op, [(x, y)] per tower, variables)."""
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
            averaged = [ops.mul(ops.add_n(list(gs)), scale) for gs in zip(*tower_grads, strict=True)]
            mean_loss = ops.mul(ops.add_n(tower_losses), scale)
            train = opt.apply_gradients(list(zip(averaged, variables, strict=True)))
        init = bridge.global_variables_initializer()
    return g, init, mean_loss, train, feeds, variables
