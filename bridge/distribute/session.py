"""Session: a bridge Session connected to one task of a cluster.

``Session(cluster, task=("worker", 0), graph=None, config=None, timeout=30.0)``
runs on that task's master (``grpc://<its address>``).  It

- checks the graph's devices against the cluster first (a device naming a
  job or task the cluster lacks is a ValueError naming the op);
- sets ``device_filters`` to its own task and the tasks the graph's devices
  name, so a task of the cluster the graph does not use (stopped, dead or
  never started) does not block the session's creation;
- runs on TensorFlow sessions made on demand: one for all of those tasks,
  and, until that one has run once, where some task does not accept
  connections, one per set of tasks a run needs (the devices of the part of
  the graph it runs), so a task that never started blocks only the runs
  that need it;
- gives every run a deadline (``timeout`` seconds, or ``run(..., timeout=)``,
  which also bounds making a TensorFlow session): a run that touches a task
  that died or stalls raises DeadlineExceededError at its deadline, saying
  which of the tasks answer TCP connections, instead of hanging; runs that
  do not touch that task go on; a master that refuses connections is an
  UnavailableError at once;
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
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from bridge.framework import _proto as pb
from bridge.framework._lib import lib
from bridge.framework.builders import global_variables
from bridge.framework.errors import (AbortedError, DeadlineExceededError, InvalidArgumentError, NotFoundError,
                                     OpError, Status, UnavailableError, check, status)
from bridge.framework.device import device_fields
from bridge.framework.graph import Graph, Operation, get_default_graph
from bridge.framework.session import Session as _Session
from bridge.framework.session import SessionConfig, _timeout_of, session_options

from .cluster import ClusterSpec
from .probe import ACCEPTS, answering, probe, probe_tasks, pruned_graph_def, run_closure, tasks_of
from .server import config_bytes
from .watch import TaskWatch

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


class _TFSession:
    """One TensorFlow session of a distributed Session: its key (the session's
    own device filters, or ("run", names) for one made for the operations
    ``names`` alone), its device filters, its graph (a pruned copy for a
    run's operations), the deadline it was made with
    (ConfigProto.operation_timeout_in_ms, which bounds its creation on the
    master), whether a run succeeded on it."""
    __slots__ = ("ptr", "key", "filters", "graph", "made_timeout", "established")

    def __init__(self, ptr: Any, key: tuple, filters: tuple, graph: Graph, made_timeout: Optional[float]):
        self.ptr, self.key, self.filters, self.graph = ptr, key, filters, graph
        self.made_timeout, self.established = made_timeout, False


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
        self._narrowing = device_filters is None
        if device_filters is None:
            own = _task_device(*self.task)
            device_filters = [own] + sorted(d for d in used if d != own)
        self.device_filters = list(device_filters)
        self._config = config_bytes(config)
        self._report: Optional[tuple] = None
        self._default_init: Optional[Operation] = None
        self._full = tuple(self.device_filters)
        inline = config.inline_small_graphs if isinstance(config, SessionConfig) else None
        super().__init__(graph, config=self._proto(self._full, timeout), target=f"grpc://{self.address}")
        if inline is not None:
            self._inline_limit = inline
        self._sessions_lock = threading.Lock()
        self._sessions: dict[tuple, _TFSession] = {
            self._full: _TFSession(self._ptr, self._full, self._full, graph, timeout)}
        self._retired: list[Any] = []  # TF sessions replaced: deleted by close(), once no run uses them
        self._plan_keys: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self._run_needs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self._used = threading.local()  # the _TFSession of this thread's run in progress
        self._watch: Optional[TaskWatch] = None
        self._trips = 0            # how often the watch cancelled the runs in flight
        self._trip_message = ""

    def _proto(self, filters: Sequence[str], timeout: Optional[float]) -> bytes:
        """ConfigProto: operation_timeout_in_ms (11) first, so the caller's
        config may override it, then the caller's, then device_filters (4)."""
        proto = pb.field_varint(11, max(1, round(timeout * 1000))) if timeout is not None else b""
        proto += self._config
        for f in filters:
            proto += pb.field_bytes(4, f)
        return proto

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

    def _tasks_in_use(self, filters: Optional[Sequence[str]] = None) -> list[tuple[str, int]]:
        return tasks_of(self.device_filters if filters is None else filters, self.cluster, self.task)

    # --- which TensorFlow session a run uses ----------------------------------------------
    def _needed(self, plan: Any) -> tuple[frozenset, tuple]:
        """(the operations a run of ``plan`` needs, the device filters of their
        tasks, own task first), worked out once per plan."""
        found = self._run_needs.get(plan)
        if found is None:
            names, devices = run_closure(self.graph, plan.run_outputs, plan.fetch.targets)
            used = set()
            for device in devices:
                job, _, index, _, _ = device_fields(device)
                if job is not None:
                    used.add(_task_device(job, index))
            own = _task_device(*self.task)
            used.discard(own)
            used = {d for d in used if "/task:" not in d or d.split("/task:")[0] not in used}
            found = self._run_needs[plan] = (names, (own,) + tuple(sorted(used)))
        return found

    def _choose(self, plan: Any) -> tuple[tuple, tuple]:
        """(key, device filters) of the TF session for a run of ``plan``: the
        session's own, unless one of its tasks does not accept connections;
        then one for the run's operations alone, on the tasks they need (a
        job needed as a whole: its tasks that do), so that a run which does
        not need that task goes on.  TensorFlow's master places a session's
        whole graph, so such a session gets a pruned copy of the graph."""
        if not self._narrowing:
            return self._full, self._full
        names, needed = self._needed(plan)
        tasks = sorted(set(self._tasks_in_use(self._full)) | set(self._tasks_in_use(needed)))
        up = answering(tasks, self.cluster)
        if all(up[t] for t in self._tasks_in_use(self._full)):
            return self._full, self._full
        filters: list[str] = []
        for f in needed:
            job, _, index, _, _ = device_fields(f)
            live = [i for i in self.cluster.task_indices(job) if up.get((job, i))] if index is None else []
            filters.extend([_task_device(job, i) for i in live] if live else [f])
        return ("run", names), tuple(dict.fromkeys(filters))

    def _session_for(self, plan: Any, timeout: Optional[float]) -> Any:
        with self._sessions_lock:
            full = self._sessions.get(self._full)
            known = self._sessions.get(self._plan_keys.get(plan, self._full))
        if full is not None and full.established:
            chosen = full
        elif known is not None and known.established:
            chosen = known
        else:
            key, filters = self._choose(plan)
            with self._sessions_lock:
                chosen = self._sessions.get(key)
                # A session not made yet waits for its tasks as long as it was told when
                # it was made: make a new one for a run with a shorter deadline.
                if chosen is None or (not chosen.established and timeout is not None and
                                      (chosen.made_timeout is None or timeout < chosen.made_timeout)):
                    if chosen is not None:
                        self._retire(chosen)
                    chosen = self._new_session(key, filters, timeout if timeout is not None else self.timeout)
            if not chosen.established:
                said = probe(self.address, 0.5)
                if said != ACCEPTS:
                    raise UnavailableError(f"Session.run on {self._where()}: the session's master {said}; start "
                                           f"it with `tfbridge server --cluster FILE --job {self.task[0]} --task "
                                           f"{self.task[1]}`.")
        self._used.session = chosen
        return chosen.ptr

    def _new_session(self, key: tuple, filters: tuple, timeout: Optional[float]) -> _TFSession:
        """A TF session (under _sessions_lock); the session's own becomes ``_ptr``."""
        if key == self._full:
            graph = self.graph
        else:
            graph = Graph()
            graph.import_graph_def(pruned_graph_def(self.graph, key[1]))
        s = status()
        ptr = lib.TF_NewSession(graph._ptr, session_options(self._proto(filters, timeout),
                                                            f"grpc://{self.address}"), s.ptr)
        check(s, f"creating a session on {self._where()}")
        made = self._sessions[key] = _TFSession(ptr, key, filters, graph, timeout)
        if key == self._full:
            self._ptr = ptr
        return made

    def _retire(self, session: _TFSession) -> None:
        """Forget ``session`` (under _sessions_lock); close() deletes it, once no run uses it."""
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
        self._retired.append((session.ptr, session.graph))

    # --- runs ----------------------------------------------------------------------
    def _execute(self, plan, values, run_options, timeout, run_metadata=None):
        if timeout is None and self.timeout is not None and _timeout_of(run_options) is None:
            timeout = self.timeout
        self._used.session = None
        trips = self._trips
        try:
            out = super()._execute(plan, values, run_options, timeout, run_metadata)
        except OpError as exc:
            if self._trips != trips:
                raise UnavailableError(f"Session.run on {self._where()}: {self._trip_message}; the run waited on "
                                       "it and was cancelled (Session.watch_tasks)") from None
            used = self._used.session
            if used is not None and not used.established:
                with self._sessions_lock:  # never made on the master: the next run makes a new one
                    self._retire(used)
            if isinstance(exc, UnavailableError) and used is None:
                raise  # the probe before the run: it says all
            filters = used.filters if used is not None else None
            if isinstance(exc, DeadlineExceededError):
                raise DeadlineExceededError(self._explain_deadline(exc, timeout, filters)) from None
            if isinstance(exc, UnavailableError):
                raise UnavailableError(f"{exc.message}\n{self._explain_unavailable()}") from None
            if isinstance(exc, (NotFoundError, InvalidArgumentError)):
                better = self._explain_unregistered(exc)
                if better is not None:
                    raise type(exc)(better) from None
            raise
        used = self._used.session
        if used is not None and not used.established:
            used.established = True
        if used is not None:
            self._plan_keys[plan] = used.key
        return out

    def _where(self) -> str:
        return f"/job:{self.task[0]}/task:{self.task[1]} ({self.address})"

    def _explain_deadline(self, exc: OpError, timeout: Optional[float], filters: Optional[tuple] = None) -> str:
        lines = [f"Session.run on {self._where()} exceeded its deadline"
                 + (f" of {timeout:g} s" if timeout else "") + f": {exc.message.splitlines()[0] if exc.message else ''}",
                 "The tasks this session uses:" if filters in (None, self._full) else "The tasks this run uses:"]
        tasks = self._tasks_in_use(filters)
        for (job, index), said in probe_tasks(tasks, self.cluster).items():
            lines.append(f"  /job:{job}/task:{index} at {self.cluster.task_address(job, index)}: {said}")
        lines.append("A run that needs a task that died or stalls fails at its deadline; runs that need only "
                     "the other tasks go on (docs/guides/distributed.md, \"When a task dies or stalls\").")
        return "\n".join(lines)

    def _explain_unavailable(self) -> str:
        return (f"The session's master {self._where()} {probe(self.address)}; "
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
            self._closed = True   # no run starts on the old sessions from here on
        with self._sessions_lock:
            old = [made.ptr for made in self._sessions.values()]
            self._sessions.clear()
            self._plan_keys.clear()
        drained = threading.Event()
        for ptr in old:
            threading.Thread(target=_close_in_background, args=(ptr, drained), daemon=True,
                             name="bridge-distribute-close").start()
        try:
            with self._runs_lock:
                while self._runs_in_flight:
                    self._runs_over.wait()
        finally:
            drained.set()
        with self._sessions_lock:
            self._new_session(self._full, self._full, self.timeout)
        with self._runs_lock:
            self._closed = False

    def watch_tasks(self, tasks: Sequence[tuple[str, int]], interval: float = 1.0) -> None:
        """Watch ``tasks`` that this session's runs wait on without running on
        them (another client's graph: SyncReplicasOptimizer's other workers,
        whose gradients a step waits for): within about ``interval`` seconds
        of one that answered dying or restarting, the runs in flight are
        cancelled and raise UnavailableError naming it (train_loop then
        recovers), instead of waiting until their deadline.  Later runs make
        new TensorFlow sessions.  ``tasks=()`` stops watching."""
        tasks = sorted({(str(job), int(index)) for job, index in tasks})
        for job, index in tasks:
            self.cluster.task_address(job, index)  # names a task the cluster lacks
        old = self._watch
        if old is not None and old.tasks == tasks and old.interval == interval:
            return
        self._watch = None
        if old is not None:
            old.stop()
        if tasks:
            self._watch = TaskWatch(self.cluster, tasks, interval, self._tripped)

    def _tripped(self, task: tuple[str, int], why: str) -> None:
        """The watch saw ``task`` die or restart: cancel the runs in flight (their TF sessions are closed)."""
        with self._sessions_lock:
            self._trip_message = f"/job:{task[0]}/task:{task[1]} at {self.cluster.task_address(*task)} {why}"
            self._trips += 1
            stale = list(self._sessions.values())
            self._sessions.clear()
            self._plan_keys.clear()
            self._retired.extend((made.ptr, made.graph) for made in stale)
        s = Status()
        for made in stale:
            lib.TF_CloseSession(made.ptr, s.ptr)

    def close(self) -> None:
        """Close the session and every TensorFlow session it made (runs in
        flight are cancelled and waited for); idempotent, thread-safe."""
        watch = getattr(self, "_watch", None)
        if watch is not None:
            self._watch = None
            watch.stop()
        try:
            super().close()  # the session's own TF session (``_ptr``), once no run is in flight
        finally:
            lock = getattr(self, "_sessions_lock", None)  # None: __init__ failed before making any
            if lock is None:
                return
            with lock:
                others = [made.ptr for made in self._sessions.values()] + [ptr for ptr, _ in self._retired]
                others = [ptr for ptr in others if ptr != self._ptr]  # super().close() deleted that one
                self._sessions.clear()
                self._retired = []
            s = Status()  # not this thread's shared one: close() also runs from __del__
            for ptr in others:
                lib.TF_CloseSession(ptr, s.ptr)
                lib.TF_DeleteSession(ptr, s.ptr)

    def wait_for_tasks(self, timeout: float = 120.0, poll_interval: float = 0.25, fetches: Any = None) -> float:
        """Wait until every task this session uses (given ``fetches``: every
        task a run of them needs; of a job it needs as a whole, the tasks
        that accept connections) answers, and each can reach the others (a
        tiny tensor from each task to each other one, which also waits out
        gRPC's reconnection backoff after a task restarted); return the
        seconds waited.  Past ``timeout`` seconds raise DeadlineExceededError
        saying what each task answers."""
        start = time.monotonic()
        deadline = start + timeout
        tasks = self._tasks_in_use() if fetches is None else self._tasks_needed(fetches)
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
        for (job, index), said in probe_tasks(tasks, self.cluster).items():
            lines.append(f"  /job:{job}/task:{index} at {self.cluster.task_address(job, index)}: {said}")
        raise DeadlineExceededError("\n".join(lines))

    def _tasks_needed(self, fetches: Any) -> list[tuple[str, int]]:
        """The tasks a run of ``fetches`` needs; of a job needed as a whole, those that accept connections
        (all of them when none does)."""
        _, needed = self._needed(self._plan(fetches, []))
        tasks = {self.task}
        whole = [device_fields(f)[0] for f in needed if device_fields(f)[2] is None]
        up = answering([(job, i) for job in whole for i in self.cluster.task_indices(job)], self.cluster) \
            if whole else {}
        for f in needed:
            job, _, index, _, _ = device_fields(f)
            if index is not None:
                tasks.add((job, index))
            else:
                indices = self.cluster.task_indices(job)
                tasks.update((job, i) for i in ([i for i in indices if up.get((job, i))] or indices))
        return sorted(tasks)

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
        return [v.op.name for v, ok in zip(variables, flags) if not ok]

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
