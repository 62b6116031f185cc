"""bridge.train.ScipyOptimizer: scipy.optimize.minimize over a bridge graph's loss.

The losses are real bridge graphs; the references are scipy on the same
function written in numpy (scipy.optimize.rosen, rosen_der, rosen_hess_prod):
with the same values and gradients the methods take the same iterations.
Session.run calls are counted with a Session subclass (a real session).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der, rosen_hess_prod

import bridge
from bridge import ops
from bridge.train import ScipyOptimizer

TIGHT = {"ftol": 1e-300, "gtol": 1e-12, "maxiter": 5000}


class CountingSession(bridge.Session):
    """A Session that counts the graph runs it makes (TF_SessionRun calls),
    whether through run(), a make_callable() function or a prepared run."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.runs = 0

    def _execute(self, *args, **kwargs):
        self.runs += 1
        return super()._execute(*args, **kwargs)

    def _run_prepared(self, *args, **kwargs):
        self.runs += 1
        return super()._run_prepared(*args, **kwargs)


def rosenbrock(x):
    """sum(100 (x[1:] - x[:-1]^2)^2 + (1 - x[:-1])^2) from bridge ops (x an Output)."""
    a, b = x[:-1], x[1:]
    return ops.sum(100.0 * ops.square(b - ops.square(a)) + ops.square(1.0 - a), 0)


def rosen_graph(x0, dtype=bridge.float64):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.Variable(np.asarray(x0), dtype=dtype, name="x")
        loss = rosenbrock(x.value())
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    return g, x, loss, sess


X0_10 = np.array([-1.2, 1.0, -0.5, 0.8, 0.0, 1.5, -1.0, 0.3, 2.0, 0.7])


@pytest.mark.parametrize("x0", [[-1.2, 1.0], X0_10], ids=["2d", "10d"])
def test_lbfgsb_reaches_rosenbrock_minimum(x0):
    g, x, loss, sess = rosen_graph(x0)
    opt = ScipyOptimizer(loss, options=TIGHT)
    sess.runs = 0
    result = opt.minimize(sess)
    # One run to read the starting point, one per evaluation (the start's is
    # scipy's first), one to assign the optimum.
    assert opt.evaluations == result.nfev
    assert sess.runs == opt.evaluations + 2
    value = sess.run(x.value())
    np.testing.assert_allclose(value, np.ones(len(x0)), atol=1e-5)
    assert result.fun < 1e-10
    assert sess.run(loss) < 1e-10
    np.testing.assert_array_equal(value, result.x)  # the Variables hold the optimum
    # scipy on numpy's Rosenbrock takes the same path.
    ref = minimize(rosen, np.asarray(x0, float), jac=rosen_der, method="L-BFGS-B", options=TIGHT)
    assert abs(result.nit - ref.nit) <= 2
    np.testing.assert_allclose(result.x, ref.x, atol=1e-8)


def test_history_and_callback_once_per_iteration():
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    calls = []
    opt = ScipyOptimizer(loss, options=TIGHT)
    result = opt.minimize(sess, callback=lambda i, f: calls.append((i, f)))
    # The first call is the starting point (iteration 0), then one per iteration.
    assert len(opt.history) == result.nit + 1 == len(calls)
    assert [i for i, _ in calls] == list(range(len(calls)))
    assert [f for _, f in calls] == opt.history
    assert opt.history[0] == pytest.approx(rosen(np.array([-1.2, 1.0])), rel=1e-15)
    assert opt.history[1] < opt.history[0]
    assert np.all(np.diff(opt.history) <= 0)  # L-BFGS-B's iterates never go up
    assert opt.history[-1] == pytest.approx(result.fun, abs=1e-15)


@pytest.mark.parametrize("method", ["L-BFGS-B", "TNC"])  # TNC: scipy cannot stop it, the optimizer does
def test_callback_stops_early(method):
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    opt = ScipyOptimizer(loss, method=method)
    result = opt.minimize(sess, callback=lambda i, f: i == 3)
    assert len(opt.history) == 4
    assert not result.success
    np.testing.assert_array_equal(sess.run(x.value()), result.x)
    assert sess.run(loss) == pytest.approx(opt.history[-1], rel=1e-12)


def test_bounds_hold_and_stop_on_the_bound():
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    # x[0] <= 0.5 excludes the minimum (1, 1): the constrained one is (0.5, 0.25).
    opt = ScipyOptimizer(loss, var_to_bounds={x: ([None, -2.0], [0.5, 2.0])}, options=TIGHT)
    opt.minimize(sess)
    value = sess.run(x.value())
    assert value[0] == 0.5
    assert value[1] == pytest.approx(0.25, abs=1e-6)


def test_scalar_bounds_over_a_vector():
    g, x, loss, sess = rosen_graph(np.zeros(10))
    opt = ScipyOptimizer(loss, var_to_bounds={x: (-0.3, 0.6)}, options=TIGHT)
    result = opt.minimize(sess)
    value = sess.run(x.value())
    assert np.all(value >= -0.3) and np.all(value <= 0.6)
    assert np.isclose(value, 0.6).any()
    ref = minimize(rosen, np.zeros(10), jac=rosen_der, method="L-BFGS-B", bounds=[(-0.3, 0.6)] * 10,
                   options=TIGHT)
    np.testing.assert_allclose(result.x, ref.x, atol=1e-7)


@pytest.mark.parametrize("method", ["BFGS", "CG", "Newton-CG", "trust-ncg", "TNC"])
def test_gradient_methods_match_scipy_on_rosenbrock(method):
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    opt = ScipyOptimizer(loss, method=method)
    sess.runs = 0
    result = opt.minimize(sess)
    assert sess.runs == 2 + opt.evaluations + opt.hessp_evaluations
    hessp = rosen_hess_prod if method in ("Newton-CG", "trust-ncg") else None
    ref = minimize(rosen, np.array([-1.2, 1.0]), jac=rosen_der, hessp=hessp, method=method)
    assert result.success == ref.success
    np.testing.assert_array_equal(sess.run(x.value()), result.x)
    np.testing.assert_allclose(result.x, [1.0, 1.0], atol=1e-3)
    if method != "TNC":  # TNC's path turns on the last bits of the gradient
        assert result.nit == ref.nit
        np.testing.assert_allclose(result.x, ref.x, atol=1e-7)
    if hessp is not None:
        assert result.nhev == ref.nhev
        assert opt.hessp_evaluations > 0 and abs(result.nhev - opt.hessp_evaluations) <= 1


@pytest.mark.parametrize("method", ["BFGS", "CG", "Newton-CG", "L-BFGS-B"])
def test_quadratic_with_two_variables(method):
    rng = np.random.default_rng(0)
    m = rng.normal(size=(6, 6))
    a = m @ m.T + 6 * np.eye(6)
    c = rng.normal(size=6)
    g = bridge.Graph()
    with g.as_default():
        u = bridge.Variable(np.zeros((2, 2)), name="u")
        w = bridge.Variable(np.zeros(2), name="w")
        z = ops.concat_v2([ops.reshape(u.value(), [-1]), w.value()], 0)
        quad = ops.sum(z * ops.reshape(ops.mat_mul(bridge.constant(a), ops.reshape(z, [6, 1])), [-1]), 0)
        loss = 0.5 * quad - ops.sum(bridge.constant(c) * z, 0)
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    options = {"L-BFGS-B": TIGHT, "Newton-CG": {"xtol": 1e-12}}.get(method, {"gtol": 1e-10})
    ScipyOptimizer(loss, method=method, options=options).minimize(sess)
    best = np.linalg.solve(a, c)
    np.testing.assert_allclose(sess.run(u.value()).ravel(), best[:4], atol=1e-7)
    np.testing.assert_allclose(sess.run(w.value()), best[4:], atol=1e-7)


def test_float32_variable():
    target = np.array([[0.25, -1.5], [3.0, 0.125]], np.float32)
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.zeros((2, 2), np.float32), name="w")
        d = w.value() - bridge.constant(target)
        loss = ops.sum(ops.reshape(d * d * (1.0 + ops.square(d)), [-1]), 0)
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    result = ScipyOptimizer(loss).minimize(sess)
    value = sess.run(w.value())
    assert value.dtype == np.float32
    np.testing.assert_allclose(value, target, atol=1e-4)
    assert result.fun < 1e-7


def test_feed_dict_reaches_the_loss_least_squares_line():
    rng = np.random.default_rng(17)
    xs = rng.uniform(-2, 2, 50)
    ys = 1.75 * xs - 0.5 + rng.normal(scale=0.3, size=50)
    g = bridge.Graph()
    with g.as_default():
        px = bridge.placeholder(bridge.float64, [None], name="px")
        py = bridge.placeholder(bridge.float64, [None], name="py")
        slope = bridge.Variable(0.0, dtype=bridge.float64, name="slope")
        icpt = bridge.Variable(0.0, dtype=bridge.float64, name="intercept")
        resid = slope.value() * px + icpt.value() - py
        loss = ops.mean(ops.square(resid), 0)
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    opt = ScipyOptimizer(loss, options={"gtol": 1e-12})
    opt.minimize(sess, feed_dict={px: xs, py: ys})
    coef, *_ = np.linalg.lstsq(np.stack([xs, np.ones_like(xs)], 1), ys, rcond=None)
    np.testing.assert_allclose([sess.run(slope.value()), sess.run(icpt.value())], coef, atol=1e-7)


def test_var_list_limits_what_is_trained():
    g = bridge.Graph()
    with g.as_default():
        a = bridge.Variable(3.0, dtype=bridge.float64, name="a")
        b = bridge.Variable(2.0, dtype=bridge.float64, name="b")
        loss = ops.square(a.value() - 1.0) + ops.square(b.value() + a.value())
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    ScipyOptimizer(loss, var_list=[a]).minimize(sess)
    # min over a of (a-1)^2 + (a+2)^2: a = -0.5; b is left alone.
    assert sess.run(a.value()) == pytest.approx(-0.5, abs=1e-6)
    assert sess.run(b.value()) == 2.0


def test_gather_read_falls_back_to_assigning_first():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.zeros(4), name="w")
        rows = ops.resource_gather(w.handle, np.array([0, 2, 2, 3], np.int32), dtype=bridge.float64)
        target = bridge.constant(np.array([1.0, -1.0, -1.0, 4.0]))
        loss = ops.sum(ops.square(rows - target), 0) + ops.sum(ops.square(w.value() - 0.5), 0)
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    opt = ScipyOptimizer(loss, options={"gtol": 1e-12})
    assert opt.assigns_first == [w]
    sess.runs = 0
    opt.minimize(sess)
    # One run reads the start, which w holds: its evaluation is one run; each
    # further one assigns first (two runs).  w then holds the last point
    # evaluated, L-BFGS-B's answer: no run to assign it again.
    assert sess.runs == 1 + 1 + 2 * (opt.evaluations - 1)
    # w0: (w-1)^2 + (w-.5)^2 -> 0.75; w1: 0.5; w2: 2 (w+1)^2 + (w-.5)^2 -> -0.5; w3: 2.25
    np.testing.assert_allclose(sess.run(w.value()), [0.75, 0.5, -0.5, 2.25], atol=1e-6)


def test_gradient_free_method_fetches_only_the_loss():
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    opt = ScipyOptimizer(loss, method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 2000})
    sess.runs = 0
    opt.minimize(sess)
    assert sess.runs == opt.evaluations + 2
    assert opt._fetch == [loss]
    np.testing.assert_allclose(sess.run(x.value()), [1.0, 1.0], atol=1e-5)


def test_errors_name_the_culprit():
    g = bridge.Graph()
    with g.as_default():
        a = bridge.Variable(np.ones(3), name="used")
        b = bridge.Variable(np.ones(2), name="unused")
        i = bridge.Variable(np.int32(1), name="count")
        loss = ops.sum(ops.square(a.value()), 0)
        vec = ops.square(a.value())
    with pytest.raises(ValueError, match="'unused:0'"):
        ScipyOptimizer(loss, var_list=[a, b])
    with pytest.raises(ValueError, match="scalar"):
        ScipyOptimizer(vec, var_list=[a])
    with pytest.raises(TypeError, match="'count:0'"):
        ScipyOptimizer(loss, var_list=[a, i])
    with pytest.raises(ValueError, match="'BFGS' does not take bounds"):
        ScipyOptimizer(loss, var_list=[a], method="BFGS", var_to_bounds={a: (0, 1)})
    with pytest.raises(ValueError, match="'used:0' has shape"):
        ScipyOptimizer(loss, var_list=[a], var_to_bounds={a: (np.zeros(2), None)})
    with pytest.raises(ValueError, match="not a variable of var_list"):
        ScipyOptimizer(loss, var_list=[a], var_to_bounds={b: (0, 1)})
    with pytest.raises(ValueError, match="low > high"):
        ScipyOptimizer(loss, var_list=[a], var_to_bounds={a: (1, 0)})
    with pytest.raises(ValueError, match="full Hessian"):
        ScipyOptimizer(loss, var_list=[a], method="dogleg")
    with pytest.raises(ValueError, match="unknown method"):
        ScipyOptimizer(loss, var_list=[a], method="no-such-method")
    with pytest.raises(ValueError, match="another graph"):
        ScipyOptimizer(loss, var_list=[a]).minimize(bridge.Session(bridge.Graph()))


def test_every_read_on_the_loss_path_is_fed():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([2.0, -1.0]), name="w")
        # Two reads of w; an update op elsewhere in the graph takes w's handle but is not on the loss's path.
        loss = ops.sum(ops.square(w.value() - 0.5), 0) + ops.sum(ops.square(w.read_value()), 0)
        w.assign_sub(np.array([1.0, 1.0]))
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    opt = ScipyOptimizer(loss, options={"gtol": 1e-12})
    assert opt.assigns_first == []
    assert sorted(r.name for r in opt._reads[0]) == ["ReadVariableOp:0", "w/Read/ReadVariableOp:0"]
    sess.runs = 0
    opt.minimize(sess)
    assert sess.runs == opt.evaluations + 2
    np.testing.assert_allclose(sess.run(w.value()), [0.25, 0.25], atol=1e-8)


# --- a non-finite loss or gradient stops the minimization, reported, at the best point --------

from bridge.grad import RegisterGradient  # noqa: E402
from support import REPO


@RegisterGradient("TestScipySquareGradNaNBelowZero")
def _square_grad_nan_below_zero(op, grad):
    """Square's gradient, NaN where the input is below 2 (x below 0 in the losses below)."""
    u = op.inputs[0]
    return grad * (u * 2.0) + 0.0 * ops.sqrt(u - 2.0)


def _valley(nan_in, x0=(3.0, 5.0)):
    """sum((x + 2)^2), whose minimum x = -2 every method heads for, with NaN
    below x = 0: in the loss (+ 0 sqrt(x)) or in its gradient alone."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.Variable(np.asarray(x0, dtype=np.float64), name="x")
        v = x.value()
        if nan_in == "loss":
            loss = ops.sum(ops.square(v + 2.0) + 0.0 * ops.sqrt(v), 0)
        else:
            with g.gradient_override_map({"Square": "TestScipySquareGradNaNBelowZero"}):
                loss = ops.sum(ops.square(v + 2.0), 0)
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    return x, loss, sess


def _check_stopped_at_best_finite_point(opt, result, x, loss, sess, what, start_loss):
    assert not result.success and result.status == 98 and result.nonfinite == what
    assert f"the {what} of 'Sum:0' is not finite" in result.message
    assert f"at evaluation {result.nfev}" in result.message and "iteration" in result.message
    assert "the variables hold the best finite point seen" in result.message
    # The Variables hold result.x, a point whose loss is finite and the best seen.
    np.testing.assert_array_equal(sess.run(x.value()), result.x)
    assert np.isfinite(result.fun) and sess.run(loss) == result.fun
    assert result.fun <= min(opt.history + [start_loss])
    if opt.method != "Newton-CG":  # whose first step, exact on the quadratic, lands at -2: NaN
        assert result.fun < start_loss


@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS", "CG", "Newton-CG", "trust-ncg", "TNC", "Nelder-Mead"])
def test_a_nan_loss_stops_and_keeps_the_best_finite_point(method):
    x, loss, sess = _valley("loss")
    start = sess.run(loss)
    opt = ScipyOptimizer(loss, method=method)
    with pytest.warns(RuntimeWarning, match=rf"ScipyOptimizer \({method}\): the loss of 'Sum:0' is not finite "
                                           r"\(nan\) at evaluation \d+"):
        result = opt.minimize(sess)
    _check_stopped_at_best_finite_point(opt, result, x, loss, sess, "loss", start)
    assert "nan" not in repr(result.fun) and not np.isnan(opt.history).any()


@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS", "CG", "Newton-CG"])
def test_a_nan_gradient_stops_and_names_the_variable(method):
    x, loss, sess = _valley("gradient")
    start = sess.run(loss)
    opt = ScipyOptimizer(loss, method=method)
    with pytest.warns(RuntimeWarning, match="the gradient of 'Sum:0' is not finite"):
        result = opt.minimize(sess)
    _check_stopped_at_best_finite_point(opt, result, x, loss, sess, "gradient", start)
    assert "first in variable 'x:0' at index (" in result.message


@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS"])
def test_a_nan_loss_at_the_start_keeps_the_starting_values(method):
    x, loss, sess = _valley("loss", x0=(-1.0, 2.0))
    opt = ScipyOptimizer(loss, method=method)
    with pytest.warns(RuntimeWarning, match="at evaluation 1 \\(the starting point\\)"):
        result = opt.minimize(sess)
    assert not result.success and result.status == 98 and np.isnan(result.fun)
    assert "the variables keep their starting values" in result.message
    np.testing.assert_array_equal(sess.run(x.value()), [-1.0, 2.0])
    np.testing.assert_array_equal(result.x, [-1.0, 2.0])


def test_the_iteration_is_named():
    """NaN beyond x = 0 while Rosenbrock's valley is followed from (-1.2, 1): the
    history before the NaN is kept, and the message names the iteration."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.Variable(np.array([-1.2, 1.0]), name="x")
        v = x.value()
        # NaN once x[0] passes 0.5, some iterations in.
        loss = rosenbrock(v) + 0.0 * ops.sqrt(0.5 - v[0])
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    opt = ScipyOptimizer(loss)
    with pytest.warns(RuntimeWarning) as caught:
        result = opt.minimize(sess)
    assert len(opt.history) >= 3 and all(np.isfinite(opt.history))
    assert f"in iteration {len(opt.history)};" in result.message and str(caught[0].message) == result.message
    assert result.fun <= opt.history[-1] and sess.run(loss) == result.fun


# --- the starting point is iteration 0; runs saved; progress on stderr -------------------------

def test_a_callback_stopping_at_the_start_runs_once():
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    opt = ScipyOptimizer(loss)
    sess.runs = 0
    calls = []
    result = opt.minimize(sess, callback=lambda i, f: calls.append((i, f)) or True)
    assert calls == [(0, pytest.approx(rosen(np.array([-1.2, 1.0])), rel=1e-15))]
    assert not result.success and result.status == 99 and result.nit == 0 and result.nfev == 1
    np.testing.assert_array_equal(result.x, [-1.2, 1.0])
    assert opt.history == [calls[0][1]] and opt.evaluations == 1
    assert sess.runs == 2  # reading the start, evaluating it; the variables already hold result.x
    np.testing.assert_array_equal(sess.run(x.value()), [-1.2, 1.0])


def test_starting_at_the_minimum_needs_no_assigning_run():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([1.0, -2.0]), name="w")
        loss = ops.sum(ops.square(w.value() - bridge.constant(np.array([1.0, -2.0]))), 0)
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    sess.runs = 0
    opt = ScipyOptimizer(loss)
    result = opt.minimize(sess)
    assert result.success and result.nit == 0 and result.fun == 0.0
    assert opt.history == [0.0] and opt.evaluations == result.nfev == 1
    assert sess.runs == 2  # reading the start, evaluating it; no run assigning it back


def test_a_start_outside_the_bounds_is_clipped_before_it_is_evaluated():
    """The start is clipped into the bounds, as L-BFGS-B clips it, before it
    is evaluated: history[0] is the loss there, and a loss undefined outside
    the bounds (NaN at x < 0 here) is never evaluated out there."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.Variable(np.array([-1.2, 1.0]), name="x")
        loss = rosenbrock(x.value()) + 0.0 * ops.sum(ops.sqrt(x.value()), 0)
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    opt = ScipyOptimizer(loss, var_to_bounds={x: (0.0, 2.0)}, options=TIGHT)
    sess.runs = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no non-finite warning, and none from scipy about the bounds
        result = opt.minimize(sess)
    assert opt.history[0] == rosen(np.array([0.0, 1.0]))
    assert opt.evaluations == result.nfev
    assert sess.runs == opt.evaluations + 2
    ref = minimize(rosen, np.array([-1.2, 1.0]), jac=rosen_der, method="L-BFGS-B", bounds=[(0.0, 2.0)] * 2,
                   options=TIGHT)
    np.testing.assert_allclose(result.x, ref.x, atol=1e-8)
    assert result.nit == ref.nit and len(opt.history) == result.nit + 1


def test_float32_and_two_variables_feed_their_slices():
    """Each variable is fed its slice of x in its dtype: the loss at the start
    (read from the variables) and at x0 fed agree exactly."""
    g = bridge.Graph()
    with g.as_default():
        a = bridge.Variable(np.array([[0.5, -1.0]], np.float32), name="a")
        b = bridge.Variable(np.array([2.0, 3.0, 4.0]), name="b")
        loss = (ops.cast(ops.sum(ops.reshape(ops.square(a.value() - 1.0), [-1]), 0), DstT=bridge.float64)
                + ops.sum(ops.square(b.value()), 0))
        init = bridge.global_variables_initializer()
    sess = CountingSession(g)
    sess.run(init)
    opt = ScipyOptimizer(loss, options=TIGHT)
    values = opt._read_values(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert [v.dtype for v in values] == [np.float32, np.float64]
    assert [v.tolist() for v in values] == [[[1.0, 2.0]], [3.0, 4.0, 5.0]]
    result = opt.minimize(sess)
    assert opt.history[0] == 0.25 + 4.0 + 29.0
    np.testing.assert_allclose(result.x, [1.0, 1.0, 0.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(sess.run(a.value()), [[1.0, 1.0]], atol=1e-6)


@pytest.mark.parametrize("verbose", [1, 2])
def test_verbose_n_prints_a_line_every_n_iterations_and_at_the_end(capsys, verbose):
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    result = ScipyOptimizer(loss, verbose=verbose).minimize(sess)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    iterations = [int(line.split("iteration ")[1].split(":")[0]) for line in lines[:-1]]
    assert iterations == list(range(0, result.nit + 1, verbose))
    assert lines[0].startswith("ScipyOptimizer (L-BFGS-B): iteration 0: loss 24.2, 1 evaluations, ")
    assert lines[-1].startswith(f"ScipyOptimizer (L-BFGS-B): done after {result.nit} iterations, "
                                f"{result.nfev} evaluations, ")
    assert f"loss {result.fun:.9g}; CONVERGENCE" in lines[-1]


def test_verbose_true_off_a_terminal_prints_the_start_and_the_end(capsys):
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    result = ScipyOptimizer(loss, method="BFGS", verbose=True).minimize(sess)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("ScipyOptimizer (BFGS): iteration 0: loss 24.2, 1 evaluations")
    assert lines[-1].startswith(f"ScipyOptimizer (BFGS): done after {result.nit} iterations")
    assert len(lines) <= 2 + result.nit  # intermediate lines at most once a second


def test_not_verbose_prints_nothing_and_bad_verbose_is_refused(capsys):
    g, x, loss, sess = rosen_graph([-1.2, 1.0])
    ScipyOptimizer(loss).minimize(sess)
    assert capsys.readouterr() == ("", "")
    with pytest.raises(ValueError, match="verbose must be"):
        ScipyOptimizer(loss, verbose=-1)
    with pytest.raises(ValueError, match="verbose must be"):
        ScipyOptimizer(loss, verbose="yes")


def test_verbose_true_on_a_terminal_shows_a_tqdm_bar():
    """A child process whose stderr is a real terminal (a pty)."""
    import fcntl
    import os
    import pty
    import struct
    import termios
    import subprocess
    import sys
    import time
    from pathlib import Path

    code = (
        "import numpy as np, bridge\n"
        "from bridge import ops\n"
        "from bridge.train import ScipyOptimizer\n"
        "g = bridge.Graph()\n"
        "with g.as_default():\n"
        "    x = bridge.Variable(np.array([-1.2, 1.0]), name='x')\n"
        "    v = x.value()\n"
        "    loss = ops.sum(100.0 * ops.square(v[1:] - ops.square(v[:-1])) + ops.square(1.0 - v[:-1]), 0)\n"
        "    init = bridge.global_variables_initializer()\n"
        "s = bridge.Session(g)\n"
        "s.run(init)\n"
        "r = ScipyOptimizer(loss, verbose=True, options={'maxiter': 50}).minimize(s)\n"
        "print('nit', r.nit)\n")
    repo = REPO
    master, slave = pty.openpty()
    # A terminal's size, as a real one has (a pty starts at 0 columns: tqdm would draw nothing).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave,
                            env=dict(os.environ, PYTHONPATH=str(repo)), cwd=repo)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        out = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, err[-3000:]
    nit = int(out.split("nit ")[1])
    assert "ScipyOptimizer (L-BFGS-B)" in err and "it/s" in err and "loss=" in err and "/50" in err
    assert f"{nit}/50" in err  # the bar counted every iteration
    assert f"done after {nit} iterations" in err


@pytest.mark.parametrize("colocate", [False, True])
def test_colocate_gradients_with_ops_puts_the_backward_pass_on_each_ops_device(colocate):
    """A model split over workers keeps its gradients there with colocate_gradients_with_ops=True
    (ScipyOptimizer had no such argument: every gradient op landed outside the device scopes)."""
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([1.0, -2.0]), name="w")
        with bridge.device("/job:worker/task:1"):
            shard = ops.square(ops.sin(w.value()), name="shard")
        loss = ops.sum(shard, 0, name="loss")
        opt = ScipyOptimizer(loss, method="L-BFGS-B", colocate_gradients_with_ops=colocate)
        init = bridge.global_variables_initializer()
    # Sin's gradient is a Cos; the gradient of square's Multiply: only the backward pass has these.
    grad_ops = [op for op in g.get_operations() if op.type == "Cos" or "shard_grad/Multiply" in op.name]
    assert grad_ops and any(op.type == "Cos" for op in grad_ops)
    on_worker = {op.name: "/job:worker/task:1" in op.device for op in grad_ops}
    assert all(on_worker.values()) if colocate else not any(on_worker.values()), on_worker
    assert opt.colocate_gradients_with_ops is colocate and init.type == "NoOp"


# --- prepared runs (bridge/train/scipy_runs.py) ------------------------------------------------

class GeneralPathSession(CountingSession):
    """A session offering no prepared runs: ScipyOptimizer then runs through
    make_callable and Session.run, as it did before them."""

    _prepare = None


@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS", "Nelder-Mead", "Newton-CG"])
def test_prepared_runs_give_bit_identical_results(method):
    """Two variables (float32 and float64) and a feed: the same iterations,
    losses, optimum, variables and number of runs as the general path, to the
    bit; a second call reuses the prepared runs, which keep no fed data."""
    g = bridge.Graph()
    with g.as_default():
        a = bridge.Variable(np.array([[0.5, -1.0]], np.float32), name="a")
        b = bridge.Variable(np.array([2.0, 3.0, 4.0]), name="b")
        t = bridge.placeholder(bridge.float64, [3], name="t")
        av = a.value()
        loss = (ops.cast(ops.sum(ops.reshape(ops.square(av - 1.0) * (1.0 + ops.square(av)), [-1]), 0),
                         DstT=bridge.float64)
                + ops.sum(ops.square(b.value() - t) * (2.0 + ops.sin(b.value())), 0))
        init = bridge.global_variables_initializer()
    opt = ScipyOptimizer(loss, method=method, options={"maxiter": 40})
    feed = {t: np.array([0.5, -0.25, 1.0])}
    outcomes = []
    for session in (GeneralPathSession(g), CountingSession(g), CountingSession(g)):
        session.run(init)
        session.runs = 0
        spare = opt._spare_runs.get("fetch", [None])[0]
        result = opt.minimize(session, feed_dict=feed)
        outcomes.append((result.x.tobytes(), float(result.fun).hex(), result.nit, result.nfev, session.runs,
                         [float(f).hex() for f in opt.history], session.run(a.value()).tobytes(),
                         session.run(b.value()).tobytes()))
        if type(session) is CountingSession:
            (kept,) = opt._spare_runs["fetch"]
            assert all(v is None for v in kept._kept) and kept.session is None
            assert spare is None or kept is spare  # the second prepared session reused the first's
            assert ("hessp" in opt._spare_runs) == (method == "Newton-CG")  # its products prepared too
        session.close()
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert outcomes[0][2] > 3


@pytest.mark.parametrize("method", ["L-BFGS-B", "CG", "Nelder-Mead"])
def test_one_vector_variable_takes_the_one_call_path_bit_identically(method):
    """One float64 vector variable read once: each evaluation is one
    PreparedRun.caller call; the same results and runs as the general path."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.Variable(X0_10, name="x")
        loss = rosenbrock(x.value())
        init = bridge.global_variables_initializer()
    opt = ScipyOptimizer(loss, method=method, options={"maxiter": 30})
    assert opt._feed_parts is None
    outcomes = []
    for session in (GeneralPathSession(g), CountingSession(g)):
        session.run(init)
        session.runs = 0
        result = opt.minimize(session)
        outcomes.append((result.x.tobytes(), float(result.fun).hex(), result.nit, result.nfev, session.runs,
                         [float(f).hex() for f in opt.history], session.run(x.value()).tobytes()))
        session.close()
    assert "fetch" in opt._spare_runs and outcomes[0] == outcomes[1]


def test_a_fed_array_changed_by_the_callback_reaches_the_next_evaluation():
    """Feed dict arrays are converted at each evaluation, as each Session.run
    did: one changed in place by the callback counts from the next run on."""
    g, x, loss, first = rosen_graph(X0_10)
    first.close()
    with g.as_default():
        shift = bridge.placeholder(bridge.float64, [10], name="shift")
        shifted = loss + ops.sum(ops.square(x.value() - shift), 0)
        init = bridge.global_variables_initializer()
    opt = ScipyOptimizer(shifted, options={"maxiter": 12})
    outcomes = []
    for session in (GeneralPathSession(g), CountingSession(g)):
        session.run(init)
        data = np.zeros(10)
        result = opt.minimize(session, feed_dict={shift: data},
                              callback=lambda i, f: data.__setitem__(slice(None), 0.5) if i == 3 else None)
        outcomes.append((result.x.tobytes(), [float(f).hex() for f in opt.history], result.nfev))
        session.close()
    assert outcomes[0] == outcomes[1] and opt._spare_runs["fetch"]
    with bridge.Session(g) as session:  # not the loss at 0.0 any more: the change was seen
        session.run(init)
        session.run(x.assign(result.x))
        assert session.run(shifted, {shift: np.full(10, 0.5)}) == pytest.approx(result.fun, rel=1e-12)
