"""Training that survives tasks that die: `train_loop(..., checkpoint_dir=,
save_every=, max_recoveries=)` on a loopback cluster (ps 0, workers 0 and 1,
`tfbridge server` processes shared by the module).

A task is killed with SIGKILL during training and restarted; the loop
reconnects, waits for the cluster, restores the newest checkpoint (into the
fresh ps too) and goes on.  The training is synchronous and deterministic
(in-graph replication, feeds a function of the step), so the losses equal
an uninterrupted run's.  Every server is killed when the module ends, pass
or fail; every run has a deadline, every recovery a time limit.
"""
from __future__ import annotations

import logging
import re
import signal
import threading
import time

import numpy as np
import pytest

import bridge
from bridge import distribute, train
from bridge.framework.errors import DeadlineExceededError, UnavailableError

from support.distributed import Killer, feed_of, regression_feed, replicated_model, worker_graph

RUN_TIMEOUT = 8.0
STEPS = 12
SAVE_EVERY = 4

#: The module's loopback cluster (the `cluster` fixture, tests/distribute/conftest.py).
CLUSTER = {"ps": 1, "worker": 2}


@pytest.fixture(scope="module")
def uninterrupted():
    """The losses of the same towers trained without a cluster and without faults."""
    g, rep, xs, ys, init, _ = replicated_model(None)
    with bridge.Session(g) as sess:
        sess.run(init)
        return train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss, feed_dict=lambda s: feed_of(s, xs, ys),
                                progress=False)


@pytest.mark.parametrize("task, down", [(("worker", 1), 0.5), (("ps", 0), 0.5), (("worker", 0), 0.5),
                                        (("ps", 0), None)],
                         ids=["worker", "ps", "master", "ps_between_steps"])
def test_training_recovers_from_a_killed_task_and_ends_as_an_uninterrupted_run(cluster, uninterrupted, task, down,
                                                                               tmp_path, caplog):
    """Killed after step 6, restarted 0.5 s later (or before step 7 starts):
    step 7 fails, the loop restores model.ckpt-4 and runs steps 4 to 11
    again.  Killing the ps loses its variables: they come back from the
    checkpoint."""
    g, rep, xs, ys, init, global_step = replicated_model(cluster.spec)
    killer = Killer(cluster, task, at=6, down=down)
    caplog.set_level(logging.INFO, logger="bridge.train")
    try:
        with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
            sess.prepare()
            t0 = time.monotonic()
            losses = train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss,
                                      feed_dict=lambda s: feed_of(s, xs, ys), callback=killer, progress=False,
                                      checkpoint_dir=tmp_path, save_every=SAVE_EVERY, max_recoveries=2,
                                      recovery_timeout=60)
            elapsed = time.monotonic() - t0
            assert sess.run(global_step) == STEPS
    finally:
        killer.join()
    assert cluster.server(*task).pid != killer.old_pid
    recoveries = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    assert len(recoveries) == 1, recoveries
    # The error depends on where the step in flight was when the task died, and
    # whether it is back: refused connections (UnavailableError), a restarted
    # master that lost the session (AbortedError), a master that died during
    # the run (DeadlineExceededError at the run's deadline), a restarted ps
    # that lost the variables (FailedPreconditionError: "Could not find variable").
    assert re.match(r"train_loop: step 7 failed with (UnavailableError|AbortedError|DeadlineExceededError"
                    r"|FailedPreconditionError) \(", recoveries[0]), recoveries
    assert "recovery 1 of 2: new session, restored model.ckpt-4, resuming at step 4" in recoveries[0], recoveries
    assert elapsed < 60, elapsed
    assert len(losses) == STEPS
    np.testing.assert_allclose(losses[-1], uninterrupted[-1], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(losses, uninterrupted)
    assert train.latest_checkpoint(tmp_path) == str(tmp_path / f"model.ckpt-{STEPS}")


def test_a_task_that_stays_dead_fails_the_run_within_the_recovery_timeout(cluster, tmp_path, caplog):
    g, rep, xs, ys, init, _ = replicated_model(cluster.spec)
    killer = Killer(cluster, ("worker", 1), at=1, restart=False)
    try:
        with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
            sess.prepare()
            t0 = time.monotonic()
            with pytest.raises((UnavailableError, DeadlineExceededError)) as info:
                train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss, feed_dict=lambda s: feed_of(s, xs, ys),
                                 callback=killer, progress=False, checkpoint_dir=tmp_path, save_every=SAVE_EVERY,
                                 recovery_timeout=3.0)
            elapsed = time.monotonic() - t0
    finally:
        killer.join()
        cluster.start("worker", 1)
    assert elapsed < 3.0 + RUN_TIMEOUT + 10, elapsed
    message = str(info.value)
    assert "could not recover within 3 s (recovery 1 of 3)" in message, message
    assert "/job:worker/task:1" in message and "no server is running there" in message, message


def test_a_first_checkpoint_that_fails_is_recovered(cluster, uninterrupted, tmp_path, caplog):
    """The ps stalls (SIGSTOP) as training starts, past the runs' deadline:
    the first save fails, train_loop reconnects, waits for the ps and saves
    again, then trains as the uninterrupted run."""
    g, rep, xs, ys, init, _ = replicated_model(cluster.spec)
    ps = cluster.server("ps", 0)
    caplog.set_level(logging.INFO, logger="bridge.train")
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=2.0) as sess:
        sess.prepare()
        ps.proc.send_signal(signal.SIGSTOP)
        resume = threading.Timer(3.0, ps.proc.send_signal, args=(signal.SIGCONT,))
        resume.start()
        try:
            losses = train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss, progress=False,
                                      feed_dict=lambda s: feed_of(s, xs, ys), checkpoint_dir=tmp_path,
                                      save_every=SAVE_EVERY, recovery_timeout=30.0)
        finally:
            resume.join()
            ps.proc.send_signal(signal.SIGCONT)
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    address = re.escape(cluster.spec.task_address("worker", 0))
    assert len(lines) == 1 and re.fullmatch(
        r"train_loop: the first checkpoint failed with DeadlineExceededError \(saving checkpoint "
        + re.escape(f"'{tmp_path / 'model.ckpt-0'}'") + r" failed \(a checkpoint saved there before is unchanged\): "
        rf"Session.run on /job:worker/task:0 \({address}\) exceeded its deadline of 2 s: Deadline Exceeded\); "
        r"recovery 1 of 3: new session, trying again \(\d+\.\d s\)", lines[0]), lines
    np.testing.assert_array_equal(losses, uninterrupted)
    assert train.latest_checkpoint(tmp_path) == str(tmp_path / f"model.ckpt-{STEPS}")


def test_recoveries_are_bounded(cluster, tmp_path, caplog):
    """max_recoveries=0: the first failure is raised, with a log line saying so."""
    g, rep, xs, ys, init, _ = replicated_model(cluster.spec)
    killer = Killer(cluster, ("worker", 1), at=0, down=0.0)
    caplog.set_level(logging.INFO, logger="bridge.train")
    try:
        with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
            sess.prepare()
            with pytest.raises(UnavailableError):
                train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss, feed_dict=lambda s: feed_of(s, xs, ys),
                                 callback=killer, progress=False, checkpoint_dir=tmp_path, max_recoveries=0)
    finally:
        killer.join()
    assert any("failed with UnavailableError after 0 recoveries: giving up" in r.getMessage()
               for r in caplog.records)


def test_train_loop_resumes_from_the_newest_checkpoint_of_its_folder(uninterrupted, tmp_path):
    """A client that restarts: the second train_loop starts at the step of the
    first one's last checkpoint and ends where an uninterrupted run ends."""
    g, rep, xs, ys, init, _ = replicated_model(None)
    feed = lambda s: feed_of(s, xs, ys)  # noqa: E731
    with bridge.Session(g) as sess:
        sess.run(init)
        first = train.train_loop(sess, rep.train_op, 5, loss=rep.loss, feed_dict=feed, progress=False,
                                 checkpoint_dir=tmp_path, save_every=SAVE_EVERY)
    assert train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-5")
    with bridge.Session(g) as sess:   # fresh variables: never initialized, restored
        rest = train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss, feed_dict=feed, progress=False,
                                checkpoint_dir=tmp_path, save_every=SAVE_EVERY)
    assert len(rest) == STEPS - 5
    np.testing.assert_array_equal(first + rest, uninterrupted)


def test_between_graph_workers_recover_the_chief_restores_the_others_wait(cluster, tmp_path, caplog):
    """Asynchronous between-graph training, a client per worker, both with the
    checkpoint folder: only the chief saves; the ps is killed during
    training and restarted; the chief restores its newest checkpoint into it,
    the other worker waits for the variables and both finish their steps."""
    
    steps = 16
    graphs = [worker_graph(cluster.spec, task, "faults_async") for task in (0, 1)]
    sessions = [distribute.Session(cluster.spec, ("worker", task), graph=graphs[task][0], timeout=RUN_TIMEOUT)
                for task in (0, 1)]
    assert [sess.is_chief for sess in sessions] == [True, False]
    killer = Killer(cluster, ("ps", 0), at=4)
    other_running = threading.Event()
    results, errors = {}, []
    caplog.set_level(logging.INFO, logger="bridge.train")

    def work(task):
        g, x, y, loss, train_op, _, _, _ = graphs[task]

        def pace(step, value):   # both workers are training when the ps dies
            time.sleep(0.05)
            if task == 1 and step >= 2:
                other_running.set()
            if task == 0 and step == killer.at:
                assert other_running.wait(60), "the other worker never started training"
                killer(step, value)

        try:
            sessions[task].prepare(wait_timeout=60)
            results[task] = train.train_loop(sessions[task], train_op, steps, loss=loss, progress=False,
                                             feed_dict=lambda s: regression_feed(x, y, s, task), callback=pace,
                                             checkpoint_dir=tmp_path, save_every=3, recovery_timeout=60)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(task,)) for task in (1, 0)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        killer.join()
        for sess in sessions:
            sess.close()
    assert not errors, errors
    assert all(not t.is_alive() for t in threads)
    assert [len(results[task]) for task in (0, 1)] == [steps, steps]
    assert all(np.all(np.isfinite(results[task])) for task in (0, 1))
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    assert any("new session, restored model.ckpt-3, resuming at step 3" in line for line in lines), lines
    assert any("new session, the chief's variables are back, resuming at step" in line for line in lines), lines
    # Only the chief wrote checkpoints: its steps, nothing else.
    assert train.latest_checkpoint(tmp_path) == str(tmp_path / f"model.ckpt-{steps}")


def test_a_stalled_worker_fails_its_step_at_the_deadline_and_training_resumes_once_it_runs_again(
        cluster, uninterrupted, tmp_path, caplog):
    """SIGSTOP worker 1 after step 6 for 4.5 s, with 3 s deadlines: step 7
    fails with DeadlineExceededError, the loop waits until the worker answers
    again (SIGCONT), restores model.ckpt-4 and ends as an uninterrupted run
    (the abandoned step left no late update behind)."""
    import signal

    g, rep, xs, ys, init, _ = replicated_model(cluster.spec)
    stalled = cluster.server("worker", 1)
    resumer = []

    def stall(step, loss):
        if step == 6 and not resumer:
            stalled.proc.send_signal(signal.SIGSTOP)
            resumer.append(threading.Timer(4.5, stalled.proc.send_signal, (signal.SIGCONT,)))
            resumer[0].start()

    caplog.set_level(logging.INFO, logger="bridge.train")
    try:
        with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
            sess.prepare()
            feed = lambda s: feed_of(s, xs, ys)  # noqa: E731
            sess.run([rep.loss], feed(0))   # the graph is registered on every task before the deadlines shrink
            sess.timeout = 3.0
            losses = train.train_loop(sess, rep.train_op, STEPS, loss=rep.loss, feed_dict=feed, callback=stall,
                                      progress=False, checkpoint_dir=tmp_path, save_every=SAVE_EVERY,
                                      recovery_timeout=30)
    finally:
        for timer in resumer:
            timer.join(10)
        stalled.proc.send_signal(signal.SIGCONT)
    lines = [r.getMessage() for r in caplog.records if "recovery" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("train_loop: step 7 failed with DeadlineExceededError ("), lines
    assert "restored model.ckpt-4, resuming at step 4" in lines[0], lines
    np.testing.assert_array_equal(losses, uninterrupted)
