"""Watching tasks a session's runs wait on without naming them.

A synchronous between-graph step (SyncReplicasOptimizer) waits for the
other workers' gradients, which come from their own clients' graphs: when
one of those workers dies, TensorFlow sees nothing wrong in this session's
graph and the step waits until its deadline.  :class:`TaskWatch` checks such
tasks every ``interval`` seconds from a thread of its own: a task seen
alive that then refuses connections (it died) or answers as another
process (it restarted: its master no longer knows the watch's session, or
its device's incarnation changed) trips the watch, once, until the task is
seen alive again.  Tasks never seen alive (not started yet) do not trip it.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable, Optional

from bridge.framework import _proto as pb
from bridge.framework._lib import ffi, lib
from bridge.framework.errors import Status
from bridge.framework.graph import Graph
from bridge.framework.session import session_options

from .cluster import ClusterSpec
from .probe import ACCEPTS, probe

__all__ = ["TaskWatch"]


class _Probe:
    """A TF session on one task (its own master, filtered to itself) whose
    ListDevices asks that process for its devices' incarnations."""

    def __init__(self, address: str, job: str, index: int, timeout: float):
        self.graph = Graph()
        config = pb.field_varint(11, max(1, round(timeout * 1000))) + pb.field_bytes(4, f"/job:{job}/task:{index}")
        s = Status()
        self.ptr = lib.TF_NewSession(self.graph._ptr, session_options(config, f"grpc://{address}"), s.ptr)
        if lib.TF_GetCode(s.ptr):
            self.ptr = None

    def incarnations(self) -> tuple[Optional[tuple], str]:
        """(the sorted incarnations of the task's devices, "") or (None, TensorFlow's error)."""
        if self.ptr is None:
            return None, "no session"
        s = Status()
        devices = lib.TF_SessionListDevices(self.ptr, s.ptr)
        if lib.TF_GetCode(s.ptr):
            return None, ffi.string(lib.TF_Message(s.ptr)).decode(errors="replace")
        try:
            return tuple(sorted(lib.TF_DeviceListIncarnation(devices, i, s.ptr)
                                for i in range(lib.TF_DeviceListCount(devices)))), ""
        finally:
            lib.TF_DeleteDeviceList(devices)

    def close(self) -> None:
        if self.ptr is not None:
            s = Status()
            lib.TF_CloseSession(self.ptr, s.ptr)
            lib.TF_DeleteSession(self.ptr, s.ptr)
            self.ptr = None


class TaskWatch:
    """Checks ``tasks`` of ``cluster`` every ``interval`` seconds; calls
    ``on_trip(task, why)`` when one seen alive died or restarted."""

    def __init__(self, cluster: ClusterSpec, tasks: Iterable[tuple[str, int]], interval: float,
                 on_trip: Callable[[tuple[str, int], str], None]):
        self.cluster, self.interval, self.on_trip = cluster, interval, on_trip
        self.tasks = sorted(set(tasks))
        self._alive: dict = {}      # task -> incarnations last seen (absent: not seen alive since start or trip)
        self._probes: dict = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="bridge-distribute-watch")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(self.interval + 2.0)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                for task in self.tasks:
                    if self._stop.is_set():
                        break
                    why = self._check(task)
                    if why is not None and not self._stop.is_set():
                        self.on_trip(task, why)
                self._stop.wait(self.interval)
        finally:
            for p in self._probes.values():
                p.close()

    def _check(self, task: tuple[str, int]) -> Optional[str]:
        """Why ``task`` trips the watch now (None: it does not)."""
        address = self.cluster.task_address(*task)
        said = probe(address, min(0.5, self.interval))
        known = self._alive.get(task)
        if said != ACCEPTS:
            self._forget(task)
            return f"{said} (it answered before)" if known is not None else None
        got, error = self._probe(task, address).incarnations()
        if got is None:
            if "not found" not in error and "restarted" not in error:
                return None  # stalled or slow: the run's deadline is for that
            # A restarted master no longer knows the probe's session: the
            # next check uses a new one, and a new process answers anew.
            self._forget(task)
            return "answers as a new process: it restarted" if known is not None else None
        self._alive[task] = got
        if known is not None and got != known:
            return "answers as a new process (its devices' incarnation changed): it restarted"
        return None

    def _probe(self, task: tuple[str, int], address: str) -> _Probe:
        found = self._probes.get(task)
        if found is None:
            found = self._probes[task] = _Probe(address, task[0], task[1], max(0.5, self.interval))
        return found

    def _forget(self, task: tuple[str, int]) -> None:
        self._alive.pop(task, None)
        old = self._probes.pop(task, None)
        if old is not None:
            old.close()
