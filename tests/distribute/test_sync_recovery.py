"""SyncReplicasOptimizer training that survives tasks that die, and its
``variable_averages``, on a loopback cluster (ps 0, workers 0 and 1,
`tfbridge server` processes shared by the module, the ps restarted before
each test so that no queue holds another test's tokens).

Between-graph training: one client (graph, ``distribute.Session``, thread)
per worker, ``train_loop(..., checkpoint_dir=, hooks=[opt.make_session_run_hook(...)])``.
A task is killed with SIGKILL after the chief's step 6 and restarted; every
worker's step fails (at the latest at its run's deadline: nothing moves
while one worker is missing), each recovers, and the chief's barrier rolls
both back to its newest checkpoint with the sync state reset.

What is compared: with two replicas, ``replicas_to_aggregate=2`` and no
initial tokens every step averages one gradient per worker computed from
the same variables, so the run is deterministic; its losses and variables
equal the same two towers replicated in one graph and run locally
(``distribute.replicate``), bit for bit (the accumulator's (a + b) / 2 and
``AddN`` times 0.5 round alike).  The chief's losses are all compared; the
other worker's too, except a step whose run failed after its gradient was
applied (the others completed that step): it resumes after it and that
step's loss is None.  Every server is killed when the module ends, pass or
fail; every run has a deadline, every recovery a time limit.
"""
from __future__ import annotations

import logging
import re
import threading
import time

import numpy as np
import pytest

import bridge
from bridge import distribute, train
from bridge.framework.errors import DeadlineExceededError

from support.distributed import Killer, local_regression_run, regression_feed, regression_loss, worker_graph

RUN_TIMEOUT = 5.0
STEPS = 12
SAVE_EVERY = 4

#: The module's loopback cluster (the `cluster` fixture, tests/distribute/conftest.py).
CLUSTER = {"ps": 1, "worker": 2}


@pytest.fixture
def fresh_ps(cluster):
    """A ps with no queues or accumulators of an earlier test (TF's queue names are fixed: sync_token_q)."""
    cluster.start("ps", 0)
    return cluster


def reference(steps: int = STEPS):
    """Each tower's losses and the final (w, b) of the same training replicated in one graph, run locally."""
    return local_regression_run(steps)


def train_two_workers(cluster, prefix, callback=None, checkpoint_dir=None, steps=STEPS, build=worker_graph,
                      timeout=RUN_TIMEOUT):
    """Both workers' train_loop in threads (graphs from ``build``, as worker_graph's),
    their sessions' deadline ``timeout``; returns (losses by task, global step,
    [w, b], chief's hook, graphs)."""
    graphs = [build(cluster.spec, task, prefix, sync_replicas=True) for task in (0, 1)]
    sessions = [distribute.Session(cluster.spec, ("worker", task), graph=graphs[task][0], timeout=timeout)
                for task in (0, 1)]
    hooks = [graphs[task][6].make_session_run_hook(is_chief=task == 0, num_tokens=0) for task in (0, 1)]
    results, errors = {}, []

    def work(task):
        g, x, y, loss, train_op, global_step, _, _ = graphs[task]
        try:
            sessions[task].prepare(wait_timeout=60)
            kwargs = dict(checkpoint_dir=checkpoint_dir, save_every=SAVE_EVERY, recovery_timeout=60,
                          max_recoveries=2) if checkpoint_dir is not None else {}
            results[task] = train.train_loop(sessions[task], train_op, steps, loss=loss, progress=False,
                                             feed_dict=lambda s: regression_feed(x, y, s, task),
                                             callback=callback if task == 0 else None, hooks=[hooks[task]],
                                             **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(task,)) for task in (1, 0)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, (errors, hooks[0].exceptions)
        assert all(not t.is_alive() for t in threads)
        g0 = graphs[0]
        final_step, w, b = sessions[0].run([g0[5].value(), g0[7][0].value(), g0[7][1].value()])
    finally:
        for sess in sessions:
            sess.close()
    return results, final_step, [w, b], hooks[0], graphs


@pytest.mark.parametrize("task", [("ps", 0), ("worker", 1), ("worker", 0)], ids=["ps", "worker", "chief"])
def test_sync_replicas_training_recovers_from_a_killed_task_and_ends_as_an_uninterrupted_run(
        fresh_ps, task, tmp_path, caplog):
    """Killed after the chief's step 6, restarted 0.5 s later: the ps loses the
    variables, the accumulators and the queues (all come back: restored,
    re-created by chief_init_op); a worker or the chief's master takes its
    local step and its session with it, and the ps keeps tokens and gradients
    of the steps before (drained).  Both workers resume at the chief's newest
    checkpoint and end where the uninterrupted training ends."""
    cluster = fresh_ps
    killer = Killer(cluster, task, at=6)
    caplog.set_level(logging.INFO, logger="bridge.train")
    t0 = time.monotonic()
    try:
        results, final_step, final, hook, _ = train_two_workers(cluster, f"rec_{task[0]}{task[1]}",
                                                                callback=killer, checkpoint_dir=tmp_path)
    finally:
        killer.join()
    elapsed = time.monotonic() - t0
    assert cluster.server(*task).pid != killer.old_pid
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    chief = [line for line in lines if "restored model.ckpt-" in line]
    other = [line for line in lines if "the chief's variables are back" in line]
    assert len(chief) == 1 and len(other) == 1, lines
    resumed = int(re.search(r"resuming at step (\d+)", chief[0]).group(1))
    assert resumed in (4, 8), chief
    assert f"restored model.ckpt-{resumed}, resuming at step {resumed}" in chief[0], chief
    assert f"resuming at step {resumed} " in other[0], other   # the same step: the chief's checkpoint
    # What the ps kept from before the failure was drained: the gradients of a
    # step in flight (a restarted ps keeps nothing).
    drained = [r.getMessage() for r in caplog.records if "drained from before the failure" in r.getMessage()]
    if task == ("ps", 0):
        assert drained == [], drained
    else:
        assert len(drained) == 1 and re.search(r"\d+ accumulator_0", drained[0]), drained
    assert final_step == STEPS
    expected, expected_final = reference()
    assert len(results[0]) == len(results[1]) == STEPS
    np.testing.assert_array_equal(results[0], expected[0])
    skipped = [s for s, value in enumerate(results[1]) if value is None]
    assert len(skipped) <= 1 and all(s < resumed for s in skipped), skipped
    for s, value in enumerate(results[1]):
        if value is not None:
            assert value == expected[1][s], (s, value, expected[1][s])
    for got, want in zip(final, expected_final, strict=True):
        np.testing.assert_array_equal(got, want)
    assert hook.exceptions == []
    assert train.latest_checkpoint(tmp_path) == str(tmp_path / f"model.ckpt-{STEPS}")
    assert elapsed < 60, elapsed


def test_the_chief_notices_a_dead_worker_within_seconds_not_at_its_deadline(fresh_ps, tmp_path, caplog):
    """Runs with a 60 s deadline: worker 1 is killed after the chief's step 6
    and restarted 2 s later.  The chief's step waits for worker 1's gradient,
    which its graph does not name; its session watches the other replicas
    (Session.watch_tasks), so the step fails within seconds naming worker 1,
    and both recover to the uninterrupted run's result."""
    cluster = fresh_ps
    addresses = [cluster.spec.task_address("worker", task) for task in (0, 1)]
    killer = Killer(cluster, ("worker", 1), at=6, down=2.0)
    killed_at = []

    def kill(step, loss):
        if step == 6 and not killed_at:
            killed_at.append(time.time())
        killer(step, loss)

    caplog.set_level(logging.INFO, logger="bridge.train")
    t0 = time.monotonic()
    try:
        results, final_step, final, hook, _ = train_two_workers(cluster, "watched", callback=kill,
                                                                checkpoint_dir=tmp_path, timeout=60.0)
    finally:
        killer.join()
    elapsed = time.monotonic() - t0
    chief = [r for r in caplog.records if "restored model.ckpt-" in r.getMessage()]
    assert len(chief) == 1, [r.getMessage() for r in caplog.records]
    message = chief[0].getMessage()
    assert (f"failed with UnavailableError (Session.run on /job:worker/task:0 ({addresses[0]}): /job:worker/task:1 "
            f"at {addresses[1]} refuses connections: no server is running there (it answered before); the run "
            "waited on it and was cancelled (Session.watch_tasks))") in message, message
    assert chief[0].created - killed_at[0] < 15.0   # the restart itself takes about 2 + 2 s
    assert elapsed < 45.0, elapsed
    expected, expected_final = reference()
    assert final_step == STEPS
    np.testing.assert_array_equal(results[0], expected[0])
    for got, want in zip(final, expected_final, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_worker_that_never_checks_in_fails_the_chiefs_recovery_within_the_recovery_timeout(fresh_ps, tmp_path):
    """Only the chief trains: its first step waits for the other worker's
    gradient until the run's deadline, its recovery waits for that worker's
    check-in until recovery_timeout, and the error says what it waited for."""
    cluster = fresh_ps
    g, x, y, loss, train_op, _, opt, _ = worker_graph(cluster.spec, 0, "alone", sync_replicas=True)
    hook = opt.make_session_run_hook(is_chief=True, num_tokens=0)
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        sess.prepare()
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceededError) as info:
            train.train_loop(sess, train_op, 3, loss=loss, feed_dict=lambda s: regression_feed(x, y, s, 0),
                             progress=False, checkpoint_dir=tmp_path, hooks=[hook], recovery_timeout=3.0)
        elapsed = time.monotonic() - t0
    message = str(info.value)
    assert "could not recover within 3 s (recovery 1 of 3)" in message, message
    assert re.search(r"SyncReplicasOptimizer: /job:worker/task:0 waited [\d.]+ s for the other workers to check "
                     r"in \(0 of 1\)", message), message
    assert elapsed < RUN_TIMEOUT + 3.0 + 10, elapsed

# --- variable_averages -----------------------------------------------------------------------------

DECAY, EMA_STEPS = 0.9, 8


def averaged_worker_graph(spec, task, prefix, sync_replicas=True):
    """worker_graph's model with ``variable_averages=ExponentialMovingAverage(DECAY,
    num_updates=global_step)`` over w and b (tests/oracle/sync_replicas_training.py builds it with stock TF)."""
    g = bridge.Graph()
    with g.as_default(), bridge.device(distribute.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{task}")):
        w = bridge.Variable(np.linspace(-0.5, 0.5, 6).reshape(3, 2), name=f"{prefix}_w")
        b = bridge.Variable(np.zeros(2), name=f"{prefix}_b")
        global_step = bridge.Variable(np.int64(0), name=f"{prefix}_global_step", trainable=False)
        x = bridge.placeholder(bridge.float64, [None, 3], name="x")
        y = bridge.placeholder(bridge.float64, [None, 2], name="y")
        loss = regression_loss(x, y, w, b)
        ema = train.ExponentialMovingAverage(DECAY, num_updates=global_step)
        opt = train.SyncReplicasOptimizer(train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
                                          total_num_replicas=2, variable_averages=ema, variables_to_average=[w, b])
        train_op = opt.minimize(loss, global_step=global_step)
    g.ema = ema
    return g, x, y, loss, train_op, global_step, opt, (w, b)


def test_variable_averages_are_applied_by_the_chief_after_each_sync_update_as_stock_tf(fresh_ps, oracle):
    """The averages (``<var>/ExponentialMovingAverage`` on the ps, beside the
    variables) follow TF's update after each sync step: the losses, the
    variables, their averages and the global step equal stock TF's
    SyncReplicasOptimizer with the same ``variable_averages`` on its own
    servers, bit for bit (TF's arithmetic: a float32 decay, min(decay,
    (1 + n) / (10 + n)) with n the global step read after the update)."""
    cluster = fresh_ps
    batches = [[tuple(regression_feed("x", "y", s, task).values()) for task in (0, 1)] for s in range(EMA_STEPS)]
    want = oracle("sync_replicas_training", {
        "learning_rate": 0.1, "decay": DECAY, "batches": batches,
        "init": {"w": np.linspace(-0.5, 0.5, 6).reshape(3, 2), "b": np.zeros(2)}}, timeout=300)
    results, final_step, final, _, graphs = train_two_workers(cluster, "ema", steps=EMA_STEPS,
                                                              build=averaged_worker_graph)
    g, ema, (w, b) = graphs[0][0], graphs[0][0].ema, graphs[0][7]
    by_name = {op.name: op for op in g.get_operations()}
    assert by_name["ema_w/ExponentialMovingAverage"].device == by_name["ema_w"].device == "/job:ps/task:0"
    assert ema.average_name(w) == "ema_w/ExponentialMovingAverage"
    assert final_step == want["global_step"] == EMA_STEPS
    for task in (0, 1):
        np.testing.assert_array_equal(results[task], want["losses"][task])
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        averages = sess.run([ema.average(w).value(), ema.average(b).value()])
    for got, name in zip(final + averages, ["w", "b", "w_average", "b_average"], strict=True):
        np.testing.assert_array_equal(got, want["final"][name], err_msg=name)
    # The averages lag the variables: they were updated, and are not the variables.
    assert not np.allclose(averages[0], final[0]) and not np.allclose(averages[0], w_initial := np.linspace(
        -0.5, 0.5, 6).reshape(3, 2)), (averages[0], w_initial)


def test_exponential_moving_average_follows_tfs_arithmetic_and_names():
    """Alone, locally: ``shadow -= (shadow - var) * (1 - decay)`` with TF's float32
    decay and ``min(decay, (1 + n) / (10 + n))``, the variable read after the
    update it follows; TF's names for the averages and for restoring them."""
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([1.0, -2.0]), name="w")
        step = bridge.Variable(np.int64(0), name="step", trainable=False)
        ema = train.ExponentialMovingAverage(DECAY, num_updates=step)
        update = bridge.ops.assign_variable_op(w.handle, w.read_value() * np.float64(0.5))
        with g.control_dependencies([update]):
            averages = ema.apply([w])
        count = bridge.ops.assign_add_variable_op(step.handle, np.int64(1))
        init = bridge.global_variables_initializer()
    # TF1's: the variable's name is its tensor's ("...:0"), average_name the op's, which checkpoints use.
    assert ema.average(w).name == "w/ExponentialMovingAverage:0"
    assert ema.average(w).op.name == ema.average_name(w) == "w/ExponentialMovingAverage"
    assert ema.average(step) is None
    # As TF's: the average's checkpoint name restores into w; the average itself is not listed again.
    assert ema.variables_to_restore() == {"w/ExponentialMovingAverage": w, "step": step}
    value, shadow = np.array([1.0, -2.0]), np.array([1.0, -2.0])
    with bridge.Session(g) as sess:
        sess.run(init)
        for n in range(4):
            sess.run(averages)
            sess.run(count)
            value = value * 0.5
            decay = min(np.float32(DECAY), (np.float32(1) + np.float32(n)) / (np.float32(10) + np.float32(n)))
            shadow = shadow - (shadow - value) * np.float64(np.float32(1) - np.float32(decay))
            np.testing.assert_array_equal(sess.run(ema.average(w).value()), shadow)
