"""Small op builders for gradient functions.

They add ops to the *default* graph (not the forward op's), so a gradient
built inside a function body lands in, and captures into, that body.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework import dtypes
from bridge.framework.graph import Operation, Output, get_default_graph
from bridge.framework.indexed_slices import IndexedSlices, convert_to_tensor
from bridge.framework.tensor import Tensor


def _node(op_type: str, inputs: Sequence[Any], attrs: Optional[dict] = None,
          attr_types: Optional[dict] = None, name: Optional[str] = None) -> Operation:
    """A new ``op_type`` op (for ops with several outputs)."""
    return get_default_graph().create_op(op_type, list(inputs), attrs=attrs, attr_types=attr_types, name=name)


def _op(op_type: str, inputs: Sequence[Any], attrs: Optional[dict] = None,
        attr_types: Optional[dict] = None, name: Optional[str] = None) -> Output:
    """Output 0 of a new ``op_type`` op."""
    return _node(op_type, inputs, attrs, attr_types, name).output(0)


def _const(value: Any, dtype: Any, name: str = "Const") -> Output:
    t = Tensor(np.asarray(value, dtype=dtypes.as_dtype(dtype).as_numpy_dtype), dtype)
    return _op("Const", [], {"value": t, "dtype": t.dtype}, {"value": "tensor", "dtype": "type"}, name)


def _c(x: Output, value: float) -> Output:
    """A scalar constant of x's dtype."""
    return _const(value, x.dtype)


def _zeros_like(x: Output) -> Output:
    return _op("ZerosLike", [x])


def _ones(x: Output) -> Output:
    """Ones of x's (dynamic) shape.  Not OnesLike: TF's C++ registry lacks its
    (empty) gradient, which would split second-derivative graphs into blocks."""
    return _op("Fill", [_op("Shape", [x]), _const(1, x.dtype, name="one")])


def _add_n(values: list[Output]) -> Output:
    return values[0] if len(values) == 1 else _op("AddN", [list(values)])


def aggregate_gradients(grads: list[Any]) -> Any:
    """The sum of a tensor's gradients, as TF's ``_AggregatedGrads``: one
    passes as is; dense ones add up (``AddN``); IndexedSlices alone
    concatenate their values and indices (int32 indices become int64 when
    the kinds mix, as ``_as_indexed_slices_list``); dense and IndexedSlices
    mixed add up densified (``add_n``'s conversion, with TF's warning)."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, Output) for g in grads):
        return _add_n(grads)
    if any(isinstance(g, Output) for g in grads):
        return _op("AddN", [[convert_to_tensor(g) for g in grads]])
    int32 = [g for g in grads if g.indices.dtype == dtypes.int32]
    if int32 and len(int32) != len(grads):
        grads = [IndexedSlices(g.values, _op("Cast", [g.indices], {"DstT": dtypes.int64}), g.dense_shape)
                 if g.indices.dtype == dtypes.int32 else g for g in grads]
    axis = _const(0, dtypes.int32, name="concat/axis")
    values = _op("ConcatV2", [[g.values for g in grads], axis], name="concat")
    axis = _const(0, dtypes.int32, name="concat_1/axis")
    indices = _op("ConcatV2", [[g.indices for g in grads], axis], name="concat_1")
    return IndexedSlices(values, indices, grads[0].dense_shape)


def _mul(*xs: Output) -> Output:
    out = xs[0]
    for x in xs[1:]:
        out = _op("Mul", [out, x])
    return out


def is_differentiable(dtype: dtypes.DType) -> bool:
    """Whether gradients flow through tensors of ``dtype`` (floats, complex,
    and variants, which carry TensorLists of gradients; reference types of TF1
    variables as their values' types)."""
    dtype = dtypes.base_dtype(dtype)
    return dtype.is_floating or dtype.is_complex or dtype.name == "variant"
