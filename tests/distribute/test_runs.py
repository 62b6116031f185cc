"""Graphs run on loopback clusters of `tfbridge server` processes: pinned
graphs, variables on a ps trained from a worker, the chief's initialisation
and the others' wait, stalled and missing tasks, and the command's error exits.

Every server is a child process started by tests/support/cluster.py and
killed when its test (or module) ends, pass or fail; every run has a deadline.
"""
from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import bridge
from bridge import distribute, train
from bridge.framework.errors import DeadlineExceededError, UnavailableError

from support.cluster import (REPO, ServerProcess, child_env, free_port, listening_addresses, local_cluster,
                             server_command)

RUN_TIMEOUT = 20.0

#: The module's loopback cluster (the `cluster` fixture, tests/distribute/conftest.py).
CLUSTER = {"ps": 1, "worker": 3}
#: The tasks started; worker 2 is in the cluster but never started.
STARTED = {("ps", 0), ("worker", 0), ("worker", 1)}


def _mlp(pinned: bool, first="/job:worker/task:1", second="/job:worker/task:0"):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None, 3], name="x")
        w = bridge.constant(np.linspace(-1.0, 1.0, 12).reshape(3, 4), name="w")
        with bridge.device(first) if pinned else contextlib.nullcontext():
            h = bridge.ops.tanh(bridge.ops.mat_mul(x, w))
        with bridge.device(second) if pinned else contextlib.nullcontext():
            y = bridge.ops.sum(h * h, [1])
    return g, x, y


def test_pinned_graph_runs_across_two_tasks_and_equals_local(cluster):
    data = np.random.default_rng(0).normal(size=(5, 3))
    g, x, y = _mlp(pinned=True)
    assert {op.device for op in g.get_operations()} >= {"/job:worker/task:0", "/job:worker/task:1"}
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        assert sess.device_filters == ["/job:worker/task:0", "/job:worker/task:1"]
        remote = sess.run(y, {x: data})
    lg, lx, ly = _mlp(pinned=False)
    with bridge.Session(lg) as sess:
        local = sess.run(ly, {lx: data})
    np.testing.assert_array_equal(remote, local)


def _regression(dist: bool, spec=None, prefix="reg"):
    g = bridge.Graph()
    with g.as_default():
        setter = distribute.replica_device_setter(cluster=spec, worker_device="/job:worker/task:0") if dist else None
        with bridge.device(setter) if dist else contextlib.nullcontext():
            x = bridge.constant(np.linspace(-1, 1, 24).reshape(8, 3), name="x")
            target = bridge.constant(np.sin(np.arange(8.0)).reshape(8, 1), name="target")
            w = bridge.Variable(np.full((3, 1), 0.1), name=f"{prefix}_w")
            b = bridge.Variable(np.zeros(1), name=f"{prefix}_b")
            with bridge.device("/job:worker/task:1") if dist else contextlib.nullcontext():
                y = bridge.ops.mat_mul(x, w.value()) + b.value()
            loss = bridge.ops.mean((y - target) * (y - target), [0, 1])
            step = bridge.train.GradientDescentOptimizer(0.2).minimize(loss, colocate_gradients_with_ops=True)
    return g, loss, step, w, b


def test_variables_on_a_ps_trained_from_a_worker_equal_the_local_run(cluster):
    g, loss, step, w, b = _regression(True, cluster.spec)
    assert w.op.device == "/job:ps/task:0" and b.op.device == "/job:ps/task:0"
    with distribute.Session(cluster.spec, ("worker", 1), graph=g, timeout=RUN_TIMEOUT) as other:
        # Before the chief: worker 1 waits, and its wait ends naming what is missing.
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceededError, match=r"still uninitialized: reg_w, reg_b"):
            other.wait_for_variables(timeout=1.5, poll_interval=0.2)
        assert time.monotonic() - t0 < 1.5 + RUN_TIMEOUT
        with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as chief:
            assert chief.uninitialized_variables() == ["reg_w", "reg_b"]
            assert chief.prepare() == "initialized"
            remote = [chief.run([loss, step])[0] for _ in range(5)]
            remote_w = chief.run(w)
        # The variables live on the ps: another worker's session sees the trained values.
        assert other.prepare() == "waited"
        np.testing.assert_array_equal(other.run(w), remote_w)
    lg, lloss, lstep, lw, _ = _regression(False)
    with bridge.Session(lg) as sess:
        sess.run(bridge.global_variables_initializer(lg))
        local = [sess.run([lloss, lstep])[0] for _ in range(5)]
        local_w = sess.run(lw)
    np.testing.assert_array_equal(remote, local)
    np.testing.assert_array_equal(remote_w, local_w)
    assert remote[-1] < remote[0]


def test_a_device_outside_the_cluster_is_refused_before_running(cluster):
    g, x, y = _mlp(pinned=True, first="/job:worker/task:7")
    with pytest.raises(ValueError, match=r"operation 'MatMul' \(MatMul\) is placed on '/job:worker/task:7', but "
                                         r"job 'worker' of the cluster has no task 7"):
        distribute.Session(cluster.spec, ("worker", 0), graph=g)
    g, x, y = _mlp(pinned=True, first="/job:trainer/task:0")
    with pytest.raises(ValueError, match="the cluster has no job 'trainer'"):
        distribute.Session(cluster.spec, ("worker", 0), graph=g)


def test_a_missing_task_fails_within_the_deadline_and_others_go_on(cluster):
    """Worker 2 is in the cluster, but no server runs: a run that needs it
    fails at its deadline, naming it; a session whose graph does not use it
    is not blocked by it (device filters)."""
    g, x, y = _mlp(pinned=True, first="/job:worker/task:2")
    data = np.ones((2, 3))
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=3.0) as sess:
        t0 = time.monotonic()
        with pytest.raises((DeadlineExceededError, UnavailableError)) as info:
            sess.run(y, {x: data})
        elapsed = time.monotonic() - t0
    assert elapsed < 3.0 + 5.0, elapsed
    message = str(info.value)
    assert "/job:worker/task:2" in message and "no server is running there" in message, message
    g, x, y = _mlp(pinned=True, first="/job:worker/task:1")
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        assert sess.run(y, {x: data}).shape == (2,)


def test_train_loop_with_checkpoints_goes_on_beside_a_task_that_never_started(cluster, tmp_path):
    """The graph names worker 2 (never started) in an op training does not
    run: train_loop saves its checkpoints and trains as the local run does."""
    g, loss, step, w, b = _regression(True, cluster.spec, prefix="beside")
    with g.as_default(), bridge.device("/job:worker/task:2"):
        bridge.ops.neg(loss, name="elsewhere")
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=5.0) as sess:
        assert sess.prepare() == "initialized"
        t0 = time.monotonic()
        remote = train.train_loop(sess, step, 6, loss=loss, progress=False, checkpoint_dir=tmp_path, save_every=2)
        assert time.monotonic() - t0 < 5.0
    lg, lloss, lstep, _, _ = _regression(False, prefix="beside")
    with bridge.Session(lg) as local:
        local.run(bridge.global_variables_initializer(lg))
        expected = [local.run([lloss, lstep])[0] for _ in range(6)]
    np.testing.assert_array_equal(remote, expected)
    assert train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-6")


def test_a_master_that_refuses_connections_is_unavailable_within_a_second(cluster):
    """Not DeadlineExceededError at the run's deadline: the master is probed first."""
    g, x, y = _mlp(pinned=False)
    address = cluster.spec.task_address("worker", 2)
    with distribute.Session(cluster.spec, ("worker", 2), graph=g, timeout=30.0) as sess:
        for _ in range(2):  # and again: nothing was made on the master
            t0 = time.monotonic()
            with pytest.raises(UnavailableError) as info:
                sess.run(y, {x: np.ones((2, 3))})
            assert time.monotonic() - t0 < 1.0
            assert str(info.value) == (f"Session.run on /job:worker/task:2 ({address}): the session's master refuses "
                                       "connections: no server is running there; start it with `tfbridge server "
                                       "--cluster FILE --job worker --task 2`.")


def test_a_first_run_keeps_its_own_deadline(cluster):
    """The session's first run makes its TensorFlow session, which waits for
    the tasks as long as it is told: the run's 2 s, not the session's 30 s."""
    g, x, y = _mlp(pinned=True, first="/job:worker/task:2")
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=30.0) as sess:
        for _ in range(2):
            t0 = time.monotonic()
            with pytest.raises(DeadlineExceededError) as info:
                sess.run(y, {x: np.ones((2, 3))}, timeout=2.0)
            elapsed = time.monotonic() - t0
            assert 1.9 <= elapsed < 2.0 + 2.0, elapsed
            assert str(info.value).startswith(f"Session.run on /job:worker/task:0 ({cluster.spec.task_address('worker', 0)}) "
                                              "exceeded its deadline of 2 s"), str(info.value)


def test_runs_that_do_not_need_a_task_that_never_started_go_on(cluster):
    """Worker 2 is named by the graph (an op pinned to it, and ops on the
    whole worker job) but never started: runs of the rest go on at once,
    and a run that needs it fails at its deadline naming it."""
    data = np.ones((2, 3))
    g, x, y = _mlp(pinned=True, first="/job:worker/task:1")
    with g.as_default():
        with bridge.device("/job:worker/task:2"):
            far = bridge.ops.neg(y, name="far")
        with bridge.device("/job:worker"):
            anywhere = bridge.ops.sum(x, [1], name="anywhere")
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=30.0) as sess:
        assert sess.device_filters == ["/job:worker/task:0", "/job:worker"]  # worker 2 included
        t0 = time.monotonic()
        got = sess.run(y, {x: data})
        assert time.monotonic() - t0 < 3.0
        lg, lx, ly = _mlp(pinned=False)
        with bridge.Session(lg) as local:
            np.testing.assert_array_equal(got, local.run(ly, {lx: data}))
        np.testing.assert_array_equal(sess.run(anywhere, {x: data}), data.sum(1))
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceededError) as info:
            sess.run(far, {x: data}, timeout=2.0)
        assert time.monotonic() - t0 < 4.0
        assert (f"  /job:worker/task:2 at {cluster.spec.task_address('worker', 2)}: refuses connections: no server "
                "is running there") in str(info.value).splitlines()
        np.testing.assert_array_equal(sess.run(y, {x: data}), got)  # and the others still go on


def test_a_stopped_worker_fails_runs_that_need_it_at_their_deadline_only(cluster):
    g, x, y = _mlp(pinned=True)  # uses workers 0 and 1
    with g.as_default(), bridge.device("/job:worker/task:0"):
        alone = bridge.ops.neg(x, name="alone")
    data = np.ones((2, 3))
    stopped = cluster.server("worker", 1)
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        before = sess.run(y, {x: data})
        stopped.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(DeadlineExceededError) as info:
                sess.run(y, {x: data}, timeout=2.0)
            elapsed = time.monotonic() - t0
            assert 1.9 <= elapsed < 2.0 + 3.0, elapsed
            message = str(info.value)
            assert "deadline of 2 s" in message
            assert "/job:worker/task:1 at" in message and "does not answer within" in message, message
            assert "/job:worker/task:0 at" in message and message.count("does not answer") == 1, message
            # The default deadline holds too: no run hangs.
            sess.timeout = 1.0
            with pytest.raises(DeadlineExceededError):
                sess.run(y, {x: data})
            sess.timeout = RUN_TIMEOUT
            # A run that does not touch the stopped worker goes on.
            t0 = time.monotonic()
            np.testing.assert_array_equal(sess.run(alone, {x: data}), -data)
            assert time.monotonic() - t0 < 1.0
        finally:
            stopped.proc.send_signal(signal.SIGCONT)
        # Once it runs again, so do the runs that need it.
        np.testing.assert_array_equal(sess.run(y, {x: data}), before)


# --- `tfbridge server` ---------------------------------------------------------------------

def _run_server(args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bridge.cli", "server", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=str(REPO))


def test_server_exits_cleanly_on_sigterm_and_sigint(tmp_path):
    for sig, host in ((signal.SIGTERM, None), (signal.SIGINT, "127.0.0.1")):
        port = free_port()
        path = tmp_path / "one.json"
        path.write_text(json.dumps({"worker": [f"localhost:{port}"]}))
        extra = ["--host", host] if host else []
        server = ServerProcess(server_command(path, "worker", 0, extra=extra), tmp_path / "one.log")
        try:
            line = server.wait_ready(60)
            assert line == (f"tfbridge server: ready /job:worker/task:0 target grpc://localhost:{port} address "
                            f"localhost:{port} listening 127.0.0.1:{port} pid {server.pid}\n"), server.stderr()
            # 127.0.0.1 on gRPC's dual-stack socket, nothing else (tests/distribute/test_listen.py).
            assert listening_addresses(port) == {"::ffff:127.0.0.1"}
            server.proc.send_signal(sig)
            assert server.proc.wait(timeout=20) == 0, server.stderr()
            rest = "".join(iter(lambda: server.lines.get(timeout=5) or "", ""))
            assert rest == f"tfbridge server: stopped /job:worker/task:0 ({sig.name})\n"
        finally:
            server.stop()


@pytest.mark.parametrize("source", ["TF_CONFIG", "SLURM"])
def test_server_takes_its_cluster_and_task_from_the_environment(tmp_path, source):
    port = free_port()
    env = child_env()
    if source == "TF_CONFIG":
        env["TF_CONFIG"] = json.dumps({"cluster": {"ps": ["localhost:1"], "worker": [f"localhost:{port}"]},
                                       "task": {"type": "worker", "index": 0}})
        args = ["--cluster", "TF_CONFIG"]
    else:
        env.update(SLURM_PROCID="1", SLURM_STEP_NODELIST="localhost", SLURM_STEP_TASKS_PER_NODE="2",
                   SLURM_NTASKS="2")
        args = ["--cluster", "SLURM", "--slurm-jobs", "ps=1,worker=1", "--port-base", str(port - 1)]
    server = ServerProcess([sys.executable, "-m", "bridge.cli", "server", *args], tmp_path / "env.log", env=env)
    try:
        line = server.wait_ready(60)
        assert line is not None, server.stderr()
        assert f"ready /job:worker/task:0 target grpc://localhost:{port}" in line, line
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0
    finally:
        server.stop()


def test_server_refuses_a_port_in_use(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = tmp_path / "c.json"
        path.write_text(json.dumps({"worker": [f"localhost:{port}"]}))
        done = _run_server(["--cluster", str(path), "--job", "worker", "--task", "0"])
    assert done.returncode == 1
    assert f"cannot start /job:worker/task:0 (localhost:{port}): port {port} is already in use" in done.stderr
    assert "ready" not in done.stdout


@pytest.mark.parametrize("content, args, fragment", [
    ('{"worker": ["localhost:1",]}', ("worker", "0"), "not valid JSON: Expecting value at line 1"),
    ('{"worker": ["localhost"]}', ("worker", "0"), "task 0 of job 'worker' has address 'localhost'"),
    ('{"worker": ["localhost:1"]}', ("ps", "0"), "has no job 'ps' (jobs: worker)"),
    ('{"worker": ["localhost:1"]}', ("worker", "3"), "job 'worker' has no task 3 (tasks: 0)"),
    (None, ("worker", "0"), "cannot be read (No such file or directory)"),
])
def test_server_refuses_a_bad_cluster_file_naming_it(tmp_path, content, args, fragment):
    path = tmp_path / "cluster.json"
    if content is not None:
        path.write_text(content)
    done = _run_server(["--cluster", str(path), "--job", args[0], "--task", args[1]])
    assert done.returncode == 1, done
    assert done.stderr.startswith(f"tfbridge server: cluster file {path}"), done.stderr
    assert fragment in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_server_refuses_an_op_folder_that_fails(tmp_path):
    folder = tmp_path / "Broken"
    folder.mkdir()
    (folder / "custom_op.txt").write_text("Broken\ndouble x(n\n")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"worker": [f"localhost:{free_port()}"]}))
    done = _run_server(["--cluster", str(path), "--job", "worker", "--task", "0", "--ops", str(folder)], timeout=120)
    assert done.returncode == 1, done
    assert f"op folder {folder} could not be loaded, so /job:worker/task:0 does not start" in done.stderr
    assert "custom_op.txt:2" in done.stderr, done.stderr
    assert "ready" not in done.stdout


def test_collective_reduce_across_two_workers(cluster):
    """CollectiveReduceV2 needs a collective group leader in the servers'
    default session config (the Server sets it); without one it waits forever."""
    g = bridge.Graph()
    outs = []
    with g.as_default():
        for task in (0, 1):
            with bridge.device(f"/job:worker/task:{task}/device:CPU:0"):
                x = bridge.constant(np.arange(3.0) * (task + 1))
                outs.append(bridge.ops.collective_reduce_v2(
                    x, bridge.constant(2), bridge.constant(7), bridge.constant(1), [], merge_op="Add",
                    final_op="Id"))
    with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=RUN_TIMEOUT) as sess:
        a, b = sess.run(outs)
    np.testing.assert_array_equal(a, np.arange(3.0) * 3)
    np.testing.assert_array_equal(b, a)
