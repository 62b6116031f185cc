"""PreparedRun: one run of a graph, repeated many times from one thread,
with everything but the fed bytes worked out once.

What an optimizer's loop needs (ScipyOptimizer: the loss and gradient at a
point, hundreds of times): the C arrays naming the fed, fetched and target
tensors and holding their TF_Tensors, one TF_Tensor per fed tensor that each
run refills in place, the fetched tensor copied out into a fresh numpy
array, a status of its own.  Per run that leaves TF_SessionRun, a memmove in
and one out: about 2 us of Python around a run TensorFlow does in 10 us,
where a ``make_callable`` function spends about 10.

A fed TF_Tensor is refilled only while this object is its only owner
(TF_TensorMaybeMove): TensorFlow may keep a fed tensor past the run (a
queue it was enqueued to, a session handle, a fetched output that aliases
it); then it keeps that one and a new tensor is allocated for the next
value.  During a run this object holds a reference, so no kernel forwards
(writes into) a fed buffer.

A PreparedRun belongs to a graph, not a session: ``Session._prepare`` makes
one or attaches one made before (``detach`` lets it go, keeping its
TF_Tensors for the next session), so a loop over many short calls pays for
the preparation once.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ._lib import CTypes as C
from ._lib import ffi, lib
from .errors import Status
from .graph import Operation, Output
from .run_plan import _NUMERIC
from .tensor import Tensor

__all__ = ["PreparedRun"]


def _same(a: Any, b: Any) -> bool:
    return a is b or (a is not None and b is not None and a == b)


class PreparedRun:
    """Runs ``fetch`` (a numeric tensor, or None) and ``targets`` with ``feeds`` fed, from one thread.

    Each fed tensor is given a value either once, kept for every later run
    (:meth:`feed`, converted as ``Session.run`` converts it), or before each
    run (:meth:`write`, for a tensor of a numeric dtype and fully known
    static shape: the bytes are copied into a TF_Tensor kept for the next
    runs).  :meth:`run` returns the fetched value as a new writable numpy
    array, or a numpy scalar for a 0-d fetch as TF1's ``Session.run`` (None
    without a fetch).  :meth:`close` frees the TF_Tensors (also
    done when collected).  Made by ``Session._prepare``."""

    __slots__ = ("session", "graph", "fetch", "feeds", "targets", "status", "c_in", "c_in_vals", "n_in", "c_out",
                 "c_out_vals", "n_out", "c_tg", "n_tg", "_np_dtype", "_out_shape", "_out_nbytes", "_slots",
                 "_kept", "_unset", "__weakref__")

    def __init__(self, session: Any, fetch: Optional[Output], feeds: Sequence[Output],
                 targets: Sequence[Operation] = ()):
        self.session, self.fetch, self.feeds, self.targets = session, fetch, list(feeds), list(targets)
        self.graph = session.graph
        self.status = Status()
        self.n_in = len(self.feeds)
        self.c_in = ffi.new(C.output_array, self.n_in or 1)
        for i, out in enumerate(self.feeds):
            self.c_in[i].oper, self.c_in[i].index = out.op._ptr, out.index
        self.c_in_vals = ffi.new(C.tensor_ptr_array, self.n_in or 1)
        self.n_out = 0 if fetch is None else 1
        self.c_out = ffi.new(C.output_array, 1)
        self.c_out_vals = ffi.new(C.tensor_ptr_array, 1)
        self._np_dtype = self._out_shape = None
        self._out_nbytes = -1
        if fetch is not None:
            self._np_dtype = _NUMERIC.get(fetch.dtype.enum)
            if self._np_dtype is None:
                raise TypeError(f"PreparedRun: fetch '{fetch.name}' is {fetch.dtype.name}, not a numeric dtype")
            self.c_out[0].oper, self.c_out[0].index = fetch.op._ptr, fetch.index
            shape = fetch.shape
            if not shape.unknown_rank and all(d is not None for d in shape):
                self._out_shape = tuple(shape)
                self._out_nbytes = math.prod(self._out_shape) * self._np_dtype.itemsize
        self.n_tg = len(self.targets)
        self.c_tg = ffi.new(C.operation_ptr_array, [op._ptr for op in self.targets]) if self.targets else ffi.NULL
        # Per fed tensor written each run: [TF_Tensor* (owned here), its data, numpy dtype, shape, nbytes];
        # None for one fed once.
        self._slots: list[Optional[list]] = [None] * self.n_in
        self._kept: list[Any] = [None] * self.n_in  # the Tensors fed once, kept alive here
        self._unset = set(range(self.n_in))  # fed tensors given no value yet: no run until they are

    # --- the fed values ----------------------------------------------------------

    def feed(self, i: int, value: Any) -> None:
        """Feed ``value`` to the i-th fed tensor in every run from now on,
        converted (and checked against its dtype and static shape) as
        ``Session.run`` converts a fed value."""
        out = self.feeds[i]
        target = self.session._feed_target(out)
        if isinstance(value, Tensor):
            t = self.session._check_tensor_feed(value, out, target)
        else:
            t = Tensor._for_feed(value, out.dtype, target[0], target[1])
        self._drop_slot(i)
        self._kept[i] = t
        self.c_in_vals[i] = t._ptr
        self._unset.discard(i)

    def writable(self, i: int) -> bool:
        """Whether :meth:`write` can feed the i-th fed tensor (a numeric dtype,
        a fully known static shape, some bytes)."""
        if self._slots[i] is not None:
            return True
        _, shape, enum = self.session._feed_target(self.feeds[i])
        return (_NUMERIC.get(enum) is not None and shape is not None and all(d is not None for d in shape)
                and math.prod(shape) > 0)

    def write(self, i: int, value: np.ndarray) -> None:
        """Copy ``value`` (a numpy array of the i-th fed tensor's static shape,
        cast to its dtype as ``astype`` casts, within a kind) into the TF_Tensor
        fed to it in the next runs."""
        slot = self._slots[i]
        if slot is None:
            slot = self._new_slot(i)
        else:
            ptr = slot[0]
            moved = lib.TF_TensorMaybeMove(ptr)
            if moved != ptr:
                slot = self._moved(i, ptr, moved)
        self._fill(i, slot, value)

    def _moved(self, i: int, ptr: Any, moved: Any) -> list:
        """The slot to write once TF_TensorMaybeMove(ptr) gave ``moved``, not ``ptr``."""
        if moved == ffi.NULL:  # TensorFlow kept the last one (see the module doc): it is TF's now
            self._slots[i] = None
            lib.TF_DeleteTensor(ptr)
            return self._new_slot(i)
        slot = self._slots[i]  # the C API's contract allows a new handle; the old one is gone
        slot[0], slot[1] = moved, lib.TF_TensorData(moved)
        self.c_in_vals[i] = moved
        return slot

    def _fill(self, i: int, slot: list, value: Any) -> None:
        if (type(value) is np.ndarray and value.dtype is slot[2] and value.shape == slot[3]
                and value.flags.c_contiguous):
            ffi.memmove(slot[1], value, slot[4])
            return
        value = np.asarray(value)
        if value.shape != slot[3]:
            raise ValueError(f"PreparedRun: a value of shape {value.shape} for tensor '{self.feeds[i].name}', "
                             f"which has shape {slot[3]}")
        view = np.frombuffer(ffi.buffer(slot[1], slot[4]), slot[2]).reshape(slot[3])
        np.copyto(view, value, casting="same_kind")

    def caller(self, i: int) -> Callable[[Any], Any]:
        """``write(i, value)`` then ``run()`` as one function of ``value``, for
        a loop's hot path (an optimizer's evaluation): about 7 us of Python
        less per call than the two (measured on a 1000x50 L-BFGS-B loop,
        where the interpreter's caches are cold at each evaluation).  Valid
        while this stays attached to the session it has now."""
        slots, session, maybe_move, memmove = self._slots, self.session, lib.TF_TensorMaybeMove, ffi.memmove
        run_prepared, c_out_vals, unset = session._run_prepared, self.c_out_vals, self._unset
        shape, np_dtype, nbytes, n_out = self._out_shape, self._np_dtype, self._out_nbytes, self.n_out
        scalar = shape == ()
        byte_size, data, delete, empty, ndarray = (lib.TF_TensorByteSize, lib.TF_TensorData, lib.TF_DeleteTensor,
                                                   np.empty, np.ndarray)

        def call(value: Any) -> Any:
            if self.session is not session:
                raise ValueError(self._not_ready())
            slot = slots[i]
            if slot is None:
                slot = self._new_slot(i)
            else:
                ptr = slot[0]
                moved = maybe_move(ptr)
                if moved != ptr:
                    slot = self._moved(i, ptr, moved)
            if (type(value) is ndarray and value.dtype is slot[2] and value.shape == slot[3]
                    and value.flags.c_contiguous):
                memmove(slot[1], value, slot[4])
            else:
                self._fill(i, slot, value)
            if unset:
                raise ValueError(self._not_ready())
            run_prepared(self)
            if not n_out:
                return None
            out = c_out_vals[0]
            if byte_size(out) != nbytes:
                return self._output()
            try:
                arr = empty(shape, np_dtype)
                memmove(arr, data(out), nbytes)
            finally:
                delete(out)
                c_out_vals[0] = ffi.NULL
            return arr[()] if scalar else arr
        return call

    def _new_slot(self, i: int) -> list:
        if not self.writable(i):
            raise ValueError(f"PreparedRun: tensor '{self.feeds[i].name}' cannot be written each run (it needs a "
                             "numeric dtype and a fully known, non-empty static shape); feed() it instead")
        _, shape, enum = self.session._feed_target(self.feeds[i])
        np_dtype = _NUMERIC[enum]
        nbytes = math.prod(shape) * np_dtype.itemsize
        ptr = lib.TF_AllocateTensor(enum, ffi.new(C.int64_array, shape) if shape else ffi.NULL, len(shape), nbytes)
        if ptr == ffi.NULL:
            raise MemoryError(f"TensorFlow could not allocate {nbytes} bytes for tensor '{self.feeds[i].name}'")
        self._kept[i] = None
        slot = self._slots[i] = [ptr, lib.TF_TensorData(ptr), np_dtype, tuple(shape), nbytes]
        self.c_in_vals[i] = ptr
        self._unset.discard(i)
        return slot

    def _drop_slot(self, i: int) -> None:
        slot = self._slots[i]
        if slot is not None:
            self._slots[i] = None
            lib.TF_DeleteTensor(slot[0])

    # --- running -----------------------------------------------------------------

    def run(self) -> Any:
        """Run once with the values fed; the fetched value as a new writable
        array or, 0-d, a numpy scalar (None without a fetch)."""
        if self._unset or self.session is None:
            raise ValueError(self._not_ready())
        self.session._run_prepared(self)
        return self._output() if self.n_out else None

    def _output(self) -> Any:
        """The fetched TF_Tensor as a new array (0-d: a numpy scalar); frees it."""
        out = self.c_out_vals[0]
        try:
            nbytes = lib.TF_TensorByteSize(out)
            if nbytes == self._out_nbytes:
                arr = np.empty(self._out_shape, self._np_dtype)
            else:  # a shape the graph did not know statically
                shape = tuple([lib.TF_Dim(out, k) for k in range(lib.TF_NumDims(out))])
                arr = np.empty(shape, self._np_dtype)
                if arr.nbytes != nbytes:
                    raise RuntimeError(f"PreparedRun: fetched '{self.fetch.name}' holds {nbytes} bytes, not the "
                                       f"{arr.nbytes} of shape {shape}")
            if nbytes:
                ffi.memmove(arr, lib.TF_TensorData(out), nbytes)
        finally:
            lib.TF_DeleteTensor(out)
            self.c_out_vals[0] = ffi.NULL
        return arr[()] if arr.ndim == 0 else arr

    def _not_ready(self) -> str:
        if self.session is None:
            return "PreparedRun: detached from its session (Session._prepare attaches it)"
        if self._unset == set():
            return "PreparedRun: attached to another session since this function was made (caller())"
        names = ", ".join(f"'{self.feeds[i].name}'" for i in sorted(self._unset))
        return f"PreparedRun: no value fed to {names} (feed() or write() it first)"

    def matches(self, graph: Any, fetch: Optional[Output], feeds: Sequence[Output],
                targets: Sequence[Operation]) -> bool:
        """Whether this runs ``fetch`` and ``targets`` of ``graph`` with ``feeds`` fed."""
        if graph is not self.graph or len(feeds) != self.n_in or len(targets) != self.n_tg or not _same(
                fetch, self.fetch):
            return False
        return all(_same(a, b) for a, b in zip(feeds, self.feeds)) and all(
            _same(a, b) for a, b in zip(targets, self.targets))

    def detach(self) -> None:
        """Let go of the session and of the values fed once (the caller's data);
        keep the TF_Tensors written each run, for the next session attached."""
        self.session = None
        for i, t in enumerate(self._kept):
            if t is not None:
                self._kept[i] = None
                self.c_in_vals[i] = ffi.NULL
                self._unset.add(i)

    def close(self) -> None:
        """Free the TF_Tensors written each run (idempotent)."""
        for i in range(self.n_in):
            self._drop_slot(i)
            self._kept[i] = None
            self.c_in_vals[i] = ffi.NULL
        self._unset.update(range(self.n_in))  # in place: caller() functions read this set

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
