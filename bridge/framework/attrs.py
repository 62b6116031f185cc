"""Operation attributes: one table of attribute kinds, used both ways.

Each OpDef attribute type ("int", "shape", ...) is an :class:`AttrKind` in
:data:`ATTR_KINDS`, and its ``list(...)`` form shares the kind's checks and
decoding.  :func:`convert_attr` is the one place a Python value is checked and
converted: :func:`set_attr` (``Graph.create_op``) and ``OpBuilder.attr`` (the
generated op functions) both call it, so the two agree on what a value means
and say the same thing when it is wrong.  Generated op functions pass each
attribute with its OpDef type; a hand-built op may leave the type out and
have it inferred from the Python value (:func:`infer_attr_type`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from . import _proto as pb
from . import dtypes
from ._lib import ffi, lib
from .errors import check, status
from .tensor import Tensor, as_tensor


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
    """A Shape from a Shape, None (unknown rank) or a sequence of sizes (None or < 0: unknown)."""
    if isinstance(value, Shape):
        return value
    if value is None:
        return Shape.unknown()
    return Shape(None if d is None or d < 0 else int(d) for d in value)


def short_repr(value: Any) -> str:
    """A value as error messages show it: ``value._short_repr()`` where it
    defines one (``bridge.Output``: its name), else its repr cut to 60 characters."""
    named = getattr(type(value), "_short_repr", None)
    if named is not None:
        return named(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class AttrKind:
    """How values of one OpDef attribute type travel between Python and
    TensorFlow.  ``list(<name>)`` uses the same ``convert`` per entry and
    ``set_list`` for the C call."""

    name: str
    #: Python types that make :func:`infer_attr_type` pick this kind (in table order).
    py_types: tuple
    #: (attribute name, value) -> the value the setters take; raises
    #: TypeError naming the attribute.  Idempotent, so a value the builder
    #: converted passes through ``set_attr`` unchanged.
    convert: Callable[[str, Any], Any]
    #: TF_SetAttr<Kind>(desc, name, converted value).
    set_one: Callable[[Any, bytes, Any], None]
    #: TF_SetAttr<Kind>List(desc, name, converted values).
    set_list: Callable[[Any, bytes, list], None]
    #: Field of the value in AttrValue, and of the list in AttrValue.ListValue.
    field: int
    list_field: int
    #: One stored field value -> Python.
    decode: Callable[[Any], Any]
    #: How list entries arrive: "varint" or "fixed32" (packed or not), "" one message each.
    packing: str = ""
    #: (attribute name, converted value, allowed values): raises if not allowed.
    check_allowed: Optional[Callable[[str, Any, tuple], None]] = None
    #: A decoded value -> Python source that makes it (the generated op
    #: functions' defaults; dtypes as ``_dt.<name>``), or None where a value
    #: has no literal (tensors and functions: TensorFlow fills those defaults in).
    literal: Callable[[Any], Optional[str]] = lambda value: None

    def decode_list(self, entries: list) -> list:
        """The Python values of a ListValue field."""
        if self.packing == "varint":
            return [self.decode(v) for x in entries for v in pb.packed_varints(x)]
        if self.packing == "fixed32":
            vals: list = []
            for x in entries:
                raw = x.to_bytes(4, "little") if isinstance(x, int) else bytes(x)
                vals.extend(np.frombuffer(raw, "<f4").tolist())
            return vals
        return [self.decode(v) for v in entries]


# --- conversions: Python value -> what the TF_SetAttr* call takes --------------

def _to_int(name: str, value: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"attribute '{name}' needs an int, got {short_repr(value)}")
    return int(value)


def _converter(target: type, convert: Callable[[Any], Any], what: str) -> Callable[[str, Any], Any]:
    """A conversion passing values of exactly ``target`` through and
    converting others with ``convert``, whose failure becomes a TypeError
    saying the attribute needs ``what``."""
    def to_target(name: str, value: Any) -> Any:
        if type(value) is target:
            return value
        try:
            return convert(value)
        except (TypeError, ValueError):
            raise TypeError(f"attribute '{name}' needs {what}, got {short_repr(value)}") from None
    return to_target


_to_float = _converter(float, float, "a float")


def _to_bool(name: str, value: Any) -> bool:
    return bool(value)


def _to_dtype(name: str, value: Any) -> dtypes.DType:
    if isinstance(value, dtypes.DType):
        return value
    try:
        return dtypes.as_dtype(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"attribute '{name}': {exc}") from None


def _to_bytes(name: str, value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    # Not bytes(value) on anything: bytes(3) is three NUL bytes, not an error.
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"attribute '{name}' needs a string, got {short_repr(value)}")


_to_shape = _converter(Shape, as_shape, "a shape")


def _to_tensor(name: str, value: Any) -> Tensor:
    try:
        return as_tensor(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"attribute '{name}': {exc}") from None


def _to_func_name(name: str, value: Any) -> bytes:
    fname = getattr(value, "name", value)  # a traced function, or its name
    if isinstance(fname, str):
        return fname.encode()
    if isinstance(fname, (bytes, bytearray)):
        return bytes(fname)
    raise TypeError(f"attribute '{name}' needs a function or its name, got {short_repr(value)}")


def _allowed_dtype(name: str, value: dtypes.DType, allowed: tuple) -> None:
    if value.name not in allowed:
        raise TypeError(f"attribute '{name}' must be one of {', '.join(allowed)}; got {value.name}")


def _allowed_string(name: str, value: bytes, allowed: tuple) -> None:
    text = value.decode(errors="replace")
    if text not in allowed:
        raise ValueError(f"attribute '{name}' must be one of {', '.join(map(repr, allowed))}, got {text!r}")


# --- setters: converted value(s) -> TF_SetAttr* ---------------------------------
# ``lib`` loads TensorFlow on first use, so the table holds functions that look
# the C calls up when called, not the C calls themselves.

def _shape_dims(shape: Shape):
    if shape.unknown_rank:
        return ffi.NULL, -1
    return ffi.new("int64_t[]", [-1 if d is None else d for d in shape]), len(shape)


def _set_string(desc, n: bytes, value: bytes) -> None:
    lib.TF_SetAttrString(desc, n, value, len(value))


def _set_strings(desc, n: bytes, values: list) -> None:
    bufs = [ffi.new("char[]", b) for b in values]
    lib.TF_SetAttrStringList(desc, n, ffi.new("void*[]", bufs), ffi.new("size_t[]", [len(b) for b in values]),
                             len(values))


def _set_shape(desc, n: bytes, value: Shape) -> None:
    dims, rank = _shape_dims(value)
    lib.TF_SetAttrShape(desc, n, dims, rank)


def _set_shapes(desc, n: bytes, values: list) -> None:
    shapes = [_shape_dims(v) for v in values]  # keeps the dims arrays alive through the call
    lib.TF_SetAttrShapeList(desc, n, ffi.new("int64_t*[]", [d for d, _ in shapes]),
                            ffi.new("int[]", [r for _, r in shapes]), len(shapes))


def _set_tensor(desc, n: bytes, value: Tensor) -> None:
    s = status()
    lib.TF_SetAttrTensor(desc, n, value._ptr, s.ptr)
    check(s, f"attribute '{n.decode()}'")


def _set_tensors(desc, n: bytes, values: list) -> None:
    s = status()
    lib.TF_SetAttrTensorList(desc, n, ffi.new("TF_Tensor*[]", [t._ptr for t in values]), len(values), s.ptr)
    check(s, f"attribute '{n.decode()}'")


def _set_func(desc, n: bytes, value: bytes) -> None:
    lib.TF_SetAttrFuncName(desc, n, value, len(value))


def _set_funcs(desc, n: bytes, values: list) -> None:
    # The C API has no TF_SetAttrFuncNameList: set the AttrValue proto
    # (list { func { name: ... } ... }) instead.
    proto = pb.field_bytes(1, b"".join(pb.field_bytes(9, pb.field_bytes(1, v)) for v in values))
    s = status()
    lib.TF_SetAttrValueProto(desc, n, proto, len(proto), s.ptr)
    check(s, f"attribute '{n.decode()}'")


# --- decoding (tensorflow/core/framework/attr_value.proto) ---------------------

def decode_shape(buf) -> Shape:
    """A serialized TensorShapeProto as a Shape (a repeated scalar field: the last value wins)."""
    f = pb.fields(bytes(buf))
    if f.get(3, [0])[-1]:
        return Shape.unknown()
    dims = []
    for d in f.get(2, []):
        size = pb.as_signed(pb.fields(bytes(d)).get(1, [0])[-1])
        dims.append(None if size < 0 else size)
    return Shape(dims)


def _decode_tensor(buf) -> Tensor:
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


def _decode_func(buf) -> str:
    return pb.text(pb.fields(bytes(buf))[1][0])  # NameAttrList.name


# --- the table ---------------------------------------------------------------------

# --- literals: a decoded value -> Python source ----------------------------------

def py_str(text: str) -> str:
    """A string literal in double quotes (what hand-written code here uses)."""
    r = repr(text)
    if r[0] == "'" and '"' not in text:
        return '"' + r[1:-1].replace("\\'", "'") + '"'
    return r


def _float_literal(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return str(np.float32(value))  # the shortest text that is the same float32


def _bytes_literal(value: bytes) -> str:
    try:
        return py_str(value.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(value)


def _shape_literal(value: Shape) -> Optional[str]:
    if value.unknown_rank:
        return "None"
    return "(" + ", ".join(repr(d) for d in value) + ("," if len(value) == 1 else "") + ")"


def python_literal(value: Any, attr_type: str) -> Optional[str]:
    """Python source for a decoded value of OpDef type ``attr_type`` ("int",
    "list(type)", ...), by its kind's ``literal``; None where there is none."""
    entry = _BY_TYPE.get(attr_type)
    if entry is None:
        return None
    if not entry.is_list:
        return entry.kind.literal(value)
    items = [entry.kind.literal(v) for v in value]
    if any(item is None for item in items):
        return None
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


#: Every attribute kind, in the order :func:`infer_attr_type` tries them
#: (bool before int: a bool is an int to isinstance).  AttrValue's other
#: field, placeholder, is no OpDef type: decode_attr_value reads it apart.
ATTR_KINDS: tuple[AttrKind, ...] = (
    # name, py_types, convert, set_one, set_list, field, list_field, decode, packing, check_allowed
    AttrKind("type", (dtypes.DType,), _to_dtype,
             lambda d, n, v: lib.TF_SetAttrType(d, n, v.enum),
             lambda d, n, vs: lib.TF_SetAttrTypeList(d, n, ffi.new("TF_DataType[]", [v.enum for v in vs]), len(vs)),
             6, 6, dtypes.as_dtype, "varint", _allowed_dtype, lambda v: f"_dt.{v.name}"),
    AttrKind("bool", (bool,), _to_bool,
             lambda d, n, v: lib.TF_SetAttrBool(d, n, v),
             lambda d, n, vs: lib.TF_SetAttrBoolList(d, n, ffi.new("unsigned char[]", vs), len(vs)),
             5, 5, bool, "varint", literal=repr),
    AttrKind("int", (int, np.integer), _to_int,
             lambda d, n, v: lib.TF_SetAttrInt(d, n, v),
             lambda d, n, vs: lib.TF_SetAttrIntList(d, n, ffi.new("int64_t[]", vs), len(vs)),
             3, 3, pb.as_signed, "varint", literal=repr),
    AttrKind("float", (float, np.floating), _to_float,
             lambda d, n, v: lib.TF_SetAttrFloat(d, n, v),
             lambda d, n, vs: lib.TF_SetAttrFloatList(d, n, ffi.new("float[]", vs), len(vs)),
             4, 4, pb.as_float, "fixed32", literal=_float_literal),
    AttrKind("string", (str, bytes), _to_bytes, _set_string, _set_strings, 2, 2, bytes,
             check_allowed=_allowed_string, literal=_bytes_literal),
    AttrKind("shape", (Shape,), _to_shape, _set_shape, _set_shapes, 7, 7, decode_shape, literal=_shape_literal),
    AttrKind("tensor", (Tensor, np.ndarray), _to_tensor, _set_tensor, _set_tensors, 8, 8, _decode_tensor),
    # Not inferred: a function is named by a str, which reads as a string.
    AttrKind("func", (), _to_func_name, _set_func, _set_funcs, 10, 9, _decode_func,
             literal=lambda v: py_str(v) if isinstance(v, str) else None),
)


class _AttrType:
    """One OpDef attribute type ("int" or "list(int)") as the table makes it:
    its kind, and the converter and setter for that form, resolved once so
    that the per-attribute path is a dict lookup and two calls."""

    __slots__ = ("kind", "is_list", "convert", "set")

    def __init__(self, kind: AttrKind, is_list: bool):
        self.kind, self.is_list = kind, is_list
        self.convert = _list_converter(kind) if is_list else kind.convert
        self.set = kind.set_list if is_list else kind.set_one


def _list_converter(kind: AttrKind) -> Callable[[str, Any], list]:
    convert, attr_type = kind.convert, f"list({kind.name})"

    def convert_list(name: str, value: Any) -> list:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(f"attribute '{name}' ({attr_type}) needs a list, got {short_repr(value)}")
        return [convert(name, v) for v in value]
    return convert_list


#: OpDef attribute type ("int", "list(int)", ...) -> its _AttrType.
_BY_TYPE: dict[str, _AttrType] = {}
for _kind in ATTR_KINDS:
    _BY_TYPE[_kind.name] = _AttrType(_kind, False)
    _BY_TYPE[f"list({_kind.name})"] = _AttrType(_kind, True)
del _kind

_PLACEHOLDER_FIELD = 9  # AttrValue.placeholder: a function attr's "$name" reference
_LIST_FIELD = 1


def attr_kind(attr_type: str) -> tuple[AttrKind, bool]:
    """(kind, is_list) of an OpDef attribute type; KeyError if there is none."""
    t = _BY_TYPE[attr_type]
    return t.kind, t.is_list


def _attr_type(name: str, attr_type: str, value: Any) -> _AttrType:
    t = _BY_TYPE.get(attr_type)
    if t is None:
        raise TypeError(f"attribute '{name}' has unsupported type '{attr_type}'")
    if value is None and attr_type != "shape":  # None is the unknown shape, and nothing else
        raise TypeError(f"attribute '{name}' ({attr_type}) needs a value, got None")
    return t


def convert_attr(name: str, attr_type: str, value: Any, allowed: Optional[tuple] = None,
                 minimum: Optional[int] = None) -> Any:
    """Check ``value`` for attribute ``name`` of OpDef type ``attr_type``
    (and the OpDef's allowed values and minimum, when given) and return it
    converted as :func:`set_attr` takes it: ints, floats, bools, DTypes,
    bytes, Shapes, Tensors, function names as bytes, or lists of these.
    Raises TypeError (ValueError for an allowed value or minimum) naming
    the attribute."""
    t = _attr_type(name, attr_type, value)
    value = t.convert(name, value)
    if minimum is not None:  # an int's value, a list's length
        got = len(value) if t.is_list else value
        if got < minimum:
            raise ValueError(f"attribute '{name}' needs at least {minimum} entries, got {got}" if t.is_list
                             else f"attribute '{name}' must be at least {minimum}, got {got}")
    check_allowed = t.kind.check_allowed
    if allowed is not None and check_allowed is not None:
        for v in value if t.is_list else (value,):
            check_allowed(name, v, allowed)
    return value


def set_attr(desc, name: str, attr_type: str, value: Any) -> None:
    """Set attribute ``name`` (OpDef type ``attr_type``) of an operation description."""
    t = _attr_type(name, attr_type, value)
    t.set(desc, name.encode(), t.convert(name, value))


def infer_attr_type(value: Any) -> str:
    """The OpDef type of an attribute value given without one."""
    for kind in ATTR_KINDS:
        if isinstance(value, kind.py_types):
            return kind.name
    if isinstance(value, (list, tuple)):
        if not value:
            return "list(int)"
        return f"list({infer_attr_type(value[0])})"
    raise TypeError(f"cannot infer an attribute type for {value!r}; pass its OpDef type")


def decode_attr_value(buf) -> Any:
    """Python value of a serialized AttrValue."""
    f = pb.fields(bytes(buf))
    for kind in ATTR_KINDS:  # the value is a oneof: at most one field is there
        if kind.field in f:
            return kind.decode(f[kind.field][0])
    if _PLACEHOLDER_FIELD in f:
        return pb.text(f[_PLACEHOLDER_FIELD][0])
    if _LIST_FIELD in f:
        lst = pb.fields(bytes(f[_LIST_FIELD][0]))
        for kind in ATTR_KINDS:
            if kind.list_field in lst:
                return kind.decode_list(lst[kind.list_field])
        return []
    return None
