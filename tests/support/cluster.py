"""Loopback clusters for the distributed tests: `tfbridge server` child
processes on ports picked here, each start bounded in time, always stopped.

``with local_cluster({"ps": 1, "worker": 2}) as cluster:`` starts one server
per task (``python -m bridge.cli server``), waits for each one's "ready"
line, and yields a :class:`Cluster` (its ClusterSpec, its processes);
leaving the block (also by an exception) resumes stopped servers and kills
them all.  Ports come from binding 127.0.0.1:0 and closing; a start that
loses its port to another process is retried on new ports.
"""
from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

import bridge
from bridge.distribute import ClusterSpec

from . import REPO

READY_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_addresses(port: int) -> set:
    """The local addresses listening on TCP ``port``, from /proc/net/tcp and
    /proc/net/tcp6 (state 0A), as ipaddress spells them: "127.0.0.1",
    "::1", "::ffff:127.0.0.1" (an IPv4 address on a dual-stack socket), "::"
    (every interface)."""
    import ipaddress

    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                address, _, hex_port = fields[1].rpartition(":")
                if fields[3] != "0A" or int(hex_port, 16) != port:
                    continue
                raw = bytes.fromhex(address)
                # The kernel prints each 32-bit word in host order (little-endian here).
                packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                ip = ipaddress.ip_address(packed)
                mapped = getattr(ip, "ipv4_mapped", None)
                found.add(f"::ffff:{mapped}" if mapped is not None else str(ip))
    return found


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def server_command(cluster_file: Path, job: str, task: int, ops: Sequence[Path] = (), extra: Sequence[str] = ()):
    args = [sys.executable, "-m", "bridge.cli", "server", "--cluster", str(cluster_file), "--job", job,
            "--task", str(task)]
    for folder in ops:
        args += ["--ops", str(folder)]
    return args + list(extra)


class ServerProcess:
    """One `tfbridge server` child: its stdout lines arrive in a queue; stderr goes to a file."""

    def __init__(self, args: list, log: Path, env: Optional[dict] = None):
        self.log = log
        self._err = open(log, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     env=env or child_env(), cwd=str(REPO))
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready_line: Optional[str] = None

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float) -> Optional[str]:
        """The "ready" line, or None if the process ended first (or the time ran out)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if " ready " in line:
                self.ready_line = line
                return line

    def stderr(self) -> str:
        self._err.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)  # a SIGSTOPped server must be able to die
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._err.close()


class Cluster:
    def __init__(self, spec: ClusterSpec, servers: dict, path: Path, ops: Optional[dict] = None):
        self.spec, self.servers, self.path = spec, servers, path
        self.ops = ops or {}
        self._restarts = 0

    def server(self, job: str, task: int) -> ServerProcess:
        return self.servers[(job, task)]

    def kill(self, job: str, task: int) -> None:
        """SIGKILL the task's server (kill -9) and reap it."""
        self.servers[(job, task)].stop()

    def start(self, job: str, task: int, ready_timeout: float = READY_TIMEOUT) -> ServerProcess:
        """Start a fresh server for the task (killing the old one first), on the
        same address; return once it is ready (RuntimeError with its stderr if not)."""
        old = self.servers.get((job, task))
        if old is not None:
            old.stop()
        self._restarts += 1
        server = ServerProcess(server_command(self.path, job, task, self.ops.get((job, task), ())),
                               self.path.parent / f"server_{job}_{task}_restart{self._restarts}.log")
        self.servers[(job, task)] = server
        if server.wait_ready(ready_timeout) is None:
            server.stop()
            raise RuntimeError(f"server /job:{job}/task:{task} did not restart within {ready_timeout} s:\n"
                               f"{server.stderr()}")
        return server


@contextlib.contextmanager
def local_cluster(jobs: dict, tmp_path: Path, ops: Optional[dict] = None, start: Optional[set] = None,
                  ready_timeout: float = READY_TIMEOUT, attempts: int = 3) -> Iterator[Cluster]:
    """Start a loopback cluster: ``jobs`` maps job names to task counts;
    ``ops`` maps (job, task) to op folders that task loads; ``start`` the
    tasks to start (default all: a task left out is a cluster member whose
    server never runs)."""
    ops = ops or {}
    servers: dict = {}
    try:
        for attempt in range(attempts):
            spec = ClusterSpec({job: [f"localhost:{free_port()}" for _ in range(n)] for job, n in jobs.items()})
            path = tmp_path / f"cluster_{attempt}.json"
            path.write_text(json.dumps(spec.as_dict()))
            servers = {}
            for job, task in spec.tasks():
                if start is not None and (job, task) not in start:
                    continue
                servers[(job, task)] = ServerProcess(server_command(path, job, task, ops.get((job, task), ())),
                                                     tmp_path / f"server_{job}_{task}_{attempt}.log")
            lost_port = False
            for (job, task), server in servers.items():
                if server.wait_ready(ready_timeout) is None:
                    server.stop()
                    err = server.stderr()
                    if "already in use" in err:
                        lost_port = True
                        break
                    raise RuntimeError(f"server /job:{job}/task:{task} did not start within {ready_timeout} s:\n{err}")
            if lost_port:
                for server in servers.values():
                    server.stop()
                continue
            yield Cluster(spec, servers, path, ops)   # shares `servers`: restarted ones are stopped too
            return
        raise RuntimeError(f"no free ports for a cluster after {attempts} attempts")
    finally:
        for server in servers.values():
            server.stop()
