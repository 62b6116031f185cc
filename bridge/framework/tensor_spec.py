"""``TensorSpec``: the dtype and (partial) shape of a function's argument
(TF's ``tensorflow/python/framework/tensor_spec``)."""
from __future__ import annotations

from typing import Any, Optional

from . import dtypes
from .attrs import Shape, as_shape
from .graph import Output

__all__ = ["TensorSpec"]


class TensorSpec:
    """The dtype and (partial) shape of a function argument: ``TensorSpec([None, 3], "float64")``."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape: Any = None, dtype: Any = "float32", name: Optional[str] = None):
        self.shape = as_shape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_value(cls, value: Any) -> "TensorSpec":
        """A spec from a TensorSpec, an Output, a dtype, or a (dtype, shape) pair."""
        if isinstance(value, TensorSpec):
            return value
        if isinstance(value, Output):
            return cls(value.shape, value.dtype)
        if isinstance(value, tuple) and len(value) == 2:
            return cls(value[1], value[0])
        return cls(None, value)

    def is_compatible_with(self, shape: Shape) -> bool:
        if self.shape.unknown_rank or shape.unknown_rank:
            return True
        return len(self.shape) == len(shape) and all(
            a is None or b is None or a == b for a, b in zip(self.shape, shape))

    def _key(self) -> tuple:
        return (self.dtype.name, None if self.shape.unknown_rank else tuple(self.shape))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape!r}, dtype={self.dtype.name})"
