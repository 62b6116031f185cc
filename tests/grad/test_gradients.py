"""bridge.gradients against stock TensorFlow's tf.gradients (the oracle), and
the behaviour around it: the Python registry, overrides, unconnected and
integer inputs, missing gradients, name scopes, jacobian and hessian."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.grad import NotDifferentiable, RegisterGradient, gradients, hessian, jacobian
from support.oracle import run_oracle

RNG = np.random.default_rng(20261122)


def _signed(*shape):
    # Away from 0, where Abs, Relu and friends have kinks.
    x = RNG.uniform(0.15, 1.2, shape) * RNG.choice([-1.0, 1.0], shape)
    return x.astype(np.float64)


def _positive(*shape, low=0.2, high=0.9):
    return RNG.uniform(low, high, shape).astype(np.float64)


def _case(op, inputs, attrs=None, wrt=None, mode="placeholder"):
    if wrt is None:
        wrt = [i for i, v in enumerate(inputs)
               if not isinstance(v, list) and np.asarray(v).dtype.kind == "f"
               or isinstance(v, list) and np.asarray(v[0]).dtype.kind == "f"]
    return {"op": op, "inputs": inputs, "attrs": attrs or {}, "wrt": wrt, "mode": mode}


def _i32(v):
    return np.asarray(v, dtype=np.int32)


S, A = _signed(2, 3), _positive(2, 3)
CASES = [
    # unary math
    *[_case(op, [_signed(2, 3)]) for op in (
        "Abs", "Neg", "Square", "Exp", "Expm1", "Sin", "Cos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh",
        "Sigmoid", "Erf", "Erfc", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "Sign", "Floor",
        "Round", "Identity", "Softmax", "LogSoftmax", "L2Loss")],
    _case("Tan", [_signed(2, 3) * 0.5]),
    _case("LeakyRelu", [_signed(2, 3)], {"alpha": 0.3}),
    *[_case(op, [_positive(2, 3)]) for op in (
        "Sqrt", "Rsqrt", "Log", "Log1p", "Asin", "Acos", "Atanh", "Reciprocal", "Lgamma")],
    _case("Acosh", [1.0 + _positive(2, 3)]),
    # binary, with and without broadcasting
    *[_case(op, [_signed(2, 3), _signed(2, 3)]) for op in (
        "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference", "Atan2", "MulNoNan")],
    _case("AddV2", [_signed(2, 3), _signed(3)]),
    _case("Mul", [_signed(2, 3), _signed(1, 3)]),
    _case("Sub", [_signed(2, 1), _signed(3)]),
    _case("RealDiv", [_signed(2, 3), _signed(3)]),
    _case("Div", [_signed(2, 3), _signed(2, 3)]),
    _case("DivNoNan", [_signed(2, 3), _signed(2, 3)]),
    _case("Pow", [_positive(2, 3), _signed(2, 3)]),
    _case("Xlogy", [_signed(2, 3), _positive(2, 3)]),
    _case("Xdivy", [_signed(2, 3), _signed(2, 3)]),
    _case("BiasAdd", [_signed(2, 3), _signed(3)]),
    _case("AddN", [[_signed(2, 3), _signed(2, 3), _signed(2, 3)]]),
    # reductions and scans
    _case("Sum", [_signed(2, 3), _i32([1])], mode="const"),
    _case("Sum", [_signed(2, 3), _i32([0])], {"keep_dims": True}, mode="const"),
    _case("Mean", [_signed(2, 3), _i32([0])], mode="const"),
    _case("Prod", [_signed(2, 3), _i32([1])], mode="const"),
    _case("Max", [_signed(2, 3), _i32([1])], mode="const"),
    _case("Min", [_signed(2, 3), _i32([0])], mode="const"),
    _case("Cumsum", [_signed(2, 3), _i32(1)], mode="const"),
    _case("Cumsum", [_signed(2, 3), _i32(1)], {"exclusive": True, "reverse": True}, mode="const"),
    # linear algebra
    _case("MatMul", [_signed(2, 3), _signed(3, 4)]),
    _case("MatMul", [_signed(3, 2), _signed(4, 3)], {"transpose_a": True, "transpose_b": True}),
    _case("BatchMatMulV2", [_signed(2, 2, 3), _signed(2, 3, 2)]),
    _case("Transpose", [_signed(2, 3, 4), _i32([2, 0, 1])], mode="const"),
    # shape manipulation
    _case("Reshape", [_signed(2, 3), _i32([3, 2])], mode="const"),
    _case("ExpandDims", [_signed(2, 3), _i32(1)], mode="const"),
    _case("Squeeze", [_signed(2, 1, 3)], {"squeeze_dims": [1]}),
    _case("ConcatV2", [[_signed(2, 3), _signed(1, 3)], _i32(0)], mode="const"),
    _case("Pack", [[_signed(2, 3), _signed(2, 3)]], {"axis": 1}),
    _case("Unpack", [_signed(2, 3)], {"num": 2}),
    _case("Split", [_i32(1), _signed(2, 3)], {"num_split": 3}, mode="const"),
    _case("Tile", [_signed(2, 3), _i32([2, 1])], mode="const"),
    _case("Pad", [_signed(2, 3), _i32([[1, 0], [0, 2]])], mode="const"),
    _case("Slice", [_signed(3, 4), _i32([1, 1]), _i32([2, 2])], mode="const"),
    _case("StridedSlice", [_signed(4, 5), _i32([1, 0]), _i32([4, 5]), _i32([2, 2])], mode="const"),
    _case("GatherV2", [_signed(2, 4), _i32([3, 0, 3]), _i32(1)], mode="const"),
    _case("ReverseV2", [_signed(2, 3), _i32([1])], mode="const"),
    _case("BroadcastTo", [_signed(1, 3), _i32([2, 3])], mode="const"),
    _case("SelectV2", [np.array([[True, False, True], [False, True, False]]), _signed(2, 3), _signed(2, 3)]),
    _case("Fill", [_i32([2, 3]), np.float64(0.7)], mode="const"),
    _case("ClipByValue", [_signed(2, 3), np.float64(-0.5), np.float64(0.5)], wrt=[0]),
    # neural-network ops
    _case("SoftmaxCrossEntropyWithLogits", [_signed(2, 3), np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])]),
    _case("Conv2D", [_signed(1, 5, 5, 2), _signed(3, 3, 2, 3)], {"strides": [1, 1, 1, 1], "padding": "SAME"}),
    _case("MaxPool", [_signed(1, 4, 4, 2)], {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}),
    _case("AvgPool", [_signed(1, 4, 4, 2)], {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}),
    # first-derivative ops (their gradients come from the Python registry)
    _case("TanhGrad", [np.tanh(_signed(2, 3)), _signed(2, 3)]),
    _case("SigmoidGrad", [_positive(2, 3), _signed(2, 3)]),
    _case("SqrtGrad", [_positive(2, 3), _signed(2, 3)]),
    _case("RsqrtGrad", [_positive(2, 3), _signed(2, 3)]),
    _case("ReciprocalGrad", [_positive(2, 3), _signed(2, 3)]),
    _case("ReluGrad", [_signed(2, 3), _signed(2, 3)]),
    _case("SoftplusGrad", [_signed(2, 3), _signed(2, 3)]),
]

_FN = {v: k for k, v in sorted(ops.OP_TYPES.items(), key=lambda kv: len(kv[0]), reverse=True)}


@pytest.fixture(scope="module")
def expected() -> dict:
    return run_oracle("eval_gradients", CASES)


def _build(case: dict):
    """The case's op in a new graph: (graph, op outputs, wrt tensors, feed)."""
    graph = bridge.Graph()
    feed, inputs = {}, []
    with graph.as_default():
        def make(value, name):
            arr = np.asarray(value)
            if case["mode"] == "const":
                return bridge.constant(arr, arr.dtype, name=name)
            ph = bridge.placeholder(arr.dtype, arr.shape, name=name)
            feed[ph] = arr
            return ph
        for i, v in enumerate(case["inputs"]):
            inputs.append([make(a, f"in{i}_{j}") for j, a in enumerate(v)] if isinstance(v, list) else make(v, f"in{i}"))
        result = getattr(ops, _FN[case["op"]])(*inputs, **case["attrs"])
        outputs = result.outputs if isinstance(result, bridge.Operation) else \
            [result] if isinstance(result, bridge.Output) else [o for part in result for o in
                                                               (part if isinstance(part, list) else [part])]
    wrt = [inputs[i] for i in case["wrt"]]
    return graph, outputs, wrt, feed


@RegisterGradient("TestPythonIdentity")
def _python_identity(op, grad):
    return grad


def _bridge_gradients(case: dict, per_op: bool) -> list:
    graph, outputs, wrt, feed = _build(case)
    with graph.as_default():
        ys = [o for o in outputs if o.dtype.is_floating]
        if per_op:
            # A Python gradient on the way turns the single C++ call into one call per op.
            with graph.gradient_override_map({"Identity": "TestPythonIdentity"}):
                ys = [ops.identity(y) for y in ys]
        flat = [t for w in wrt for t in (w if isinstance(w, list) else [w])]
        # IndexedSlices (gathers) densified, as the oracle's tf.convert_to_tensor.
        grads = [bridge.convert_to_tensor(g) for g in gradients(ys, flat)]
        fetch = [g for g in grads if g is not None]
        values = iter(bridge.Session(graph).run(fetch, feed) if fetch else [])
    got = [None if g is None else np.asarray(next(values)) for g in grads]
    result, pos = [], 0
    for w in wrt:
        n = len(w) if isinstance(w, list) else 1
        result.append(got[pos:pos + n] if isinstance(w, list) else got[pos])
        pos += n
    return result


def _label(case):
    return f"{case['op']}{'_' + '_'.join(f'{k}' for k in case['attrs']) if case['attrs'] else ''}"


@pytest.mark.parametrize("per_op", [False, True], ids=["whole_graph", "per_op"])
@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{i}-{_label(c)}" for i, c in enumerate(CASES)])
def test_gradient_matches_tensorflow(expected: dict, index: int, per_op: bool) -> None:
    case = CASES[index]
    want = expected["results"][index]
    assert not isinstance(want, str), f"the oracle rejected {case['op']}: {want}"
    got = _bridge_gradients(case, per_op)
    for w, g in zip(want, got, strict=True):
        for wi, gi in zip(w if isinstance(w, list) else [w], g if isinstance(g, list) else [g], strict=True):
            if wi is None:
                assert gi is None or not np.any(gi), f"{case['op']}: TF has no gradient, the bridge has {gi}"
            else:
                assert gi is not None, f"{case['op']}: TF has a gradient, the bridge None"
                np.testing.assert_allclose(gi, wi, rtol=1e-9, atol=1e-12, err_msg=case["op"])


def test_at_least_sixty_differentiable_op_types_are_covered(expected: dict) -> None:
    differentiable = {case["op"] for case, r in zip(CASES, expected["results"], strict=True)
                      if not isinstance(r, str) and any(
                          v is not None for w in r for v in (w if isinstance(w, list) else [w]))}
    assert len(differentiable) >= 60, sorted(differentiable)


# --- behaviour ----------------------------------------------------------------------------

def _run(graph, fetches, feed):
    with bridge.Session(graph) as s:
        return s.run(fetches, feed)


def test_unconnected_inputs_give_none_or_zeros() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        z = bridge.placeholder("float64", [2], name="z")
        y = ops.sum(ops.sin(x), [0])
        assert gradients(y, [x, z])[1] is None
        gz = gradients(y, [x, z], unconnected_gradients="zero")[1]
        np.testing.assert_array_equal(_run(g, gz, {x: np.ones(3), z: np.ones(2)}), np.zeros(2))
        with pytest.raises(ValueError, match="unconnected_gradients"):
            gradients(y, x, unconnected_gradients="zeros")


def test_integer_inputs_get_no_gradient() -> None:
    g = bridge.Graph()
    with g.as_default():
        n = bridge.placeholder("int32", [3], name="n")
        x = bridge.placeholder("float64", [3], name="x")
        y = ops.sum(x * ops.cast(n, DstT="float64"), [0])
        gn, gx = gradients(y, [n, x])
        assert gn is None
        np.testing.assert_allclose(_run(g, gx, {n: [1, 2, 3], x: np.ones(3)}), [1, 2, 3])


def test_op_without_gradient_raises_lookup_error_naming_it() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        # IgammaGradA: an op neither TF Python nor TF's C++ registry differentiates.
        y = ops.igamma_grad_a(ops.exp(x), ops.exp(x), name="my_igamma_grad_a")
        loss = ops.sum(y, [0])
        # The second time TF's C++ registry is already known to lack it.
        for _ in range(2):
            with pytest.raises(LookupError) as info:
                gradients(loss, x)
            msg = str(info.value)
            assert "IgammaGradA" in msg and "my_igamma_grad_a" in msg
            assert "RegisterGradient('IgammaGradA')" in msg and "gradient_override_map" in msg
        # An op without gradient is fine where no gradient reaches it.
        gx, = gradients(ops.sum(ops.exp(x), [0]) + ops.stop_gradient(loss), x)
    xv = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(_run(g, gx, {x: xv}), np.exp(xv), rtol=1e-15)


def test_python_registered_gradient_is_used_and_duplicates_are_rejected() -> None:
    @RegisterGradient("TestTripleSquare")
    def _triple(op, grad):
        return grad * 3.0 * op.inputs[0]

    with pytest.raises(KeyError, match="TestTripleSquare"):
        RegisterGradient("TestTripleSquare")(_triple)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        with g.gradient_override_map({"Square": "TestTripleSquare"}):
            y = ops.square(x)
        # The override is fixed when the op is made, so it holds outside the block.
        assert y.op.get_attr("_gradient_op_type") == b"TestTripleSquare"
        gx, = gradients(y, x)
        np.testing.assert_allclose(_run(g, gx, {x: [1.0, 2.0]}), [3.0, 6.0])


def test_not_differentiable_op_gives_none() -> None:
    NotDifferentiable("TestNoGrad")
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        with g.gradient_override_map({"Sin": "TestNoGrad"}):
            y = ops.sin(x)
        gx, = gradients(ops.add_v2(y, ops.cos(x)), x)   # only cos(x) reaches x: -sin(x)
        assert gradients(y, x)[0] is None
    np.testing.assert_allclose(_run(g, gx, {x: [0.5, -1.0]}), -np.sin([0.5, -1.0]), rtol=1e-15)


def test_override_naming_nothing_registered_is_an_error() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        with g.gradient_override_map({"Sin": "NoSuchGradient"}):
            y = ops.sin(x)
        with pytest.raises(LookupError, match="NoSuchGradient"):
            gradients(y, x)


def test_inputs_that_depend_on_each_other_are_not_counted_twice() -> None:
    """x*tanh(x), x + exp(x)*x: TF's C++ builder would fold the path through
    tanh into x's gradient when asked for both inputs of Mul at once."""
    xv = np.array([0.1, 0.5, 1.0])
    th, ex = np.tanh(xv), np.exp(xv)
    want = th + xv * (1 - th ** 2) + ex * xv + ex
    for force_per_op in (False, True):
        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder("float64", [3], name="x")
            y = x * ops.tanh(x) + ops.exp(x) * x
            if force_per_op:
                with g.gradient_override_map({"Identity": "TestPythonIdentity"}):
                    y = ops.identity(y)
            loss = ops.sum(y, [0])
            before = {op.name for op in g}
            gx, = gradients(loss, x)
            np.testing.assert_allclose(_run(g, gx, {x: xv}), want, rtol=1e-12)
            # Every gradient op is under the gradients scope; the forward graph is untouched.
            new = [op.name for op in g if op.name not in before]
            assert new and all(n.startswith("gradients/") for n in new), new
    # Asking for both x and tanh(x) gives x's total derivative, as tf.gradients does.
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        t = ops.tanh(x)
        gx, gt = gradients(ops.sum(x * t, [0]), [x, t])
        vx, vt = _run(g, [gx, gt], {x: xv})
        np.testing.assert_allclose(vx, th + xv * (1 - th ** 2), rtol=1e-12)
        np.testing.assert_allclose(vt, xv, rtol=1e-12)


def test_grad_ys_and_stop_gradients() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        s = ops.square(x)
        y = s * ops.sin(x)
        gx, = gradients(y, x, grad_ys=np.array([2.0, -1.0]))
        gs, = gradients(y, x, stop_gradients=[s])
        xv = np.array([0.3, 0.8])
        vx, vs = _run(g, [gx, gs], {x: xv})
    np.testing.assert_allclose(vx, np.array([2.0, -1.0]) * (2 * xv * np.sin(xv) + xv ** 2 * np.cos(xv)))
    np.testing.assert_allclose(vs, xv ** 2 * np.cos(xv))


def test_gradients_of_several_ys_where_one_depends_on_another() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        a = ops.sin(x)
        b = ops.square(a)
        gx, = gradients([a, b], x)
        np.testing.assert_allclose(_run(g, gx, {x: 0.7}), np.cos(0.7) + 2 * np.sin(0.7) * np.cos(0.7))


def test_jacobian_and_hessian() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        w = bridge.constant(np.array([[1.0, 2.0, 0.5], [-1.0, 0.3, 2.0]]))
        y = ops.tanh(ops.mat_mul(w, ops.reshape(x, [3, 1])))  # (2, 1)
        J = jacobian(y, x)
        H = hessian(ops.sum(ops.sin(x) * ops.square(x), [0]), x)
        unconnected = jacobian(y, bridge.placeholder("float64", [2], name="other"))
        assert J.shape == bridge.Shape([2, 1, 3]) and unconnected is None
        xv = np.array([0.2, -0.4, 0.7])
        jv, hv = _run(g, [J, H], {x: xv})
    wv = np.array([[1.0, 2.0, 0.5], [-1.0, 0.3, 2.0]])
    np.testing.assert_allclose(jv[:, 0, :], (1 - np.tanh(wv @ xv) ** 2)[:, None] * wv, rtol=1e-12)
    d2 = 2 * np.sin(xv) + 4 * xv * np.cos(xv) - xv ** 2 * np.sin(xv)
    np.testing.assert_allclose(hv, np.diag(d2), rtol=1e-12, atol=1e-15)


def test_hessian_of_second_order_ops_matches_finite_differences() -> None:
    """Second derivatives run through TanhGrad, SigmoidGrad, SqrtGrad: gradients from the Python registry."""
    xv = np.array([0.3, 0.9])
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        y = ops.sum(ops.tanh(x) + ops.sigmoid(x) + ops.sqrt(x), [0])
        h = hessian(y, x)
        hv = _run(g, h, {x: xv})

    def f1(v):
        th, sg = np.tanh(v), 1 / (1 + np.exp(-v))
        return (1 - th ** 2) + sg * (1 - sg) + 0.5 / np.sqrt(v)
    eps = 1e-6
    np.testing.assert_allclose(np.diag(hv), (f1(xv + eps) - f1(xv - eps)) / (2 * eps), rtol=1e-6)


# --- mixing: random graphs with some gradients from Python --------------------------------

@RegisterGradient("TestPyTanh")
def _py_tanh(op, grad):
    y = op.outputs[0]
    return grad * (1.0 - y * y)


@RegisterGradient("TestPySin")
def _py_sin(op, grad):
    return grad * ops.cos(op.inputs[0])


@RegisterGradient("TestPyMul")
def _py_mul(op, grad):
    a, b = op.inputs
    return grad * b, grad * a


@RegisterGradient("TestPyAddV2")
def _py_add(op, grad):
    return grad, grad


_PY_OVERRIDES = {"Tanh": "TestPyTanh", "Sin": "TestPySin", "Mul": "TestPyMul", "AddV2": "TestPyAddV2"}


def _random_graph(seed: int, python_share: float):
    """A random DAG over [3]-vectors: unary and binary ops, a multi-output Unpack,
    tensors reused all over (inputs that depend on one another), and about
    ``python_share`` of the ops taking their gradient from Python."""
    rng = np.random.default_rng(seed)
    g = bridge.Graph()
    with g.as_default():
        xs = [bridge.placeholder("float64", [3], name=f"x{i}") for i in range(3)]
        pool = list(xs)
        for _ in range(24):
            kind = rng.choice(["Tanh", "Sin", "Mul", "AddV2", "Unpack"])
            pick = [pool[i] for i in rng.choice(len(pool), 2)]
            override = {kind: _PY_OVERRIDES[kind]} if kind in _PY_OVERRIDES and rng.random() < python_share else {}
            with g.gradient_override_map(override):
                if kind in ("Tanh", "Sin"):
                    pool.append(getattr(ops, kind.lower())(pick[0]))
                elif kind == "Mul":
                    pool.append(ops.mul(pick[0], pick[1]))
                elif kind == "AddV2":
                    pool.append(ops.add_v2(pick[0], pick[1]))
                else:
                    a, b = ops.unpack(ops.pack([pick[0], pick[1]]), num=2)
                    pool.extend([ops.sin(a), b])
        ends = [pool[i] for i in rng.choice(len(pool), 3, replace=False)] + [pool[-1]]
        ys = [ops.sum(t, [0]) for t in ends]
        grads = gradients(ys, xs)
    feed = {x: np.random.default_rng(seed + 1).uniform(-1, 1, 3) for x in xs}
    fetch = [g_ for g_ in grads if g_ is not None]
    values = iter(_run(g, fetch, feed) if fetch else [])
    return [None if g_ is None else next(values) for g_ in grads]


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_mixing_python_and_cpp_gradients(seed: int) -> None:
    reference = _random_graph(seed, python_share=0.0)  # one TF_AddGradients call
    for share in (0.2, 1.0):
        got = _random_graph(seed, python_share=share)
        for r, v in zip(reference, got, strict=True):
            assert (r is None) == (v is None)
            if r is not None:
                np.testing.assert_allclose(v, r, rtol=1e-11, atol=1e-13)
