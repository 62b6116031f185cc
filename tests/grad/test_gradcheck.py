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
from support.oracle import run_oracle

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
    # Reported as linear, not as a second-order PASS with a NaN slope.
    assert result.verdict == "LINEAR"
    text = str(result)
    assert "gradcheck LINEAR" in text and "f is linear along v" in text and "no convergence order" in text
    assert "PASS" not in text and "nan" not in text
    # A wrong gradient of a linear function is still caught: slope 1.
    @RegisterGradient("TestLinearGradWrong")
    def _wrong(op, grad):
        return grad * 1.5
    def build(x):
        with bridge.get_default_graph().gradient_override_map({"Identity": "TestLinearGradWrong"}):
            return ops.identity(x) * 3.0
    wrong = gradcheck(build, X0)
    assert wrong.verdict == "FAIL" and wrong.slope_first == pytest.approx(1.0, abs=0.1)


def test_a_zero_gradient_at_a_minimum_passes() -> None:
    """g v = 0: the remainder is all curvature, O(h^2); no relative resolution to speak of."""
    result = gradcheck(lambda x: x * x, np.zeros(3))
    assert result.verdict == "PASS" and result.slope_first == pytest.approx(2.0, abs=0.05)
    assert result.directional_derivative == 0.0 and result.resolution == np.inf
    assert "cannot see" not in result.message


def test_a_constant_function_is_reported_as_such_and_does_not_pass() -> None:
    result = gradcheck(lambda x: ops.stop_gradient(x) * 0.0 + 2.0, X0)
    assert result.verdict == "CONSTANT" and not result.passed
    assert "f does not change along v" in str(result) and "PASS" not in str(result)


# --- non-finite values: never a pass -----------------------------------------------------

def test_nan_outputs_cannot_be_tested_and_name_the_output() -> None:
    """sqrt of negative numbers: NaN everywhere, which used to PASS as 'linear'."""
    result = gradcheck(ops.sqrt, np.array([-1.0, -2.0, 3.0]))
    assert result.verdict == "CANNOT TEST" and not result.passed and not result.evaluated
    text = str(result)
    assert "output Sqrt:0 is not finite: 2 of 3 values (nan at index (0,))" in text
    assert "PASS" not in text and "linear" not in text and "nan" not in text.replace("(nan at", "")
    named = gradcheck(lambda a, b: (ops.sqrt(a), ops.exp(b)), [np.ones(2), np.array([1.0, 800.0])],
                      output_names=["root", "growth"])
    assert named.verdict == "CANNOT TEST" and "output growth is not finite: 1 of 2 values (inf at index (1,))" \
        in named.message


def test_non_finite_inputs_cannot_be_tested_and_name_the_input() -> None:
    result = gradcheck(lambda a, b: a * b, [np.ones(3), np.array([1.0, np.inf, np.nan])])
    assert result.verdict == "CANNOT TEST" and not result.passed
    assert "input x0[1] is not finite: 2 of 3 values (inf at index (1,))" in result.message
    named = gradcheck(lambda a, b: a * b, [np.ones(3), np.array([1.0, np.nan, 2.0])], names=["a", "b"])
    assert "input b is not finite" in named.message


@RegisterGradient("TestSquareGradNaN")
def _nan_square_grad(op, grad):
    return grad * (op.inputs[0] * float("nan"))


def test_a_non_finite_gradient_fails_naming_the_input() -> None:
    result = gradcheck(_model("TestSquareGradNaN"), X0)
    assert result.verdict == "FAIL" and not result.passed
    assert "the gradient with respect to x0 is not finite where f is: 4 of 4 values" in result.message
    # Two inputs: the message names the one whose gradient is NaN.
    def two(a, b):
        with bridge.get_default_graph().gradient_override_map({"Square": "TestSquareGradNaN"}):
            return ops.sin(a) + ops.square(b)
    result = gradcheck(two, [X0, X0], names=["a", "b"])
    assert result.verdict == "FAIL" and "gradient with respect to b is not finite" in result.message


def test_steps_where_f_is_not_finite_are_left_out_and_said_so() -> None:
    """sqrt at 0.05 along -1: the step h = 0.1 leaves its domain, the others converge."""
    x0, v = np.array([0.05, 2.0]), np.array([-1.0, 1.0])
    result = gradcheck(ops.sqrt, x0, direction=v)
    assert result.verdict == "PASS" and result.slope_first == pytest.approx(2.0, abs=0.1)
    assert list(result.finite) == [False, True, True, True, True] and not result.fitted[0]
    text = str(result)
    assert "(f(x+hv) not finite, not fitted)" in text
    assert "f(x+hv) is not finite for 1 of 5 steps (h = 1e-01: output Sqrt:0 is not finite" in text
    # With fewer than two finite steps left there is nothing to fit.
    result = gradcheck(ops.sqrt, x0, direction=v, steps=[1.0, 0.1, 0.01])
    assert result.verdict == "CANNOT TEST" and not result.passed and "fewer than two steps" in result.message


def test_plots_of_untestable_results(tmp_path) -> None:
    """A step left out does not break the plot; a test stopped before the steps writes none."""
    path = tmp_path / "partial.png"
    gradcheck(ops.sqrt, np.array([0.05, 2.0]), direction=np.array([-1.0, 1.0]), plot=str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = gradcheck(ops.sqrt, np.array([-1.0, 2.0]), plot=str(tmp_path / "none.png"))
    assert result.plot is None and not (tmp_path / "none.png").exists()


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




# Complex values count as two real ones, as in TF's gradient checker: the
# bridge's theoretical Jacobians equal TF's, laid out the same way.
_RNG = np.random.default_rng(5)
_Z = _RNG.standard_normal(3) + 1j * _RNG.standard_normal(3)
COMPLEX_CASES = {
    "square": ([_Z], lambda z: z * z),
    "sin_exp": ([_Z], lambda z: ops.mul(ops.sin(z), ops.exp(z))),
    "abs": ([_Z], lambda z: ops.complex_abs(z, Tout=bridge.float64)),
    "z_conj_z_z": ([_Z], lambda z: z * ops.conj(z) * z),
    "complex": ([_Z.real.copy(), _Z.imag.copy()], lambda a, b: ops.complex(a, b, Tout=bridge.complex128)),
    "scale": ([_Z, np.array([0.5, -2.0, 3.0])], lambda z, s: z * ops.cast(s, DstT=bridge.complex128)),
}


def test_complex_jacobians_equal_tfs_gradient_checker() -> None:
    answer = run_oracle("checker_jacobians", {"cases": [(name, x0) for name, (x0, _) in COMPLEX_CASES.items()]})
    for name, (x0, f) in COMPLEX_CASES.items():
        ours = compute_gradient(f, x0)
        for k, ((t, n), (tf_t, tf_n)) in enumerate(zip(ours, answer["jacobians"][name], strict=True)):
            assert t.dtype == np.float64 and t.shape == tf_t.T.shape, (name, k, t.shape, tf_t.shape)
            np.testing.assert_allclose(t, tf_t.T, rtol=1e-12, atol=1e-12, err_msg=f"{name} x{k} theoretical")
            np.testing.assert_allclose(n, tf_n.T, rtol=1e-6, atol=1e-8, err_msg=f"{name} x{k} numerical")
        assert compare_jacobians(f, x0).passed, name


def test_a_wrong_complex_gradient_fails_compare_jacobians() -> None:
    @bridge.custom_gradient
    def square_without_conj(z):
        return z * z, lambda dy: dy * 2.0 * z          # TF's convention needs conj(2z)

    check = compare_jacobians(square_without_conj, [_Z])
    assert not check.passed and check.max_error > 0.1, check


def test_nan_jacobian_error_is_reported_not_hidden() -> None:
    check = compare_jacobians(lambda x: ops.sqrt(x), [np.array([-1.0, 4.0])])
    assert not check.passed and np.isnan(check.max_error), check


# --- order 2: the Hessian ---------------------------------------------------------------------

def _twice(f, df, d2f, second=1.0):
    """f with custom first and second derivatives: the gradient df is right,
    the gradient of the gradient is d2f times ``second`` (1: right)."""
    def build(x):
        @bridge.custom_gradient
        def derivative(u):
            return df(u), lambda dy: dy * d2f(u) * second

        @bridge.custom_gradient
        def value(u):
            return f(u), lambda dy: dy * derivative(u)
        return value(x)
    return build


SIN_EXP = (lambda u: ops.sin(u) * ops.exp(u), lambda u: (ops.cos(u) + ops.sin(u)) * ops.exp(u),
           lambda u: 2.0 * ops.cos(u) * ops.exp(u))


def test_order_2_passes_a_right_hessian_with_third_order_convergence() -> None:
    result = gradcheck(_twice(*SIN_EXP), X0, order=2)
    assert result.verdict == "PASS" and result.passed and result.order == 2
    assert result.slope_second == pytest.approx(3.0, abs=0.15)
    assert result.slope_first == pytest.approx(2.0, abs=0.15)
    assert result.second_order.shape == result.first_order.shape == (6,)
    text = str(result)
    assert text.startswith("gradcheck PASS (order 2): second-order slope")
    # The bridge's own second derivatives (TF's C++ gradients of gradients) and a matrix product.
    assert gradcheck(lambda x: ops.tanh(x) * ops.exp(x), X0, order=2).verdict == "PASS"
    a = np.array([[2.0, 0.5], [0.5, 1.0]])
    assert gradcheck(lambda m: ops.sin(ops.mat_mul(m, m)), [a], order=2).verdict == "PASS"


def test_order_2_fails_a_wrong_hessian_with_slope_two() -> None:
    """The gradient is right (order 1 passes); its own gradient is off by 2, by 1%, NaN."""
    assert gradcheck(_twice(*SIN_EXP, second=2.0), X0).verdict == "PASS"
    for second in (2.0, 1.01):
        result = gradcheck(_twice(*SIN_EXP, second=second), X0, order=2)
        assert result.verdict == "FAIL" and not result.passed, (second, str(result))
        assert "second-order remainder falls like O(h^" in result.message and "the Hessian is wrong" in \
            result.message
    assert gradcheck(_twice(*SIN_EXP, second=2.0), X0, order=2).slope_second == pytest.approx(2.0, abs=0.15)
    result = gradcheck(_twice(*SIN_EXP, second=float("nan")), X0, order=2)
    assert result.verdict == "FAIL" and not result.evaluated
    assert "the Hessian-vector product with respect to x0 is not finite where f is: 4 of 4 values" in result.message


def test_order_2_of_a_wrong_gradient_fails_on_the_gradient() -> None:
    result = gradcheck(_model("TestSquareGradMissingFactor"), X0, order=2)
    assert result.verdict == "FAIL"
    assert "first-order remainder falls like O(h^1.0" in result.message and "the gradient is wrong (fix it " \
        "before testing the Hessian)" in result.message


def test_order_2_quadratic_passes_exactly_and_linear_tests_nothing() -> None:
    """A quadratic f has a zero third-order remainder: QUADRATIC, order 2's LINEAR.
    A linear f has v'Hv = 0: at order 2 that checks no Hessian (LINEAR, not a pass)."""
    result = gradcheck(lambda x: x * x * 3.0 + x, X0, order=2)
    assert result.verdict == "QUADRATIC" and result.passed and not result.fitted.any()
    assert "f is quadratic along v" in result.message and "PASS" not in str(result)
    linear = gradcheck(lambda x: x * 3.0 + 1.0, X0, order=2)
    assert linear.verdict == "LINEAR" and not linear.passed
    assert "a zero second derivative checks no Hessian" in linear.message
    # At order 1 a linear f passes, a quadratic one is an ordinary PASS.
    assert gradcheck(lambda x: x * 3.0 + 1.0, X0).passed
    assert gradcheck(lambda x: x * x * 3.0 + x, X0).verdict == "PASS"

    @RegisterGradient("TestQuadraticGradWrong")  # d/dx of x^2 is 2x: 2.5x makes v'Hv wrong
    def _wrong(op, grad):
        return grad * (op.inputs[0] * 2.5)

    def quadratic(x):
        with bridge.get_default_graph().gradient_override_map({"Square": "TestQuadraticGradWrong"}):
            return ops.square(x)
    # The gradient is wrong too, so order 2 stops at it; a linear f with a curved "Hessian" fails.
    assert gradcheck(quadratic, X0, order=2).verdict == "FAIL"
    curved = gradcheck(_twice(lambda u: u * 3.0, lambda u: u * 0.0 + 3.0, lambda u: u * 0.0 + 1.0), X0, order=2)
    assert curved.verdict == "FAIL" and "f is linear along v" in curved.message and \
        "v'Hv" in curved.message and "the Hessian is wrong" in curved.message


def test_order_2_in_float32_is_evaluated_in_float64_or_said_untestable() -> None:
    x0 = X0.astype(np.float32)
    assert gradcheck(_twice(*SIN_EXP), x0, order=2).verdict == "PASS"
    assert gradcheck(_twice(*SIN_EXP, second=2.0), x0, order=2).verdict == "FAIL"
    own = gradcheck(_twice(*SIN_EXP), x0, order=2, promote=False)
    assert own.dtype == "float32" and own.verdict in ("PASS", "CANNOT TEST"), str(own)


def test_order_2_of_complex_inputs() -> None:
    """|z|^4 as a real function of (re z, im z), and a holomorphic z^3 (its real part weighted)."""
    z = _Z[:2]
    assert gradcheck(lambda u: ops.real(u * ops.conj(u) * u * ops.conj(u), Tout=bridge.float64), [z],
                     order=2).verdict == "PASS"
    assert gradcheck(lambda u: u * u * u, [z], order=2).verdict == "PASS"


def test_order_2_plot_shows_three_remainders(tmp_path) -> None:
    path = tmp_path / "hessian.png"
    result = gradcheck(_twice(*SIN_EXP, second=2.0), X0, order=2, plot=str(path))
    assert result.plot == str(path) and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_order_must_be_1_or_2() -> None:
    with pytest.raises(ValueError, match="order must be 1 .gradient. or 2 .Hessian., not 3"):
        gradcheck(ops.sin, X0, order=3)


def test_a_gradient_without_a_gradient_cannot_test_the_hessian() -> None:
    """Order 2 differentiates the gradient: an op on its way without a gradient stops it, named."""
    def cos_grad(x):  # sin with the gradient dy * cos(x), whose Cos takes a gradient nothing registered
        @bridge.custom_gradient
        def value(u):
            def grad(dy):
                with bridge.get_default_graph().gradient_override_map({"Cos": "TestNoSuchGradient"}):
                    return dy * ops.cos(u)
            return ops.sin(u), grad
        return value(x)
    assert gradcheck(cos_grad, X0).verdict == "PASS"
    result = gradcheck(cos_grad, X0, order=2)
    assert result.verdict == "CANNOT TEST" and not result.passed and not result.evaluated
    assert result.message.startswith("cannot test the Hessian: the gradient of f is not differentiable: ")
    assert "'TestNoSuchGradient'" in result.message


def test_an_f_without_a_gradient_raises_at_any_order() -> None:
    """No gradient at all is the caller's error, as before, not a verdict about the Hessian."""
    def build(x):
        with bridge.get_default_graph().gradient_override_map({"Sin": "TestNoSuchGradient"}):
            return ops.sin(x)
    for order in (1, 2):
        with pytest.raises(LookupError, match="'TestNoSuchGradient'"):
            gradcheck(build, X0, order=order)
