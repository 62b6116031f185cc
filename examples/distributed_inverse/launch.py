"""Start a loopback TensorFlow cluster of `tfbridge server` processes, and
always stop it: ``with local_servers({"ps": 1, "worker": 2}, ops=...) as cluster:``.

Standard library only, so that the servers start before the client loads
TensorFlow (the client's threads then cannot meet a fork).  On a real cluster
each node runs its own `tfbridge server` instead (docs/guides/distributed.md):
this file is the one-machine stand-in for srun or mpirun.

Stopping: leaving the block, by an exception or Ctrl-C included, sends
SIGTERM to every server (each then exits 0) and SIGKILL to any still alive
after ``grace`` seconds.  On Linux each server also gets SIGTERM from the
kernel if this process dies without cleaning up (kill -9): no server is
left behind.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: the finally below still stops the servers


def _interrupt(signum, _frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(repo: Optional[Path]) -> dict:
    """The servers' environment: the bridge importable (``repo`` first on PYTHONPATH)."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if repo is not None:
        env["PYTHONPATH"] = str(repo) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Server:
    """One `tfbridge server` child process; stdout lines are collected, stderr goes to a log file."""

    def __init__(self, job: str, task: int, cluster_file: Path, ops: Sequence[Path], log: Path, env: dict):
        self.job, self.task, self.log = job, task, log
        args = [sys.executable, "-m", "bridge.cli", "server", "--cluster", str(cluster_file), "--job", job,
                "--task", str(task)]
        for folder in ops:
            args += ["--ops", str(folder)]
        self._err = open(log, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env,
                                     preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        self.ready_line: Optional[str] = None
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if " ready " in line and self.ready_line is None:
                self.ready_line = line.strip()
                self._ready.set()
        self._ready.set()  # ended

    def wait_ready(self, deadline: float) -> None:
        self._ready.wait(max(0.0, deadline - time.monotonic()))
        if self.ready_line is None:
            self._err.flush()
            why = self.log.read_text(errors="replace").strip()[-2000:] or "(no message)"
            state = f"exited with status {self.proc.poll()}" if self.proc.poll() is not None else "is not ready in time"
            raise RuntimeError(f"server /job:{self.job}/task:{self.task} {state}:\n{why}")

    def stop(self, grace: float) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)   # a stopped server must be able to exit
                self.proc.terminate()
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


class Cluster:
    def __init__(self, jobs: dict, path: Path, servers: dict):
        self.jobs, self.path, self.servers = jobs, path, servers


@contextlib.contextmanager
def local_servers(jobs: dict, ops: Optional[dict] = None, repo: Optional[Path] = None, ready_timeout: float = 600.0,
                  grace: float = 10.0, log_dir: Optional[Path] = None, log=None) -> Iterator[Cluster]:
    """Serve ``jobs`` (name -> task count) on free loopback ports; ``ops`` maps
    (job, task) to the op folders that task loads; ``log(line)`` hears of each
    server started.  Yields once every server printed its ready line (a
    server that fails raises, with its message)."""
    ops = ops or {}
    servers: dict = {}
    previous = signal.getsignal(signal.SIGTERM)
    # SIGTERM to this process (a batch system's, `kill`) unwinds like Ctrl-C, through the finally below.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    with tempfile.TemporaryDirectory(prefix="tfbridge-cluster-") as tmp:
        logs = Path(log_dir) if log_dir else Path(tmp)
        try:
            spec = {job: [f"localhost:{free_port()}" for _ in range(n)] for job, n in jobs.items()}
            path = Path(tmp) / "cluster.json"
            path.write_text(json.dumps(spec))
            env = server_env(repo)
            for job, n in jobs.items():
                for task in range(n):
                    server = Server(job, task, path, ops.get((job, task), ()), logs / f"{job}{task}.log", env)
                    servers[(job, task)] = server
                    if log is not None:
                        log(f"started /job:{job}/task:{task} at {spec[job][task]}, pid {server.proc.pid}")
            deadline = time.monotonic() + ready_timeout
            for server in servers.values():
                server.wait_ready(deadline)
            yield Cluster(spec, path, servers)
        finally:
            for server in servers.values():
                server.stop(grace)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, previous)
