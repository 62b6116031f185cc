"""bridge.framework.opdef: decoding TensorFlow's OpList into OpDef dataclasses."""
from __future__ import annotations

import numpy as np
import pytest

from bridge.framework import _proto as pb
from bridge import dtypes
from bridge.framework import opdef
from bridge.framework.opdef import NO_DEFAULT, ArgDef, AttrDef, OpDef


@pytest.fixture(scope="module")
def registry() -> dict[str, OpDef]:
    return {op.name: op for op in opdef.registry_op_defs()}


def test_registry_size_and_unique_names(registry) -> None:
    ops = opdef.registry_op_defs()
    assert len(ops) == len(registry) > 1500  # ~1,800 in TF 2.21
    assert all(op.name for op in ops)


def test_mat_mul(registry) -> None:
    op = registry["MatMul"]
    assert [a.name for a in op.input_args] == ["a", "b"]
    assert all(a.type_attr == "T" and a.type is None and not a.is_list for a in op.input_args)
    assert [a.name for a in op.output_args] == ["product"]
    t = op.attr("T")
    assert t.type == "type" and not t.has_default
    assert dtypes.float32 in t.allowed_values and dtypes.string not in t.allowed_values
    ta = op.attr("transpose_a")
    assert ta.type == "bool" and ta.default is False and ta.has_default
    assert op.inferred_attrs == {"T"}
    assert not op.is_stateful


def test_list_inputs_and_minimums(registry) -> None:
    concat = registry["ConcatV2"]
    values, axis = concat.input_args
    assert values.number_attr == "N" and values.type_attr == "T" and values.is_list
    assert axis.type_attr == "Tidx" and not axis.is_list
    n = concat.attr("N")
    assert n.type == "int" and n.has_minimum and n.minimum == 2
    tidx = concat.attr("Tidx")
    assert tidx.default == dtypes.int32 and tidx.allowed_values == [dtypes.int32, dtypes.int64]
    assert concat.inferred_attrs == {"N", "T", "Tidx"}

    grad = registry["SymbolicGradient"]
    assert grad.input_args[0].type_list_attr == "Tin"
    assert grad.output_args[0].type_list_attr == "Tout"
    assert grad.attr("f").type == "func"


def test_fixed_types_refs_and_stateful(registry) -> None:
    split = registry["Split"]
    assert split.input_args[0].type == dtypes.int32 and split.input_args[0].type_attr == ""
    assign = registry["Assign"]
    assert assign.input_args[0].is_ref and not assign.input_args[1].is_ref
    assert assign.output_args[0].is_ref
    assert assign.allows_uninitialized_input
    assert registry["VariableV2"].is_stateful
    assert registry["RandomUniform"].is_stateful
    assert registry["AddN"].is_aggregate and registry["AddN"].is_commutative


def test_decoded_defaults(registry) -> None:
    conv = registry["Conv2D"]
    assert conv.attr("padding").allowed_values == [b"SAME", b"VALID", b"EXPLICIT"]
    assert conv.attr("padding").default is NO_DEFAULT
    assert conv.attr("data_format").default == b"NHWC"
    assert conv.attr("dilations").default == [1, 1, 1, 1]
    assert conv.attr("explicit_paddings").default == []
    shape = registry["Placeholder"].attr("shape").default
    assert shape.unknown_rank
    assert registry["Unique"].attr("out_idx").default == dtypes.int32
    assert registry["LeakyRelu"].attr("alpha").default == pytest.approx(0.2)
    assert registry["DebugNumericSummary"].attr("lower_bound").default == float("-inf")
    # A tensor default (the only one in the registry).
    bad_color = registry["ImageSummary"].attr("bad_color").default
    assert bad_color.dtype == dtypes.uint8
    np.testing.assert_array_equal(bad_color.numpy(), [255, 0, 0, 255])
    # Negative minimums are signed.
    assert registry["InitializeTableFromTextFileV2"].attr("key_index").minimum == -2


def test_summaries_and_deprecations(registry) -> None:
    with_summary = [op for op in registry.values() if op.summary]
    assert len(with_summary) > 100  # the wheel has no ApiDefs: only ~170 ops carry text
    deprecated = registry["BatchMatrixSolve"]
    assert deprecated.deprecation_version > 0 and deprecated.deprecation_explanation


def _attr(name: str, type_: str, default: bytes = b"", minimum: int | None = None) -> bytes:
    out = pb.field_bytes(1, name) + pb.field_bytes(2, type_)
    if default:
        out += pb.field_bytes(3, default)
    if minimum is not None:
        out += pb.field_varint(5, 1) + pb.field_varint(6, minimum)
    return out


def test_decode_hand_written_op_def() -> None:
    """Every OpDef field the decoder reads, in a message written here."""
    arg_x = pb.field_bytes(1, "x") + pb.field_bytes(2, "the input") + pb.field_bytes(4, "T")
    arg_ref = pb.field_bytes(1, "r") + pb.field_varint(3, dtypes.int64.enum) + pb.field_varint(16, 1)
    arg_list = pb.field_bytes(1, "ys") + pb.field_bytes(5, "N") + pb.field_varint(3, dtypes.float32.enum)
    allowed_types = pb.field_bytes(1, pb.field_bytes(6, bytes([1, 2])))  # list { type: [1, 2] } packed
    attrs = [
        _attr("T", "type") + pb.field_bytes(7, allowed_types),
        _attr("N", "int", minimum=1),
        _attr("alpha", "float", default=pb.field_float(4, 0.5)),
        _attr("offset", "int", default=pb.field_varint(3, -3), minimum=-5),
        _attr("label", "string", default=pb.field_bytes(2, b"hi")),
    ]
    msg = (pb.field_bytes(1, "HandMade") + pb.field_bytes(2, arg_x) + pb.field_bytes(2, arg_ref)
           + pb.field_bytes(3, arg_list) + b"".join(pb.field_bytes(4, a) for a in attrs)
           + pb.field_bytes(5, "Does things.") + pb.field_bytes(6, "At length.")
           + pb.field_bytes(8, pb.field_varint(1, 7) + pb.field_bytes(2, "use Other"))
           + pb.field_varint(17, 1) + pb.field_bytes(20, "done"))
    op = opdef.decode_op_list(pb.field_bytes(1, msg))[0]
    assert op == OpDef(
        name="HandMade",
        input_args=(ArgDef("x", "the input", type_attr="T"), ArgDef("r", type=dtypes.int64, is_ref=True)),
        output_args=(ArgDef("ys", type=dtypes.float32, number_attr="N"),),
        attrs=(AttrDef("T", "type", allowed_values=[dtypes.float32, dtypes.float64]),
               AttrDef("N", "int", has_minimum=True, minimum=1),
               AttrDef("alpha", "float", default=0.5),
               AttrDef("offset", "int", default=-3, has_minimum=True, minimum=-5),
               AttrDef("label", "string", default=b"hi")),
        summary="Does things.", description="At length.", is_stateful=True,
        control_outputs=("done",), deprecation_version=7, deprecation_explanation="use Other")
    assert op.attr("alpha").has_default and not op.attr("T").has_default
    assert op.inferred_attrs == {"T"}  # N is used by an output only


def test_canonical_op_list_is_sorted_and_filters() -> None:
    raw = opdef.registry_op_list_bytes()
    canonical = opdef.canonical_op_list(raw)
    names = [name for name, _ in opdef.split_op_list(canonical)]
    assert names == sorted(names) and len(names) == len(opdef.split_op_list(raw))
    # Independent of TensorFlow's (hash-map) order.
    shuffled = opdef.split_op_list(raw)[::-1]
    assert opdef.canonical_op_list(b"".join(pb.field_bytes(1, r) for _, r in shuffled)) == canonical
    without = opdef.canonical_op_list(raw, exclude=frozenset({"MatMul", "AddV2"}))
    assert {"MatMul", "AddV2"}.isdisjoint(name for name, _ in opdef.split_op_list(without))
    assert len(opdef.split_op_list(without)) == len(names) - 2
