"""@bridge.function: tracing into the graph's function library, calls,
captures, signatures, and gradients through calls."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.framework.functions import FuncGraph, TensorSpec, function
from bridge.grad import gradients, hessian
from bridge.framework.graph_def import graph_def_library


def _run(graph, fetches, feed=None):
    with bridge.Session(graph) as s:
        return s.run(fetches, feed or {})


def _mul(a, b):
    """Mul on the default graph (captures when it is a function body)."""
    return bridge.get_default_graph().create_op("Mul", [a, b]).output(0)


def test_function_called_three_times_is_in_the_library_once() -> None:
    @function
    def cube_plus_one(x):
        return x * x * x + 1.0

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        y1 = cube_plus_one(x)
        y2 = cube_plus_one(y1)
        y3 = cube_plus_one(x * 2.0)
        library = graph_def_library(g.as_graph_def())
        calls = [op for op in g if op.type.startswith("cube_plus_one")]
        v1, v2, v3 = _run(g, [y1, y2, y3], {x: np.array([0.5, -1.0])})
    assert len([n for n in library if n.startswith("cube_plus_one")]) == 1, library
    assert len(calls) == 3 and len({op.type for op in calls}) == 1
    assert calls[0].type in library
    xv = np.array([0.5, -1.0])
    np.testing.assert_allclose(v1, xv ** 3 + 1)
    np.testing.assert_allclose(v2, v1 ** 3 + 1)
    np.testing.assert_allclose(v3, (2 * xv) ** 3 + 1)


def test_gradients_flow_through_calls_to_any_order() -> None:
    @function
    def f(a, b):
        return ops.tanh(a) * b, a + b

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        p, q = f(x, x * x)
        loss = ops.sum(p * q, [0])
        gx, = gradients(loss, x)
        h = hessian(loss, x)
        xv = np.array([0.1, -0.5, 0.9])
        gv, hv = _run(g, [gx, h], {x: xv})

    def fn(v):
        return np.tanh(v) * v * v * (v + v * v)

    eps = 1e-5
    np.testing.assert_allclose(gv, (fn(xv + eps) - fn(xv - eps)) / (2 * eps), rtol=1e-6)
    np.testing.assert_allclose(np.diag(hv), (fn(xv + eps) - 2 * fn(xv) + fn(xv - eps)) / eps ** 2, rtol=1e-4)
    assert np.count_nonzero(hv - np.diag(np.diag(hv))) == 0
    # The gradient is itself a function in the library (built once per set of output gradients).
    assert any(n.startswith("f_grad") for n in graph_def_library(g.as_graph_def()))


def test_captured_tensors_are_inputs_of_the_call_and_get_gradients() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        w = bridge.placeholder("float64", [3], name="w")

        @function
        def scale(a):
            return _mul(a, w)  # w comes from the enclosing graph

        y = scale(x)
        call = y.op
        assert call.num_inputs == 2 and call.inputs[1] == w
        gx, gw = gradients(ops.sum(y, [0]), [x, w])
        xv, wv = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
        yv, gxv, gwv = _run(g, [y, gx, gw], {x: xv, w: wv})
    np.testing.assert_allclose(yv, xv * wv)
    np.testing.assert_allclose(gxv, wv)
    np.testing.assert_allclose(gwv, xv)


def test_bridge_ops_capture_inside_function_bodies() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        w = bridge.constant(np.array([3.0, 4.0]), name="w")

        @function
        def f(a):
            return a * w

        y = f(x)
        np.testing.assert_allclose(_run(g, y, {x: [1.0, 2.0]}), [3.0, 8.0])


def test_input_signature_gives_one_trace_for_every_shape() -> None:
    traces = []

    @function(input_signature=[TensorSpec([None], "float64")])
    def double(v):
        traces.append(v)
        return v + v

    g = bridge.Graph()
    with g.as_default():
        a = bridge.placeholder("float64", [2], name="a")
        b = bridge.placeholder("float64", [5], name="b")
        ya, yb = double(a), double(b)
        yc = double(np.array([1.0, 2.0, 3.0]))  # converted to the signature's dtype
        with pytest.raises(TypeError, match="does not match"):
            double(bridge.placeholder("int32", [2], name="n"))
        va, vb, vc = _run(g, [ya, yb, yc], {a: [1.0, 2.0], b: np.arange(5.0)})
    assert len(traces) == 1 and traces[0].shape == bridge.Shape([None])
    np.testing.assert_allclose(va, [2.0, 4.0])
    np.testing.assert_allclose(vb, 2 * np.arange(5.0))
    np.testing.assert_allclose(vc, [2.0, 4.0, 6.0])


def test_python_arguments_are_baked_in_and_retrace() -> None:
    traces = []

    @function
    def power(v, n):
        traces.append(n)
        out = v
        for _ in range(n - 1):
            out = out * v
        return out

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        y2, y3, y2b = power(x, 2), power(x, 3), power(x, 2)
        values = _run(g, [y2, y3, y2b], {x: 1.5})
    assert traces == [2, 3]
    np.testing.assert_allclose(values, [2.25, 3.375, 2.25])
    assert power.get_concrete_function(x, 3) is not None


def test_structured_outputs_and_keyword_arguments() -> None:
    @function
    def stats(v, scale=2.0):
        return {"sum": ops.sum(v, [0]) * scale, "parts": (v * scale, None)}

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [3], name="x")
        out = stats(v=x)
        assert set(out) == {"sum", "parts"} and out["parts"][1] is None
        total, scaled = _run(g, [out["sum"], out["parts"][0]], {x: [1.0, 2.0, 3.0]})
    assert total == 12.0
    np.testing.assert_allclose(scaled, [2.0, 4.0, 6.0])


def test_nested_functions_and_exported_graph_def_runs_elsewhere() -> None:
    @function
    def inner(v):
        return ops.sin(v)

    @function
    def outer(v):
        return inner(v) * inner(v * 2.0)

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        y = outer(x)
        gx, = gradients(ops.sum(y, [0]), x)
    library = graph_def_library(g.as_graph_def())
    forward = [n for n in library if "_grad_" not in n]
    assert sorted(n.split("_")[0] for n in forward) == ["inner", "outer"], library
    # The exported GraphDef carries the library: it runs in a graph that never traced anything.
    h = bridge.Graph()
    y2, gx2 = h.import_graph_def(g.as_graph_def(), return_elements=[y.name, gx.name])
    xv = np.array([0.3, -1.1])
    yv, gv = _run(h, [y2, gx2], {"x:0": xv})
    np.testing.assert_allclose(yv, np.sin(xv) * np.sin(2 * xv))
    np.testing.assert_allclose(gv, np.cos(xv) * np.sin(2 * xv) + 2 * np.sin(xv) * np.cos(2 * xv))


def test_func_graph_captures_through_nested_bodies() -> None:
    g = bridge.Graph()
    with g.as_default():
        w = bridge.constant(2.0, "float64", name="w")
    outer = FuncGraph("outer", g)
    inner = FuncGraph("inner", outer)
    ph = inner.capture(w)
    assert ph.graph is inner and ph.op.type == "Placeholder"
    assert list(inner.captures) == [list(outer.captures.values())[0]]
    assert list(outer.captures) == [w]
    assert inner.capture(w) is ph or inner.capture(w) == ph
    other = bridge.Graph()
    with other.as_default():
        stranger = bridge.constant(1.0, "float64")
    with pytest.raises(bridge.errors.InvalidArgumentError, match="does not enclose"):
        inner.capture(stranger)


def test_control_flow_inside_a_function_differentiates() -> None:
    from bridge.framework.control_flow import cond, while_loop

    @function
    def f(v):
        _, out = while_loop(lambda i, u: ops.less(i, 2), lambda i, u: (ops.add_v2(i, 1), u * u),
                            [bridge.constant(0), v])
        return cond(ops.greater(out, 1.0), lambda: _mul(out, v), lambda: ops.sin(v))

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        y = f(x)
        gx, = gradients(y, x)
        for xv in (1.2, 0.5):
            yv, gv = _run(g, [y, gx], {x: xv})
            if xv ** 4 > 1.0:
                np.testing.assert_allclose([yv, gv], [xv ** 5, 5 * xv ** 4], rtol=1e-12)
            else:
                np.testing.assert_allclose([yv, gv], [np.sin(xv), np.cos(xv)], rtol=1e-12)
