"""custom_op.txt parsing: ADCME's examples, the extensions, and every error."""
from __future__ import annotations

import pytest

from bridge.customop.model import Arg, Attr, Expr
from bridge.customop.spec import (SpecError, dim_bindings, evaluate, grad_inputs, grad_outputs,
                                  has_gradient, is_dynamic, op_types, parse, parse_expr, parse_file,
                                  render_expr, snake_case)
from support.build import spec_error

SINKHORN = """\
SinkhornKnopp
double m(?,?)
int64 iter()
double p(?,?) -> output
double l() -> output
"""

ZERO_OUT_ROW = """\
ZeroOutRow
int64 indices(?,2)
double vv(?)
int64 bd(?)
int64 oindices(?,2) -> output
double ovv(?) -> output
"""

TWO_LAYER = """\
TwoLayer
double x(n)
double w1(h,n)
double b1(h)
double w2(m,h)
double b2(m)
double y(m*n) -> output
"""


# ------------------------------------------------------------------ ADCME's examples

def test_sinkhorn_knopp():
    spec = parse(SINKHORN)
    assert spec.name == "SinkhornKnopp"
    assert spec.inputs == (Arg("m", "double", (None, None), 2), Arg("iter", "int64", (), 3))
    assert spec.outputs == (Arg("p", "double", (None, None), 4), Arg("l", "double", (), 5))
    assert spec.attrs == ()
    assert (spec.forward, spec.backward) == ("sinkhorn_knopp", "sinkhorn_knopp_grad")
    assert spec.source == SINKHORN
    # p's size is only known to Julia; l is a scalar the kernel allocates.
    assert [is_dynamic(spec, o) for o in spec.outputs] == [True, False]
    assert [a.name for a in grad_inputs(spec)] == ["m"]
    assert [a.name for a in grad_outputs(spec)] == ["p", "l"]


def test_zero_out_row():
    spec = parse(ZERO_OUT_ROW)
    assert [(a.name, a.dtype.spec, a.shape) for a in spec.inputs] == [
        ("indices", "int64", (None, 2)), ("vv", "double", (None,)), ("bd", "int64", (None,))]
    assert [(a.name, a.dtype.spec, a.shape) for a in spec.outputs] == [
        ("oindices", "int64", (None, 2)), ("ovv", "double", (None,))]
    assert all(is_dynamic(spec, o) for o in spec.outputs)
    assert [a.name for a in grad_inputs(spec)] == ["vv"]
    assert [a.name for a in grad_outputs(spec)] == ["ovv"]


def test_two_layer_named_dims_and_arithmetic():
    spec = parse(TWO_LAYER)
    assert [a.shape for a in spec.inputs] == [("n",), ("h", "n"), ("h",), ("m", "h"), ("m",)]
    (y,) = spec.outputs
    assert y.shape == (Expr("m*n", ("m", "n")),)
    assert not is_dynamic(spec, y)
    bindings = dim_bindings(spec)
    assert list(bindings) == ["n", "h", "m"]
    assert (bindings["n"].arg, bindings["n"].axis) == ("x", 0)
    assert (bindings["h"].arg, bindings["h"].axis) == ("w1", 0)
    assert (bindings["m"].arg, bindings["m"].axis) == ("w2", 0)
    assert has_gradient(spec)


# ------------------------------------------------------------------ format details

def test_comments_blank_lines_spaces_and_aliases():
    spec = parse("""
        # leading comment

        MyOp   # the name
        float64 a(?, ?)     # ADCME drops this line; we accept the spaces
        float32 b( 3 , ? ,4 )
        int c()
        bool d(2, 2, 2, 2)
        string e(?)

        double out( ? ) ->   output
        """, "ops/custom_op.txt")
    assert spec.path == "ops/custom_op.txt"
    assert [(a.name, a.dtype.spec, a.shape) for a in spec.inputs] == [
        ("a", "double", (None, None)), ("b", "float", (3, None, 4)), ("c", "int32", ()),
        ("d", "bool", (2, 2, 2, 2)), ("e", "string", (None,))]
    assert spec.outputs[0].shape == (None,)
    assert [a.line for a in spec.inputs] == [5, 6, 7, 8, 9]


def test_inputs_and_outputs_may_interleave():
    spec = parse("Op\ndouble y(?) -> output\ndouble x(?)\ndouble z() -> output\n")
    assert [a.name for a in spec.inputs] == ["x"]
    assert [a.name for a in spec.outputs] == ["y", "z"]


def test_attrs_and_function_names():
    spec = parse("""\
Scale
double x(n)
double y(n) -> output
@attr double alpha = 0.5
@attr float beta = -1e-3
@attr int k = 3
@attr int64 big
@attr bool flag = true
@attr string mode = "fast # not a comment"   # a comment
@forward scale!
@backward scale_back
""")
    assert spec.attrs == (
        Attr("alpha", "double", 0.5, 4), Attr("beta", "float", -1e-3, 5), Attr("k", "int64", 3, 6),
        Attr("big", "int64", None, 7), Attr("flag", "bool", True, 8),
        Attr("mode", "string", "fast # not a comment", 9))
    assert (spec.forward, spec.backward) == ("scale!", "scale_back")


def test_functions_inside_modules():
    spec = parse("Op\ndouble x()\ndouble y() -> output\n@forward MyModule.op!\n")
    assert (spec.forward, spec.backward) == ("MyModule.op!", "MyModule.op_grad!")
    spec = parse("Op\ndouble x()\ndouble y() -> output\n@forward A.B.f\n@backward C.g\n")
    assert (spec.forward, spec.backward) == ("A.B.f", "C.g")


def test_the_spec_keeps_the_op_name_line():
    assert parse("# comment\n\nOp\ndouble y() -> output\n").line == 3


def test_default_backward_of_a_bang_function():
    spec = parse("Op\ndouble x()\ndouble y() -> output\n@forward op!\n")
    assert spec.backward == "op_grad!"


def test_int_attr_sizes_dims():
    spec = parse("Fill\n@attr int64 k = 2\ndouble v()\ndouble y(k, 3) -> output\n")
    assert not is_dynamic(spec, spec.outputs[0])
    assert dim_bindings(spec)["k"].attr == "k"


def test_dynamic_outputs():
    spec = parse("""\
Op
double x(n)
double a(n) -> output
double b(n+1) -> output
double c(?) -> output
double d(k) -> output
double e(n*k) -> output
double f(3, 2) -> output
""")
    assert [is_dynamic(spec, o) for o in spec.outputs] == [False, False, True, True, True, False]


def test_expressions_in_inputs_use_bound_names():
    spec = parse("Op\ndouble x(n, n+1)\ndouble y(2*n) -> output\n")
    assert spec.inputs[0].shape == ("n", Expr("n+1", ("n",)))


def test_constant_arithmetic_folds():
    spec = parse("Op\ndouble x(2*3, (4))\ndouble y(7//2) -> output\n")
    assert spec.inputs[0].shape == (6, 4)
    assert spec.outputs[0].shape == (3,)


@pytest.mark.parametrize("text, normal, env, value", [
    ("n", "n", {"n": 4}, 4),
    ("m * n", "m*n", {"m": 2, "n": 3}, 6),
    ("(m + 1) // 2", "(m+1)//2", {"m": 4}, 2),
    ("n - (m - 1)", "n-(m-1)", {"n": 5, "m": 3}, 3),
    ("a - b - c", "a-b-c", {"a": 9, "b": 2, "c": 3}, 4),
    ("((n))*n", "n*n", {"n": 3}, 9),
    ("(n - 5) // 3", "(n-5)//3", {"n": 3}, -1),  # floors, as Python does
])
def test_expressions(text, normal, env, value):
    node = parse_expr(text)
    assert render_expr(node) == normal
    assert evaluate(node, env) == value
    assert evaluate(parse_expr(render_expr(node)), env) == value


def test_expressions_render_as_cxx():
    assert render_expr(parse_expr("(m+1)//2*n"), cxx=True) == "FloorDiv(m + 1, 2) * n"


@pytest.mark.parametrize("name, snake", [
    ("TwoLayer", "two_layer"), ("SinkhornKnopp", "sinkhorn_knopp"), ("ZeroOutRow", "zero_out_row"),
    ("Conv2D", "conv2d"), ("AddV2", "add_v2"), ("HSVToRGB", "hsv_to_rgb"), ("Op", "op"),
])
def test_snake_case(name, snake):
    assert snake_case(name) == snake


def test_parse_file(tmp_path):
    path = tmp_path / "custom_op.txt"
    path.write_text(SINKHORN)
    spec = parse_file(path)
    assert spec.path == str(path)
    with pytest.raises(SpecError, match=r"custom_op.txt:1: spec file not found"):
        parse_file(tmp_path / "missing" / "custom_op.txt")


# ------------------------------------------------------------------ errors

ERRORS = [
    # (spec text, line, message fragment)
    ("", 1, "empty spec: expected the op name in CamelCase"),
    ("# only a comment\n\n", 1, "empty spec"),
    ("double x(?)\ndouble y(?) -> output\n", 1, "missing op name: expected the op name in CamelCase"),
    ("@attr int64 k\nOp\n", 1, "missing op name"),
    ("twoLayer\ndouble x(?)\ndouble y(?) -> output\n", 1, "op name 'twoLayer' is not CamelCase"),
    ("Two_Layer\ndouble y(?) -> output\n", 1, "is not CamelCase"),
    ("Op\ndouble x(?)\n", 2, "op Op has no output: mark at least one argument with '-> output'"),
    ("Op\ndoubel x(?)\ndouble y() -> output\n", 2, "unknown type 'doubel' (did you mean 'double'?)"),
    ("Op\ncomplex x(?)\ndouble y() -> output\n", 2,
     "expected one of double, float, int32, int64, bool, string"),
    ("Op\ndouble X(?)\ndouble y() -> output\n", 2, "argument name 'X' must be lower-case"),
    ("Op\ndouble 1x(?)\ndouble y() -> output\n", 2, "bad argument name '1x'"),
    ("Op\ndouble x-y(?)\ndouble y() -> output\n", 2, "bad argument name 'x-y'"),
    ("Op\ndouble end(?)\ndouble y() -> output\n", 2, "argument name 'end' is reserved"),
    ("Op\ndouble ctx(?)\ndouble y() -> output\n", 2, "argument name 'ctx' is reserved"),
    ("Op\ndouble x(?)\ndouble x() -> output\n", 3, "duplicate name 'x' (first defined on line 2)"),
    ("Op\ndouble x(?)\ndouble y() -> output\n@attr int64 x\n", 4, "duplicate name 'x'"),
    ("Op\ndouble x\ndouble y() -> output\n", 2, "argument 'x' has no shape"),
    ("Op\ndouble\ndouble y() -> output\n", 2, "expected 'TYPE NAME(SHAPE)'"),
    ("Op\ndouble x(?,?\ndouble y() -> output\n", 2, "shape of 'x' is missing its closing ')'"),
    ("Op\ndouble x(?,)\ndouble y() -> output\n", 2, "shape of 'x' has an empty dimension 1"),
    ("Op\ndouble x(?) output\ndouble y() -> output\n", 2, "unexpected 'output' after the shape of 'x'"),
    ("Op\ndouble x(?) -> outptu\ndouble y() -> output\n", 2, "expected nothing (an input) or '-> output'"),
    ("Op\ndouble x(n)\ndouble y(n^2) -> output\n", 3, "dimension 0 of 'y', 'n^2': unknown syntax at '^'"),
    ("Op\ndouble x(n)\ndouble y(n/2) -> output\n", 3, "use // for integer division"),
    ("Op\ndouble x(n)\ndouble y(n**2) -> output\n", 3, "unexpected '*'"),
    ("Op\ndouble x(n)\ndouble y(-n) -> output\n", 3, "unexpected '-'"),
    ("Op\ndouble x(n)\ndouble y(n//0) -> output\n", 3, "division by zero"),
    ("Op\ndouble x(n)\ndouble y((n+1) -> output\n", 3, "missing its closing ')'"),
    ("Op\ndouble x(N)\ndouble y() -> output\n", 2, "dimension name 'N' must be lower-case"),
    ("Op\ndouble x(2-5)\ndouble y() -> output\n", 2, "is negative (-3)"),
    ("Op\ndouble x(n)\ndouble y(x) -> output\n", 3, "dimension name 'x' in the shape of 'y' is also an argument name"),
    ("Op\ndouble x(frame)\ndouble y() -> output\n", 2, "dimension name 'frame' is reserved"),
    ("Op\ndouble x(n+1)\ndouble y() -> output\n", 2,
     "dimension 'n+1' of input 'x' uses 'n', which no input binds"),
    ("Op\ndouble x(k)\ndouble y() -> output\n@attr double k\n", 2,
     "names the double attribute on line 4; only int64 attributes can size a dimension"),
    ("Op\ndouble y(k) -> output\n@attr int64 k = -1\n", 3, "its default must be >= 0, not -1"),
    ("Op\ndouble x()\ndouble y() -> output\n@attrs int64 k\n", 4,
     "unknown directive '@attrs': expected @attr, @forward, @backward, @gradient or @language"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr k\n", 4, "expected '@attr TYPE NAME'"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr int32x k\n", 4, "unknown attribute type 'int32x'"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr double K\n", 4, "attribute name 'K' must be lower-case"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr double a = fast\n", 4,
     "default of double attribute 'a' is 'fast': expected a number"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr int64 a = 1.5\n", 4, "expected an integer"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr int64 a = 99999999999999999999\n", 4,
     "fits in 64 bits"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr bool a = True\n", 4, "expected true or false"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr string a = fast\n", 4, "a double-quoted string"),
    ("Op\ndouble x()\ndouble y() -> output\n@attr string a = \"a\\\"b\"\n", 4, "a double-quoted string"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward\n", 4, "@forward expects one Julia function name"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward a b\n", 4, "got 'a b'"),
    ("Op\ndouble x()\ndouble y() -> output\n@backward f-g\n", 4, "@backward expects one Julia function name"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward f\n@forward g\n", 5, "@forward given twice (first on line 4)"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward end.f\n", 4,
     "@forward end.f: 'end' is not a valid Julia module name (a Julia keyword): choose another name"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward M.in.f\n", 4,
     "'in' is not a valid Julia module name (an infix operator: 'module in' does not parse)"),
    ("Op\ndouble x()\ndouble y() -> output\n@backward M.ccall\n", 4,
     "'ccall' is not a valid Julia function name (Julia keeps it for its ccall(...) special form)"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward M.__\n", 4, "'__' is not a valid Julia function name (only"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward M.\n", 4, "@forward expects one Julia function name"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward M..f\n", 4, "@forward expects one Julia function name"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward M!.f\n", 4, "@forward expects one Julia function name"),
    ("Op\ndouble x()\ndouble y() -> output\n@forward .f\n", 4, "@forward expects one Julia function name"),
    ("Op\ndouble x()\ndouble grad_x() -> output\n", 3, "clashes with the gradient op OpGrad"),
]


@pytest.mark.parametrize("text, line, fragment", ERRORS)
def test_errors(text, line, fragment):
    spec_error(text, line, fragment)


def test_spec_error_is_a_value_error():
    assert issubclass(SpecError, ValueError)


@pytest.mark.parametrize("text, line, fragment", [
    ("Op\ndouble x(n)\ndouble y(n) -> output\ndouble y_shape() -> output\n", 4,
     "name 'y_shape' clashes with the name the generated kernel gives output 'y'"),
    ("Op\ndouble x(n)\ndouble y(n+1) -> output\ndouble y_0() -> output\n", 4,
     "gives dimension 0 of 'y'"),
    ("Op\ndouble x(alpha_)\ndouble y() -> output\n@attr double alpha\n", 2, "gives attribute 'alpha'"),
])
def test_names_clashing_with_generated_ones(text, line, fragment):
    with pytest.raises(SpecError, match=rf"^custom_op.txt:{line}: .*{fragment}"):
        parse(text)


# ------------------------------------------------------------------ @gradient forwarddiff (issue 37)

def test_gradient_forwarddiff_replaces_the_backward_function_and_adds_a_second_gradient_op():
    spec = parse("Op\ndouble x(n)\nint32 k()\ndouble y(n) -> output\n@gradient forwarddiff\n")
    assert (spec.gradient, spec.gradient_line) == ("forwarddiff", 5)
    assert spec.backward == "TFBridge.ForwardDiffGradients.OpGrad"
    assert op_types(spec) == ("Op", "OpGrad", "OpGradGrad")
    assert op_types(parse("Op\ndouble x(n)\ndouble y(n) -> output\n")) == ("Op", "OpGrad")


@pytest.mark.parametrize("text, line, message", [
    ("Op\ndouble x()\ndouble y() -> output\n@gradient reverse\n", 4,
     "@gradient expects forwarddiff (the gradient op then differentiates the forward function with ForwardDiff), "
     "got 'reverse'"),
    ("Op\ndouble x()\ndouble y() -> output\n@gradient forwarddiff\n@gradient forwarddiff\n", 5,
     "@gradient given twice (first on line 4)"),
    ("Op\ndouble x()\ndouble y() -> output\n@backward g\n@gradient forwarddiff\n", 5,
     "@gradient contradicts @backward on line 4: @backward names a backward function you write, @gradient "
     "forwarddiff has the bridge differentiate the forward function instead; keep one of them"),
    ("Op\ndouble x()\ndouble y() -> output\n@gradient forwarddiff\n@backward g\n", 5,
     "@backward contradicts @gradient on line 4: @backward names a backward function you write, @gradient "
     "forwarddiff has the bridge differentiate the forward function instead; keep one of them"),
    ("Op\nint32 k()\ndouble y() -> output\n@gradient forwarddiff\n", 4,
     "@gradient forwarddiff: op Op has no gradient (it needs a differentiable (float or complex) input and output)"),
    ("Op\ndouble x()\ndouble grad2_x() -> output\n@gradient forwarddiff\n", 3,
     "argument name 'grad2_x' clashes with OpGrad's gradient op OpGradGrad, which names its arguments grad_<name>, "
     "grad_grad_<name> and grad2_<name>: rename it"),
])
def test_gradient_forwarddiff_errors_name_the_line(text, line, message):
    with pytest.raises(SpecError) as info:
        parse(text)
    assert str(info.value) == f"custom_op.txt:{line}: {message}"


def test_a_fortran_op_cannot_take_gradient_forwarddiff():
    from bridge.customop import fortran
    spec = parse("Op\ndouble x(n)\ndouble y(n) -> output\n@language fortran\n@gradient forwarddiff\n")
    with pytest.raises(SpecError) as info:
        fortran.check_spec(spec)
    assert str(info.value) == ("custom_op.txt:5: @gradient forwarddiff differentiates a Julia forward function with "
                               "dual numbers, which Fortran subroutines cannot take: write the backward subroutine "
                               "(@backward) instead")
