"""Small op builders for gradient functions.

They add ops to the *default* graph (not the forward op's), so a gradient
built inside a function body lands in, and captures into, that body.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework import dtypes
from bridge.framework.graph import Operation, Output, get_default_graph
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
