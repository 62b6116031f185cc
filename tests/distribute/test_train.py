"""Training across workers on a loopback cluster (ps 0 and 1, workers 0
and 1, `tfbridge server` processes shared by the module): synchronous
in-graph replication (`distribute.replicate`) against the same towers run
locally, and a sharded `Saver` whose shards the ps tasks write, restored
into fresh ps tasks.

Every server is a child process that tests/support/cluster.py starts and
kills when the module ends, pass or fail; every run has a deadline.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import bridge
from bridge import distribute, train
from bridge.framework.errors import FailedPreconditionError
from bridge.train.recovery import is_recoverable

from support.distributed import (feed_of, local_regression_run, local_trajectory, regression_feed, replicated_model,
                                 run_steps, worker_graph)

RUN_TIMEOUT = 20.0
STEPS = 8

#: The module's loopback cluster (the `cluster` fixture, tests/distribute/conftest.py).
CLUSTER = {"ps": 2, "worker": 2}


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
    for a, e in zip(averaged, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=0, atol=1e-14)


def test_a_tower_that_makes_its_own_variables_is_refused():
    g = bridge.Graph()
    with g.as_default():
        def tower(i):
            v = bridge.Variable(np.ones(2), name="v")
            return bridge.ops.sum(v.value() * v.value(), [0])

        with pytest.raises(ValueError, match=r"tower 1 created the variables tower_1/v"):
            distribute.replicate(tower, train.GradientDescentOptimizer(0.1), num_replicas=2)


def test_sharded_saver_writes_a_shard_per_ps_task_and_restores_into_fresh_ps_tasks(cluster, tmp_path, monkeypatch):
    # A relative prefix: the servers' working folder is not this process's, so the Saver feeds absolute paths.
    monkeypatch.chdir(tmp_path)
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
    names = [v.op.name for v in bridge.global_variables(g)]  # the checkpoint's keys
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        sess.prepare()
        run_steps(sess, rep, xs, ys, steps=3)
        # An unsharded checkpoint there first: the sharded save replaces its one data file.
        plain.save(sess, "model.ckpt-3", write_state=False)
        assert (tmp_path / "model.ckpt-3.data-00000-of-00001").is_file()
        prefix = saver.save(sess, "model.ckpt", global_step=global_step)
        saved = dict(zip(names, sess.run([v.value() for v in bridge.global_variables(g)]), strict=True))
    assert prefix == "model.ckpt-3"
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
        # What a step reading them says, which train_loop recovers from (by restoring).
        with pytest.raises(FailedPreconditionError, match="Could not find variable") as info:
            sess.run(rep.loss, feed_of(0, xs, ys))
        assert is_recoverable(info.value)
        assert sess.prepare(saver=saver, checkpoint_dir=".") == "restored"
        restored = dict(zip(names, sess.run([v.value() for v in bridge.global_variables(g)]), strict=True))
        after = run_steps(sess, rep, xs, ys, steps=2, start=3)
    assert restored.keys() == saved.keys()
    for name in names:
        np.testing.assert_array_equal(restored[name], saved[name], err_msg=name)
    # Training goes on from the checkpoint exactly as without the restart.
    np.testing.assert_array_equal(after, local_trajectory(5)[3:])


# --- between-graph training: one client (graph and session) per worker ------------------------------

def test_asynchronous_between_graph_training_shares_the_ps_variables(cluster):
    """Two clients, each its own graph on its own worker, train the variables
    on the ps at their own pace (TF1's asynchronous data parallelism): every
    update lands (the global step counts both workers' steps), both see the
    same values, and the loss falls."""
    steps = 20
    graphs = [worker_graph(cluster.spec, task, "async") for task in (0, 1)]
    sessions = [distribute.Session(cluster.spec, ("worker", task), graph=graphs[task][0], timeout=RUN_TIMEOUT)
                for task in (0, 1)]
    results, errors = {}, []

    def work(task):
        g, x, y, loss, train_op, global_step, _, _ = graphs[task]
        try:
            sessions[task].prepare(wait_timeout=60)   # the chief initializes, the other waits
            results[task] = train.train_loop(sessions[task], train_op, steps, loss=loss, progress=False,
                                             feed_dict=lambda s: regression_feed(x, y, s, task))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    import threading
    threads = [threading.Thread(target=work, args=(task,)) for task in (1, 0)]   # the waiting worker first
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert all(not t.is_alive() for t in threads)
        values = [sessions[task].run([v.value() for v in graphs[task][7]] + [graphs[task][5]]) for task in (0, 1)]
    finally:
        for sess in sessions:
            sess.close()
    assert values[0][2] == values[1][2] == 2 * steps
    for a, b in zip(values[0][:2], values[1][:2], strict=True):
        np.testing.assert_array_equal(a, b)
    for task in (0, 1):
        assert np.all(np.isfinite(results[task])) and np.mean(results[task][-3:]) < 0.5 * results[task][0], results


def test_sync_replicas_optimizer_between_graphs_equals_in_graph_replication(cluster):
    """SyncReplicasOptimizer, two clients: each step the chief's sync thread
    averages one gradient per worker in the accumulators on the ps and
    applies it once; the workers wait for its token.  With two replicas and
    no initial tokens each worker's losses are those of its tower in the
    same training replicated in one graph."""
    steps = 6
    graphs = [worker_graph(cluster.spec, task, "sync", sync_replicas=True) for task in (0, 1)]
    g0 = graphs[0][0]
    by_name = {op.name: op for op in g0.get_operations()}
    assert by_name["sync_replicas/conditional_accumulator"].device == "/job:ps/task:0"      # sync_w's
    assert by_name["sync_replicas/conditional_accumulator_1"].device == "/job:ps/task:1"    # sync_b's
    assert by_name["sync_token_q"].device == by_name["sync_global_step"].device == "/job:ps/task:0"
    assert by_name["sync_rep_local_step"].device == "/job:worker/task:0"
    assert by_name["sync_replicas/conditional_accumulator"].get_attr("shared_name") == b"sync_w:0/grad_accum"
    sessions = [distribute.Session(cluster.spec, ("worker", task), graph=graphs[task][0], timeout=RUN_TIMEOUT)
                for task in (0, 1)]
    hooks = [graphs[task][6].make_session_run_hook(is_chief=task == 0, num_tokens=0) for task in (0, 1)]
    results, errors = {}, []

    def work(task):
        g, x, y, loss, train_op, global_step, _, _ = graphs[task]
        try:
            sessions[task].prepare(wait_timeout=60)
            hooks[task].after_create_session(sessions[task])
            results[task] = train.train_loop(sessions[task], train_op, steps, loss=loss, progress=False,
                                             feed_dict=lambda s: regression_feed(x, y, s, task))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    import threading
    threads = [threading.Thread(target=work, args=(task,)) for task in (1, 0)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, (errors, hooks[0].exceptions)
        assert all(not t.is_alive() for t in threads)
        final_step = sessions[0].run(graphs[0][5])
        hooks[0].end(sessions[0])
        assert hooks[0].exceptions == []
    finally:
        for sess in sessions:
            sess.close()
    assert final_step == steps
    # The same two towers, in one graph, run locally.
    expected, _ = local_regression_run(steps)
    for task in (0, 1):
        np.testing.assert_allclose(results[task], expected[task], rtol=0, atol=1e-12)
        assert results[task][-1] < results[task][0]


def test_sync_replicas_with_tf_default_tokens_stops_on_the_global_step(cluster):
    """TF's default, num_tokens=-1: a fast worker may run ahead of a slow one,
    so both stop once the global step reaches the last step (TF's
    StopAtStepHook) and the chief's hook.end releases a worker still
    waiting for a token: nobody waits until a deadline."""
    last_step = 8
    graphs = [worker_graph(cluster.spec, task, "tokens", sync_replicas=True) for task in (0, 1)]
    sessions = [distribute.Session(cluster.spec, ("worker", task), graph=graphs[task][0], timeout=RUN_TIMEOUT)
                for task in (0, 1)]
    hooks = [graphs[task][6].make_session_run_hook(is_chief=task == 0) for task in (0, 1)]
    results, errors = {}, []

    def work(task):
        g, x, y, loss, train_op, global_step, _, _ = graphs[task]
        sess = sessions[task]
        try:
            sess.prepare(wait_timeout=60)
            hooks[task].after_create_session(sess)
            results[task] = train.train_loop(sess, train_op, 1000, loss=loss, progress=False,
                                             feed_dict=lambda s: regression_feed(x, y, s, task),
                                             callback=lambda s, _: sess.run(global_step) >= last_step)
            hooks[task].end(sess)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    import threading
    threads = [threading.Thread(target=work, args=(task,)) for task in (1, 0)]
    t0 = time.monotonic()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert all(not t.is_alive() for t in threads)
        final_step = sessions[0].run(graphs[0][5])
    finally:
        for sess in sessions:
            sess.close()
    assert time.monotonic() - t0 < RUN_TIMEOUT, "a worker waited for a token until its deadline"
    # A worker may run ahead and supply both gradients of a step: the counts differ, the global step does not.
    assert last_step <= final_step <= last_step + 2
    assert all(results[task] and np.all(np.isfinite(results[task])) for task in (0, 1))
