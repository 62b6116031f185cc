"""``IndexedSlices``: TensorFlow's sparse representation of a gradient.

A gather's gradient names a few rows of a large tensor: ``values`` (the rows,
``[n, ...]``), ``indices`` (``[n]``, which rows; they may repeat) and
``dense_shape`` (the whole tensor's shape, a 1-D integer Output).  The dense
tensor it stands for is the sum of each ``values[i]`` placed at row
``indices[i]``, zeros elsewhere: :func:`convert_to_tensor` builds it
(``UnsortedSegmentSum``), as TF's ``tf.convert_to_tensor`` does, with TF's
warning when that tensor holds 100,000,000 elements or more.

``bridge.gradients`` returns IndexedSlices where TF's ``tf.gradients`` does;
the optimizers of ``bridge.train`` apply them with TF's sparse kernels;
``Session.run`` fetches one as an :class:`IndexedSlicesValue`.
"""
from __future__ import annotations

import warnings
from typing import Any, NamedTuple, Optional

import numpy as np

from . import dtypes
from .attrs import Shape
from .graph import Output
from .tensor import Tensor

__all__ = ["IndexedSlices", "IndexedSlicesValue", "convert_to_tensor", "indexed_slices_to_tensor",
           "LARGE_SPARSE_NUM_ELEMENTS"]

#: TF's ``_LARGE_SPARSE_NUM_ELEMENTS``: densifying at least this many elements warns.
LARGE_SPARSE_NUM_ELEMENTS = 100000000


class IndexedSlicesValue(NamedTuple):
    """A fetched :class:`IndexedSlices`' value (numpy arrays), as TensorFlow's."""
    values: Any
    indices: Any
    dense_shape: Any

    def to_dense(self) -> np.ndarray:
        """The dense array: ``values`` rows added at ``indices`` (repeats add up)."""
        out = np.zeros(tuple(int(d) for d in self.dense_shape), dtype=np.asarray(self.values).dtype)
        np.add.at(out, np.asarray(self.indices), np.asarray(self.values))
        return out


class IndexedSlices:
    """Rows ``values`` of a tensor of shape ``dense_shape`` at ``indices``
    (TensorFlow's ``tf.IndexedSlices``): a gather's gradient."""

    __slots__ = ("_values", "_indices", "_dense_shape")

    def __init__(self, values: Output, indices: Output, dense_shape: Optional[Output] = None):
        if not isinstance(values, Output) or not isinstance(indices, Output):
            raise TypeError("IndexedSlices takes Outputs for values and indices, got "
                            f"{type(values).__name__} and {type(indices).__name__}")
        if dense_shape is not None and not isinstance(dense_shape, Output):
            raise TypeError(f"IndexedSlices' dense_shape is an Output or None, got {type(dense_shape).__name__}")
        self._values, self._indices, self._dense_shape = values, indices, dense_shape

    @property
    def values(self) -> Output:
        return self._values

    @property
    def indices(self) -> Output:
        return self._indices

    @property
    def dense_shape(self) -> Optional[Output]:
        return self._dense_shape

    @property
    def dtype(self) -> dtypes.DType:
        return self._values.dtype

    @property
    def graph(self):
        return self._values.graph

    @property
    def op(self):
        return self._values.op

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def device(self) -> str:
        return self._values.op.device

    @property
    def shape(self) -> Shape:
        """The dense tensor's static shape, as far as the graph tells it."""
        if self._dense_shape is None:
            return Shape.unknown()
        known = constant_value(self._dense_shape)
        if known is not None:
            return Shape(int(d) for d in known)
        static = _static_shape_behind(self._dense_shape)
        if static is not None:
            return static
        rank = self._dense_shape.shape
        if rank.unknown_rank or rank[0] is None:
            return Shape.unknown()
        tail = self._values.shape
        dims = [None] * rank[0]
        if not tail.unknown_rank and len(tail) == rank[0]:
            dims[1:] = tail[1:]
        return Shape(dims)

    def __neg__(self) -> "IndexedSlices":
        neg = self.graph.create_op("Neg", [self._values]).output(0)
        return IndexedSlices(neg, self._indices, self._dense_shape)

    def __repr__(self) -> str:
        shape = "None" if self._dense_shape is None else self._dense_shape.name
        return (f"<bridge.IndexedSlices values={self._values.name} indices={self._indices.name} "
                f"dense_shape={shape} dtype={self.dtype.name}>")

    def _short_repr(self) -> str:
        return f"IndexedSlices '{self._values.name}'"


def constant_value(t: Output) -> Optional[np.ndarray]:
    """The value of ``t`` where the graph fixes it (TF's ``tensor_util.constant_value``
    for what a dense shape is built from: Const, Shape of a fully known shape, Identity)."""
    op = t.op
    if op.type == "Const":
        value = op.get_attr("value")
        return value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if op.type == "Shape":
        shape = op.inputs[0].shape
        if not shape.unknown_rank and all(d is not None for d in shape):
            return np.asarray(list(shape), dtype=op.get_attr("out_type").as_numpy_dtype)
        return None
    if op.type == "Identity":
        return constant_value(op.inputs[0])
    return None


def _static_shape_behind(t: Output) -> Optional[Shape]:
    """The static shape a Shape or VariableShape op reads (the variable's
    declared shape through its VarHandleOp), None where unknown."""
    op = t.op
    if op.type == "Shape":
        shape = op.inputs[0].shape
        return None if shape.unknown_rank else shape
    if op.type == "VariableShape":
        handle = op.inputs[0].op
        while handle.type == "Identity":
            handle = handle.inputs[0].op
        if handle.type == "VarHandleOp":
            shape = handle.get_attr("shape")
            return None if shape.unknown_rank else shape
    return None


def _const(graph, value, dtype, name):
    t = Tensor(np.asarray(value, dtype=dtypes.as_dtype(dtype).as_numpy_dtype), dtype)
    return graph.create_op("Const", attrs={"value": t, "dtype": t.dtype},
                           attr_types={"value": "tensor", "dtype": "type"}, name=name).output(0)


def indexed_slices_to_tensor(value: IndexedSlices, name: Optional[str] = None, warn: bool = True) -> Output:
    """The dense tensor ``value`` stands for: ``UnsortedSegmentSum(values,
    indices, dense_shape[0])``, TF's ``_indexed_slices_to_tensor`` (``warn``:
    its warning when the dense tensor has a known size of at least
    :data:`LARGE_SPARSE_NUM_ELEMENTS` elements; TF's gradients of gathers
    densify without it)."""
    if value.dense_shape is None:
        raise ValueError("Tensor conversion requested for IndexedSlices without dense_shape: "
                         f"{value!r}")
    if warn:
        known = constant_value(value.dense_shape)
        if known is not None:
            num_elements = int(np.prod(known, dtype=np.int64))
            if num_elements >= LARGE_SPARSE_NUM_ELEMENTS:
                warnings.warn("Converting sparse IndexedSlices to a dense Tensor with %d elements. "
                              "This may consume a large amount of memory." % num_elements, stacklevel=3)
    graph = value.graph
    with graph.as_default():
        with graph.name_scope("strided_slice"):
            begin = _const(graph, [0], dtypes.int32, "stack")
            end = _const(graph, [1], dtypes.int32, "stack_1")
            strides = _const(graph, [1], dtypes.int32, "stack_2")
        rows = graph.create_op("StridedSlice", [value.dense_shape, begin, end, strides], name="strided_slice",
                               attrs={"shrink_axis_mask": 1}, attr_types={"shrink_axis_mask": "int"}).output(0)
        return graph.create_op("UnsortedSegmentSum", [value.values, value.indices, rows],
                               name=name or "UnsortedSegmentSum").output(0)


def convert_to_tensor(value: Any, name: Optional[str] = None) -> Any:
    """``value`` as a dense Output where it is an :class:`IndexedSlices`
    (:func:`indexed_slices_to_tensor`, with TF's warning); anything else as is."""
    if isinstance(value, IndexedSlices):
        return indexed_slices_to_tensor(value, name=name)
    return value
