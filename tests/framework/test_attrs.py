"""The attribute-kind table (bridge.framework.attrs.ATTR_KINDS): it covers every
attribute type in TensorFlow's op registry, and the setter (Graph.create_op)
and the op builder (the generated bridge.ops functions) agree on every kind,
on values and on errors."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import bridge
from bridge import dtypes
from bridge.framework import opdef
from bridge.framework.attrs import (ATTR_KINDS, Shape, attr_kind, convert_attr, decode_attr_value,
                                    infer_attr_type)
from bridge.ops.op_helpers import OpBuilder

ALL_TYPES = [k.name for k in ATTR_KINDS] + [f"list({k.name})" for k in ATTR_KINDS]

# One value per attribute type, in the spellings a caller may use.
VALUES: dict[str, Any] = {
    "int": np.int64(3), "float": 0.5, "bool": True, "string": "abc", "type": "float64",
    "shape": [None, 3], "tensor": np.arange(3, dtype=np.int32), "func": "some_function",
    "list(int)": (1, np.int32(2)), "list(float)": [0.5, 2], "list(bool)": [True, False],
    "list(string)": ["a", b"b"], "list(type)": [dtypes.int32, "float32"],
    "list(shape)": [[1], None, Shape.unknown()], "list(tensor)": [np.float32(1), np.arange(2)],
    "list(func)": ["f1", "f2"],
}

# Values of the wrong kind, and the error both paths raise (the builder's
# names the op first).
BAD_VALUES: list[tuple[str, Any, type, str]] = [
    ("int", 2.5, TypeError, "attribute '_x' needs an int, got 2.5"),
    ("int", True, TypeError, "attribute '_x' needs an int, got True"),
    ("float", "abc", TypeError, "attribute '_x' needs a float, got 'abc'"),
    ("string", 5, TypeError, "attribute '_x' needs a string, got 5"),
    ("type", "no-such-type", TypeError, "attribute '_x': "),
    ("shape", 5, TypeError, "attribute '_x' needs a shape, got 5"),
    ("func", 5, TypeError, "attribute '_x' needs a function or its name, got 5"),
    ("list(int)", 1, TypeError, "attribute '_x' (list(int)) needs a list, got 1"),
    ("list(string)", "ab", TypeError, "attribute '_x' (list(string)) needs a list, got 'ab'"),
    ("list(int)", [1, 2.5], TypeError, "attribute '_x' needs an int, got 2.5"),
    ("list(type)", ["float32", "nope"], TypeError, "attribute '_x': "),
    ("list(list(int))", [[1]], TypeError, "attribute '_x' has unsupported type 'list(list(int))'"),
]


def _plain(value: Any) -> Any:
    """get_attr results made comparable (Tensors by dtype and contents)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bridge.Tensor):
        return (value.dtype, value.numpy().tolist())
    if isinstance(value, Shape):
        return ("unknown",) if value.unknown_rank else tuple(value)
    return value


@pytest.fixture(scope="module")
def registry_attr_types() -> set[str]:
    return {a.type for op in opdef.registry_op_defs() for a in op.attrs}


def test_table_covers_every_registry_attr_type(registry_attr_types: set[str]) -> None:
    assert registry_attr_types  # the registry was read
    assert registry_attr_types <= set(ALL_TYPES), registry_attr_types - set(ALL_TYPES)
    assert set(VALUES) == set(ALL_TYPES)  # and the tests below try every kind
    for attr_type in ALL_TYPES:
        kind, is_list = attr_kind(attr_type)
        assert attr_type == (f"list({kind.name})" if is_list else kind.name)


def test_table_fields_are_distinct() -> None:
    # decode_attr_value finds the kind by field: two kinds on one field would shadow each other.
    assert len({k.field for k in ATTR_KINDS}) == len(ATTR_KINDS)
    assert len({k.list_field for k in ATTR_KINDS}) == len(ATTR_KINDS)


@pytest.mark.parametrize("attr_type", ALL_TYPES)
def test_setter_and_builder_agree(attr_type: str) -> None:
    """The same value set through Graph.create_op and through OpBuilder (as
    a private "_x" attribute, which TensorFlow accepts on any op) reads back
    the same, and as convert_attr says."""
    value = VALUES[attr_type]
    g = bridge.Graph()
    with g.as_default():
        by_setter = g.create_op("NoOp", attrs={"_x": value}, attr_types={"_x": attr_type})
        b = OpBuilder("NoOp", None)
        b.attr("_x", value, attr_type)
        by_builder = b.finish()
    got = _plain(by_setter.get_attr("_x"))
    assert got == _plain(by_builder.get_attr("_x"))
    expected = convert_attr("_x", attr_type, value)
    if "func" in attr_type:  # converted to bytes, read back as the function's name
        expected = [v.decode() for v in expected] if isinstance(expected, list) else expected.decode()
    assert got == _plain(expected)


@pytest.mark.parametrize("attr_type, value, exc_type, message", BAD_VALUES)
def test_setter_and_builder_reject_alike(attr_type: str, value: Any, exc_type: type, message: str) -> None:
    g = bridge.Graph()
    with g.as_default():
        with pytest.raises(exc_type) as by_setter:
            g.create_op("NoOp", attrs={"_x": value}, attr_types={"_x": attr_type})
        with pytest.raises(exc_type) as by_builder:
            OpBuilder("NoOp", None).attr("_x", value, attr_type)
    assert str(by_setter.value).startswith(message)
    assert str(by_builder.value) == f"NoOp: {by_setter.value}"


def test_builder_checks_allowed_values_and_minimums() -> None:
    b = OpBuilder("Op", None)
    with pytest.raises(ValueError, match="^Op: attribute 'n' must be at least 2, got 1$"):
        b.attr("n", 1, "int", minimum=2)
    with pytest.raises(ValueError, match=r"^Op: attribute 'l' needs at least 2 entries, got 1$"):
        b.attr("l", [1], "list(int)", minimum=2)
    with pytest.raises(TypeError, match="^Op: attribute 't' must be one of int32, int64; got float32$"):
        b.attr("t", "float32", "type", allowed=("int32", "int64"))
    with pytest.raises(TypeError, match="^Op: attribute 't' must be one of int32; got float32$"):
        b.attr("t", ["int32", "float32"], "list(type)", allowed=("int32",))
    with pytest.raises(ValueError, match="^Op: attribute 's' must be one of 'A', 'B', got 'C'$"):
        b.attr("s", "C", "string", allowed=("A", "B"))
    with pytest.raises(TypeError, match=r"^Op: attribute 'i' \(int\) needs a value, got None$"):
        b.attr("i", None, "int")
    b.attr("shape", None, "shape")  # None is the unknown shape
    b.attr("s", b"B", "string", allowed=("A", "B"))
    assert b._attrs == {"shape": Shape.unknown(), "s": b"B"} and b._attrs["shape"].unknown_rank


def test_infer_attr_type() -> None:
    cases = [(dtypes.float32, "type"), (True, "bool"), (3, "int"), (np.int8(3), "int"), (1.5, "float"),
             (np.float32(1), "float"), ("s", "string"), (b"s", "string"), (Shape([1]), "shape"),
             (np.zeros(2), "tensor"), (bridge.Tensor(np.zeros(1)), "tensor"), ((), "list(int)"),
             ((dtypes.int32,), "list(type)"), ([1.0, 2.0], "list(float)"), ([Shape([1])], "list(shape)")]
    for value, expected in cases:
        assert infer_attr_type(value) == expected, value
    with pytest.raises(TypeError, match="cannot infer an attribute type"):
        infer_attr_type(object())


def test_decode_attr_value_of_placeholder_and_empty() -> None:
    from bridge.framework import _proto as pb
    assert decode_attr_value(pb.field_bytes(9, "T")) == "T"  # a function body's "$T" reference
    assert decode_attr_value(pb.field_bytes(1, b"")) == []
    assert decode_attr_value(b"") is None


# --- real ops: the generated function and Graph.create_op ------------------------------

def _real_cases(ops) -> list[tuple]:
    """(built by the generated function, op type, inputs, attrs for create_op)."""
    x = bridge.constant(np.ones((1, 2, 2, 1), np.float32), name="x")
    w = bridge.constant(np.ones((1, 1, 1, 1), np.float32), name="w")
    m = bridge.constant(np.ones((2, 2), np.float32), name="m")
    v = bridge.constant(np.array([0.1, 1.7], np.float32), name="v")
    f32 = dtypes.float32
    return [
        (ops.placeholder(dtype="float64", shape=[None, 3]).op, "Placeholder", [],
         {"dtype": "float64", "shape": [None, 3]}),
        (ops.const(value=np.arange(4, dtype=np.int64), dtype=dtypes.int64).op, "Const", [],
         {"value": np.arange(4, dtype=np.int64), "dtype": dtypes.int64}),
        (ops.mat_mul(m, m, transpose_a=True).op, "MatMul", [m, m], {"T": f32, "transpose_a": True}),
        (ops.leaky_relu(m, alpha=0.3).op, "LeakyRelu", [m], {"T": f32, "alpha": 0.3}),
        (ops.conv2d(x, w, strides=[1, 2, 2, 1], padding=b"VALID").op, "Conv2D", [x, w],
         {"T": f32, "strides": [1, 2, 2, 1], "padding": b"VALID"}),
        (ops.bucketize(v, boundaries=[0.5, 1.5]).op, "Bucketize", [v], {"T": f32, "boundaries": [0.5, 1.5]}),
        (ops.split(0, m, num_split=np.int32(2))[0].op, "Split", [bridge.constant(0, name="d"), m],
         {"T": f32, "num_split": 2}),
        (ops.fifo_queue_v2(component_types=[f32, "int32"], shapes=[[2], []], capacity=5, shared_name="q").op,
         "FIFOQueueV2", [], {"component_types": [f32, "int32"], "shapes": [[2], []], "capacity": 5,
                             "shared_name": "q"}),
        (ops.var_handle_op(dtype=f32, shape=[2], container="c", shared_name="w",
                           allowed_devices=["/job:localhost/replica:0/task:0/device:CPU:0"]).op,
         "VarHandleOp", [], {"dtype": f32, "shape": [2], "container": "c", "shared_name": "w",
                             "allowed_devices": ["/job:localhost/replica:0/task:0/device:CPU:0"]}),
        (ops.partitioned_call([m], Tout=[f32], f="some_function")[0].op, "PartitionedCall", [[m]],
         {"Tin": [f32], "Tout": [f32], "f": "some_function"}),
    ]


def test_generated_functions_and_create_op_agree(registry_attr_types: set[str]) -> None:
    from bridge import ops
    g = bridge.Graph()
    covered: set[str] = set()
    with g.as_default():
        for built, op_type, inputs, attrs in _real_cases(ops):
            types = {a.name: a.type for a in opdef.op_def(op_type).attrs}
            by_setter = g.create_op(op_type, inputs, attrs=attrs, attr_types=types)
            for name in attrs:
                assert _plain(built.get_attr(name)) == _plain(by_setter.get_attr(name)), (op_type, name)
                covered.add(types[name])
    # Every kind but list(func) (only XlaCallModule has one) on a real op.
    assert registry_attr_types - covered == {"list(func)"}


def test_every_kind_has_its_literal_in_the_table():
    """The generated ops' defaults come from ATTR_KINDS' literal column: each
    literal evaluates back to the value (tensors and functions have none)."""
    import math as _math
    from bridge.framework import attrs as attrs_module
    from bridge.framework.attrs import Shape, python_literal
    samples = {"type": bridge.float64, "bool": True, "int": -3, "float": 0.1, "string": b'a"b',
               "shape": Shape((2, None))}
    for kind in attrs_module.ATTR_KINDS:
        if kind.name not in samples:
            assert python_literal(object(), kind.name) is None, kind.name
            continue
        value = samples[kind.name]
        for attr_type, v in ((kind.name, value), (f"list({kind.name})", [value, value])):
            text = python_literal(v, attr_type)
            back = eval(text, {"_dt": bridge.dtypes, "float": float})
            if kind.name == "string":
                back = tuple(b.encode() for b in back) if isinstance(back, tuple) else back.encode()
            if kind.name == "float":
                assert _math.isclose(back if not isinstance(back, tuple) else back[0], 0.1, rel_tol=1e-7)
            elif kind.name == "shape":
                assert tuple(back if not isinstance(back[0], tuple) else back[0]) == (2, None)
            else:
                assert back == (v if not isinstance(v, list) else tuple(v)), (attr_type, text)
    assert python_literal(float("nan"), "float") == 'float("nan")'
    assert python_literal(Shape.unknown(), "shape") == "None"
    assert python_literal(["f"], "list(func)") == '("f",)'
