"""The protobuf field numbers bridge/framework/proto_fields.py names are
TensorFlow's, and the modules that read and write those messages name them
rather than write numbers.

The TensorFlow wheel ships no ``.proto`` files, but protoc copies each
field's declaration into the ``.pb.h`` header it ships, as a comment inside
the message's class (``  // repeated .tensorflow.OpDef.ArgDef input_arg =
2;``), the class ending at ``// @@protoc_insertion_point(class_scope:
tensorflow.OpDef)``: those declarations are read here with a small regex.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Optional

from bridge.framework import proto_fields
from support import REPO

_CLASS = re.compile(r"^class (?:\w+ )*\w+ final\s*:")
_FIELD = re.compile(r"^  // (?:repeated |optional )?(?:map<[^>]*>|[\w.]+) (\w+) = (\d+)(?: \[[^\]]*\])?;$")
_SCOPE = re.compile(r"// @@protoc_insertion_point\(class_scope:tensorflow\.([\w.]+)\)")

#: The modules that read or write these messages with bridge.framework._proto.
NAMING_MODULES = ("bridge/framework/function_def_to_graph.py", "bridge/framework/opdef.py",
                  "bridge/framework/placement.py", "bridge/saved_model/objects.py")


def _include() -> Path:
    """The wheel's include/tensorflow folder (found without importing tensorflow)."""
    spec = importlib.util.find_spec("tensorflow")
    assert spec is not None and spec.submodule_search_locations, "the tensorflow wheel is not installed"
    return Path(list(spec.submodule_search_locations)[0]) / "include" / "tensorflow"


def declared_fields(header: str) -> dict[str, dict[str, int]]:
    """Message (``OpDef.ArgDef``) -> its fields by name -> number, from a .pb.h's text."""
    out: dict[str, dict[str, int]] = {}
    fields: dict[str, int] = {}
    for line in header.splitlines():
        if _CLASS.match(line):
            fields = {}
        elif (field := _FIELD.match(line)) is not None:
            fields[field[1]] = int(field[2])
        elif (scope := _SCOPE.search(line)) is not None:
            out[scope[1]] = fields
            fields = {}
    return out


def named_fields(holder: object, proto: Optional[str] = None, prefix: str = "") -> dict[str, tuple[str, dict]]:
    """Message -> (its .proto file, {field: number}) for every message class in ``holder``."""
    out: dict[str, tuple[str, dict]] = {}
    for name, value in vars(holder).items():
        if not inspect.isclass(value) or value.__module__ != getattr(holder, "__module__", holder.__name__):
            continue
        file = value.__dict__.get("PROTO", proto)
        if file is None:
            continue  # MapEntry: protobuf's rule, in no .proto file
        numbers = {k: v for k, v in vars(value).items() if isinstance(v, int) and not k.startswith("_")}
        out[prefix + name] = (file, numbers)
        out.update(named_fields(value, file, prefix + name + "."))
    return out


def mismatches(named: dict[str, tuple[str, dict]]) -> list[tuple[str, str, int, Optional[int]]]:
    """(message, field, the number named, TF's number or None) for every named number that is not TF's."""
    headers: dict[str, dict[str, dict[str, int]]] = {}
    out = []
    for message, (proto, numbers) in sorted(named.items()):
        if proto not in headers:
            headers[proto] = declared_fields((_include() / proto).with_suffix(".pb.h").read_text())
        declared = headers[proto].get(message)
        assert declared is not None, f"{proto} declares no message tensorflow.{message}"
        for field, number in sorted(numbers.items()):
            if declared.get(field) != number:
                out.append((message, field, number, declared.get(field)))
    return out


def test_the_headers_give_every_field_with_its_number() -> None:
    op_def = declared_fields((_include() / "core/framework/op_def.pb.h").read_text())
    assert op_def["OpDef.ArgDef"] == {"name": 1, "description": 2, "type": 3, "type_attr": 4, "number_attr": 5,
                                      "type_list_attr": 6, "handle_data": 7, "is_ref": 16,
                                      "experimental_full_type": 17}
    assert op_def["OpList"] == {"op": 1}
    attr_value = declared_fields((_include() / "core/framework/attr_value.pb.h").read_text())
    assert attr_value["AttrValue.ListValue"] == {"s": 2, "i": 3, "f": 4, "b": 5, "type": 6, "shape": 7,
                                                 "tensor": 8, "func": 9}   # i, f, b, type are [packed = true]
    function = declared_fields((_include() / "core/framework/function.pb.h").read_text())
    assert function["FunctionDef"]["arg_attr"] == 7   # a map<uint32, FunctionDef.ArgAttrs>


def test_every_named_field_number_is_tensorflows() -> None:
    named = named_fields(proto_fields)
    assert {"OpDef", "OpDef.ArgDef", "FunctionDef.ArgAttrs", "TrackableObjectGraph.TrackableObject.ObjectReference",
            "MetaGraphDef", "SavedObjectGraph"} <= set(named)
    assert sum(len(numbers) for _, numbers in named.values()) >= 60
    assert mismatches(named) == []


def test_a_wrong_or_misnamed_number_is_found() -> None:
    class OpDef:
        PROTO = "core/framework/op_def.proto"
        input_arg = 3          # TF's is 2
        inputs = 2             # no such field

        class ArgDef:
            is_ref = 16
    OpDef.__module__ = __name__

    class Holder:
        pass
    Holder.__module__ = __name__
    Holder.OpDef = OpDef
    assert mismatches(named_fields(Holder)) == [("OpDef", "input_arg", 3, 2), ("OpDef", "inputs", 2, None)]


def _inline_numbers(source: str, label: str) -> list[str]:
    """Field numbers written as literals: ``field_bytes(2, ...)``, ``f.get(7, ...)``, ``2 in f``, ``f[1][0]``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        literal = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("field_bytes", "field_varint", "field_float", "get"):
            literal = node.args[0]
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            literal = node.left
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript):
            literal = node.value.slice
        if isinstance(literal, ast.Constant) and type(literal.value) is int:
            found.append((node.lineno, f"{label}:{node.lineno}: {ast.unparse(node)}"))
    return [line for _, line in sorted(found)]


def test_the_modules_reading_these_messages_name_their_fields() -> None:
    assert [line for module in NAMING_MODULES for line in _inline_numbers((REPO / module).read_text(), module)] == []


def test_the_inline_number_check_finds_numbers() -> None:
    sample = "f.get(7, [])\npb.field_bytes(1, b'')\nif 2 in e:\n    pass\nx = kv[1][0]\nok = parts[0]\n"
    assert _inline_numbers(sample, "sample.py") == [
        "sample.py:1: f.get(7, [])", "sample.py:2: pb.field_bytes(1, b'')", "sample.py:3: 2 in e",
        "sample.py:5: kv[1][0]"]
