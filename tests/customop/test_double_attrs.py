"""`@attr double` arrives bit-equal to the Python float (issue 36 item 4).

TensorFlow's float attributes hold 32 bits: `r = 0.23` reached the Julia or
Fortran function as 0.23000000417232513.  A double attribute now travels as
TF's float attribute and an int attribute with its bits
(bridge/framework/double_attrs.py); the ops here return the attributes they
received as their output (forward) and as their gradient (backward), and the
bits are compared, for values whose float32 rounding differs from them:
0.23, 1e-300, 1/3, -0.0, infinities, 1e300, subnormals, NaN payloads.
Through the op's Python function, its gradient, a GraphDef round trip and a
SavedModel; graphs saved before the bits existed (only the float attribute)
run as they did.
"""
from __future__ import annotations

import inspect
import math
import struct

import numpy as np
import pytest

import bridge
from bridge import customop
from bridge.customop import fortran
from bridge.framework import double_attrs
from support.build import op_folder

SPEC = """{name}
double x(2)
double y(2) -> output
@attr double r = 0.23
@attr double s
"""

JULIA = """
attr_bits(y, x, r, s) = (y[1] = r; y[2] = s; nothing)
attr_bits_grad(grad_x, grad_y, y, x, r, s) = (grad_x[1] = r; grad_x[2] = s; nothing)
"""


def _bits(*patterns: int) -> list[float]:
    return [double_attrs.from_bits(p) for p in patterns]


#: Values whose float32 rounding is another number (or another NaN), each kind the issue names.
VALUES = [0.23, 1e-300, 1 / 3, -0.0, 0.0, math.inf, -math.inf, 1e300, -1e300, 5e-324, 1e-40, -2.5e-45,
          3.4028235677973366e38, 0.1, math.pi, 2.0 ** -149 * 1.5, 1.0 + 2.0 ** -52,
          *_bits(0x7FF8000000000000, 0x7FF8000000000123, 0xFFF80000000ABCDE, 0x7FFFFFFFFFFFFFFF)]


def _random_values(n: int, seed: int) -> list[float]:
    """Random bit patterns, signalling NaNs made quiet (a move may quiet them)."""
    rng = np.random.default_rng(seed)
    out = []
    for bits in rng.integers(0, 2 ** 64, n, dtype=np.uint64):
        bits = int(bits)
        if (bits >> 52) & 0x7FF == 0x7FF and bits & ((1 << 52) - 1):
            bits |= 1 << 51
        out.append(double_attrs.from_bits(bits))
    return out


ALL = VALUES + _random_values(40, 36)


def _as_bits(values) -> list[int]:
    return [double_attrs.to_bits(float(v)) for v in values]


@pytest.fixture(scope="module")
def julia_op(tmp_path_factory):
    folder = op_folder(tmp_path_factory.mktemp("doubleattrs"), "AttrBits", SPEC.format(name="AttrBits"), JULIA)
    return folder, customop.load(folder)


@pytest.fixture(scope="module")
def fortran_op(tmp_path_factory):
    folder = tmp_path_factory.mktemp("doubleattrs_f") / "AttrBitsF"
    folder.mkdir()
    text = SPEC.format(name="AttrBitsF") + "@language fortran\n"
    (folder / "custom_op.txt").write_text(text)
    (folder / "attr_bits_f.f90").write_text(fortran.stub(
        customop.parse(text), ["y(1) = r", "y(2) = s"], ["grad_x(1) = r", "grad_x(2) = s"]))
    return folder, customop.load(folder)


@pytest.fixture(params=["julia", "fortran"])
def op(request):
    folder, module = request.getfixturevalue(f"{request.param}_op")
    return folder, module, getattr(module, "attr_bits" if request.param == "julia" else "attr_bits_f")


def _graph(fn, pairs):
    """One op per (r, s) pair, and each op's own gradient (the gradient op
    gets the attributes from the forward op)."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        ys = [fn(x, r=r, s=s) for r, s in pairs]
        grads = [bridge.gradients(y, x)[0] for y in ys]
    return g, x, ys, grads


def _received(sess, x, ys, grads) -> tuple[list, list]:
    got_y, got_g = sess.run([ys, grads], {x: np.ones(2)})
    return [np.asarray(v).view(np.int64).tolist() for v in got_y], [np.asarray(v).view(np.int64).tolist() for v in got_g]


def test_double_attributes_arrive_bit_equal_in_the_function_and_its_gradient(op):
    _, _, fn = op
    pairs = list(zip(ALL, ALL[1:] + ALL[:1], strict=True))
    g, x, ys, grads = _graph(fn, pairs)
    expected = [_as_bits(p) for p in pairs]
    with bridge.Session(g) as sess:
        got_y, got_g = _received(sess, x, ys, grads)
    assert got_y == expected
    assert got_g == expected


def test_a_graphdef_round_trip_keeps_them_exact(op):
    _, _, fn = op
    pairs = list(zip(ALL, reversed(ALL), strict=True))
    g, x, ys, grads = _graph(fn, pairs)
    g2 = bridge.Graph()
    g2.import_graph_def(g.as_graph_def())
    with bridge.Session(g2) as sess:
        got_y, got_g = _received(sess, g2.get_tensor_by_name("x:0"),
                                 [g2.get_tensor_by_name(y.name) for y in ys],
                                 [g2.get_tensor_by_name(t.name) for t in grads])
    assert got_y == [_as_bits(p) for p in pairs] and got_g == got_y


def test_the_python_function_takes_a_float_with_the_specs_default(op):
    folder, module, fn = op
    params = inspect.signature(fn).parameters
    assert list(params) == ["x", "s", "r", "name"]
    assert params["r"].default == 0.23 and params["s"].default is inspect.Parameter.empty
    with pytest.raises(TypeError):
        fn(np.ones(2))   # s has no default
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        y_default = fn(x, s=np.float64(1e-300))
        y_int = fn(x, r=3, s=-7)
        with pytest.raises(TypeError, match="attribute 'r' needs a float"):
            fn(x, r=[0.5], s=1.0)
    with bridge.Session(g) as sess:
        got = sess.run([y_default, y_int], {x: np.ones(2)})
    assert [v.view(np.int64).tolist() for v in got] == [_as_bits([0.23, 1e-300]), _as_bits([3.0, -7.0])]
    op_ = y_default.op
    assert (op_.get_attr("r"), op_.get_attr("r_f64bits")) == (float(np.float32(0.23)), double_attrs.to_bits(0.23))


def test_graphs_that_set_only_the_float_attribute_run_as_they_did(op):
    """A node with the float attribute alone: written by the bridge's
    versions before the bits (or by TF's own wrapper of the library, or
    edited by hand).  TensorFlow fills in the bits attribute's default; bits
    that do not round to the float leave the float as it is, and the spec's
    default, kept as a float, still comes out exact."""
    _, module, fn = op
    op_type = module.OP_TYPES[fn.__name__]
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")

        def old(**attrs):
            return g.create_op(op_type, [x], attrs, attr_types={k: "float" for k in attrs}).outputs[0]
        nodes = [old(r=0.7, s=0.5), old(r=float(np.float32(0.23)), s=1e-300), old(s=math.nan)]
        edited = g.create_op(op_type, [x], {"r": 0.5, "r_f64bits": double_attrs.to_bits(0.7), "s": 2.0,
                                            "s_f64bits": double_attrs.to_bits(2.0)},
                             attr_types={"r": "float", "r_f64bits": "int", "s": "float", "s_f64bits": "int"}).outputs[0]
    g2 = bridge.Graph()
    g2.import_graph_def(g.as_graph_def())
    with bridge.Session(g2) as sess:
        got = sess.run([g2.get_tensor_by_name(t.name) for t in nodes + [edited]], {g2.get_tensor_by_name("x:0"): np.ones(2)})
    widened = [float(np.float32(0.7)), 0.5]
    assert [v.view(np.int64).tolist() for v in got] == [
        _as_bits(widened), _as_bits([0.23, 0.0]), _as_bits([0.23, math.nan]), _as_bits([0.5, 2.0])]


def test_a_saved_model_keeps_them_exact(op, tmp_path):
    folder, _, fn = op
    g, x, ys, grads = _graph(fn, [(0.23, 1e-300), (-0.0, VALUES[18])])
    with bridge.Session(g) as sess:
        bridge.saved_model.save(sess, tmp_path / "model", {"serving_default": ({"x": x}, {"y0": ys[0], "y1": ys[1]})})
    model = bridge.load_saved_model(tmp_path / "model", op_libraries=[folder])
    out = model.signatures["serving_default"](x=np.ones(2))
    assert [np.asarray(out[k]).view(np.int64).tolist() for k in ("y0", "y1")] == [
        _as_bits([0.23, 1e-300]), _as_bits([-0.0, VALUES[18]])]


def test_the_rounding_on_the_bits_is_numpys_cast():
    """double_attrs.float32_bits, which the kernel's Float32Bits mirrors,
    against numpy's float64 -> float32 cast (NaNs aside: both are NaN)."""
    rng = np.random.default_rng(7)
    patterns = rng.integers(-2 ** 63, 2 ** 63 - 1, 200_000, dtype=np.int64)
    near = rng.integers(1023 - 160, 1023 + 130, 200_000, dtype=np.int64) << 52 | rng.integers(0, 2 ** 52, 200_000)
    ties = (near >> 29 << 29) | (1 << 28)
    doubles = np.concatenate([patterns, near, -near, ties]).view(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = doubles.astype(np.float32).view(np.uint32)
    got = np.array([double_attrs.float32_bits(int(b)) for b in doubles.view(np.int64)], np.uint32)
    nan = np.isnan(doubles)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all((got[nan] & 0x7FFFFFFF) == 0x7FC00000)
    for v in VALUES:
        f, bits = double_attrs.encode(v)
        assert struct.pack("<d", double_attrs.decode(f, bits)) == struct.pack("<d", v)
        with np.errstate(over="ignore"):
            assert f == float(np.float32(v)) or (math.isnan(f) and math.isnan(v))


@pytest.mark.parametrize("line, message", [
    ("@attr double r = 1e400", "default of double attribute 'r' is '1e400': expected a number a double can hold "
                                       "(a magnitude up to 1.7976931e+308)"),
    ("@attr double r\n@attr int64 r_f64bits", "name 'r_f64bits' clashes with the name the generated kernel gives "
                                               "the bits of double attribute 'r': rename it"),
])
def test_spec_errors(line, message):
    with pytest.raises(customop.SpecError) as info:
        customop.parse(f"Op\ndouble x(2)\ndouble y(2) -> output\n{line}\n")
    assert str(info.value).split(": ", 1)[1] == message


def test_a_double_default_below_float32s_range_is_allowed():
    spec = customop.parse("Op\ndouble x(2)\ndouble y(2) -> output\n@attr double r = 1e-300\n@attr float f = 0.5\n")
    assert [a.default for a in spec.attrs] == [1e-300, 0.5]
    with pytest.raises(customop.SpecError, match="expected a number TensorFlow's 32-bit float attributes can hold"):
        customop.parse("Op\ndouble x(2)\ndouble y(2) -> output\n@attr float f = 1e-300\n")


def test_the_float_attribute_is_what_stock_tensorflow_writes_for_the_same_float(op, oracle):
    """The float half of the carrier, against stock TF: for each value, TF's
    own LeakyRelu with ``alpha=v`` (a float attribute, built by the
    import_check oracle) holds the same 32 bits as the bridge's ``r`` for
    ``r=v`` (1e300 an infinity in both), so what TF's tools show of a bridge
    graph is what TF would have written; ``r_f64bits`` holds the double.
    NaNs: both NaN (TF keeps part of the payload in the 32 bits, the bridge
    float32's quiet NaN; the payload travels in the bits)."""
    _, _, fn = op
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        nodes = [fn(x, r=v, s=1.0).op for v in ALL]
    build = [{"op": "Placeholder", "id": "x", "attrs": {"dtype": np.float32, "shape": [2]}}]
    build += [{"op": "LeakyRelu", "id": f"l{i}", "inputs": ["x"], "attrs": {"alpha": v}} for i, v in enumerate(ALL)]
    answer = oracle("import_check", {"build": build})
    built, ids = {node["name"]: node for node in answer["built"]}, answer["ids"]
    tf_alpha = [built[ids[f"l{i}"]]["attrs"]["alpha"] for i in range(len(ALL))]

    def as32(f: float):
        return "nan" if math.isnan(f) else struct.pack("<f", f)
    assert [as32(n.get_attr("r")) for n in nodes] == [as32(a) for a in tf_alpha]
    assert [n.get_attr("r_f64bits") for n in nodes] == _as_bits(ALL)
