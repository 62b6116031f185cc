"""Training across workers on a loopback cluster (ps 0 and 1, workers 0
and 1, `tfbridge server` processes shared by the module): synchronous
in-graph replication (`distribute.replicate`) against the same towers run
locally, and a sharded `Saver` whose shards the ps tasks write, restored
into fresh ps tasks.

Every server is a child process that tests/cluster_support.py starts and
kills when the module ends, pass or fail; every run has a deadline.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import distribute, train

from cluster_support import local_cluster

RUN_TIMEOUT = 20.0
STEPS = 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster({"ps": 2, "worker": 2}, tmp_path_factory.mktemp("cluster")) as c:
        yield c


def feed_of(step: int, xs, ys) -> dict:
    """Each tower's shard of the data at ``step``: a function of the step alone."""
    rng = np.random.default_rng(1000 + step)
    feed = {}
    for x, y in zip(xs, ys):
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


def run_steps(sess, rep, xs, ys, steps=STEPS, start=0):
    return [sess.run([rep.loss, rep.train_op], feed_of(s, xs, ys))[0] for s in range(start, start + steps)]


def local_trajectory(steps=STEPS):
    g, rep, xs, ys, init, _ = replicated_model(None)
    with bridge.Session(g) as sess:
        sess.run(init)
        return run_steps(sess, rep, xs, ys, steps)


def test_replicated_towers_on_two_workers_equal_the_same_towers_run_locally(cluster):
    g, rep, xs, ys, init, global_step = replicated_model(cluster.spec)
    assert rep.devices == ["/job:worker/task:0", "/job:worker/task:1"] and rep.num_replicas == 2
    by_name = {op.name: op for op in g.get_operations()}
    # Variables round-robin over the ps tasks, their slots with them.
    assert [by_name[n].device for n in ("w1", "b1", "w2")] == ["/job:ps/task:0", "/job:ps/task:1",
                                                               "/job:ps/task:0"]
    assert by_name["w1/Momentum"].device == "/job:ps/task:0"
    # Each tower's forward and gradient ops on its worker; the averages on the variables' ps tasks.
    for i in (0, 1):
        tower_ops = [op for op in g.get_operations() if op.name.startswith(f"tower_{i}/")]
        assert tower_ops and {op.device for op in tower_ops} == {f"/job:worker/task:{i}"}, i
    assert by_name["replicated/average_b1/average"].device == "/job:ps/task:1"
    assert by_name["replicated/average_w2/average"].device == "/job:ps/task:0"
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        assert sess.device_filters == ["/job:worker/task:0", "/job:ps/task:0", "/job:ps/task:1",
                                       "/job:worker/task:1"]
        assert sess.prepare() == "initialized"
        remote = run_steps(sess, rep, xs, ys)
        assert sess.run(global_step) == STEPS
    local = local_trajectory()
    np.testing.assert_allclose(remote, local, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(remote, local)   # the same kernels on the same values: bit for bit
    assert all(np.isfinite(remote)) and remote[-1] < remote[0]


def test_replicated_gradient_is_the_mean_of_the_towers_gradients():
    """One tower per shard averaged equals the gradient of the mean loss: the
    averaged gradient of two towers fed the halves of a batch is the
    full-batch gradient (the loss is a mean over equal halves)."""
    g, rep, xs, ys, init, _ = replicated_model(None)
    with g.as_default():
        x_all = bridge.ops.concat_v2([xs[0], xs[1]], 0)
        y_all = bridge.ops.concat_v2([ys[0], ys[1]], 0)
        w1, b1, w2 = [v for _, v in rep.grads_and_vars]
        h = bridge.ops.tanh(bridge.ops.mat_mul(x_all, w1.value()) + b1.value())
        out = bridge.ops.mat_mul(h, w2.value())
        full = bridge.ops.mean((out - y_all) * (out - y_all), [0, 1])
        full_grads = bridge.gradients(full, [w1, b1, w2])
    with bridge.Session(g) as sess:
        sess.run(init)
        feed = feed_of(0, xs, ys)
        averaged = sess.run([gr for gr, _ in rep.grads_and_vars], feed)
        expected = sess.run(full_grads, feed)
        assert sess.run(rep.loss, feed) == pytest.approx(sess.run(full, feed), abs=1e-14)
    for a, e in zip(averaged, expected):
        np.testing.assert_allclose(a, e, rtol=0, atol=1e-14)


def test_a_tower_that_makes_its_own_variables_is_refused():
    g = bridge.Graph()
    with g.as_default():
        def tower(i):
            v = bridge.Variable(np.ones(2), name="v")
            return bridge.ops.sum(v.value() * v.value(), [0])

        with pytest.raises(ValueError, match=r"tower 1 created the variables tower_1/v"):
            distribute.replicate(tower, train.GradientDescentOptimizer(0.1), num_replicas=2)


def test_sharded_saver_writes_a_shard_per_ps_task_and_restores_into_fresh_ps_tasks(cluster, tmp_path):
    g, rep, xs, ys, init, global_step = replicated_model(cluster.spec)
    with g.as_default():
        saver = train.Saver(sharded=True)
        plain = train.Saver(name="plain")
    # One shard per ps task, its SaveV2 and RestoreV2 on that task.
    assert [device for device, _ in saver.shards] == ["/job:ps/task:0/device:CPU:0", "/job:ps/task:1/device:CPU:0"]
    assert saver.shards[1][1] == ["b1", "b1/Momentum", "global_step"]
    devices = {op.name: op.device for op in g.get_operations()}
    assert devices["save/SaveV2"] == devices["save/RestoreV2"] == "/job:ps/task:0/device:CPU:0"
    assert devices["save/SaveV2_1"] == devices["save/RestoreV2_1"] == "/job:ps/task:1/device:CPU:0"
    assert devices["save/MergeV2Checkpoints"] == "/job:ps/task:1/device:CPU:0"
    names = [v.name for v in bridge.global_variables(g)]
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        sess.prepare()
        run_steps(sess, rep, xs, ys, steps=3)
        # An unsharded checkpoint there first: the sharded save replaces its one data file.
        plain.save(sess, str(tmp_path / "model.ckpt-3"), write_state=False)
        assert (tmp_path / "model.ckpt-3.data-00000-of-00001").is_file()
        prefix = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=global_step)
        saved = dict(zip(names, sess.run([v.value() for v in bridge.global_variables(g)])))
    assert prefix == str(tmp_path / "model.ckpt-3")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "model.ckpt-3.data-00000-of-00002", "model.ckpt-3.data-00001-of-00002", "model.ckpt-3.index"]
    assert [name for name, _ in train.list_variables(prefix)] == sorted(names)
    # Fresh ps tasks on the same addresses hold nothing; the restore fills them, shard by shard.
    cluster.kill("ps", 0)
    cluster.kill("ps", 1)
    cluster.start("ps", 0)
    cluster.start("ps", 1)
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        assert sorted(sess.uninitialized_variables()) == sorted(names)
        assert sess.prepare(saver=saver, checkpoint_dir=tmp_path) == "restored"
        restored = dict(zip(names, sess.run([v.value() for v in bridge.global_variables(g)])))
        after = run_steps(sess, rep, xs, ys, steps=2, start=3)
    assert restored.keys() == saved.keys()
    for name in names:
        np.testing.assert_array_equal(restored[name], saved[name], err_msg=name)
    # Training goes on from the checkpoint exactly as without the restart.
    np.testing.assert_array_equal(after, local_trajectory(5)[3:])
