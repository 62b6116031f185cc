"""Models, data and faults shared by the distributed tests (tests/distribute/):
a replicated two-layer regression (one tower per worker), a worker's own
graph of a linear regression for between-graph training, their data as a
function of the step alone, and a ``Killer`` that SIGKILLs a task and
restarts it."""
from __future__ import annotations

import threading
import time

import numpy as np

import bridge
from bridge import distribute, train


def feed_of(step: int, xs, ys) -> dict:
    """Each tower's shard of the data at ``step``: a function of the step alone."""
    rng = np.random.default_rng(1000 + step)
    feed = {}
    for x, y in zip(xs, ys, strict=True):
        feed[x] = rng.normal(size=(6, 3))
        feed[y] = np.sin(feed[x] @ np.array([[1.0, -0.5], [0.3, 0.8], [-0.7, 0.2]]))
    return feed


def replicated_model(spec=None, num_replicas=2, optimizer=None):
    """A two-layer regression, one tower per worker, Momentum (slots on the ps)."""
    g = bridge.Graph()
    xs, ys = [], []
    with g.as_default():
        setter = (distribute.replica_device_setter(cluster=spec, worker_device="/job:worker/task:0")
                  if spec is not None else None)
        with bridge.device(setter):
            w1 = bridge.Variable(np.linspace(-0.6, 0.6, 12).reshape(3, 4), name="w1")
            b1 = bridge.Variable(np.full(4, 0.1), name="b1")
            w2 = bridge.Variable(np.linspace(0.5, -0.5, 8).reshape(4, 2), name="w2")
            global_step = train.get_or_create_global_step()

        def tower(i):
            x = bridge.placeholder(bridge.float64, [None, 3], name="x")
            y = bridge.placeholder(bridge.float64, [None, 2], name="y")
            xs.append(x)
            ys.append(y)
            h = bridge.ops.tanh(bridge.ops.mat_mul(x, w1.value()) + b1.value())
            out = bridge.ops.mat_mul(h, w2.value())
            return bridge.ops.mean((out - y) * (out - y), [0, 1]), out

        rep = distribute.replicate(tower, optimizer or train.MomentumOptimizer(0.05, 0.9), spec,
                                   num_replicas=num_replicas, global_step=global_step)
        init = bridge.global_variables_initializer()
    return g, rep, xs, ys, init, global_step


def run_steps(sess, rep, xs, ys, steps=8, start=0):
    return [sess.run([rep.loss, rep.train_op], feed_of(s, xs, ys))[0] for s in range(start, start + steps)]


def local_trajectory(steps=8):
    g, rep, xs, ys, init, _ = replicated_model(None)
    with bridge.Session(g) as sess:
        sess.run(init)
        return run_steps(sess, rep, xs, ys, steps)


def worker_graph(spec, task: int, prefix: str, sync_replicas: bool = False):
    """Worker ``task``'s own graph of a linear regression: the same variables
    (by name, on the ps tasks; ``prefix`` keeps each test's apart on the
    module's cluster), its model on its worker."""
    g = bridge.Graph()
    with g.as_default(), bridge.device(distribute.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{task}")):
        w = bridge.Variable(np.linspace(-0.5, 0.5, 6).reshape(3, 2), name=f"{prefix}_w")
        b = bridge.Variable(np.zeros(2), name=f"{prefix}_b")
        global_step = bridge.Variable(np.int64(0), name=f"{prefix}_global_step", trainable=False)
        x = bridge.placeholder(bridge.float64, [None, 3], name="x")
        y = bridge.placeholder(bridge.float64, [None, 2], name="y")
        loss = regression_loss(x, y, w, b)
        opt = train.GradientDescentOptimizer(0.1)
        if sync_replicas:
            opt = train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2, total_num_replicas=2)
        train_op = opt.minimize(loss, global_step=global_step)
    return g, x, y, loss, train_op, global_step, opt, (w, b)


def regression_loss(x, y, w, b):
    out = bridge.ops.mat_mul(x, w.value()) + b.value()
    return bridge.ops.mean((out - y) * (out - y), [0, 1])


def regression_feed(x, y, step: int, task: int) -> dict:
    rng = np.random.default_rng(100 * task + step)
    data = rng.normal(size=(8, 3))
    return {x: data, y: data @ np.array([[1.0, -1.0], [0.5, 0.25], [-0.75, 2.0]]) + np.array([0.5, -0.5])}


def local_regression_run(steps: int):
    """The between-graph linear regression's two towers replicated in one graph
    and run locally (the reference of a distributed run): each tower's losses
    per step, and the final (w, b)."""
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.linspace(-0.5, 0.5, 6).reshape(3, 2), name="w")
        b = bridge.Variable(np.zeros(2), name="b")
        feeds = []

        def tower(i):
            x = bridge.placeholder(bridge.float64, [None, 3], name="x")
            y = bridge.placeholder(bridge.float64, [None, 2], name="y")
            feeds.append((x, y))
            return regression_loss(x, y, w, b)

        rep = distribute.replicate(tower, train.GradientDescentOptimizer(0.1), num_replicas=2)
        init = bridge.global_variables_initializer()
    losses = {0: [], 1: []}
    with bridge.Session(g) as sess:
        sess.run(init)
        for s in range(steps):
            feed = {**regression_feed(*feeds[0], s, 0), **regression_feed(*feeds[1], s, 1)}
            values = sess.run(rep.tower_losses + [rep.train_op], feed)[:2]
            for task in (0, 1):
                losses[task].append(values[task])
        final = sess.run([w.value(), b.value()])
    return losses, final


class Killer:
    """Kills a task (SIGKILL) once, after step ``at``, and restarts it ``down`` seconds later in a thread."""

    def __init__(self, cluster, task, at: int, down: float = 0.5, restart: bool = True):
        self.cluster, self.task, self.at, self.down, self.restart = cluster, task, at, down, restart
        self.thread = None
        self.old_pid = cluster.server(*task).pid
        self.error = None

    def __call__(self, step, loss):
        if step == self.at and self.thread is None:
            self.cluster.kill(*self.task)
            self.thread = threading.Thread(target=self._restart, daemon=True)
            self.thread.start()
            if self.down is None:   # back before the next step starts
                self.thread.join(60)

    def _restart(self):
        time.sleep(self.down or 0.0)
        if self.restart:
            try:
                self.cluster.start(*self.task)
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.error = exc

    def join(self):
        if self.thread is not None:
            self.thread.join(60)
        assert self.error is None, self.error
