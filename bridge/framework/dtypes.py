"""TensorFlow data types, with their numpy counterparts where numpy has one."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np


class DType:
    """One TF_DataType. Compare with ``==`` against another DType, a numpy
    dtype, or a name such as ``"float32"``."""

    __slots__ = ("enum", "name", "_np", "size")

    def __init__(self, enum: int, name: str, np_dtype: Any, size: int):
        self.enum = enum
        self.name = name
        self._np = np_dtype
        self.size = size

    @property
    def as_numpy_dtype(self) -> Optional[np.dtype]:
        """The numpy dtype, or None where numpy (and ml_dtypes) has none."""
        if isinstance(self._np, str):  # an ml_dtypes type, imported on first use
            try:
                import ml_dtypes
                self._np = np.dtype(getattr(ml_dtypes, self._np))
            except (ImportError, AttributeError):
                self._np = None
        return self._np

    @property
    def is_floating(self) -> bool:
        return self.name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_complex(self) -> bool:
        return self.name in ("complex64", "complex128")

    @property
    def is_integer(self) -> bool:
        return self.name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

    @property
    def is_differentiable(self) -> bool:
        """Whether gradients flow through values of this type."""
        return self.is_floating or self.is_complex or self.name == "resource" or self.name == "variant"

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return self.enum == other.enum
        try:
            return self.enum == as_dtype(other).enum
        except (TypeError, ValueError):
            return False

    def __hash__(self) -> int:
        return self.enum

    def __repr__(self) -> str:
        return f"bridge.{self.name}"

    def __reduce__(self):
        return as_dtype, (self.enum,)


_TABLE = [
    # enum, name, numpy, element size in a dense buffer (0: not memcpy-able)
    (1, "float32", np.float32, 4), (2, "float64", np.float64, 8),
    (3, "int32", np.int32, 4), (4, "uint8", np.uint8, 1), (5, "int16", np.int16, 2),
    (6, "int8", np.int8, 1), (7, "string", np.object_, 0), (8, "complex64", np.complex64, 8),
    (9, "int64", np.int64, 8), (10, "bool", np.bool_, 1), (11, "qint8", None, 1),
    (12, "quint8", None, 1), (13, "qint32", None, 4), (14, "bfloat16", "bfloat16", 2),
    (15, "qint16", None, 2), (16, "quint16", None, 2), (17, "uint16", np.uint16, 2),
    (18, "complex128", np.complex128, 16), (19, "float16", np.float16, 2),
    (20, "resource", None, 0), (21, "variant", None, 0), (22, "uint32", np.uint32, 4),
    (23, "uint64", np.uint64, 8), (24, "float8_e5m2", "float8_e5m2", 1),
    (25, "float8_e4m3fn", "float8_e4m3fn", 1), (26, "float8_e4m3fnuz", "float8_e4m3fnuz", 1),
    (27, "float8_e4m3b11fnuz", "float8_e4m3b11fnuz", 1), (28, "float8_e5m2fnuz", "float8_e5m2fnuz", 1),
    (29, "int4", "int4", 1), (30, "uint4", "uint4", 1), (31, "int2", "int2", 1), (32, "uint2", "uint2", 1),
    (33, "float4_e2m1fn", "float4_e2m1fn", 1),
]

_BY_ENUM: dict[int, DType] = {}
_BY_NAME: dict[str, DType] = {}
for _enum, _name, _np_type, _size in _TABLE:
    _dt = DType(_enum, _name, np.dtype(_np_type) if _np_type is not None and not isinstance(_np_type, str) else _np_type, _size)
    _BY_ENUM[_enum] = _BY_NAME[_name] = _dt
    globals()[_name] = _dt

# TensorFlow's aliases.
_BY_NAME.update(half=_BY_NAME["float16"], float=_BY_NAME["float32"], double=_BY_NAME["float64"],
                complex=_BY_NAME["complex64"])
half, double = _BY_NAME["half"], _BY_NAME["double"]

_BY_NUMPY = {d._np: d for d in _BY_ENUM.values() if isinstance(d._np, np.dtype) and d.name != "string"}

float32: DType
float64: DType
int32: DType
int64: DType
string: DType
bool: DType  # noqa: A001  (TensorFlow's name)
resource: DType


def as_dtype(value: Any) -> DType:
    """Convert a DType, TF_DataType number, name, numpy dtype or Python type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, type(True)):
        if value in _BY_ENUM:
            return _BY_ENUM[value]
        if value - _REF_OFFSET in _BY_ENUM:
            return _ref_dtype(_BY_ENUM[value - _REF_OFFSET])
        raise ValueError(f"unknown TF_DataType {value}")
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        if value.startswith("DT_") and value[3:].lower() in _BY_NAME:
            return _BY_NAME[value[3:].lower()]
    if value is str or value is bytes:
        return _BY_NAME["string"]
    if value is float:
        return _BY_NAME["float64"]
    if value is int:
        return _BY_NAME["int64"]
    if value is type(True):
        return _BY_NAME["bool"]
    if value is complex:
        return _BY_NAME["complex128"]
    try:
        npd = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot interpret {value!r} as a TensorFlow dtype") from None
    if npd.kind in "OSU":
        return _BY_NAME["string"]
    if npd in _BY_NUMPY:
        return _BY_NUMPY[npd]
    d = _BY_NAME.get(npd.name)  # ml_dtypes types carry TensorFlow's names
    if d is not None and d.as_numpy_dtype == npd:
        return d
    raise TypeError(f"numpy dtype {npd} has no TensorFlow counterpart")


def from_enum(enum: int) -> DType:
    """The DType of a TF_DataType number (fast path for the C API's answers)."""
    try:
        return _BY_ENUM[enum]
    except KeyError:
        return as_dtype(enum)


# Reference types (DT_FLOAT_REF = 101, ...) of TF1 ref variables: the base
# type plus 100. They hold the same values, so they share the base numpy type.
_REF_OFFSET = 100
_REFS: dict[int, DType] = {}


def _ref_dtype(base: DType) -> DType:
    ref = _REFS.get(base.enum)
    if ref is None:
        ref = _REFS[base.enum] = DType(base.enum + _REF_OFFSET, base.name + "_ref", base._np, base.size)
    return ref


def base_dtype(dtype: DType) -> DType:
    """The value type of a reference type (float32_ref -> float32); others unchanged."""
    return _BY_ENUM.get(dtype.enum - _REF_OFFSET, dtype) if dtype.enum > _REF_OFFSET else dtype


def all_dtypes() -> list[DType]:
    return list(_BY_ENUM.values())
