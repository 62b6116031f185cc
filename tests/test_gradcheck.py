"""bridge.gradcheck: the convergence test catches a wrong gradient, passes a
right one, plots, and compares full Jacobians with central differences."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.grad.gradient_check import compare_jacobians, compute_gradient, gradcheck
from bridge.grad import RegisterGradient

X0 = np.array([0.3, -0.7, 1.2, 0.5])


@RegisterGradient("TestSquareGradMissingFactor")
def _wrong_square_grad(op, grad):
    return grad * op.inputs[0]  # d(x^2)/dx is 2x: this is half of it


@RegisterGradient("TestSquareGradRight")
def _right_square_grad(op, grad):
    return grad * (op.inputs[0] * 2.0)


def _model(override):
    """sin(x) * x^2 as a vector, the Square's gradient from the Python registry."""
    def build(x):
        with bridge.get_default_graph().gradient_override_map({"Square": override}):
            sq = ops.square(x)
        return ops.sin(x) * sq
    return build


def test_right_python_gradient_passes_with_second_order_convergence() -> None:
    result = gradcheck(_model("TestSquareGradRight"), X0)
    assert result.verdict == "PASS" and result.passed
    assert result.slope_first == pytest.approx(2.0, abs=0.1)
    assert result.slope_zeroth == pytest.approx(1.0, abs=0.1)
    assert list(result.steps) == [1e-1, 1e-2, 1e-3, 1e-4, 1e-5]
    assert result.first_order.shape == result.zeroth_order.shape == (5,)


def test_wrong_python_gradient_fails_with_first_order_slope_one() -> None:
    result = gradcheck(_model("TestSquareGradMissingFactor"), X0)
    assert result.verdict == "FAIL" and not result.passed
    assert result.slope_first == pytest.approx(1.0, abs=0.1)
    assert "wrong" in str(result)
    # The full-Jacobian comparison catches it too.
    assert not compare_jacobians(_model("TestSquareGradMissingFactor"), X0).passed
    assert compare_jacobians(_model("TestSquareGradRight"), X0).passed


def test_plot_is_a_png_with_reference_lines(tmp_path) -> None:
    path = tmp_path / "convergence.png"
    result = gradcheck(_model("TestSquareGradMissingFactor"), X0, plot=str(path))
    assert result.plot == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # Width and height from the IHDR chunk: a real image, not an empty canvas.
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 400 and height >= 300


def test_plot_without_matplotlib_says_what_to_install(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        gradcheck(lambda x: ops.sin(x), X0, plot=str(tmp_path / "p.png"))


def test_forms_of_f_op_type_several_inputs_and_existing_graph() -> None:
    assert gradcheck("Tanh", X0).passed
    assert gradcheck("Atan2", [X0, X0[::-1] + 2.0]).passed
    assert gradcheck(lambda a, b: (ops.mat_mul(a, b), ops.tanh(a)), [np.eye(2) + 0.1, np.ones((2, 3))]).passed
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [4], name="x")
        scale = bridge.placeholder("float64", [], name="scale")
        y = ops.exp(x) * scale
    assert gradcheck(y, X0, x=x, feed_dict={scale: 3.0}).passed


def test_linear_functions_pass_at_roundoff() -> None:
    result = gradcheck(lambda x: x * 3.0 + 1.0, X0)
    assert result.passed and not result.fitted.any()


def test_gradcheck_through_control_flow_and_functions() -> None:
    @bridge.function
    def step(v):
        return ops.sin(v) * v

    def build(x):
        _, y = bridge.while_loop(lambda i, v: ops.less(i, 3), lambda i, v: (ops.add_v2(i, 1), step(v)),
                                 [bridge.constant(0), x])
        return y

    assert gradcheck(build, X0).passed


def test_compute_gradient_shapes_and_values() -> None:
    a0 = np.array([[1.0, 2.0], [0.5, -1.0]])
    b0 = np.array([0.3, 0.7])
    pairs = compute_gradient(lambda a, b: ops.mat_mul(a, ops.reshape(b, [2, 1])), [a0, b0])
    (ta, na), (tb, nb) = pairs
    assert ta.shape == na.shape == (2, 4) and tb.shape == nb.shape == (2, 2)
    np.testing.assert_allclose(ta, na, atol=1e-8)
    np.testing.assert_allclose(tb, a0, atol=1e-12)
    check = compare_jacobians(lambda a, b: ops.mat_mul(a, ops.reshape(b, [2, 1])), [a0, b0])
    assert check.passed and check.max_error < 1e-8 and "PASS" in str(check)


