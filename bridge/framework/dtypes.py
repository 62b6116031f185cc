"""TensorFlow data types, with their numpy counterparts where numpy has one."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np


class DType:
    """One TF_DataType. Compare with ``==`` against another DType, a numpy
    dtype, or a name such as ``"float32"``."""

    __slots__ = ("enum", "name", "_np", "size", "kind")

    def __init__(self, enum: int, name: str, np_dtype: Any, size: int, kind: str = "other"):
        self.enum = enum
        self.name = name
        self._np = np_dtype
        self.size = size
        self.kind = kind  # _TABLE's kind (is_floating, ...); "ref" for TF1's reference types

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
    def proto_name(self) -> str:
        """TensorFlow's ``DataType`` enumerator (types.proto, C++ ``tensorflow::DT_*``): DT_DOUBLE, DT_COMPLEX128."""
        base = base_dtype(self)
        name = "DT_" + _PROTO_NAMES.get(base.name, base.name.upper())
        return name + "_REF" if base is not self else name

    @property
    def is_floating(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_integer(self) -> bool:
        return self.kind == "int"

    @property
    def is_differentiable(self) -> bool:
        """Whether gradients flow through values of this type."""
        return self.kind in ("float", "complex", "handle")

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


# kind: "float", "complex" and "handle" (resource, variant) are differentiable;
# "int" (signed and unsigned), "bool", "string", "quantized" and "narrow" (the
# float8, float4, int4 and int2 types: no is_floating or is_integer) are not.
_TABLE = [
    # enum, name, numpy, element size in a dense buffer (0: not memcpy-able), kind
    (1, "float32", np.float32, 4, "float"), (2, "float64", np.float64, 8, "float"),
    (3, "int32", np.int32, 4, "int"), (4, "uint8", np.uint8, 1, "int"), (5, "int16", np.int16, 2, "int"),
    (6, "int8", np.int8, 1, "int"), (7, "string", np.object_, 0, "string"),
    (8, "complex64", np.complex64, 8, "complex"),
    (9, "int64", np.int64, 8, "int"), (10, "bool", np.bool_, 1, "bool"), (11, "qint8", None, 1, "quantized"),
    (12, "quint8", None, 1, "quantized"), (13, "qint32", None, 4, "quantized"),
    (14, "bfloat16", "bfloat16", 2, "float"), (15, "qint16", None, 2, "quantized"),
    (16, "quint16", None, 2, "quantized"), (17, "uint16", np.uint16, 2, "int"),
    (18, "complex128", np.complex128, 16, "complex"), (19, "float16", np.float16, 2, "float"),
    (20, "resource", None, 0, "handle"), (21, "variant", None, 0, "handle"), (22, "uint32", np.uint32, 4, "int"),
    (23, "uint64", np.uint64, 8, "int"), (24, "float8_e5m2", "float8_e5m2", 1, "narrow"),
    (25, "float8_e4m3fn", "float8_e4m3fn", 1, "narrow"), (26, "float8_e4m3fnuz", "float8_e4m3fnuz", 1, "narrow"),
    (27, "float8_e4m3b11fnuz", "float8_e4m3b11fnuz", 1, "narrow"),
    (28, "float8_e5m2fnuz", "float8_e5m2fnuz", 1, "narrow"),
    (29, "int4", "int4", 1, "narrow"), (30, "uint4", "uint4", 1, "narrow"), (31, "int2", "int2", 1, "narrow"),
    (32, "uint2", "uint2", 1, "narrow"), (33, "float4_e2m1fn", "float4_e2m1fn", 1, "narrow"),
]
# TensorFlow's DataType enumerators that are not DT_<NAME>.
_PROTO_NAMES = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "HALF"}

_BY_ENUM: dict[int, DType] = {}
_BY_NAME: dict[str, DType] = {}
for _enum, _name, _np_type, _size, _kind in _TABLE:
    _dt = DType(_enum, _name, np.dtype(_np_type) if _np_type is not None and not isinstance(_np_type, str) else _np_type,
                _size, _kind)
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
        # kind "ref": no is_floating etc., as before kinds were a column
        ref = _REFS[base.enum] = DType(base.enum + _REF_OFFSET, base.name + "_ref", base._np, base.size, "ref")
    return ref


def base_dtype(dtype: DType) -> DType:
    """The value type of a reference type (float32_ref -> float32); others unchanged."""
    return _BY_ENUM.get(dtype.enum - _REF_OFFSET, dtype) if dtype.enum > _REF_OFFSET else dtype


def all_dtypes() -> list[DType]:
    return list(_BY_ENUM.values())
