"""OpDefs: what an op takes, returns and accepts, decoded from TensorFlow's registry.

``TF_GetAllOpList`` (every registered op) and ``TF_GetOpList`` (the ops of a
loaded library) hand out a serialized ``OpList``; this module decodes it into
plain dataclasses (tensorflow/core/framework/op_def.proto) with the
``_proto`` wire-format reader, since the ``*_pb2`` modules live inside the
``tensorflow`` package and must not be imported here.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

from . import _proto as pb
from . import buffers, dtypes
from . import proto_fields as pf
from ._lib import ffi, lib
from .attrs import decode_attr_value


class _NoDefault:
    """Marks an attribute without a default value (None is a valid default)."""

    _instance: Optional["_NoDefault"] = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self):
        return _NoDefault, ()


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class ArgDef:
    """One input or output of an op.

    Its type is either fixed (``type``), the value of a type attribute
    (``type_attr``), or per element of a list (``type_list_attr``);
    ``number_attr`` makes it a list of that many tensors of one type.
    """

    name: str
    description: str = ""
    type: Optional[dtypes.DType] = None
    type_attr: str = ""
    number_attr: str = ""
    type_list_attr: str = ""
    is_ref: bool = False

    @property
    def is_list(self) -> bool:
        return bool(self.number_attr or self.type_list_attr)


@dataclass(frozen=True)
class AttrDef:
    """One attribute: its OpDef type ("int", "list(type)", ...), default and limits."""

    name: str
    type: str
    default: Any = NO_DEFAULT
    description: str = ""
    has_minimum: bool = False
    minimum: int = 0
    allowed_values: Optional[list] = None

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True)
class OpDef:
    """An op's signature as registered with TensorFlow."""

    name: str
    input_args: tuple[ArgDef, ...] = ()
    output_args: tuple[ArgDef, ...] = ()
    attrs: tuple[AttrDef, ...] = ()
    summary: str = ""
    description: str = ""
    is_stateful: bool = False
    is_commutative: bool = False
    is_aggregate: bool = False
    allows_uninitialized_input: bool = False
    control_outputs: tuple[str, ...] = ()
    deprecation_version: int = 0
    deprecation_explanation: str = ""
    attr_by_name: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        self.attr_by_name.update((a.name, a) for a in self.attrs)

    def attr(self, name: str) -> AttrDef:
        return self.attr_by_name[name]

    @property
    def inferred_attrs(self) -> set[str]:
        """Attributes whose value follows from the inputs (types and list lengths)."""
        return {a for arg in self.input_args for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a}


def _text(f: dict, number: int) -> str:
    return pb.text(f[number][0]) if number in f else ""


def _flag(f: dict, number: int) -> bool:
    return bool(f[number][0]) if number in f else False


def _decode_arg(buf) -> ArgDef:
    F = pf.OpDef.ArgDef
    f = pb.fields(bytes(buf))
    type_enum = f.get(F.type, [0])[0]
    return ArgDef(
        name=_text(f, F.name), description=_text(f, F.description),
        type=dtypes.as_dtype(type_enum) if type_enum else None,
        type_attr=_text(f, F.type_attr), number_attr=_text(f, F.number_attr),
        type_list_attr=_text(f, F.type_list_attr), is_ref=_flag(f, F.is_ref))


def _decode_attr(buf) -> AttrDef:
    F = pf.OpDef.AttrDef
    f = pb.fields(bytes(buf))
    allowed = None
    if F.allowed_values in f:
        value = decode_attr_value(f[F.allowed_values][0])
        allowed = list(value) if isinstance(value, list) else [value]
    return AttrDef(
        name=_text(f, F.name), type=_text(f, F.type),
        default=decode_attr_value(f[F.default_value][0]) if F.default_value in f else NO_DEFAULT,
        description=_text(f, F.description), has_minimum=_flag(f, F.has_minimum),
        minimum=pb.as_signed(f[F.minimum][0]) if F.minimum in f else 0,
        allowed_values=allowed)


def decode_op_def(buf) -> OpDef:
    """Decode one serialized OpDef."""
    F = pf.OpDef
    f = pb.fields(bytes(buf))
    version, explanation = 0, ""
    if F.deprecation in f:
        dep = pb.fields(bytes(f[F.deprecation][0]))
        version, explanation = dep.get(pf.OpDeprecation.version, [0])[0], _text(dep, pf.OpDeprecation.explanation)
    return OpDef(
        name=_text(f, F.name),
        input_args=tuple(_decode_arg(b) for b in f.get(F.input_arg, [])),
        output_args=tuple(_decode_arg(b) for b in f.get(F.output_arg, [])),
        attrs=tuple(_decode_attr(b) for b in f.get(F.attr, [])),
        summary=_text(f, F.summary), description=_text(f, F.description),
        is_aggregate=_flag(f, F.is_aggregate), is_stateful=_flag(f, F.is_stateful),
        is_commutative=_flag(f, F.is_commutative),
        allows_uninitialized_input=_flag(f, F.allows_uninitialized_input),
        control_outputs=tuple(pb.text(b) for b in f.get(F.control_output, [])),
        deprecation_version=version, deprecation_explanation=explanation)


def decode_op_list(buf: bytes) -> list[OpDef]:
    """Decode a serialized OpList, in its order."""
    return [decode_op_def(b) for b in pb.fields(bytes(buf)).get(pf.OpList.op, [])]


def split_op_list(buf: bytes) -> list[tuple[str, bytes]]:
    """(name, serialized OpDef) for each op of an OpList, without decoding the rest."""
    out = []
    for number, _, value in pb.iter_fields(bytes(buf)):
        if number != pf.OpList.op:
            continue
        raw = bytes(value)
        name = ""
        for n, _, v in pb.iter_fields(raw):
            if n == pf.OpDef.name:
                name = pb.text(v)
                break
        out.append((name, raw))
    return out


def canonical_op_list(buf: bytes, exclude: frozenset = frozenset()) -> bytes:
    """The OpList with its ops sorted by name (TensorFlow lists them in hash
    order, which changes from run to run), leaving out the names in ``exclude``."""
    return b"".join(pb.field_bytes(pf.OpList.op, raw) for name, raw in sorted(split_op_list(buf))
                    if name not in exclude)


def registry_op_list_bytes() -> bytes:
    """The serialized OpList of every op registered in this process."""
    buf = lib.TF_GetAllOpList()
    try:
        return buffers.read(buf)
    finally:
        lib.TF_DeleteBuffer(buf)


def registry_op_defs() -> list[OpDef]:
    """Every op registered in this process (built-in and loaded libraries)."""
    return decode_op_list(registry_op_list_bytes())


# --- one op type's OpDef ----------------------------------------------------------
# An op type's OpDef never changes once registered, so lookups are cached; a
# failed one is not (a library loaded later may register the type).  A graph
# also knows its functions as op types, hence one cache per graph.

_by_graph: "weakref.WeakKeyDictionary[Any, dict[str, OpDef]]" = weakref.WeakKeyDictionary()
_registered: dict[str, OpDef] = {}
_scratch_lock = threading.Lock()
_scratch_graph: Any = None  # a TF_Graph* that asks the process-wide registry alone


def _registry_graph() -> Any:
    global _scratch_graph
    with _scratch_lock:
        if _scratch_graph is None:
            _scratch_graph = ffi.gc(lib.TF_NewGraph(), lib.TF_DeleteGraph)
        return _scratch_graph


def op_def(op_type: str, graph: Any = None) -> OpDef:
    """The OpDef of ``op_type``: as ``graph`` (a :class:`bridge.Graph`) knows it,
    functions of its library included, or from TensorFlow's op registry
    (built-in ops and loaded libraries) when ``graph`` is None.

    Raises :class:`bridge.errors.NotFoundError` naming ``op_type`` when it is unknown.
    """
    cache = _registered if graph is None else _by_graph.setdefault(graph, {})
    found = cache.get(op_type)
    if found is None:
        ptr = _registry_graph() if graph is None else graph._ptr
        found = cache[op_type] = decode_op_def(buffers.filled(
            lambda buf, s: lib.TF_GraphGetOpDef(ptr, op_type.encode(), buf, s), f"looking up op {op_type}"))
    return found
