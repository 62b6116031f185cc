"""examples/distributed_inverse: one command starts a loopback cluster (a ps,
two workers running the Julia PDE op), trains the inverse-diffusion problem
with its experiments split over the workers, prints the kappa error and
stops every server, also when it is interrupted.

Both tests run the example in a child process with a time limit, as a user
would (tests/examples/test_inverse_diffusion.py does the same with the one-process
example); ``--small`` keeps the training to about 2000 quick steps.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.build import toolchain_missing
from support.cluster import child_env
from support import REPO

EXAMPLE = REPO / "examples" / "distributed_inverse" / "run.py"
TARGET = 0.05


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by a parent that is gone) is not serving.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_gone(pids: list, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


@pytest.fixture(scope="module", autouse=True)
def _toolchain():
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)


def test_distributed_example_recovers_kappa_and_stops_its_servers(tmp_path):
    logdir = tmp_path / "chief"
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--small", "--logdir", str(logdir)], capture_output=True,
                          text=True, timeout=900, cwd=tmp_path, env=child_env())
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    assert out.strip().endswith("OK"), out
    # The servers: each worker started Julia (the ready line says how long it took); the client did not.
    ready = [line for line in out.splitlines() if "tfbridge server: ready" in line]
    assert len(ready) == 3, out
    for i in range(2):
        line = next(l for l in ready if f"/job:worker/task:{i} " in l)
        assert re.search(r"Julia started in [\d.]+ s, ops loaded in [\d.]+ s", line), line
    assert "Julia started in this process: no" in out, out
    # The experiments are split: the op and its adjoint ran on both workers.
    assert "DiffusionSolve1D       on /job:worker/task:0: experiments 0, 2" in out, out
    assert "DiffusionSolve1DGrad   on /job:worker/task:1: experiments 1" in out, out
    m = re.search(r"^Adam\s+2000\s+[\d.]+ s\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)%$", out, re.M)
    assert m, out
    loss, kappa_error, u_error = float(m[1]), float(m[2]) / 100, float(m[3]) / 100
    assert kappa_error <= TARGET and u_error < 0.02 and 0.5 < loss < 2, out
    # The chief's TensorBoard log: the graph (Julia ops on the workers), every step's loss, ten kappa errors.
    events = _events(logdir)
    graph = next(e for e in events if e.graph_def)
    assert b"/job:worker/task:1" in graph.graph_def and b"_tfbridge_function" in graph.graph_def
    losses = [(e.step, v.simple_value) for e in events for v in e.summary.value if v.tag == "train/loss"]
    assert [s for s, _ in losses] == list(range(2000)) and abs(losses[-1][1] - loss) < 0.05 * loss
    errors = [(e.step, v.simple_value) for e in events for v in e.summary.value if v.tag == "kappa_error"]
    assert [s for s, _ in errors] == list(range(199, 2000, 200)) and abs(errors[-1][1] - kappa_error) < 1e-3
    # Every server is gone once the command returns.
    pids = [int(re.search(r"pid (\d+)", line)[1]) for line in ready]
    assert _wait_gone(pids, 5) == [], out


def _events(logdir) -> list:
    from tensorboard.compat.proto import event_pb2

    from bridge.summary import records

    (path,) = logdir.glob("events.out.tfevents.*")
    return [event_pb2.Event.FromString(r) for r in records.unframe(path.read_bytes())]


def test_interrupted_example_stops_every_server(tmp_path):
    """SIGINT to the command alone (not to its process group, as a terminal's
    Ctrl-C would, which the servers would obey by themselves) while its
    servers start: it exits 130 and no server outlives it."""
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--small", "--no-log"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=child_env(),
                            start_new_session=True)
    pids = []
    try:
        for line in proc.stdout:
            m = re.search(r"started /job:\w+/task:\d+ at \S+, pid (\d+)", line)
            if m:
                pids.append(int(m[1]))
            if len(pids) == 3:
                break
        assert len(pids) == 3, proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, proc.stderr.read()[-3000:]
        assert "the servers are stopped" in proc.stderr.read()
        assert _wait_gone(pids, 5) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
