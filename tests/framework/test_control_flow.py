"""bridge.cond and bridge.while_loop: values and gradients (first and second
order), captures, nesting, and a Julia op inside a loop body."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.framework.control_flow import cond, while_loop
from bridge.grad import gradients
from support.build import toolchain_missing
from support import REPO

ROOT = REPO
def _run(graph, fetches, feed=None):
    with bridge.Session(graph) as s:
        return s.run(fetches, feed or {})


def _op(op_type, *inputs):
    """An op on the default graph, which captures tensors of enclosing graphs
    when it is a function body (bridge.ops builds in the graph of its inputs)."""
    return bridge.get_default_graph().create_op(op_type, list(inputs)).output(0)


def _mul(a, b):
    return _op("Mul", a, b)


# --- cond ---------------------------------------------------------------------------

def test_cond_value_and_gradients_on_both_branches() -> None:
    g = bridge.Graph()
    with g.as_default():
        p = bridge.placeholder("bool", [], name="p")
        x = bridge.placeholder("float64", [2], name="x")
        w = bridge.placeholder("float64", [2], name="w")
        r = cond(p, lambda: _mul(ops.sin(x), w), lambda: _mul(x, x))
        assert [op.type for op in g if op.type == "If"] == ["If"]
        gx, gw = gradients(ops.sum(r, [0]), [x, w])
        xv, wv = np.array([0.4, -1.3]), np.array([2.0, 0.5])
        for pv in (True, False):
            rv, gxv, gwv = _run(g, [r, gx, gw], {p: pv, x: xv, w: wv})
            if pv:
                np.testing.assert_allclose(rv, np.sin(xv) * wv)
                np.testing.assert_allclose(gxv, np.cos(xv) * wv)
                np.testing.assert_allclose(gwv, np.sin(xv))
            else:
                np.testing.assert_allclose(rv, xv * xv)
                np.testing.assert_allclose(gxv, 2 * xv)
                np.testing.assert_allclose(gwv, np.zeros(2))  # w only feeds the other branch


def test_cond_structures_python_predicates_and_second_derivatives() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        a, b = cond(ops.greater(x, 0.0), lambda: (ops.exp(x), x * 3.0), lambda: (ops.cos(x), x * x))
        assert cond(True, lambda: x, lambda: ops.neg(x)) is x
        d2, = gradients(gradients(a, x)[0], x)
        for xv in (0.7, -0.7):
            av, bv, d2v = _run(g, [a, b, d2], {x: xv})
            if xv > 0:
                np.testing.assert_allclose([av, bv, d2v], [np.exp(xv), 3 * xv, np.exp(xv)])
            else:
                np.testing.assert_allclose([av, bv, d2v], [np.cos(xv), xv * xv, -np.cos(xv)])


def test_cond_rejects_mismatched_branches() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        p = bridge.placeholder("bool", [], name="p")
        with pytest.raises(ValueError, match="different structures"):
            cond(p, lambda: (x, x), lambda: x)
        with pytest.raises(TypeError, match="float64 in true_fn but int32"):
            cond(p, lambda: x, lambda: bridge.constant(1))
        with pytest.raises(TypeError, match="bool"):
            cond(x, lambda: x, lambda: x)


# --- while_loop -------------------------------------------------------------------------

def _repeated_squaring(n: int, shape, back_prop: bool = True):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", shape, name="x")
        _, y = while_loop(lambda i, v: ops.less(i, n), lambda i, v: (ops.add_v2(i, 1), v * v),
                          [bridge.constant(0), x], back_prop=back_prop)
        gx, = gradients(ops.sum(y, np.arange(len(shape), dtype=np.int32)), x)
    return g, x, y, gx


@pytest.mark.parametrize("n", [0, 1, 3, 5])
def test_while_loop_repeated_squaring_value_and_gradient(n: int) -> None:
    g, x, y, gx = _repeated_squaring(n, [3])
    xv = np.array([0.9, -1.05, 1.1])
    yv, gv = _run(g, [y, gx], {x: xv})
    p = 2 ** n
    np.testing.assert_allclose(yv, xv ** p, rtol=1e-12)
    np.testing.assert_allclose(gv, p * xv ** (p - 1), rtol=1e-12)


def test_while_loop_without_back_prop_is_still_differentiable() -> None:
    g, x, y, gx = _repeated_squaring(4, [], back_prop=False)
    loops = [op for op in g if op.type == "While"]
    # The forward loop kept nothing; the gradient reran it keeping its steps.
    assert len(loops) == 3
    yv, gv = _run(g, [y, gx], {x: 1.01})
    np.testing.assert_allclose([yv, gv], [1.01 ** 16, 16 * 1.01 ** 15], rtol=1e-12)


def test_while_loop_second_derivative() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        _, y = while_loop(lambda i, v: ops.less(i, 3), lambda i, v: (ops.add_v2(i, 1), v * v),
                          [bridge.constant(0), x])
        d1, = gradients(y, x)
        d2, = gradients(d1, x)
        values = _run(g, [y, d1, d2], {x: 1.1})
    np.testing.assert_allclose(values, [1.1 ** 8, 8 * 1.1 ** 7, 56 * 1.1 ** 6], rtol=1e-12)


def test_while_loop_captures_data_dependent_trip_count_and_maximum_iterations() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")
        w = bridge.placeholder("float64", [], name="w")
        # v <- v * w + x until v exceeds 10: the trip count depends on the values.
        v = while_loop(lambda v: ops.less(v, 10.0), lambda v: _op("AddV2", _mul(v, w), x), x)
        gx, gw = gradients(v, [x, w])
        capped = while_loop(lambda v: ops.less(v, 1e9), lambda v: v * 2.0, x, maximum_iterations=5)
        gc, = gradients(capped, x)
        xv, wv = 1.5, 1.7
        vv, gxv, gwv, cv, gcv = _run(g, [v, gx, gw, capped, gc], {x: xv, w: wv})

    def simulate(x0, w0):
        val = x0
        while val < 10.0:
            val = val * w0 + x0
        return val

    eps = 1e-7
    assert vv == pytest.approx(simulate(xv, wv))
    assert gxv == pytest.approx((simulate(xv + eps, wv) - simulate(xv - eps, wv)) / (2 * eps), rel=1e-6)
    assert gwv == pytest.approx((simulate(xv, wv + eps) - simulate(xv, wv - eps)) / (2 * eps), rel=1e-6)
    assert (cv, gcv) == (xv * 32, 32.0)


def test_while_loop_shape_invariants() -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [1], name="x")
        grow = lambda v: ops.concat_v2([v, v * 2.0], 0)  # noqa: E731
        small = lambda v: ops.less(ops.size(v), 8)  # noqa: E731
        with pytest.raises(ValueError, match="shape_invariants"):
            while_loop(small, grow, x)
        y = while_loop(small, grow, x, shape_invariants=[None])
        gx, = gradients(ops.sum(y, [0]), x)
        yv, gv = _run(g, [y, gx], {x: [1.0]})
    np.testing.assert_allclose(yv, [1, 2, 2, 4, 2, 4, 4, 8])
    np.testing.assert_allclose(gv, [27.0])


def test_cond_and_function_inside_a_loop_body() -> None:
    @bridge.function
    def damp(v):
        return v * 0.5

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [], name="x")

        def body(i, v):
            nxt = cond(ops.greater(v, 1.0), lambda: _mul(damp(v), v),
                       lambda: _op("AddV2", _op("Sin", v), bridge.constant(1.0, "float64")))
            return ops.add_v2(i, 1), nxt

        _, y = while_loop(lambda i, v: ops.less(i, 4), body, [bridge.constant(0), x])
        gx, = gradients(y, x)
        values = _run(g, [y, gx], {x: 0.3})

    def f(v):
        for _ in range(4):
            v = 0.5 * v * v if v > 1.0 else np.sin(v) + 1.0
        return v

    eps = 1e-7
    np.testing.assert_allclose(values, [f(0.3), (f(0.3 + eps) - f(0.3 - eps)) / (2 * eps)], rtol=1e-6)


# --- a Julia op in a loop body ------------------------------------------------------------

JULIA_LOOP = textwrap.dedent("""
    import sys
    import numpy as np
    import bridge
    from bridge import customop, ops

    customop.init("Twice", sys.argv[1])        # y = 2x, with its gradient op TwiceGrad
    jl = customop.load(sys.argv[1])
    x = bridge.placeholder("double", shape=[3])
    _, y = bridge.while_loop(lambda i, v: ops.less(i, 3),
                             lambda i, v: (ops.add_v2(i, 1), jl.twice(v) * v),   # v -> 2 v^2
                             [bridge.constant(0), x])
    (dx,) = bridge.gradients([ops.sum(y, [0])], [x])
    xv = np.array([0.5, -0.3, 0.9])
    with bridge.Session() as s:
        yv, dv = s.run([y, dx], {x: xv})
    np.testing.assert_allclose(yv, 128 * xv ** 8, rtol=1e-12)
    np.testing.assert_allclose(dv, 1024 * xv ** 7, rtol=1e-12)
    print("ok")
""")


def test_julia_op_inside_a_while_loop_body(tmp_path: Path) -> None:
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    # A child process, as the custom-op tests do: Julia never shares a process with stock TF.
    proc = subprocess.run([sys.executable, "-c", JULIA_LOOP, str(tmp_path / "twice")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
