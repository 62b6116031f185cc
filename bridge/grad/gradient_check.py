"""Checking gradients (and Hessians) numerically.

:func:`gradcheck` is the convergence test of ADCME's ``test_jacobian`` /
``test_gradients`` (``order=1``) and ``test_hessian`` (``order=2``): along a
random direction v, for decreasing steps h,

* the zeroth-order remainder ``|f(x+hv) - f(x)|`` falls like O(h),
* the first-order remainder ``|f(x+hv) - f(x) - h g(x)v|`` falls like O(h^2)
  when the gradient g is right, but only like O(h) when it is wrong, and
* (order 2) the second-order remainder
  ``|f(x+hv) - f(x) - h g(x)v - h^2/2 v'H(x)v|`` falls like O(h^3) when the
  Hessian H is right too, like O(h^2) when it is wrong.

The slope of the highest remainder on a log-log scale (least squares over
the steps above roundoff) gives the verdict.  A function with several (or
non-scalar) outputs is reduced to the scalar ``sum_k sum(w_k * y_k)`` with
fixed random weights w, so the test checks ``J^T w`` (what reverse mode
computes) through ``bridge.gradients`` (``grad_ys=w``), and ``H v`` as the
gradient of ``g . v`` (the bridge's gradients of gradients, as
``bridge.hessian`` builds them).  The sum and the remainders are computed in
float64 from the fetched outputs, at the points the inputs' dtype can hold
(``x + hv`` rounded to float32 moves by ``d``, not exactly ``hv``: the
remainders use ``d``).

Precision.  The remainders are compared with the roundoff level of the
outputs (``eps`` of their dtype times the size of the weighted terms, at x
and at x+hv); steps whose remainder is not above it are not fitted.  The
default steps follow the precision: 1e-1 ... 1e-5 for float64 (half
decades 1e-1 ... 10^-3.5 for order 2); for float32 and float16 a finer ladder of larger steps.
float32 and float16 inputs of a function (or an op type) the test builds
itself are evaluated in float64 where f accepts it (``promote=True``; the
result's ``dtype`` says which precision was tested): the formula of the
gradient is tested, not the float32 code.  Where f takes float32 only (a
float32 custom op), or ``promote=False``, it is evaluated at its own
precision, and when too few steps rise above roundoff the verdict is
CANNOT TEST, never FAIL.

Complex inputs and outputs are tested as pairs of real numbers, with
TensorFlow's convention for the gradient of a real function L of complex z:
``dL/d(re z) + i dL/d(im z)`` (so for y = f(z) holomorphic the gradient is
``grad_y * conj(f'(z))``).  A complex output enters the objective as
``real(w_k * y_k)`` with complex random weights, so both its real and its
imaginary part are tested; a complex input moves along a complex random
direction v, and ``g v`` is ``real(sum(conj(g) * v))`` for the gradient g.

The test never passes what it did not test.  Its verdicts (k is the order):

* ``PASS``: the k-th order remainder falls like O(h^(k+1)) (slope >= ``min_order``);
* ``FAIL``: it falls more slowly (the gradient, or for order 2 the Hessian, is
  wrong), or the gradient (or H v) holds NaN or Inf where f is finite (the
  message names the input), or a lower remainder is at roundoff while the
  k-th is not (f linear along v but v'Hv is not 0);
* ``LINEAR`` (order 1), ``QUADRATIC`` (order 2): f is a polynomial of degree
  k along v: the k-th order remainder is at roundoff for every step while
  the one below moves, so the derivatives are exact along v.  They pass
  (``passed`` is True), but there is no convergence to measure, and the
  message says so;
* ``CONSTANT``, and ``LINEAR`` for order 2: f is a polynomial of lower degree
  along v (it does not move; it does not curve): the test saw nothing but
  a zero k-th derivative, which checks nothing, and does not pass;
* ``CANNOT TEST``: x0, or f at x0, holds NaN or Inf (the message names which
  input or output); fewer than two steps give a finite f(x+hv); fewer than
  two steps rise above the roundoff of f's dtype (the message says how to
  test it); or (order 2) the gradient is not differentiable (a gradient op
  without a gradient).  Steps where f(x+hv) is not finite (a step across a
  pole or out of f's domain) are left out of the fit and marked in the table.

What to differentiate, ``f``, is one of:

* a function ``f(*xs) -> Output(s)``, built in a fresh graph with one
  Placeholder per array of ``x0``;
* an op type name (``"Tanh"``, a Julia custom op's type), applied to those
  Placeholders with ``attrs``;
* an Output (or a list of them) of an existing graph, with ``x=`` naming the
  tensors (Placeholders or any other) that ``x0`` feeds, ``feed_dict`` the rest.

:func:`compute_gradient` and :func:`compare_jacobians` (``jacobian_check``)
compare the full Jacobian from ``bridge.gradients`` with central differences,
as ``tf.test.compute_gradient`` does.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework.graph import Output
from bridge.framework.indexed_slices import convert_to_tensor
from bridge.framework.session import Session
from .check_plot import write_plot
from .check_verdict import (CANNOT_TEST, CONSTANT, DEFAULT_STEPS, FAIL, LINEAR, NOISE_FACTOR,
                            NOT_TWICE_DIFFERENTIABLE, PASS, QUADRATIC, ROUNDOFF_ULPS, GradcheckResult,
                            default_steps, judge, stopped)
from .check_problem import Problem
from .jacobian_check import JacobianCheck, compare_jacobians, compute_gradient

__all__ = ["gradcheck", "GradcheckResult", "compute_gradient", "compare_jacobians", "JacobianCheck",
           "default_steps", "write_plot", "PASS", "FAIL", "LINEAR", "QUADRATIC", "CONSTANT", "CANNOT_TEST",
           "DEFAULT_STEPS"]


def _where_not_finite(value: np.ndarray) -> str:
    """'2 of 4 values (nan at index (1,))': where ``value`` holds NaN or Inf."""
    bad = ~np.isfinite(value)
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if value.ndim else ()
    sample = value[first] if value.ndim else value
    where = f" at index {first}" if value.ndim else ""
    return f"{int(bad.sum())} of {value.size} values ({sample}{where})"


def gradcheck(f: Any, x0: Any, *, order: int = 1, steps: Optional[Sequence[float]] = None, seed: int = 0,
              direction: Any = None, plot: Optional[str] = None, x: Any = None,
              feed_dict: Optional[dict] = None, session: Optional[Session] = None,
              attrs: Optional[dict] = None, min_order: Optional[float] = None,
              names: Optional[Sequence[str]] = None,
              output_names: Optional[Sequence[str]] = None, promote: bool = True) -> GradcheckResult:
    """Convergence test of ``bridge.gradients`` for ``f`` at ``x0`` (see the module doc).

    ``order`` 1 tests the gradient, 2 the Hessian too (Hessian-vector
    products from the gradient of ``g . v``).  ``x0`` is an array or a list
    of arrays (one per input of f); ``direction`` (same layout) replaces the
    random v.  ``steps`` default to :func:`default_steps` of the precision f
    is evaluated at.  The verdict is PASS when the order-k remainder falls
    with slope >= ``min_order`` (default k + 0.8); LINEAR (order 1) or
    QUADRATIC (order 2), which pass too, saying so, when it sits at roundoff
    for every step while the one below moves; CONSTANT (and LINEAR at
    order 2) when f does not move (or curve) along v; FAIL when it falls
    like a wrong derivative's O(h^k), or the gradient (H v) is not finite;
    CANNOT TEST when x0 or f(x0) is not finite, too few steps rise above
    roundoff or the remainder has not settled where they do, or (order 2)
    the gradient has no gradient.  ``names`` and ``output_names`` name the arrays of x0
    and f's float outputs in the messages (default ``x0[i]`` and the
    outputs' tensor names).  ``promote`` (default True) evaluates a float32,
    float16 or complex64 x0 at double precision where f is a function or an
    op type name that accepts it; False tests f at x0's own dtype.
    ``plot``: a path to write the log-log plot (PNG) to, with reference
    slopes; needs matplotlib.
    """
    if order not in (1, 2):
        raise ValueError(f"gradcheck: order must be 1 (gradient) or 2 (Hessian), not {order!r}")
    rng = np.random.default_rng(seed)
    problem = Problem(f, x0, x, feed_dict, session, attrs, promote=promote)
    try:
        result = _check(problem, order, steps, rng, direction, plot, min_order, names, output_names)
    finally:
        problem.close()
    note = _precision_note(problem, result.dtype)
    if note:
        result.message = f"{result.message}\n{note}" if result.message else note
    return result


def _precision_note(problem: Problem, dtype: str) -> str:
    """Which precision a float32 or float16 x0 was tested at, and why."""
    if problem.promote_error:
        first = problem.promote_error.splitlines()[0][:200]
        return f"evaluated in {dtype}: f does not accept float64 ({first})"
    if problem.promoted:
        return (f"evaluated in {dtype}: x0 is {_low_dtypes(problem)}, and f accepts {dtype} "
                "(promote=False tests f at x0's precision)")
    return ""


def _precision(problem: Problem) -> np.dtype:
    """The real dtype f is evaluated at: the least precise of its inputs' and float outputs'."""
    dtypes = [np.dtype(np.real(np.zeros((), d)).dtype) for d in problem.dtypes]
    dtypes += [np.dtype(np.real(np.zeros((), y.dtype.as_numpy_dtype)).dtype) for y in problem.ys]
    return max(dtypes, key=lambda d: np.finfo(d).eps)


def _check(problem: Problem, order: int, steps: Optional[Sequence[float]], rng: np.random.Generator,
           direction: Any, plot: Optional[str], min_order: Optional[float],
           names: Optional[Sequence[str]], output_names: Optional[Sequence[str]]) -> GradcheckResult:
    from bridge.framework.nest import flatten
    precision = _precision(problem)
    dtype_name = precision.name
    steps_arr = np.asarray(sorted(default_steps(precision, order) if steps is None else steps, reverse=True),
                           dtype=np.float64)
    if steps_arr.size < 2 or np.any(steps_arr <= 0):
        raise ValueError("gradcheck: steps must hold at least two positive step sizes")
    min_order = order + 0.8 if min_order is None else float(min_order)
    if names is None:
        names = ["x0"] if problem.single else [f"x0[{i}]" for i in range(len(problem.x0))]
    names = [str(n) for n in names]
    if len(names) != len(problem.x0):
        raise ValueError(f"gradcheck: {len(names)} names for {len(problem.x0)} arrays in x0")
    for name, value in zip(names, problem.x0):
        if not np.all(np.isfinite(value)):
            return stopped(CANNOT_TEST, f"cannot test: input {name} is not finite: {_where_not_finite(value)}",
                           steps_arr, order, dtype_name)
    out_names = [y.name for y in problem.ys] if output_names is None else [str(n) for n in output_names]
    if len(out_names) != len(problem.ys):
        raise ValueError(f"gradcheck: {len(out_names)} output_names for {len(problem.ys)} float outputs")
    x0 = problem.point(problem.x0)
    y0 = [np.asarray(v) for v in problem.run(problem.ys, x0)]
    bad = _first_non_finite(out_names, y0)
    if bad:
        return stopped(CANNOT_TEST, f"cannot test: output {bad} at x0; test f at inputs where it is finite",
                       steps_arr, order, dtype_name)
    weights = _weights(problem.ys, y0, rng)
    if direction is None:
        v = [_random(rng, x.shape, x.dtype) for x in problem.x0]
    else:
        given = flatten([direction] if problem.single else direction)
        v = [np.asarray(d, dtype=x.dtype) for d, x in zip(given, problem.x0)]
    for name, d in zip(names, v):
        if not np.all(np.isfinite(d)):
            raise ValueError(f"gradcheck: the direction for {name} is not finite: {_where_not_finite(d)}")
    v = [_wide(d) for d in v]
    try:
        grads, hvs = _derivatives(problem, weights, v, order)
    except _NotTwiceDifferentiable as exc:
        return stopped(CANNOT_TEST, f"{NOT_TWICE_DIFFERENTIABLE}: {exc}",
                       steps_arr, order, dtype_name)
    live = [t for t in grads + hvs if t is not None]
    values = iter(problem.run(live, x0))
    g0 = [np.zeros(x.shape) if t is None else _wide(next(values)) for x, t in zip(x0, grads)]
    hv0 = [np.zeros(x.shape) if t is None else _wide(next(values)) for x, t in zip(x0, hvs)]
    f0, size0 = _objective(y0, weights)
    for what, found in (("gradient", g0),) + ((("Hessian-vector product", hv0),) if order == 2 else ()):
        for name, g in zip(names, found):
            if not np.all(np.isfinite(g)):
                message = (f"the {what} with respect to {name} is not finite where f is: "
                           f"{_where_not_finite(g)}: the {'gradient' if what == 'gradient' else 'Hessian'} "
                           f"is wrong, or f is not {'' if what == 'gradient' else 'twice '}differentiable at x0")
                return stopped(FAIL, message, steps_arr, order, dtype_name, f0)
    gv = _dot(g0, v)
    vhv = _dot(hv0, v)
    start = [_wide(x) for x in x0]
    n = len(steps_arr)
    rem = np.full((order + 1, n), np.nan)
    sizes = np.full(n, np.nan)
    eps = float(np.finfo(precision).eps)
    tiny = np.finfo(np.float64).tiny
    non_finite = []
    for i, h in enumerate(steps_arr):
        xh = problem.point([x + h * d for x, d in zip(start, v)])
        # The step the dtype could take: x + hv rounded to float32 moves by d, not by hv.
        d = [_wide(a) - b for a, b in zip(xh, start)]
        yh = [np.asarray(val) for val in problem.run(problem.ys, xh)]
        fh, size_h = _objective(yh, weights)
        if not np.isfinite(fh):
            non_finite.append((h, _first_non_finite(out_names, yh) or "the weighted sum of the outputs overflows"))
            continue
        step = _dot(g0, d)
        rem[0, i] = abs(fh - f0)
        rem[1, i] = abs(fh - f0 - step)
        if order == 2:
            # d'Hd to first order in d - hv (hv only is known): h^2 v'Hv + 2h (d - hv)'Hv.
            curve = h * _dot(hv0, [2 * a - h * b for a, b in zip(d, v)])
            rem[2, i] = abs(fh - f0 - step - curve / 2)
        sizes[i] = size_h
    # The noise measured near x, scaled to the outputs' size at each step (at most 100-fold: f(x) near
    # 0 has no size to scale from, and the ulps of the outputs' size bound the rest).
    growth = np.clip((size0 + sizes) / (2 * size0), 1.0, 100.0) if size0 > 0 else 1.0
    noise = _noise(problem, weights, start, v, precision) * growth
    ulps = ROUNDOFF_ULPS[eps <= 1e-15] * eps * (size0 + sizes)
    roundoff = np.maximum(np.maximum(NOISE_FACTOR * noise, ulps), tiny)
    finite = np.isfinite(rem[0])
    skipped = ""
    if non_finite:
        h, what = non_finite[0]
        skipped = (f"f(x+hv) is not finite for {len(non_finite)} of {n} steps (h = {h:.0e}: "
                   f"output {what}); those steps are not fitted")
    result = GradcheckResult(steps_arr, rem[0], rem[1], float("nan"), float("nan"), CANNOT_TEST, f0, gv,
                             np.zeros(n, bool), None, "", finite, order=order,
                             second_order=rem[2] if order == 2 else None, second_directional_derivative=vhv,
                             roundoff=roundoff, dtype=dtype_name)
    notes = [skipped] if skipped else []
    if finite.sum() < 2:
        notes.append(f"cannot test: {skipped}; fewer than two steps are left: try smaller steps")
    else:
        judge(result, min_order, eps, precision, notes)
    result.message = "\n".join(notes)
    if plot is not None:
        result.plot = write_plot(result, plot)
    return result


def _noise(problem: Problem, weights: list, start: list[np.ndarray], v: list[np.ndarray],
           precision: np.dtype, points: int = 9, k: int = 4) -> float:
    """The standard deviation of f's roundoff noise near x, from the k-th
    differences of f at ``points`` points x + i delta v (Mor\u00e9 and Wild's
    ECnoise): with delta = sqrt(eps), f's smooth part contributes about
    eps^(k/2), far below the noise."""
    from math import comb
    delta = float(np.sqrt(np.finfo(precision).eps))
    values = []
    for i in range(points):
        xi = problem.point([x + i * delta * d for x, d in zip(start, v)])
        values.append(_objective([np.asarray(y) for y in problem.run(problem.ys, xi)], weights)[0])
    diffs = np.diff(np.asarray(values), n=k)
    if not np.all(np.isfinite(diffs)):
        return 0.0
    return float(np.sqrt(np.mean(diffs ** 2) / comb(2 * k, k)))


def _low_dtypes(problem: Problem) -> str:
    return ", ".join(sorted({v.dtype.name for v, d in zip(problem.x0, problem.dtypes) if v.dtype != d}))


def _derivatives(problem: Problem, weights: list[np.ndarray], v: list[np.ndarray],
                 order: int) -> tuple[list, list]:
    """The gradient of sum(w . y) for each x (None where not connected) and,
    for order 2, the Hessian-vector products H v (the gradient of g . v)."""
    from bridge.framework import dtypes
    from bridge.framework.builders import constant
    from . import gradients
    from ._helpers import _op
    graph = problem.graph
    with graph.as_default(), graph.name_scope("gradcheck"):
        seeds = [None if w is None else constant(np.conj(w).astype(y.dtype.as_numpy_dtype), y.dtype, name=f"w{i}")
                 for i, (y, w) in enumerate(zip(problem.ys, weights))]
        if all(s is None for s in seeds):
            grads = gradients(problem.ys, problem.xs)
        else:
            grads = gradients(problem.ys, problem.xs, grad_ys=seeds)
        grads = [None if g is None else convert_to_tensor(g) for g in grads]
        hvs: list = [None] * len(grads)
        if order == 2:
            terms = []
            for i, (g, x, d) in enumerate(zip(grads, problem.xs, v)):
                if g is None:
                    continue
                dv = constant(d.astype(g.dtype.as_numpy_dtype), g.dtype, name=f"v{i}")
                prod = _op("Mul", [_op("Conj", [g]) if g.dtype.is_complex else g, dv])
                if g.dtype.is_complex:
                    real = dtypes.as_dtype(np.real(np.zeros((), g.dtype.as_numpy_dtype)).dtype)
                    prod = _op("Real", [prod], {"Tout": real})
                axes = constant(np.arange(len(d.shape), dtype=np.int32), name=f"axes{i}")
                terms.append(_op("Sum", [prod, axes]))
            if terms:
                if len({t.dtype for t in terms}) > 1:
                    terms = [t if t.dtype == dtypes.float64 else _op("Cast", [t], {"DstT": dtypes.float64})
                             for t in terms]
                gv = terms[0] if len(terms) == 1 else _op("AddN", [terms])
                try:
                    hvs = [None if h is None else convert_to_tensor(h) for h in gradients([gv], problem.xs)]
                except LookupError as exc:  # an op of the gradient has no gradient itself
                    raise _NotTwiceDifferentiable(str(exc)) from exc
    return grads, hvs


class _NotTwiceDifferentiable(Exception):
    """The gradient of f has no gradient (order 2 only: order 1's LookupError is the caller's)."""


def _weights(ys: list[Output], y0: list[np.ndarray], rng: np.random.Generator) -> list[Optional[np.ndarray]]:
    """Random weights w_k of the outputs (None, meaning 1, for a single real scalar)."""
    if len(ys) == 1 and y0[0].shape == () and ys[0].dtype.is_floating:
        return [None]
    return [_wide(_random(rng, v.shape, y.dtype.as_numpy_dtype)) for y, v in zip(ys, y0)]


def _objective(ys: list[np.ndarray], weights: list[Optional[np.ndarray]]) -> tuple[float, float]:
    """sum_k sum(real(w_k * y_k)) in float64, and sum_k sum(|w_k| |y_k|): the size its roundoff scales with."""
    total, size = 0.0, 0.0
    for y, w in zip(ys, weights):
        y = _wide(y)
        w = np.ones(()) if w is None else w
        with np.errstate(over="ignore", invalid="ignore"):
            total += float(np.sum(np.real(w * y)))
            size += float(np.sum(np.abs(w) * np.abs(y)))
    return total, size


def _wide(value: Any) -> np.ndarray:
    """``value`` as float64 (complex128 where complex)."""
    value = np.asarray(value)
    return value.astype(np.complex128 if value.dtype.kind == "c" else np.float64)


def _dot(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """real(sum(conj(a) * b)) over the arrays: the directional derivative."""
    return float(np.real(sum((np.vdot(p, q) for p, q in zip(a, b)), 0.0)))


def _first_non_finite(names: Sequence[str], values: Sequence[np.ndarray]) -> str:
    """'y is not finite: 2 of 4 values (nan at index (1,))' for the first
    non-finite value, or ''."""
    for name, value in zip(names, values):
        if not np.all(np.isfinite(value)):
            return f"{name} is not finite: {_where_not_finite(value)}"
    return ""


def _random(rng: np.random.Generator, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Standard normal values of ``dtype``; complex ones with an imaginary part of their own."""
    value = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        value = value + 1j * rng.standard_normal(shape)
    return value.astype(dtype)
