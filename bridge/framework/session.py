"""Session: runs a graph (TF_Session)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np

from . import _proto as pb
from ._lib import CTypes as C
from ._lib import ffi, lib
from .errors import (CancelledError, DeadlineExceededError, Status, check, lease_status, raise_pending_signals,
                     return_status, status)
from .graph import Graph, Operation, Output, get_default_graph
from .prepared_run import PreparedRun
from .run_plan import _NUMERIC, RunPlan, expand_feeds, fetched, plan_key, value_of_feed
from .tensor import Tensor

# How a ``julia_thread`` session runs: an object whose run() takes
# TF_SessionRun's arguments and a timeout and runs it on Julia's thread
# (bridge.julia.JuliaThreadRunner says what it returns).  The Julia host
# provides it (bridge.julia.session_runner); the package wires it in
# (bridge/__init__.py), so this binding never imports the host and works
# without Julia.
SessionRunner = Any
_julia_thread_runner: Optional[Callable[[], SessionRunner]] = None


def set_julia_thread_runner(factory: Optional[Callable[[], SessionRunner]]) -> None:
    """Register how ``SessionConfig(julia_thread=True)`` sessions run:
    ``factory()`` starts the host and returns the runner (None unregisters)."""
    global _julia_thread_runner
    _julia_thread_runner = factory


@dataclass
class SessionConfig:
    """The ConfigProto fields the binding exposes.

    ``inter_op_parallelism_threads``: 0 lets TensorFlow choose; a negative
    value runs every op in the caller's thread.  ``julia_thread=True`` runs
    each ``Session.run`` on Julia's own thread with ops executed inline, so
    Julia custom ops call Julia directly instead of handing their call over
    (the fastest mode for graphs made mostly of Julia ops).

    ``inline_small_graphs``: a graph of at most this many operations runs in
    the caller's thread (TensorFlow's RunOptions.inter_op_thread_pool = -1),
    which saves TensorFlow's hand-off to its inter-op pool and back (about
    30 us on a 2-core machine, more than the run itself for small graphs).
    Larger graphs keep the pool and its parallelism; 0 turns this off.

    ``disable_meta_optimizer``: run the graph as written, without Grappler's
    rewrites (TensorFlow's RewriterConfig field of the same name).  Grappler
    may, for instance, fuse a chain of element-wise ops into one kernel.
    """
    inter_op_parallelism_threads: int = 0
    intra_op_parallelism_threads: int = 0
    use_per_session_threads: bool = False
    allow_soft_placement: bool = False
    log_device_placement: bool = False
    julia_thread: bool = False
    inline_small_graphs: int = 16
    disable_meta_optimizer: bool = False

    def to_proto(self) -> bytes:
        inter = -1 if self.julia_thread else self.inter_op_parallelism_threads
        out = b""
        if self.intra_op_parallelism_threads:
            out += pb.field_varint(2, self.intra_op_parallelism_threads)
        if inter:
            out += pb.field_varint(5, inter)
        if self.allow_soft_placement:
            out += pb.field_varint(7, 1)
        if self.log_device_placement:
            out += pb.field_varint(8, 1)
        if self.use_per_session_threads:
            out += pb.field_varint(9, 1)
        if self.disable_meta_optimizer:
            # ConfigProto.graph_options(10).rewrite_options(10).disable_meta_optimizer(19)
            out += pb.field_bytes(10, pb.field_bytes(10, pb.field_varint(19, 1)))
        return out


# RunOptions{inter_op_thread_pool: -1}: execute the run in the caller's thread.
_CALLER_THREAD_RUN_OPTIONS = pb.field_varint(3, -1)
# ... as a TF_Buffer built once (TensorFlow only reads it), and its bytes.
_CALLER_THREAD_RAW = ffi.new(C.char_array, _CALLER_THREAD_RUN_OPTIONS)
_CALLER_THREAD_OPTS = ffi.new(C.buffer_ptr)
_CALLER_THREAD_OPTS.data, _CALLER_THREAD_OPTS.length = _CALLER_THREAD_RAW, len(_CALLER_THREAD_RUN_OPTIONS)
_SIZE_T_PTR = ffi.typeof("size_t*")
_PLANS_KEPT = 64  # RunPlans a session keeps for fetches and feeds it has run (plan_key's cases)
_RUN_OPTIONS_TIMEOUT_IN_MS = 2  # RunOptions.timeout_in_ms

# What the runtime's SIGINT handler writes into the status of the Julia ops
# it abandons (kernels_cpp/src/tfjl_runtime/sigint.cc).
_SIGINT_MARK = "interrupted (SIGINT"


def _serialized(run_options: Any) -> Optional[bytes]:
    """``run_options`` as bytes: a :class:`~bridge.RunOptions` serialized, bytes as given."""
    if run_options is None or isinstance(run_options, (bytes, bytearray)):
        return run_options
    return run_options.SerializeToString()


def _timeout_of(run_options: Optional[bytes]) -> Optional[float]:
    """RunOptions.timeout_in_ms in seconds, None if unset (or <= 0)."""
    if not run_options:
        return None
    values = pb.fields(run_options).get(_RUN_OPTIONS_TIMEOUT_IN_MS)
    ms = pb.as_signed(values[-1]) if values else 0
    return ms / 1000.0 if ms > 0 else None


def session_options(config: Union[SessionConfig, bytes, dict, None], target: str = ""):
    """A TF_SessionOptions for a config (SessionConfig, its dict, or ConfigProto bytes)."""
    opts = ffi.gc(lib.TF_NewSessionOptions(), lib.TF_DeleteSessionOptions)
    if target:
        lib.TF_SetTarget(opts, target.encode())
    if isinstance(config, dict):
        config = SessionConfig(**config)
    proto = config.to_proto() if isinstance(config, SessionConfig) else (config or b"")
    if proto:
        s = status()
        lib.TF_SetConfig(opts, proto, len(proto), s.ptr)
        check(s, "session config")
    return opts


class Session:
    """Runs operations of a graph.

    ``Session(graph=None, config=None)``; use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, graph: Optional[Graph] = None, config: Union[SessionConfig, bytes, dict, None] = None,
                 target: str = "", _ptr=None):
        self.graph = graph if graph is not None else get_default_graph()
        if isinstance(config, dict):
            config = SessionConfig(**config)
        self._julia_thread = isinstance(config, SessionConfig) and config.julia_thread
        self._inline_limit = config.inline_small_graphs if isinstance(config, SessionConfig) else \
            SessionConfig.inline_small_graphs
        self._runner: Optional[SessionRunner] = None
        if self._julia_thread:
            if _julia_thread_runner is None:
                raise RuntimeError("SessionConfig(julia_thread=True) needs a Julia host to run on, and none "
                                   "is registered (bridge.framework.session.set_julia_thread_runner)")
            self._runner = _julia_thread_runner()
        self._scan_pos = 0    # TF_GraphNextOperation's cursor: how far the graph has been counted
        self._scan_count = 0  # operations counted so far
        if _ptr is None:
            s = status()
            _ptr = lib.TF_NewSession(self.graph._ptr, session_options(config, target), s.ptr)
            check(s, "creating session")
        self._ptr = _ptr
        self._closed = False
        self._runs_lock = threading.Lock()
        self._runs_over = threading.Condition(self._runs_lock)  # close() waits on it
        self._runs_in_flight = 0  # close() waits for these before freeing the session
        self._feed_targets: dict = {}  # (operation, index) -> (its name in errors, its static shape)
        self._plans: dict = {}  # plan_key -> RunPlan, the oldest first
        self._plans_lock = threading.Lock()
        # julia_thread runs, from before each starts until it is known over:
        # slot -> (slot, what the run uses, its outputs array, how many).
        # Registered before the run, so that a run abandoned (deadline,
        # interrupt) but still going on Julia's thread keeps what it uses
        # whatever Python raises meanwhile (see _execute).
        self._julia_runs: dict = {}

    def run(self, fetches: Any, feed_dict: Optional[dict] = None, run_options: Optional[bytes] = None,
            timeout: Optional[float] = None, run_metadata: Any = None) -> Any:
        """Run the graph and return the fetched values in the shape of ``fetches``.

        Fetches are Outputs, Operations (fetched as None), names ("op:0" for
        a tensor, "op" for an operation to run), Variables (their value),
        SparseTensors (a SparseTensorValue), IndexedSlices (an
        IndexedSlicesValue), or nested lists, tuples,
        namedtuples and dicts of them; anything else is a TypeError saying
        where it is.  Feed keys are Outputs, tensor names, Variables (their
        value, as in TF) or SparseTensors (fed a triple); values are numpy
        arrays, Python values or Tensors.  A fed tensor fetched gives the fed
        value.  A 0-d result is a numpy scalar (``bytes`` for a string), as
        TF1 gives it; other numeric results are read-only numpy arrays: up to 64 KiB
        copies (TensorFlow's tensor is freed at once), larger ones views of
        TensorFlow's buffers (no copy).

        ``timeout`` (seconds) sets RunOptions.timeout_in_ms: past it the run
        raises DeadlineExceededError, abandoning the Julia ops still running
        (docs/internals/interrupts.md).  Ctrl-C during a run raises
        KeyboardInterrupt the same way.  ``run_options``: a
        :class:`~bridge.RunOptions` or serialized RunOptions.
        ``run_metadata``: a :class:`~bridge.RunMetadata` the run fills (the
        kernels' step stats where ``run_options`` asked for a trace).
        """
        keys, values = expand_feeds(feed_dict)
        run_options = _serialized(run_options)
        self._enter_run()
        try:
            plan = self._plan(fetches, keys)
            return self._execute(plan, values, run_options, timeout, run_metadata)
        finally:
            self._leave_run()

    def make_callable(self, fetches: Any, feed_list: Sequence[Any] = ()) -> Callable[..., Any]:
        """A function running ``fetches`` with ``feed_list``'s tensors fed by
        its positional arguments, as TF's ``Session.make_callable``: what
        ``run`` works out from its arguments (the fetch structure, the fed
        and fetched tensors, how a numpy array of a fed tensor's dtype and
        static shape becomes a TF_Tensor) is worked out once, so a loop that
        runs the same step many times pays less per run.  The function also
        takes ``run_options=`` and ``timeout=`` as ``run`` does, and may be
        called from several threads."""
        self._enter_run()
        try:
            plan = self._plan(fetches, list(feed_list))
        finally:
            self._leave_run()
        n = plan.n_in
        enter, leave = self._enter_run, self._leave_run

        def call(*values: Any, run_options: Optional[bytes] = None, timeout: Optional[float] = None,
                 run_metadata: Any = None) -> Any:
            if len(values) != n:
                raise TypeError(f"this callable feeds {n} tensor(s) "
                                f"({', '.join(t.name for t in plan.feed_outputs) or 'none'}), got {len(values)} "
                                "value(s)")
            run_options = _serialized(run_options)
            enter()
            try:
                return self._execute(plan, values, run_options, timeout, run_metadata)
            finally:
                leave()
        return call

    def _plan(self, fetches: Any, feed_keys: list) -> RunPlan:
        """The RunPlan of ``fetches`` and ``feed_keys``: worked out once for the
        plain cases (``plan_key``), as a loop calling ``run`` with the same
        fetches and feeds would otherwise redo it each time."""
        key = plan_key(fetches, feed_keys)
        if key is None:
            return RunPlan(self, fetches, feed_keys)
        with self._plans_lock:
            plan = self._plans.get(key)
        if plan is None:
            plan = RunPlan(self, fetches, feed_keys)
            with self._plans_lock:
                if len(self._plans) >= _PLANS_KEPT:
                    del self._plans[next(iter(self._plans))]
                self._plans[key] = plan
        return plan

    def _enter_run(self) -> None:
        """Count a run in flight (close() waits for it); refuse it once closed.
        Every call is paired with a _leave_run (try/finally)."""
        with self._runs_lock:
            if self._closed:
                raise RuntimeError("attempted to use a closed Session")
            self._runs_in_flight += 1

    def _leave_run(self) -> None:
        with self._runs_lock:
            self._runs_in_flight -= 1
            # Only close() waits, and only once it has set _closed (under this lock).
            if not self._runs_in_flight and self._closed:
                self._runs_over.notify_all()

    def _execute(self, plan: RunPlan, values: Iterable[Any], run_options: Optional[bytes],
                 timeout: Optional[float], run_metadata: Any = None) -> Any:
        n_in, n_out, n_tg = plan.n_in, plan.n_out, plan.n_tg
        if run_metadata is not None and self._runner is not None:
            raise NotImplementedError("Session.run: run_metadata is not collected in a julia_thread session "
                                      "(its runs go through Julia's thread): trace in a default session")
        c_in_vals = ffi.new(C.tensor_ptr_array, n_in or 1)
        held = []
        for i, value in enumerate(values):
            spec = plan.feed_specs[i]
            if (spec is not None and type(value) is np.ndarray and value.dtype is spec.np_dtype
                    and value.shape == spec.shape and value.flags.c_contiguous):
                t = spec.tensor(value)  # fits by construction: no conversion checks to make
            elif isinstance(value, Tensor):
                t = self._check_tensor_feed(value, plan.feed_outputs[i], plan.feed_targets[i])
            else:
                target = plan.feed_targets[i]
                t = Tensor._for_feed(value, plan.feed_outputs[i].dtype, target[0], target[1])
            held.append(t)
            c_in_vals[i] = t._ptr
        if not n_out and not n_tg:  # nothing for TensorFlow to run (TF Python does not call it either)
            return plan.fetch.rebuild([value_of_feed(held[i]) for _, i in plan.sources])
        c_out_vals = ffi.new(C.tensor_ptr_array, n_out or 1)
        opts = raw = ffi.NULL
        if timeout is not None:
            if timeout <= 0:
                raise ValueError(f"Session.run: timeout must be positive seconds, got {timeout!r}")
            # A TF deadline needs a thread that waits for the run: never the caller's own.
            run_options = (run_options or b"") + pb.field_varint(_RUN_OPTIONS_TIMEOUT_IN_MS,
                                                                 max(1, round(timeout * 1000)))
        elif (not run_options and not self._julia_thread and self._scan_count <= self._inline_limit
              and self._graph_is_small()):
            opts = _CALLER_THREAD_OPTS
        if run_options:
            opts = ffi.new(C.buffer_ptr)
            raw = ffi.new(C.char_array, run_options)
            opts.data, opts.length = raw, len(run_options)
        ptr = self._session_for(plan, _timeout_of(run_options))
        if self._runner is None:
            s = status()
            meta = lib.TF_NewBuffer() if run_metadata is not None else ffi.NULL
            try:
                lib.TF_SessionRun(ptr, opts, plan.c_in, c_in_vals, n_in, plan.c_out, c_out_vals, n_out,
                                  plan.c_tg, n_tg, meta, s.ptr)
                if meta != ffi.NULL and not lib.TF_GetCode(s.ptr):
                    run_metadata.ParseFromString(ffi.unpack(ffi.cast("char *", meta.data), meta.length))
            finally:
                if meta != ffi.NULL:
                    lib.TF_DeleteBuffer(meta)
        else:
            s = self._run_on_julia_thread(ptr, opts, plan, c_in_vals, n_in, c_out_vals, n_out, n_tg, held,
                                          raw if run_options else None, _timeout_of(run_options))
        if lib.TF_GetCode(s.ptr):
            self._raise_run_error(s)
        got = []
        try:
            for i in range(n_out):
                got.append(fetched(c_out_vals[i]))
        except BaseException:
            for i in range(len(got) + 1, n_out):  # not converted yet: nobody else frees them
                lib.TF_DeleteTensor(c_out_vals[i])
            raise
        if n_out != len(plan.sources):
            got = [value_of_feed(held[i]) if fed else got[i] for fed, i in plan.sources]
        return plan.fetch.rebuild(got)

    def _session_for(self, plan: RunPlan, timeout: Optional[float]) -> Any:
        """The TF_Session a run of ``plan`` with deadline ``timeout`` uses: this
        session's own (a distributed session chooses by the tasks the run needs)."""
        return self._ptr

    def _raise_run_error(self, s: Status) -> None:
        """Raise the error of a failed run's status ``s`` (and reset it)."""
        code = lib.TF_GetCode(s.ptr)
        if self._closed and code == CancelledError.code:  # close() cancelled this run
            lib.TF_SetStatus(s.ptr, lib.TF_OK, b"")
            raise CancelledError("Session.run was cancelled: another thread closed the session during the run")
        if code == CancelledError.code and _SIGINT_MARK in ffi.string(lib.TF_Message(s.ptr)).decode(
                errors="replace"):
            raise_pending_signals()
        check(s)

    def _prepare(self, fetch: Optional[Output], feeds: Sequence[Output], targets: Sequence[Operation] = (),
                 reuse: Optional[PreparedRun] = None) -> Optional[PreparedRun]:
        """A PreparedRun of ``fetch`` and ``targets`` with ``feeds`` fed
        (bridge/framework/prepared_run.py), attached to this session:
        ``reuse`` if it is one of them, detached, else a new one.  None where
        it does not apply: a ``julia_thread`` session (its runs go through
        Julia's thread), a fetch of no numeric dtype, a fetch also fed, a
        tensor of another graph."""
        if self._closed:
            raise RuntimeError("attempted to use a closed Session")
        if self._runner is not None:
            return None
        graph = self.graph
        if reuse is not None and reuse.session is None and reuse.matches(graph, fetch, feeds, targets):
            reuse.session = self
            return reuse
        if ((fetch is not None and (fetch.graph is not graph or fetch in feeds
                                    or _NUMERIC.get(fetch.dtype.enum) is None))
                or any(f.graph is not graph for f in feeds) or any(op.graph is not graph for op in targets)):
            return None
        return PreparedRun(self, fetch, feeds, targets)

    def _run_prepared(self, prepared: PreparedRun) -> None:
        """Run ``prepared`` once (its fetched TF_Tensor left in its output array)."""
        self._enter_run()
        try:
            opts = ffi.NULL
            if self._scan_count <= self._inline_limit and self._graph_is_small():
                opts = _CALLER_THREAD_OPTS
            s = prepared.status
            lib.TF_SessionRun(self._ptr, opts, prepared.c_in, prepared.c_in_vals, prepared.n_in, prepared.c_out,
                              prepared.c_out_vals, prepared.n_out, prepared.c_tg, prepared.n_tg, ffi.NULL, s.ptr)
        finally:
            self._leave_run()
        if lib.TF_GetCode(s.ptr):
            self._raise_run_error(s)

    def _run_on_julia_thread(self, ptr, opts, plan: RunPlan, c_in_vals, n_in: int, c_out_vals, n_out: int,
                             n_tg: int, held: list, raw, timeout: Optional[float]) -> Status:
        """TF_SessionRun on Julia's thread (a julia_thread session); returns
        the run's status, or raises if the run was abandoned.

        An abandoned run goes on on Julia's thread, reading its arguments and
        writing its outputs and status when it ends; Python raises the
        KeyboardInterrupt of the Ctrl-C that abandoned it as soon as the
        runtime returns, before anything here runs.  So the run is recorded
        before it starts (the runtime leaves its handle in the recorded slot
        as it returns) and its status is leased, not this thread's shared
        one: nothing it writes can reach a later run, and nothing it uses is
        freed before it is over (_reap_detached)."""
        self._reap_detached(wait=False)
        s = lease_status()
        args = (ptr, opts, plan.c_in, c_in_vals, n_in, plan.c_out, c_out_vals, n_out, plan.c_tg, n_tg,
                ffi.NULL, s.ptr)
        # A new slot each run: its state only ever moves forward (not
        # returned, then over or abandoned), so whoever reads it knows whose run it is.
        slot = self._runner.new_slot()
        self._julia_runs[slot] = (slot, (args, held, plan, raw, s), c_out_vals, n_out)
        abandoned = self._runner.run(*args, timeout=timeout, slot=slot)
        if abandoned is None or abandoned[1] is None:
            self._julia_runs.pop(slot, None)
            return_status(s)  # the run is over: nothing writes into it any more
            if abandoned is None or lib.TF_GetCode(s.ptr) == lib.TF_OK:
                return s
            # It ended after an interrupt or deadline abandoned it, failing
            # because of it (its Julia code threw InterruptException).
            lib.TF_SetStatus(s.ptr, lib.TF_OK, b"")
        if abandoned[0] == "deadline":
            raise DeadlineExceededError(f"Session.run: deadline of {timeout:g} s exceeded; "
                                        "its Julia ops were abandoned and their outputs are discarded")
        raise_pending_signals()
        raise CancelledError("Session.run was interrupted (bridge.julia.interrupt or Ctrl-C); its Julia "
                             "ops were abandoned and their outputs are discarded")

    def _feed_target(self, out: Output) -> tuple:
        """How conversion errors name the fed tensor ``out``, the shape a value
        fed to it must fit (None: any) as shape inference knows it, and its
        dtype's enum; looked up once per fed tensor."""
        key = (out.op._ptr, out.index)
        try:
            return self._feed_targets[key]
        except KeyError:
            kind = "placeholder" if out.op.type.startswith("Placeholder") else "tensor"
            shape = out.shape
            found = self._feed_targets[key] = (f"{kind} '{out.name}'", None if shape.unknown_rank else tuple(shape),
                                               out.dtype.enum)
            return found

    @staticmethod
    def _check_tensor_feed(value: Tensor, out: Output, target: tuple) -> Tensor:
        """A Tensor fed to ``out``: as is when its dtype is out's, else converted
        as a numpy value would be (only where no value changes); its shape must
        fit out's static shape (ValueError, as for numpy values)."""
        meta = getattr(value, "_meta", None)
        if meta is not None and meta[2] is target:  # this Tensor fitted this tensor before
            return value
        name, shape, enum = target
        if meta is None:  # a C call costs about 1 us here: read once per Tensor
            ptr = value._ptr
            meta = (lib.TF_TensorType(ptr), tuple([lib.TF_Dim(ptr, i) for i in range(lib.TF_NumDims(ptr))]), None)
        if meta[0] != enum:
            return Tensor._for_feed(value, out.dtype, name, shape)
        if shape is not None:
            dims = meta[1]
            fits = len(dims) == len(shape)
            if fits:
                for d, n in zip(shape, dims):
                    if d is not None and d != n:
                        fits = False
                        break
            if not fits:
                Tensor._for_feed(value, out.dtype, name, shape)  # raises the ValueError numpy values get
        value._meta = (meta[0], meta[1], target)
        return value

    def _graph_is_small(self) -> bool:
        """Whether the graph has at most ``inline_small_graphs`` operations.
        Graphs only grow, so counting resumes where the last call stopped:
        one C call per run once the count is known."""
        limit = self._inline_limit
        if self._scan_count > limit:
            return False
        pos = ffi.new(_SIZE_T_PTR, self._scan_pos)
        count = self._scan_count
        while count <= limit and lib.TF_GraphNextOperation(self.graph._ptr, pos) != ffi.NULL:
            count += 1
        self._scan_pos, self._scan_count = pos[0], count
        return count <= limit

    def close(self) -> None:
        """Close the session and free it.  Runs in flight on other threads are
        cancelled (they raise CancelledError) and waited for before the session
        is freed; later runs raise RuntimeError.  Idempotent, thread-safe."""
        with self._runs_lock:
            if self._closed:
                return
            self._closed = True  # no run starts from here on
        # A status of its own: close() also runs from __del__ in the
        # interpreter's last garbage collection, which may already have
        # freed this thread's shared status (finalizers of one batch of
        # garbage run in no set order).
        s = Status()
        # TF_CloseSession cancels the runs in flight and refuses new ones; the
        # session may be deleted only once every run has returned from it.
        lib.TF_CloseSession(self._ptr, s.ptr)
        with self._runs_lock:
            while self._runs_in_flight:
                self._runs_over.wait()
        self._reap_detached(wait=True)
        lib.TF_DeleteSession(self._ptr, s.ptr)
        check(s, "closing session")

    def _reap_detached(self, wait: bool) -> None:
        """Free what abandoned julia_thread runs used once they are over
        (``wait``: wait for each, as the session is about to be deleted;
        no run is in flight then).  Each record is taken out of
        ``_julia_runs`` by one thread only (dict.pop), whichever comes first."""
        if not self._julia_runs:
            return
        for slot in list(self._julia_runs):
            returned, handle = self._runner.slot_state(slot)
            if not returned:  # its run is in the runtime now, or Python raised before calling it
                if wait:  # close(): no run is in flight, so it never started
                    self._julia_runs.pop(slot, None)
                continue
            if handle is None:  # over: its caller has its results
                self._julia_runs.pop(slot, None)
                continue
            if wait:
                self._runner.wait(handle)
            elif not self._runner.is_done(handle):
                continue
            entry = self._julia_runs.pop(slot, None)
            if entry is None:
                continue  # another thread freed it
            _, _keep, c_out_vals, n_out = entry
            for i in range(n_out):  # what the run fetched, for nobody
                if c_out_vals[i] != ffi.NULL:
                    lib.TF_DeleteTensor(c_out_vals[i])
            self._runner.release(handle)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# The package's hooks for this module (bridge/__init__.py; bridge/platform/hooks.py).
from bridge.platform import hooks as _hooks  # noqa: E402
_hooks.imported(__name__)
