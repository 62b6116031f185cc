"""Golden files: the exact source bridge.ops.opgen writes for a few OpDefs.

Set TFBRIDGE_UPDATE_GOLDEN=1 to rewrite tests/golden/ops/* after a
deliberate change to the generator (and review the diff); refused on CI
(tests/support/golden.py).
"""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from bridge import dtypes
from bridge.framework import opdef
from bridge.ops import opgen
from bridge.framework.attrs import Shape
from bridge.framework.opdef import ArgDef, AttrDef, OpDef
from support import TESTS
from support.golden import update_requested

GOLDEN = TESTS / "golden" / "ops"
UPDATE = update_requested()

#: Registry ops pinned: polymorphic, list inputs, multi-output, no output,
#: a keyword function name with builtin-named parameters, a list output.
REGISTRY_OPS = ["Add", "ConcatV2", "AddN", "Unique", "TopKV2", "NoOp", "If", "Split"]

#: A made-up op whose names collide with keywords, builtins and the generated
#: code's own names.
CLASH = OpDef(
    name="Clash",
    input_args=(ArgDef("lambda", type_attr="T"), ArgDef("input", type=dtypes.int32),
                ArgDef("range", number_attr="N", type_attr="T")),
    output_args=(ArgDef("yield", type_attr="T"), ArgDef("class", type=dtypes.int64),
                 ArgDef("list", number_attr="N", type_attr="T")),
    attrs=(AttrDef("T", "type", allowed_values=[dtypes.float32, dtypes.float64]),
           AttrDef("N", "int", has_minimum=True, minimum=1),
           AttrDef("name", "string", description="Clashes with the op's own name parameter."),
           AttrDef("type", "type", default=dtypes.float32),
           AttrDef("min", "float", default=float("-inf")),
           AttrDef("max", "list(int)", default=[3]),
           AttrDef("input_", "bool", default=True)),
    summary="An op whose names all need renaming.",
    description='Backslashes \\ and """quotes""" survive.')

#: Two ops sharing a snake_case name, for the module template.
FOO_BAR = OpDef(name="FooBar", output_args=(ArgDef("out", type=dtypes.float32),),
                attrs=(AttrDef("shape", "shape", default=Shape.unknown()),
                       AttrDef("dims", "shape", default=Shape([2, None]))))
FOO_BAR_2 = OpDef(name="Foo_Bar", input_args=(ArgDef("x", type=dtypes.string),))


@pytest.fixture(scope="module")
def registry() -> dict[str, OpDef]:
    return {op.name: op for op in opdef.registry_op_defs()}


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}: run with TFBRIDGE_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"generated source differs from {path}"


@pytest.mark.parametrize("op_type", REGISTRY_OPS)
def test_registry_op_golden(registry, op_type: str) -> None:
    text = opgen.render_function(registry[op_type])
    ast.parse(text)
    _check_golden(f"{op_type}.py", text)


def test_bridge_ops_uses_the_same_source(registry) -> None:
    """bridge.ops holds exactly what the generator renders for these ops."""
    from bridge import ops
    by_op = {v: k for k, v in ops.OP_TYPES.items()}
    for op_type in REGISTRY_OPS:
        fn = getattr(ops, by_op[op_type])
        assert inspect.getsource(fn) == opgen.render_function(registry[op_type])


def test_clash_golden() -> None:
    text = opgen.render_function(CLASH)
    _check_golden("Clash.py", text)
    tree = ast.parse(text)
    fn = tree.body[0]
    assert fn.name == "clash"
    assert [a.arg for a in fn.args.args] == ["lambda_", "input_", "range_"]
    assert [a.arg for a in fn.args.kwonlyargs] == ["name_", "type_", "min_", "max_", "input__", "name"]


def test_module_golden() -> None:
    text = opgen.render_module([FOO_BAR_2, FOO_BAR, CLASH], title="Golden test module.", source="test OpDefs")
    _check_golden("module.py", text)
    namespace: dict = {}
    exec(compile(text, "<golden module>", "exec"), namespace)
    assert namespace["OP_TYPES"] == {"clash": "Clash", "foo_bar": "FooBar", "foo_bar_2": "Foo_Bar"}
    assert namespace["COLLISIONS"] == {"foo_bar": ["FooBar", "Foo_Bar"]}
    assert set(namespace["RENAMED"]) == {"foo_bar_2"}


def test_generated_functions_run(registry) -> None:
    """The golden functions, exec'd on their own, build working ops."""
    import numpy as np

    import bridge
    from bridge.framework.graph import Output
    from bridge.ops.op_helpers import TF_DEFAULT, OpBuilder
    namespace = {"_dt": dtypes, "_Output": Output, "_OpBuilder": OpBuilder, "_TF_DEFAULT": TF_DEFAULT}
    for op_type in ("Add", "ConcatV2", "Unique", "NoOp"):
        exec(compile((GOLDEN / f"{op_type}.py").read_text(), op_type, "exec"), namespace)
    g = bridge.Graph()
    with g.as_default():
        s = namespace["add"](np.float32(1), 2)
        c = namespace["concat_v2"]([[1, 2], [3]], 0)
        u = namespace["unique"]([4, 4, 5])
        n = namespace["no_op"]()
    assert isinstance(n, bridge.Operation) and n.type == "NoOp"
    with bridge.Session(g) as sess:
        sv, cv, uv = sess.run([s, c, u])
    assert sv == np.float32(3) and sv.dtype == np.float32
    assert cv.tolist() == [1, 2, 3]
    assert uv.y.tolist() == [4, 5] and uv.idx.tolist() == [0, 0, 1]


def test_snake_case_and_function_names() -> None:
    cases = {"MatMul": "mat_mul", "AddV2": "add_v2", "BiasAddGrad": "bias_add_grad",
             "TensorArrayV3": "tensor_array_v3", "Conv2DBackpropInput": "conv2d_backprop_input",
             "HSVToRGB": "hsv_to_rgb", "FFT2D": "fft2d", "LRN": "lrn", "_Arg": "_arg",
             "SparseSegmentSqrtNGrad": "sparse_segment_sqrt_n_grad", "TopKV2": "top_kv2",
             "Foo>BarBaz": "foo_bar_baz"}
    assert {op: opgen.snake_case(op) for op in cases} == cases
    names = opgen.function_names(["If", "FooBar", "Foo_Bar", "Abs", "Foo__Bar"])
    assert names.by_op == {"Abs": "abs", "FooBar": "foo_bar", "Foo_Bar": "foo_bar_2",
                           "Foo__Bar": "foo__bar", "If": "if_"}
    assert set(names.renamed) == {"If", "Foo_Bar"}
    assert names.collisions == {"foo_bar": ["FooBar", "Foo_Bar"]}
    # Deterministic whatever the input order.
    assert opgen.function_names(["Foo_Bar", "FooBar"]).by_op == opgen.function_names(["FooBar", "Foo_Bar"]).by_op


def test_reserved_names_cover_this_python() -> None:
    import builtins
    import keyword
    assert set(keyword.kwlist) <= opgen.KEYWORDS
    lower_builtins = {n for n in dir(builtins) if n.islower() and not n.startswith("_")}
    assert lower_builtins <= opgen.BUILTINS | {"aiter", "anext"}
    assert opgen.safe_name("input") == "input_" and opgen.safe_name("x", ["x"]) == "x_"
