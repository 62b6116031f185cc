"""Operation attributes: Python values -> TF_SetAttr* calls, and AttrValue
protos -> Python values.

Generated op functions pass each attribute with its OpDef type ("int",
"list(type)", "shape", ...); a hand-built op may leave the type out and have
it inferred from the Python value.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _proto as pb
from . import dtypes
from ._lib import ffi, lib
from .errors import check, status


class Shape(tuple):
    """A tensor shape: a tuple of ints, None for an unknown dimension.
    ``Shape.unknown()`` is a shape of unknown rank."""

    unknown_rank = False

    @classmethod
    def unknown(cls) -> "Shape":
        s = cls(())
        s.unknown_rank = True
        return s

    def __repr__(self) -> str:
        return "Shape(<unknown rank>)" if self.unknown_rank else f"Shape({list(self)})"


def as_shape(value: Any) -> Shape:
    if isinstance(value, Shape):
        return value
    if value is None:
        return Shape.unknown()
    return Shape(None if d is None or d < 0 else int(d) for d in value)


def infer_attr_type(value: Any) -> str:
    """The OpDef type of an attribute value given without one."""
    if isinstance(value, dtypes.DType):
        return "type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, Shape):
        return "shape"
    from .tensor import Tensor
    if isinstance(value, (Tensor, np.ndarray)):
        return "tensor"
    if isinstance(value, (list, tuple)):
        if not value:
            return "list(int)"
        return f"list({infer_attr_type(value[0])})"
    raise TypeError(f"cannot infer an attribute type for {value!r}; pass its OpDef type")


def _shape_dims(value: Any):
    shape = as_shape(value)
    if shape.unknown_rank:
        return ffi.NULL, -1
    return ffi.new("int64_t[]", [-1 if d is None else d for d in shape]), len(shape)


def set_attr(desc, name: str, attr_type: str, value: Any) -> None:
    """Set attribute ``name`` of an operation description."""
    n = name.encode()
    if attr_type.startswith("list(") and not isinstance(value, (list, tuple)):
        raise TypeError(f"attribute '{name}' is a {attr_type} and needs a list, got {value!r}")
    if attr_type == "int":
        lib.TF_SetAttrInt(desc, n, _int(name, value))
    elif attr_type == "float":
        lib.TF_SetAttrFloat(desc, n, float(value))
    elif attr_type == "bool":
        lib.TF_SetAttrBool(desc, n, bool(value))
    elif attr_type == "type":
        lib.TF_SetAttrType(desc, n, dtypes.as_dtype(value).enum)
    elif attr_type == "string":
        b = value.encode() if isinstance(value, str) else bytes(value)
        lib.TF_SetAttrString(desc, n, b, len(b))
    elif attr_type == "shape":
        dims, rank = _shape_dims(value)
        lib.TF_SetAttrShape(desc, n, dims, rank)
    elif attr_type == "tensor":
        from .tensor import as_tensor
        s = status()
        lib.TF_SetAttrTensor(desc, n, as_tensor(value)._ptr, s.ptr)
        check(s, f"attribute '{name}'")
    elif attr_type == "func":
        fname = getattr(value, "name", value)
        b = fname.encode() if isinstance(fname, str) else bytes(fname)
        lib.TF_SetAttrFuncName(desc, n, b, len(b))
    elif attr_type == "list(int)":
        lib.TF_SetAttrIntList(desc, n, ffi.new("int64_t[]", [_int(name, v) for v in value]), len(value))
    elif attr_type == "list(float)":
        lib.TF_SetAttrFloatList(desc, n, ffi.new("float[]", [float(v) for v in value]), len(value))
    elif attr_type == "list(bool)":
        lib.TF_SetAttrBoolList(desc, n, ffi.new("unsigned char[]", [bool(v) for v in value]), len(value))
    elif attr_type == "list(type)":
        lib.TF_SetAttrTypeList(desc, n, ffi.new("TF_DataType[]", [dtypes.as_dtype(v).enum for v in value]),
                               len(value))
    elif attr_type == "list(string)":
        items = [v.encode() if isinstance(v, str) else bytes(v) for v in value]
        bufs = [ffi.new("char[]", b) for b in items]
        lib.TF_SetAttrStringList(desc, n, ffi.new("void*[]", bufs), ffi.new("size_t[]", [len(b) for b in items]),
                                 len(items))
    elif attr_type == "list(shape)":
        shapes = [_shape_dims(v) for v in value]
        lib.TF_SetAttrShapeList(desc, n, ffi.new("int64_t*[]", [d for d, _ in shapes]),
                                ffi.new("int[]", [r for _, r in shapes]), len(shapes))
    elif attr_type == "list(tensor)":
        from .tensor import as_tensor
        tensors = [as_tensor(v) for v in value]
        s = status()
        lib.TF_SetAttrTensorList(desc, n, ffi.new("TF_Tensor*[]", [t._ptr for t in tensors]), len(tensors), s.ptr)
        check(s, f"attribute '{name}'")
    elif attr_type == "list(func)":
        raw = b"".join(pb.field_bytes(9, pb.field_bytes(1, getattr(v, "name", v))) for v in value)
        proto = pb.field_bytes(1, raw)
        s = status()
        lib.TF_SetAttrValueProto(desc, n, proto, len(proto), s.ptr)
        check(s, f"attribute '{name}'")
    else:
        raise TypeError(f"attribute '{name}' has unsupported type '{attr_type}'")


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"attribute '{name}' needs an int, got {value!r}")
    return int(value)


# --- decoding AttrValue protos (tensorflow/core/framework/attr_value.proto) ---

def _decode_shape(buf) -> Shape:
    f = pb.fields(bytes(buf))
    if f.get(3, [0])[0]:
        return Shape.unknown()
    dims = []
    for d in f.get(2, []):
        size = pb.as_signed(pb.fields(bytes(d)).get(1, [0])[0])
        dims.append(None if size < 0 else size)
    return Shape(dims)


def _decode_tensor(buf):
    from .tensor import Tensor
    b = ffi.new("TF_Buffer*")
    data = bytes(buf)
    keep = ffi.new("char[]", data)
    b.data, b.length = keep, len(data)
    # A float32 scalar to be overwritten: TF_AllocateTensor returns NULL for 0 bytes.
    t = Tensor._adopt(lib.TF_AllocateTensor(1, ffi.NULL, 0, 4))
    s = status()
    lib.TF_TensorFromProto(b, t._ptr, s.ptr)
    check(s, "tensor attribute")
    return t


def decode_attr_value(buf) -> Any:
    """Python value of a serialized AttrValue."""
    f = pb.fields(bytes(buf))
    if 2 in f:
        return bytes(f[2][0])
    if 3 in f:
        return pb.as_signed(f[3][0])
    if 4 in f:
        return pb.as_float(f[4][0])
    if 5 in f:
        return bool(f[5][0])
    if 6 in f:
        return dtypes.as_dtype(f[6][0])
    if 7 in f:
        return _decode_shape(f[7][0])
    if 8 in f:
        return _decode_tensor(f[8][0])
    if 10 in f:
        return pb.text(pb.fields(bytes(f[10][0]))[1][0])
    if 9 in f:
        return pb.text(f[9][0])
    if 1 in f:
        lst = pb.fields(bytes(f[1][0]))
        if 2 in lst:
            return [bytes(v) for v in lst[2]]
        if 3 in lst:
            return [pb.as_signed(v) for x in lst[3] for v in pb.packed_varints(x)]
        if 4 in lst:
            vals = []
            for x in lst[4]:
                raw = x.to_bytes(4, "little") if isinstance(x, int) else bytes(x)
                vals.extend(np.frombuffer(raw, "<f4").tolist())
            return vals
        if 5 in lst:
            return [bool(v) for x in lst[5] for v in pb.packed_varints(x)]
        if 6 in lst:
            return [dtypes.as_dtype(v) for x in lst[6] for v in pb.packed_varints(x)]
        if 7 in lst:
            return [_decode_shape(v) for v in lst[7]]
        if 8 in lst:
            return [_decode_tensor(v) for v in lst[8]]
        if 9 in lst:
            return [pb.text(pb.fields(bytes(v))[1][0]) for v in lst[9]]
        return []
    return None
