"""Session: a bridge Session connected to one task of a cluster.

``Session(cluster, task=("worker", 0), graph=None, config=None, timeout=30.0)``
runs on that task's master (``grpc://<its address>``).  It

- checks the graph's devices against the cluster first (a device naming a
  job or task the cluster lacks is a ValueError naming the op);
- sets ``device_filters`` to its own task and the tasks the graph's devices
  name, so a task of the cluster the graph does not use (stopped, dead or
  never started) does not block the session's creation;
- gives every run a deadline (``timeout`` seconds, or ``run(..., timeout=)``):
  a run that touches a task that died or stalls raises DeadlineExceededError
  at its deadline, saying which of the tasks answer TCP connections, instead
  of hanging; runs that do not touch that task go on;
- explains the errors of a cluster: an op type a task has not registered
  (start that task with ``tfbridge server ... --ops FOLDER``), a master that
  cannot be reached.

Variables: the chief initialises or restores them (:meth:`Session.initialize`),
the other workers wait for them (:meth:`Session.wait_for_variables`, TF's
``wait_for_session``: polls which variables are still uninitialized);
:meth:`Session.prepare` does whichever the task's role asks.
"""
from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from bridge.framework import _proto as pb
from bridge.framework._lib import lib
from bridge.framework.builders import global_variables
from bridge.framework.errors import (AbortedError, DeadlineExceededError, InvalidArgumentError, NotFoundError,
                                     OpError, check, status,
                                     UnavailableError)
from bridge.framework.device import device_fields
from bridge.framework.graph import Graph, Operation, get_default_graph
from bridge.framework.session import Session as _Session
from bridge.framework.session import SessionConfig, _timeout_of, session_options

from .cluster import ClusterSpec
from .server import config_bytes

__all__ = ["Session", "chief_task"]

TaskLike = Union[tuple, str]

_NOT_REGISTERED = (re.compile(r"Op type not registered '([^']+)'"),
                   re.compile(r"No OpKernel was registered to support Op '([^']+)'"))


def _task_of(task: TaskLike) -> tuple[str, int]:
    if isinstance(task, str):
        job, _, index, _, _ = device_fields(task)
        if job is None:
            raise ValueError(f"task '{task}' names no job (expected '/job:NAME/task:I' or (NAME, I))")
        return job, index or 0
    job, index = task
    return str(job), int(index)


def chief_task(cluster: ClusterSpec) -> tuple[str, int]:
    """The chief: task 0 of "chief" if the cluster has that job, else of "worker" (TF's rule)."""
    for job in ("chief", "worker"):
        if job in cluster.jobs:
            return job, cluster.task_indices(job)[0]
    return cluster.jobs[0], cluster.task_indices(cluster.jobs[0])[0]


def _task_device(job: str, index: Optional[int]) -> str:
    return f"/job:{job}" if index is None else f"/job:{job}/task:{index}"


def _probe(address: str, timeout: float = 0.5) -> str:
    """What a TCP connection to ``address`` says about the task there."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return "accepts connections"
    except ConnectionRefusedError:
        return "refuses connections: no server is running there"
    except OSError as exc:
        return f"cannot be reached ({exc.strerror or exc})"


def _probe_task(job: str, index: int, address: str, budget: float) -> str:
    """Whether the task's server answers a trivial run within ``budget`` seconds."""
    said = _probe(address, budget)
    if said != "accepts connections":
        return said
    from bridge.framework.builders import constant

    device = f"/job:{job}/task:{index}"
    g = Graph()
    with g.as_default(), g.device(device):
        c = constant(0.0, name="probe")
    proto = pb.field_varint(11, max(1, round(budget * 1000))) + pb.field_bytes(4, device)
    try:
        sess = _Session(g, config=proto, target=f"grpc://{address}")
        try:
            sess.run(c, timeout=budget)
        finally:
            sess.close()
    except DeadlineExceededError:
        return f"accepts connections but does not answer within {budget:g} s: stopped, stalled or overloaded"
    except OpError as exc:
        return f"answers, with an error: {exc.message.splitlines()[0]}"
    return "answers"


def _probe_tasks(tasks: list, cluster: ClusterSpec, budget: float = 0.5) -> dict:
    """_probe_task for each (job, index), in parallel threads, all within about ``budget`` seconds."""
    results: dict = {}

    def probe(job: str, index: int) -> None:
        try:
            results[(job, index)] = _probe_task(job, index, cluster.task_address(job, index), budget)
        except Exception as exc:  # noqa: BLE001 - a diagnosis must never fail the error it explains
            results[(job, index)] = f"could not be probed ({exc})"

    threads = [threading.Thread(target=probe, args=t, daemon=True) for t in tasks]
    for t in threads:
        t.start()
    end = time.monotonic() + budget + 0.5
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    return {t: results.get(t, f"does not answer within {budget:g} s") for t in tasks}


class Session(_Session):
    """A Session on ``task``'s master in ``cluster``; see the module docstring."""

    def __init__(self, cluster: Union[ClusterSpec, Mapping[str, Any]], task: TaskLike = ("worker", 0),
                 graph: Optional[Graph] = None, config: Union[SessionConfig, dict, bytes, None] = None,
                 timeout: Optional[float] = 30.0, device_filters: Optional[Sequence[str]] = None):
        self.cluster = ClusterSpec(cluster)
        self.task = _task_of(task)
        self.address = self.cluster.task_address(*self.task)
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
        self.timeout = timeout
        graph = graph if graph is not None else get_default_graph()
        used = self._check_devices(graph)
        if device_filters is None:
            own = _task_device(*self.task)
            device_filters = [own] + sorted(d for d in used if d != own)
        self.device_filters = list(device_filters)
        # ConfigProto.operation_timeout_in_ms (11) bounds the session's creation
        # (first, so that the caller's config may override it), device_filters (4).
        proto = pb.field_varint(11, max(1, round(timeout * 1000))) if timeout is not None else b""
        proto += config_bytes(config)
        for f in self.device_filters:
            proto += pb.field_bytes(4, f)
        self._report: Optional[tuple] = None
        self._default_init: Optional[Operation] = None
        self._proto = proto
        inline = config.inline_small_graphs if isinstance(config, SessionConfig) else None
        super().__init__(graph, config=proto, target=f"grpc://{self.address}")
        if inline is not None:
            self._inline_limit = inline

    @property
    def is_chief(self) -> bool:
        """Whether this session's task is the chief (:func:`chief_task`)."""
        return self.task == chief_task(self.cluster)

    # --- devices -----------------------------------------------------------------
    def _check_devices(self, graph: Graph) -> set[str]:
        """The tasks (or whole jobs) the graph's devices name, each checked against the cluster."""
        used: set[str] = set()
        for op in graph.get_operations():
            device = op.device
            if not device:
                continue
            job, _, index, _, _ = device_fields(device)
            if job is None:
                continue
            if job not in self.cluster.jobs:
                raise ValueError(f"operation '{op.name}' ({op.type}) is placed on '{device}', but the cluster has "
                                 f"no job '{job}' (jobs: {', '.join(self.cluster.jobs)})")
            if index is not None and index not in self.cluster.task_indices(job):
                raise ValueError(f"operation '{op.name}' ({op.type}) is placed on '{device}', but job '{job}' of "
                                 f"the cluster has no task {index} (tasks: "
                                 f"{', '.join(map(str, self.cluster.task_indices(job)))})")
            used.add(_task_device(job, index))
        # A whole job in the filters covers its tasks.
        return {d for d in used if "/task:" not in d or d.split("/task:")[0] not in used}

    def _tasks_in_use(self) -> list[tuple[str, int]]:
        tasks = {self.task}
        for f in self.device_filters:
            job, _, index, _, _ = device_fields(f)
            if job in self.cluster.jobs:
                tasks.update((job, i) for i in ([index] if index is not None else self.cluster.task_indices(job)))
        return sorted(tasks)

    # --- runs ----------------------------------------------------------------------
    def _execute(self, plan, values, run_options, timeout):
        if timeout is None and self.timeout is not None and _timeout_of(run_options) is None:
            timeout = self.timeout
        try:
            return super()._execute(plan, values, run_options, timeout)
        except DeadlineExceededError as exc:
            raise DeadlineExceededError(self._explain_deadline(exc, timeout)) from None
        except UnavailableError as exc:
            raise UnavailableError(f"{exc.message}\n{self._explain_unavailable()}") from None
        except (NotFoundError, InvalidArgumentError) as exc:
            better = self._explain_unregistered(exc)
            if better is None:
                raise
            raise type(exc)(better) from None

    def _where(self) -> str:
        return f"/job:{self.task[0]}/task:{self.task[1]} ({self.address})"

    def _explain_deadline(self, exc: OpError, timeout: Optional[float]) -> str:
        lines = [f"Session.run on {self._where()} exceeded its deadline"
                 + (f" of {timeout:g} s" if timeout else "") + f": {exc.message.splitlines()[0] if exc.message else ''}",
                 "The tasks this session uses:"]
        tasks = self._tasks_in_use()
        for (job, index), said in _probe_tasks(tasks, self.cluster).items():
            lines.append(f"  /job:{job}/task:{index} at {self.cluster.task_address(job, index)}: {said}")
        lines.append("A run that needs a task that died or stalls fails at its deadline; runs that need only "
                     "the other tasks go on (README, \"Distributed\").")
        return "\n".join(lines)

    def _explain_unavailable(self) -> str:
        return (f"The session's master {self._where()} {_probe(self.address)}; "
                "start it with `tfbridge server --cluster FILE --job "
                f"{self.task[0]} --task {self.task[1]}`.")

    def _explain_unregistered(self, exc: OpError) -> Optional[str]:
        op_type = next((m.group(1) for m in (p.search(exc.message) for p in _NOT_REGISTERED) if m), None)
        if op_type is None:
            return None
        tasks = []
        for op in self.graph.get_operations():
            if op.type == op_type:
                job, _, index, _, _ = device_fields(op.device) if op.device else (None,) * 5
                where = (_task_device(job, index) if job is not None else
                         f"/job:{self.task[0]}/task:{self.task[1]}")
                if where not in tasks:
                    tasks.append(where)
        master = f"/job:{self.task[0]}/task:{self.task[1]}"
        if master not in tasks:
            tasks.append(f"{master} (the session's master, which builds the whole graph)")
        library = _library_of(op_type)
        folder = f" {library}" if library else " FOLDER"
        return (f"op type '{op_type}' is not registered on task {' or '.join(tasks)}: start that task's server "
                f"with the op's library, `tfbridge server --cluster FILE --job NAME --task I --ops{folder}` "
                f"(TensorFlow said: {exc.message.splitlines()[0]})")

    # --- recovery ------------------------------------------------------------------------
    def reconnect(self) -> None:
        """Replace this session's connection to its master by a new one (same
        graph, config and device filters), as TF's ``MonitoredSession`` makes
        a new session after a task died; callables from ``make_callable``
        keep working.  The old session is closed in the background: its runs
        in flight on other threads are cancelled and waited for, but its
        clean-up, which waits on dead tasks until the session's timeout, does
        not hold this call.  Variables keep the values their ps tasks hold; a
        restarted ps task holds none until restored."""
        with self._runs_lock:
            if self._closed:
                raise RuntimeError("attempted to reconnect a closed Session")
            self._closed = True   # no run starts on the old session from here on
            old = self._ptr
        drained = threading.Event()
        threading.Thread(target=_close_in_background, args=(old, drained), daemon=True,
                         name="bridge-distribute-close").start()
        try:
            with self._runs_lock:
                while self._runs_in_flight:
                    self._runs_over.wait()
        finally:
            drained.set()
        s = status()
        ptr = lib.TF_NewSession(self.graph._ptr, session_options(self._proto, f"grpc://{self.address}"), s.ptr)
        check(s, f"reconnecting to {self._where()}")
        with self._runs_lock:
            self._ptr = ptr
            self._closed = False

    def wait_for_tasks(self, timeout: float = 120.0, poll_interval: float = 0.25) -> float:
        """Wait until every task this session uses answers, and each can reach
        the others (a tiny tensor from each task to each other one, which
        also waits out gRPC's reconnection backoff after a task restarted);
        return the seconds waited.  Past ``timeout`` seconds raise
        DeadlineExceededError saying what each task answers."""
        start = time.monotonic()
        deadline = start + timeout
        tasks = self._tasks_in_use()
        g = Graph()
        fetches = []
        with g.as_default():
            for job, index in tasks:
                with g.device(f"/job:{job}/task:{index}"):
                    # Stateful, so that no constant folding takes the transfers away.
                    value = g.create_op("Timestamp", [], name=f"probe_{job}_{index}").output(0)
                for other_job, other in tasks:
                    if (other_job, other) != (job, index):
                        with g.device(f"/job:{other_job}/task:{other}"):
                            fetches.append(g.create_op("Identity", [value], attrs={"T": value.dtype},
                                                       attr_types={"T": "type"}).output(0))
                if len(tasks) == 1:
                    fetches.append(value)
        filters = b"".join(pb.field_bytes(4, f"/job:{j}/task:{i}") for j, i in tasks)
        last: Optional[OpError] = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            budget = max(0.05, min(left, 5.0))
            try:
                probe = _Session(g, config=pb.field_varint(11, max(1, round(budget * 1000))) + filters,
                                 target=f"grpc://{self.address}")
                try:
                    probe.run(fetches, timeout=budget)
                    return time.monotonic() - start
                finally:
                    try:
                        probe.close()
                    except OpError:
                        pass
            except (UnavailableError, DeadlineExceededError, AbortedError) as exc:
                last = exc
            time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        lines = [f"{self._where()} waited {timeout:g} s for the tasks it uses to answer"
                 + (f" (last error: {last.message.splitlines()[0] if last.message else type(last).__name__})"
                    if last else "") + ":"]
        for (job, index), said in _probe_tasks(tasks, self.cluster).items():
            lines.append(f"  /job:{job}/task:{index} at {self.cluster.task_address(job, index)}: {said}")
        raise DeadlineExceededError("\n".join(lines))

    # --- variables -------------------------------------------------------------------
    def _report_op(self):
        """(the variables, the Output of their VarIsInitializedOp flags), made once."""
        variables = global_variables(self.graph)
        if self._report is None or self._report[0] != variables:
            g = self.graph
            flags = []
            with g.as_default(), g.control_dependencies(None), g.name_scope("report_uninitialized_variables"):
                for v in variables:
                    with g.colocate_with(v):
                        flags.append(g.create_op("VarIsInitializedOp", [v.handle]).output(0))
                packed = g.create_op("Pack", [flags], attrs={"N": len(flags), "axis": 0},
                                     attr_types={"N": "int", "axis": "int"}).output(0) if flags else None
            self._report = (variables, packed)
        return self._report

    def uninitialized_variables(self, timeout: Optional[float] = None) -> list[str]:
        """The names of the graph's variables that hold no value yet (TF's
        ``report_uninitialized_variables``)."""
        variables, packed = self._report_op()
        if packed is None:
            return []
        flags = self.run(packed, timeout=timeout)
        return [v.name for v, ok in zip(variables, flags) if not ok]

    def wait_for_variables(self, timeout: float = 300.0, poll_interval: float = 0.5) -> None:
        """Wait until every variable of the graph is initialized (by the chief),
        as TF's ``SessionManager.wait_for_session``; past ``timeout`` seconds
        raise DeadlineExceededError naming the variables still uninitialized."""
        deadline = time.monotonic() + timeout
        missing: list[str] = []
        last_error: Optional[OpError] = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                missing = self.uninitialized_variables(
                    timeout=max(0.05, min(left, self.timeout if self.timeout else left)))
                last_error = None
                if not missing:
                    return
            except (UnavailableError, DeadlineExceededError) as exc:
                last_error = exc
            time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        what = (f"still uninitialized: {', '.join(missing)}" if missing else
                f"the variables could not be read: {last_error.message.splitlines()[0]}" if last_error else
                "no answer")
        raise DeadlineExceededError(f"{self._where()} waited {timeout:g} s for the chief to initialize the "
                                    f"variables; {what}")

    def initialize(self, init_op: Optional[Operation] = None, saver: Any = None,
                   checkpoint_dir: Optional[Union[str, Path]] = None) -> str:
        """The chief's part: restore the variables from the latest checkpoint in
        ``checkpoint_dir`` with ``saver`` if there is one ("restored"), else run
        ``init_op`` (default: every variable's initializer) ("initialized")."""
        if saver is not None and checkpoint_dir is not None:
            from bridge.train import latest_checkpoint

            path = latest_checkpoint(checkpoint_dir)
            if path is not None:
                saver.restore(self, path)
                return "restored"
        if init_op is None:
            if self._default_init is None:
                from bridge.framework.builders import global_variables_initializer
                with self.graph.as_default():
                    self._default_init = global_variables_initializer(self.graph, name="distribute_init")
            init_op = self._default_init
        self.run(init_op)
        return "initialized"

    def prepare(self, is_chief: Optional[bool] = None, init_op: Optional[Operation] = None, saver: Any = None,
                checkpoint_dir: Optional[Union[str, Path]] = None, wait_timeout: float = 300.0) -> str:
        """Initialize or restore the variables (the chief, by default the task
        :func:`chief_task` names) or wait for them (the others): "restored",
        "initialized" or "waited"."""
        if is_chief is None:
            is_chief = self.is_chief
        if is_chief:
            return self.initialize(init_op, saver, checkpoint_dir)
        self.wait_for_variables(wait_timeout)
        return "waited"


def _close_in_background(ptr: Any, drained: threading.Event) -> None:
    """Close a replaced TF session (cancelling its runs in flight), then free
    it once ``drained`` says no run uses it any more."""
    s = status()
    lib.TF_CloseSession(ptr, s.ptr)
    drained.wait()
    lib.TF_DeleteSession(ptr, s.ptr)


def _library_of(op_type: str) -> Optional[str]:
    """The op folder (else the library file) that registered ``op_type`` in this process."""
    from bridge.ops.op_library import loaded_libraries
    from bridge.platform.paths import op_folder_of_library

    for path, types in loaded_libraries().items():
        if op_type in types:
            # Not the nearest folder holding a custom_op.txt: a build folder
            # (<op>/build/<key>/) keeps a copy of the spec it was built from.
            folder = op_folder_of_library(Path(path))
            return str(folder) if folder is not None else path
    return None
