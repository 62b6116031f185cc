"""What a Session run's fetches and feeds come to, worked out once per
``Session.run`` call or ``make_callable`` function, and the conversions each
run makes: fed values to TF_Tensors, fetched TF_Tensors to numpy.

The per-run work is kept small for small problems (an L-BFGS evaluation of a
1000x50 loss costs TensorFlow about 60 us): a fed numpy array of the dtype
and static shape of its tensor is copied into a tensor TensorFlow allocates,
without the general conversion's checks, which it passes by construction;
a small numeric fetch is copied out and its TF_Tensor freed at once.
"""
from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import Any, Iterable, Optional

import numpy as np

from . import dtypes
from ._lib import CTypes as C
from ._lib import ffi, lib
from .builders import SparseTensor, SparseTensorValue
from .graph import Graph, Operation, Output
from .indexed_slices import IndexedSlices, IndexedSlicesValue
from .tensor import Tensor, to_numpy

#: Arrays up to this size are copied (in as feeds, out as fetches): cheaper
#: than TensorFlow calling back into Python to release a numpy buffer it
#: borrowed, or than keeping the fetched TF_Tensor alive behind a view.
#: Larger ones cross without a copy (bridge/framework/tensor.py).
COPY_LIMIT = 1 << 16

#: TF_DataType values of handles, which a fetch returns as Tensors, not numpy arrays.
HANDLE_DTYPES = (dtypes.resource.enum, dtypes.variant.enum)

# TF_DataType -> numpy dtype, for the types whose values are plain numpy arrays.
_NUMERIC: dict[int, np.dtype] = {}


def _numeric(dtype: dtypes.DType) -> Optional[np.dtype]:
    """``dtype``'s numpy dtype if its values are fixed-size numbers, else None."""
    if dtype.kind in ("handle", "ref") or dtype.name == "string" or not dtype.size:
        return None
    np_dtype = dtype.as_numpy_dtype
    return np_dtype if np_dtype is not None and np_dtype.itemsize == dtype.size else None


for _d in dtypes.all_dtypes():
    if _numeric(_d) is not None:
        _NUMERIC[_d.enum] = _numeric(_d)


def _path(path: str, key: Any) -> str:
    return f"{path}[{key!r}]"


class _FetchPlan:
    """Flattens a nested fetch structure into outputs and targets, and rebuilds it.

    What TF1's ``Session.run`` accepts: Outputs, Operations (fetched as None),
    names ("op:0", "op"), anything with TensorFlow's ``_as_graph_element()``
    (a Variable: its value), SparseTensors (a SparseTensorValue), IndexedSlices
    (an IndexedSlicesValue), and lists,
    tuples, namedtuples and dicts (mappings) of them, nested.  Anything else is
    a TypeError naming it and where it sits in ``fetches``."""

    def __init__(self, graph: Graph, fetches: Any):
        self.outputs: list[Output] = []
        self.targets: list[Operation] = []
        self.structure = self._flatten(graph, fetches, "fetches")
        node = self.structure
        # The common shapes, rebuilt without walking: one output, a list of outputs.
        self._single = node if isinstance(node, int) else None
        self._plain_list = (isinstance(node, tuple) and node[0] == "seq" and node[1] is list
                            and node[2] == list(range(len(node[2]))))

    def _element(self, graph: Graph, f: Any, path: str):
        el = graph.as_graph_element(f)
        if isinstance(el, Operation):
            self.targets.append(el)
            return None
        self.outputs.append(el)
        return len(self.outputs) - 1

    def _flatten(self, graph: Graph, f: Any, path: str):
        if isinstance(f, (Output, Operation, str)) or (
                hasattr(type(f), "_as_graph_element") and not isinstance(f, type)):
            return self._element(graph, f, path)
        if isinstance(f, SparseTensor):
            return ("seq", lambda items: SparseTensorValue(*items),
                    [self._element(graph, t, _path(path, i)) for i, t in enumerate(f)])
        if isinstance(f, IndexedSlices):
            parts = (f.values, f.indices, f.dense_shape)
            return ("seq", lambda items: IndexedSlicesValue(*items),
                    [None if t is None else self._element(graph, t, _path(path, i)) for i, t in enumerate(parts)])
        if isinstance(f, Mapping):
            if isinstance(f, collections.defaultdict):
                factory = f.default_factory
                make = lambda items: collections.defaultdict(factory, items)  # noqa: E731
            elif type(f) in (dict, collections.OrderedDict):
                make = type(f)
            else:
                make = dict
            return ("map", make, {k: self._flatten(graph, v, _path(path, k)) for k, v in f.items()})
        if isinstance(f, tuple) and hasattr(f, "_fields"):  # namedtuple
            return ("seq", lambda items, t=type(f): t(*items),
                    [self._flatten(graph, v, _path(path, i)) for i, v in enumerate(f)])
        if isinstance(f, (list, tuple)):
            return ("seq", type(f), [self._flatten(graph, v, _path(path, i)) for i, v in enumerate(f)])
        what = "None" if f is None else f"{type(f).__name__} {f!r}"
        raise TypeError(f"cannot fetch {what} ({path}): a fetch is an Output, an Operation, a Variable, "
                        "a SparseTensor, an IndexedSlices, a name ('op:0' for a tensor, 'op' for an operation), or a "
                        "list/tuple/namedtuple/dict of them")

    def rebuild(self, values: list, node=None, top=True):
        """The fetch structure with ``values`` (one per output, in order) in place."""
        if top:
            if self._single is not None:
                return values[self._single]
            if self._plain_list:
                return list(values)
            node = self.structure
        if node is None:
            return None
        if isinstance(node, int):
            return values[node]
        kind, make, items = node
        if kind == "map":
            return make((k, self.rebuild(values, v, False)) for k, v in items.items())
        return make([self.rebuild(values, v, False) for v in items])



def expand_feeds(feed_dict: Optional[dict]) -> tuple[list, list]:
    """A feed dict's keys and values, a SparseTensor key fed by a
    (indices, values, dense_shape) triple (a SparseTensorValue) as its three parts."""
    if feed_dict is None:
        return [], []
    if not isinstance(feed_dict, Mapping):
        raise TypeError(f"feed_dict must be a dict, not {type(feed_dict).__name__}")
    keys, values = [], []
    for key, value in feed_dict.items():
        if isinstance(key, SparseTensor):
            parts = list(value) if isinstance(value, (tuple, list)) else None
            if parts is None or len(parts) != 3:
                raise TypeError(f"a SparseTensor is fed an (indices, values, dense_shape) triple or a "
                                f"SparseTensorValue, not {type(value).__name__}")
            keys.extend(key)
            values.extend(parts)
        else:
            keys.append(key)
            values.append(value)
    return keys, values


def value_of_feed(t: Tensor):
    """A fed tensor's value, fetched: as a fetch of the same dtype would be."""
    if t.dtype.enum in HANDLE_DTYPES:  # resource / variant handles stay Tensors
        return t
    return t.numpy()


def fetched(ptr) -> Any:
    """The value of a fetched TF_Tensor* (which Python now owns), as TF1's
    ``Session.run`` gives it: a 0-d tensor is a numpy scalar (``numpy.float64``,
    ``numpy.int32``, ``numpy.bool``, ...; ``bytes`` for a string), any other a
    read-only numpy array (when small, over a bytes copy that cannot be made
    writable, the TF_Tensor freed at once; else a view that keeps it alive);
    a Tensor for resource and variant handles."""
    np_dtype = _NUMERIC.get(lib.TF_TensorType(ptr))
    nbytes = lib.TF_TensorByteSize(ptr) if np_dtype is not None else 0
    if not 0 < nbytes <= COPY_LIMIT:
        if lib.TF_TensorType(ptr) in HANDLE_DTYPES:
            return Tensor._adopt(ptr)
        owner = ffi.gc(ptr, lib.TF_DeleteTensor)
        arr = to_numpy(owner, owner)
        return arr[()] if arr.ndim == 0 else arr
    try:
        ndim = lib.TF_NumDims(ptr)
        shape = (lib.TF_Dim(ptr, 0),) if ndim == 1 else tuple([lib.TF_Dim(ptr, i) for i in range(ndim)])
        data = ffi.buffer(lib.TF_TensorData(ptr), nbytes)[:]  # a bytes copy
    finally:
        lib.TF_DeleteTensor(ptr)
    arr = np.frombuffer(data, np_dtype)
    if ndim == 1:
        return arr
    return arr[0] if ndim == 0 else arr.reshape(shape)


class FeedSpec:
    """How a value fed to one tensor is converted on the fast path: a C-contiguous
    numpy array of exactly the tensor's dtype and (fully known, small) static
    shape, copied into a TF_Tensor allocated with dimensions built once.  Any
    other value takes the general conversion, with its checks and errors."""

    __slots__ = ("np_dtype", "shape", "enum", "dims", "ndim", "nbytes")

    def __init__(self, np_dtype: np.dtype, shape: tuple, enum: int):
        self.np_dtype, self.shape, self.enum = np_dtype, shape, enum
        self.ndim = len(shape)
        self.dims = ffi.new(C.int64_array, shape) if shape else ffi.NULL
        self.nbytes = math.prod(shape) * np_dtype.itemsize

    @classmethod
    def of(cls, out: Output, target: tuple) -> Optional["FeedSpec"]:
        """The spec for feeding ``out`` (``target``: Session._feed_target's), or
        None where the fast path does not apply."""
        _, shape, enum = target
        np_dtype = _NUMERIC.get(enum)
        if np_dtype is None or shape is None or any(d is None for d in shape):
            return None
        spec = cls(np_dtype, shape, enum)
        return spec if 0 < spec.nbytes <= COPY_LIMIT else None

    def tensor(self, value: np.ndarray) -> Tensor:
        """A Tensor holding a copy of ``value`` (already checked to fit)."""
        ptr = lib.TF_AllocateTensor(self.enum, self.dims, self.ndim, self.nbytes)
        if ptr == ffi.NULL:
            raise MemoryError(f"TensorFlow could not allocate {self.nbytes} bytes for a feed")
        t = Tensor.__new__(Tensor)
        t._ptr = ffi.gc(ptr, lib.TF_DeleteTensor)
        ffi.memmove(lib.TF_TensorData(ptr), value, self.nbytes)
        return t


def plan_key(fetches: Any, feed_keys: list) -> Optional[tuple]:
    """A hashable key naming the RunPlan of ``fetches`` and ``feed_keys``, for
    the plain cases (an Output, an Operation, a name, or a flat list or tuple
    of them; feed keys Outputs or names), or None.  Equal keys make equal
    plans: what a plan holds follows from the graph elements alone, which
    never change once made."""
    kind = type(fetches)
    if kind in _KEYABLE:
        head: Any = fetches
    elif (kind is list or kind is tuple) and all(type(f) in _KEYABLE for f in fetches):
        head = (kind, *fetches)
    else:
        return None
    for key in feed_keys:
        if type(key) is not Output and type(key) is not str:
            return None
    return (head, *feed_keys)


_KEYABLE = (Output, Operation, str)


class RunPlan:
    """What a run's fetches and fed tensors come to, worked out once: the
    fetch structure, the C arrays naming fed, fetched and target operations,
    how each fed tensor is named and shaped for conversion errors, and its
    fast-path FeedSpec.  Everything here is only read by runs, so threads may
    share a plan."""

    def __init__(self, session: Any, fetches: Any, feed_keys: Iterable[Any]):
        graph = session.graph
        self.fetch = _FetchPlan(graph, fetches)
        self.feed_outputs: list[Output] = []
        for key in feed_keys:
            out = key if type(key) is Output and key.op.graph is graph else graph.as_graph_element(key)
            if not isinstance(out, Output):
                raise TypeError(f"feed key {key!r} names an operation, not a tensor ('op:0')")
            self.feed_outputs.append(out)
        self.feed_targets = [session._feed_target(out) for out in self.feed_outputs]
        self.feed_specs = [FeedSpec.of(out, target) for out, target in zip(self.feed_outputs, self.feed_targets)]
        self.c_in = ffi.new(C.output_array, len(self.feed_outputs) or 1)
        for i, out in enumerate(self.feed_outputs):
            self.c_in[i].oper, self.c_in[i].index = out.op._ptr, out.index
        # A fetched tensor that is also fed is not asked of TensorFlow (which
        # refuses it): its value is the fed one, as TF Python's Session gives.
        fed = {out: i for i, out in enumerate(self.feed_outputs)}
        self.run_outputs: list[Output] = []
        self.sources: list[tuple[bool, int]] = []  # per fetched output: (fed?, index)
        for out in self.fetch.outputs:
            if out in fed:
                self.sources.append((True, fed[out]))
            else:
                self.sources.append((False, len(self.run_outputs)))
                self.run_outputs.append(out)
        self.c_out = ffi.new(C.output_array, len(self.run_outputs) or 1)
        for i, out in enumerate(self.run_outputs):
            self.c_out[i].oper, self.c_out[i].index = out.op._ptr, out.index
        self.c_tg = (ffi.new(C.operation_ptr_array, [op._ptr for op in self.fetch.targets])
                     if self.fetch.targets else ffi.NULL)
        self.n_in, self.n_out, self.n_tg = len(self.feed_outputs), len(self.run_outputs), len(self.fetch.targets)
