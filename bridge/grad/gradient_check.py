"""Checking gradients numerically.

:func:`gradcheck` is the convergence test of ADCME's ``test_jacobian`` /
``test_gradients``: along a random direction v, for steps h = 1e-1 ... 1e-5,

* the zeroth-order remainder ``|f(x+hv) - f(x)|`` falls like O(h), and
* the first-order remainder ``|f(x+hv) - f(x) - h J(x)v|`` falls like O(h^2)
  when the gradient J is right, but only like O(h) when it is wrong.

The slopes of both on a log-log scale (least squares) give the verdict.  A
function with several (or non-scalar) outputs is reduced to the scalar
``sum_k sum(w_k * y_k)`` with fixed random weights w, so the test checks
``J^T w`` (what reverse mode computes) through ``bridge.gradients``.

Complex inputs and outputs are tested as pairs of real numbers, with
TensorFlow's convention for the gradient of a real function L of complex z:
``dL/d(re z) + i dL/d(im z)`` (so for y = f(z) holomorphic the gradient is
``grad_y * conj(f'(z))``).  A complex output enters the objective as
``real(w_k * y_k)`` with complex random weights, so both its real and its
imaginary part are tested; a complex input moves along a complex random
direction v, and ``J v`` is ``real(sum(conj(g) * v))`` for the gradient g.

The test never passes what it did not test.  Its verdicts:

* ``PASS``: the first-order remainder falls like O(h^2) (slope >= ``min_order``);
* ``FAIL``: it falls more slowly (the gradient is wrong), or the gradient
  holds NaN or Inf where f is finite (the message names the input);
* ``LINEAR``: f is linear along v: the first-order remainder is at roundoff
  for every step while f moves, so ``J v`` equals the finite differences
  exactly.  The gradient is right along v (``passed`` is True), but there is
  no convergence to measure, and the message says so;
* ``CONSTANT``: f does not move along v (both remainders at roundoff): the
  test saw nothing but ``J v = 0`` and does not pass;
* ``CANNOT TEST``: x0, or f at x0, holds NaN or Inf (the message names which
  input or output), or fewer than two steps give a finite f(x+hv).  Steps
  where f(x+hv) is not finite (a step across a pole or out of f's domain) are
  left out of the fit and marked in the table.

:func:`compute_gradient` and :func:`compare_jacobians` compare the full
Jacobian from ``bridge.gradients`` with central differences, as
``tf.test.compute_gradient`` does.

What to differentiate, ``f``, is one of:

* a function ``f(*xs) -> Output(s)``, built in a fresh graph with one
  Placeholder per array of ``x0``;
* an op type name (``"Tanh"``, a Julia custom op's type), applied to those
  Placeholders with ``attrs``;
* an Output (or a list of them) of an existing graph, with ``x=`` naming the
  tensors (Placeholders or any other) that ``x0`` feeds, ``feed_dict`` the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework.graph import Graph, Output
from bridge.framework.indexed_slices import convert_to_tensor
from bridge.framework.session import Session

__all__ = ["gradcheck", "GradcheckResult", "compute_gradient", "compare_jacobians", "JacobianCheck"]

DEFAULT_STEPS = tuple(10.0 ** -k for k in range(1, 6))


# --- the problem: a graph, the x tensors, the outputs -----------------------------------

class _Problem:
    """The graph around ``f``, with a session to evaluate it at any x."""

    def __init__(self, f: Any, x0: Any, x: Any = None, feed_dict: Optional[dict] = None,
                 session: Optional[Session] = None, attrs: Optional[dict] = None):
        from bridge.framework import builders
        from bridge.framework.nest import flatten
        self.single = not isinstance(x0, (list, tuple))
        self.x0 = [np.array(v, dtype=np.float64 if np.asarray(v).dtype.kind in "iub" else None)
                   for v in ([x0] if self.single else x0)]
        for i, v in enumerate(self.x0):
            if v.dtype.kind not in "fc":
                raise TypeError(f"gradcheck: x0[{i}] has dtype {v.dtype}; gradients need floating values")
        self.feed = dict(feed_dict or {})
        self._own_session = False
        if isinstance(f, Output) or (isinstance(f, (list, tuple)) and f and isinstance(f[0], Output)):
            if x is None:
                raise TypeError("gradcheck: with Outputs of an existing graph, pass x= (the tensors x0 feeds)")
            self.ys = [f] if isinstance(f, Output) else list(f)
            self.xs = [x] if isinstance(x, Output) else list(x)
            self.graph = self.ys[0].graph
        else:
            self.graph = Graph()
            with self.graph.as_default():
                self.xs = [builders.placeholder(v.dtype, v.shape, name=f"x{i}") for i, v in enumerate(self.x0)]
                if isinstance(f, str):
                    op = self.graph.create_op(f, self.xs, attrs=attrs, name=f)
                    result = op.outputs
                elif callable(f):
                    result = f(*self.xs)
                else:
                    raise TypeError(f"gradcheck: f must be a function, an op type name or Outputs, not {f!r}")
                self.ys = [y for y in flatten(result) if isinstance(y, Output)]
        if len(self.xs) != len(self.x0):
            raise ValueError(f"gradcheck: {len(self.x0)} arrays in x0 for {len(self.xs)} x tensors")
        self.ys = [y for y in self.ys if y.dtype.is_floating or y.dtype.is_complex]
        if not self.ys:
            raise ValueError("gradcheck: f has no floating output to differentiate")
        if session is None:
            session, self._own_session = Session(self.graph), True
        self.session = session

    def run(self, fetches: Any, xs: Sequence[np.ndarray]) -> Any:
        feed = dict(self.feed)
        feed.update(zip(self.xs, xs))
        return self.session.run(fetches, feed)

    def close(self) -> None:
        if self._own_session:
            self.session.close()


# --- the convergence test -----------------------------------------------------------------

#: Verdicts of :func:`gradcheck` (see the module doc); PASS and LINEAR pass.
PASS, FAIL, LINEAR, CONSTANT, CANNOT_TEST = "PASS", "FAIL", "LINEAR", "CONSTANT", "CANNOT TEST"


@dataclass
class GradcheckResult:
    """Outcome of :func:`gradcheck`.

    ``verdict`` is one of ``PASS``, ``FAIL``, ``LINEAR``, ``CONSTANT`` and
    ``CANNOT TEST`` (the module doc); ``passed`` is True for ``PASS`` and
    ``LINEAR`` only.  ``slope_*`` are NaN where no slope was fitted (fewer
    than two steps above roundoff); ``finite`` marks the steps where
    f(x+hv) was finite; ``evaluated`` is False when the test stopped before
    the steps (a non-finite x0, f(x0) or gradient), whose remainders are then NaN."""

    steps: np.ndarray
    zeroth_order: np.ndarray
    first_order: np.ndarray
    slope_zeroth: float
    slope_first: float
    verdict: str
    value: float
    directional_derivative: float
    fitted: np.ndarray = field(repr=False)
    plot: Optional[str] = None
    message: str = ""
    finite: Optional[np.ndarray] = field(default=None, repr=False)
    evaluated: bool = True

    @property
    def passed(self) -> bool:
        return self.verdict in (PASS, LINEAR)

    def __str__(self) -> str:
        head = f"gradcheck {self.verdict}"
        if self.verdict in (PASS, FAIL) and np.isfinite(self.slope_first):
            head += (f": first-order slope {self.slope_first:.2f} (want ~2), "
                     f"zeroth-order slope {_slope_text(self.slope_zeroth)} (want ~1)")
        rows = [head]
        if self.evaluated:
            rows.append(f"{'h':>10} {'|f(x+hv)-f(x)|':>16} {'|f(x+hv)-f(x)-hJv|':>20}")
            finite = self.finite if self.finite is not None else np.ones(len(self.steps), bool)
            for h, r0, r1, used, ok in zip(self.steps, self.zeroth_order, self.first_order, self.fitted, finite):
                note = "" if used else ("  (f(x+hv) not finite, not fitted)" if not ok
                                        else "  (roundoff, not fitted)")
                rows.append(f"{h:10.1e} {r0:16.6e} {r1:20.6e}" + note)
        if self.message:
            rows.append(self.message)
        return "\n".join(rows)


def _slope_text(slope: float) -> str:
    return f"{slope:.2f}" if np.isfinite(slope) else "n/a"


def _slope(steps: np.ndarray, errors: np.ndarray, mask: np.ndarray) -> float:
    if mask.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log10(steps[mask]), np.log10(errors[mask]), 1)[0])


def _where_not_finite(value: np.ndarray) -> str:
    """'2 of 4 values (nan at index (1,))': where ``value`` holds NaN or Inf."""
    bad = ~np.isfinite(value)
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if value.ndim else ()
    sample = value[first] if value.ndim else value
    where = f" at index {first}" if value.ndim else ""
    return f"{int(bad.sum())} of {value.size} values ({sample}{where})"


def _cannot_test(message: str, steps: np.ndarray) -> GradcheckResult:
    empty = np.full(len(steps), np.nan)
    return GradcheckResult(steps, empty, empty.copy(), float("nan"), float("nan"), CANNOT_TEST,
                           float("nan"), float("nan"), np.zeros(len(steps), bool), None, message,
                           np.zeros(len(steps), bool), evaluated=False)


def gradcheck(f: Any, x0: Any, *, steps: Sequence[float] = DEFAULT_STEPS, seed: int = 0,
              direction: Any = None, plot: Optional[str] = None, x: Any = None,
              feed_dict: Optional[dict] = None, session: Optional[Session] = None,
              attrs: Optional[dict] = None, min_order: float = 1.8,
              names: Optional[Sequence[str]] = None,
              output_names: Optional[Sequence[str]] = None) -> GradcheckResult:
    """Convergence test of ``bridge.gradients`` for ``f`` at ``x0`` (see the module doc).

    ``x0`` is an array or a list of arrays (one per input of f);
    ``direction`` (same layout) replaces the random v.  The verdict is PASS
    when the first-order remainder falls with slope >= ``min_order``; LINEAR
    (which passes too, saying so) when it sits at roundoff level for every
    step while f moves (f linear along v, gradient exact); CONSTANT when f
    does not move along v; FAIL for a slower slope or a non-finite
    gradient; CANNOT TEST when x0 or f(x0) is not finite.  ``names`` and
    ``output_names`` name the arrays of x0 and f's float outputs in the
    messages (default ``x0[i]`` and the outputs' tensor names).
    ``plot``: a path to write the log-log plot (PNG) to, with O(h) and O(h^2)
    reference lines; needs matplotlib.
    """
    from bridge.framework.nest import flatten
    from . import gradients
    steps_arr = np.asarray(sorted(steps, reverse=True), dtype=np.float64)
    if steps_arr.size < 2 or np.any(steps_arr <= 0):
        raise ValueError("gradcheck: steps must hold at least two positive step sizes")
    rng = np.random.default_rng(seed)
    problem = _Problem(f, x0, x, feed_dict, session, attrs)
    if names is None:
        names = ["x0"] if problem.single else [f"x0[{i}]" for i in range(len(problem.x0))]
    names = [str(n) for n in names]
    if len(names) != len(problem.x0):
        raise ValueError(f"gradcheck: {len(names)} names for {len(problem.x0)} arrays in x0")
    try:
        for name, value in zip(names, problem.x0):
            if not np.all(np.isfinite(value)):
                return _cannot_test(f"cannot test: input {name} is not finite: {_where_not_finite(value)}",
                                    steps_arr)
        out_names = ([y.name for y in problem.ys] if output_names is None
                     else [str(n) for n in output_names])
        if len(out_names) != len(problem.ys):
            raise ValueError(f"gradcheck: {len(out_names)} output_names for {len(problem.ys)} float outputs")
        y0 = [np.asarray(v) for v in problem.run(problem.ys, problem.x0)]
        bad = _first_non_finite(out_names, y0)
        if bad:
            return _cannot_test(f"cannot test: output {bad} at x0; "
                                f"test f at inputs where it is finite", steps_arr)
        graph = problem.graph
        with graph.as_default(), graph.name_scope("gradcheck"):
            objective = _weighted_sum(problem.ys, [np.shape(v) for v in y0], rng)
            grads = [convert_to_tensor(g) for g in gradients([objective], problem.xs)]
        fetch = [objective] + [g for g in grads if g is not None]
        values = problem.run(fetch, problem.x0)
        f0 = float(np.real(values[0]))
        got = iter(values[1:])
        g0 = [np.zeros_like(v) if g is None else np.asarray(next(got)) for v, g in zip(problem.x0, grads)]
        if direction is None:
            v = [_random(rng, x.shape, x.dtype) for x in problem.x0]
        else:
            v = [np.asarray(d, dtype=x.dtype) for d, x in zip(flatten([direction] if problem.single else direction),
                                                               problem.x0)]
        for name, d in zip(names, v):
            if not np.all(np.isfinite(d)):
                raise ValueError(f"gradcheck: the direction for {name} is not finite: {_where_not_finite(d)}")
        for name, g in zip(names, g0):
            if not np.all(np.isfinite(g)):
                message = (f"the gradient with respect to {name} is not finite where f is: "
                           f"{_where_not_finite(g)}: the gradient is wrong, or f is not "
                           f"differentiable at x0")
                empty = np.full(len(steps_arr), np.nan)
                return GradcheckResult(steps_arr, empty, empty.copy(), float("nan"), float("nan"), FAIL, f0,
                                       float("nan"), np.zeros(len(steps_arr), bool), None, message,
                                       np.zeros(len(steps_arr), bool), evaluated=False)
        jv = float(np.real(sum(np.vdot(g, d) for g, d in zip(g0, v))))
        r0, r1, non_finite = [], [], []
        for h in steps_arr:
            xh = [x + h * d for x, d in zip(problem.x0, v)]
            fh = float(np.real(problem.run(objective, xh)))
            if not np.isfinite(fh):
                yh = [np.asarray(val) for val in problem.run(problem.ys, xh)]
                non_finite.append((h, _first_non_finite(out_names, yh) or "the weighted sum of the outputs "
                                                                           "overflows"))
            r0.append(abs(fh - f0))
            r1.append(abs(fh - f0 - h * jv))
    finally:
        problem.close()
    r0_arr, r1_arr = np.asarray(r0), np.asarray(r1)
    finite = np.isfinite(r0_arr) & np.isfinite(r1_arr)
    skipped = ""
    if non_finite:
        h, what = non_finite[0]
        skipped = (f"f(x+hv) is not finite for {len(non_finite)} of {len(steps_arr)} steps (h = {h:.0e}: "
                   f"output {what}); those steps are not fitted")
    if finite.sum() < 2:
        result = GradcheckResult(steps_arr, r0_arr, r1_arr, float("nan"), float("nan"), CANNOT_TEST, f0, jv,
                                 np.zeros(len(steps_arr), bool), None,
                                 f"cannot test: {skipped}; fewer than two steps are left: try smaller steps",
                                 finite)
        if plot is not None:
            result.plot = write_plot(result, plot)
        return result
    eps = max(np.finfo(x.dtype).eps for x in problem.x0)
    floor = 100 * eps * max(abs(f0), float(np.max(r0_arr[finite])), np.finfo(np.float64).tiny)
    moved = finite & (r0_arr > floor)
    fitted = finite & (r1_arr > floor)
    slope0 = _slope(steps_arr, r0_arr, moved)
    slope1 = _slope(steps_arr, r1_arr, fitted)
    notes = [skipped] if skipped else []
    if not fitted.any() and not moved.any():
        verdict = CONSTANT
        notes.append("f does not change along v (both remainders at roundoff level for every step): the test "
                     "saw nothing but J v = 0 = the finite differences, which checks no gradient; try inputs "
                     "where f's outputs depend on x")
    elif not fitted.any():
        verdict = LINEAR
        notes.append("f is linear along v: f(x+hv) - f(x) equals h J v to roundoff at every step, so J v is "
                     "exact; there is no convergence order to measure (no first-order slope)")
    elif fitted.sum() < 2:
        verdict = FAIL
        notes.append("only one step rose above roundoff: use larger steps")
    else:
        verdict = PASS if slope1 >= min_order else FAIL
        if verdict == FAIL:
            notes.append(f"first-order remainder falls like O(h^{slope1:.2f}), not O(h^2): the gradient is wrong")
    result = GradcheckResult(steps_arr, r0_arr, r1_arr, slope0, slope1, verdict, f0, jv, fitted,
                             None, "\n".join(notes), finite)
    if plot is not None:
        result.plot = write_plot(result, plot)
    return result


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


def _weighted_sum(ys: list[Output], shapes: list[tuple], rng: np.random.Generator) -> Output:
    """sum_k sum(w_k * y_k) with random w_k (just y for a single real scalar);
    real(w_k * y_k), with complex w_k, for a complex y_k."""
    from bridge.framework import dtypes
    from bridge.framework.builders import constant
    from ._helpers import _op
    if len(ys) == 1 and shapes[0] == () and ys[0].dtype.is_floating:
        return ys[0]
    terms = []
    for i, (y, shape) in enumerate(zip(ys, shapes)):
        w = constant(_random(rng, shape, y.dtype.as_numpy_dtype), y.dtype, name=f"w{i}")
        prod = _op("Mul", [y, w])
        if y.dtype.is_complex:
            real = np.real(np.zeros((), y.dtype.as_numpy_dtype)).dtype  # complex128 -> float64
            prod = _op("Real", [prod], {"Tout": dtypes.as_dtype(real)})
        axes = constant(np.arange(len(shape), dtype=np.int32), name=f"axes{i}")
        terms.append(_op("Sum", [prod, axes]))
    if len({t.dtype for t in terms}) > 1:  # float32 and float64 terms (say complex64 and complex128 outputs)
        terms = [t if t.dtype == dtypes.float64 else _op("Cast", [t], {"DstT": dtypes.float64}) for t in terms]
    return terms[0] if len(terms) == 1 else _op("AddN", [terms])


def write_plot(result: GradcheckResult, path: str) -> str:
    """Write the log-log convergence plot of ``result`` to ``path`` (PNG); return the path."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("the convergence plot needs matplotlib, a dependency of tf-julia-bridge that "
                          "is not importable here: pip install matplotlib") from None
    h = result.steps
    fig = Figure(figsize=(6, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    shown = lambda r: np.where(np.isfinite(r) & (r > 0), r, np.nan)  # noqa: E731
    r0, r1 = shown(result.zeroth_order), shown(result.first_order)
    ax.loglog(h, r0, "o-", label=f"|f(x+hv) - f(x)|  (slope {_slope_text(result.slope_zeroth)})")
    ax.loglog(h, r1, "s-", label=f"|f(x+hv) - f(x) - h Jv|  (slope {_slope_text(result.slope_first)})")
    anchor0 = np.nanmax(r0) if np.isfinite(r0).any() else 1.0
    anchor1 = np.nanmax(r1) if np.isfinite(r1).any() else 1.0
    ax.loglog(h, anchor0 * h / h[0], "k--", linewidth=0.8, label="O(h)")
    ax.loglog(h, anchor1 * (h / h[0]) ** 2, "k:", linewidth=0.8, label="O(h$^2$)")
    ax.set_xlabel("h")
    ax.set_ylabel("remainder")
    ax.set_title(f"gradcheck: {result.verdict}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    return str(path)


# --- Jacobians ---------------------------------------------------------------------------

def _real_view(value: np.ndarray) -> np.ndarray:
    """A flat real vector: complex entries as (real, imaginary) pairs, as TF's gradient checker lays them out."""
    flat = np.ascontiguousarray(value).reshape(-1)
    return flat.view(np.real(flat[:0]).dtype) if flat.dtype.kind == "c" else flat


def compute_gradient(f: Any, x0: Any, *, delta: Optional[float] = None, x: Any = None,
                     feed_dict: Optional[dict] = None, session: Optional[Session] = None,
                     attrs: Optional[dict] = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(theoretical, numerical) Jacobians of f's float and complex outputs
    (flattened and concatenated, n_y entries) for each array of x0: both
    shaped (n_y, x.size).

    As in TF's ``tf.test.compute_gradient``, a complex value counts as two
    real ones, its real and imaginary parts side by side: a complex output
    gives two rows per element and a complex input two columns, and the
    Jacobians are real.  The theoretical one comes from ``bridge.gradients``
    (one backward graph, fed a one-hot gradient per row, ``1j`` for an
    imaginary part), read with TF's convention for complex gradients (the
    gradient of a real L is dL/dRe z + i dL/dIm z); the numerical one from
    central differences with step ``delta`` (1e-6 for float64 and
    complex128, 1e-3 for float32 and complex64).
    """
    from bridge.framework.builders import placeholder
    from . import gradients
    problem = _Problem(f, x0, x, feed_dict, session, attrs)
    try:
        graph = problem.graph
        y0 = [np.asarray(v) for v in problem.run(problem.ys, problem.x0)]
        # Real rows per output and real columns per input.
        sizes = [_real_view(v).size for v in y0]
        n_y = int(sum(sizes))
        with graph.as_default(), graph.name_scope("compute_gradient"):
            dys = [placeholder(y.dtype, v.shape, name=f"dy{i}") for i, (y, v) in enumerate(zip(problem.ys, y0))]
            grads = [convert_to_tensor(g) for g in gradients(problem.ys, problem.xs, grad_ys=dys)]
        real_dtype = [np.real(np.zeros((), xv.dtype)).dtype for xv in problem.x0]
        theoretical = [np.zeros((n_y, _real_view(xv).size), dtype=rd) for xv, rd in zip(problem.x0, real_dtype)]
        live = [(k, g) for k, g in enumerate(grads) if g is not None]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        for row in range(n_y):
            seeds = [np.zeros(v.shape, dtype=v.dtype) for v in y0]
            i = int(np.searchsorted(offsets, row, side="right") - 1)
            within = row - offsets[i]
            if seeds[i].dtype.kind == "c":
                seeds[i].reshape(-1)[within // 2] = 1j if within % 2 else 1
            else:
                seeds[i].reshape(-1)[within] = 1
            if live:
                feed = dict(problem.feed)
                feed.update(zip(problem.xs, problem.x0))
                feed.update(zip(dys, seeds))
                values = problem.session.run([g for _, g in live], feed)
                for (k, _), val in zip(live, values):
                    val = np.asarray(val)
                    if problem.x0[k].dtype.kind != "c":
                        val = np.real(val)  # a real input's gradient (TF's is real already)
                    theoretical[k][row] = _real_view(val.astype(problem.x0[k].dtype, copy=False))
        numerical = []
        for k, xv in enumerate(problem.x0):
            step = delta if delta is not None else (1e-3 if real_dtype[k] == np.float32 else 1e-6)
            jac = np.zeros((n_y, _real_view(xv).size), dtype=real_dtype[k])
            parts = (1, 1j) if xv.dtype.kind == "c" else (1,)
            for j in range(xv.size):
                for p, unit in enumerate(parts):
                    shifted = []
                    for sign in (1, -1):
                        xs = [v.copy() for v in problem.x0]
                        xs[k].reshape(-1)[j] += sign * step * unit
                        shifted.append(np.concatenate([_real_view(np.asarray(v))
                                                       for v in problem.run(problem.ys, xs)]))
                    jac[:, j * len(parts) + p] = (shifted[0] - shifted[1]) / (2 * step)
            numerical.append(jac)
    finally:
        problem.close()
    return list(zip(theoretical, numerical))


@dataclass
class JacobianCheck:
    """Outcome of :func:`compare_jacobians`: per x, the two Jacobians and the worst error."""

    theoretical: list[np.ndarray]
    numerical: list[np.ndarray]
    max_error: float
    passed: bool
    atol: float
    rtol: float

    def __str__(self) -> str:
        return (f"compare_jacobians {'PASS' if self.passed else 'FAIL'}: max |theoretical - numerical| "
                f"= {self.max_error:.3e} (atol {self.atol:g}, rtol {self.rtol:g})")


def compare_jacobians(f: Any, x0: Any, *, atol: float = 1e-5, rtol: float = 1e-4, delta: Optional[float] = None,
                      **kwargs: Any) -> JacobianCheck:
    """Compare ``bridge.gradients``' Jacobian with central differences:
    passes when ``|t - n| <= atol + rtol * |n|`` everywhere."""
    pairs = compute_gradient(f, x0, delta=delta, **kwargs)
    worst, passed = 0.0, True
    for t, n in pairs:
        if t.size:
            err = np.abs(t - n)
            # NaN anywhere is the worst error, never a pass (np.max propagates it; Python's max would not).
            worst = float(np.max([worst, np.max(err)]))
            passed = passed and bool(np.all(err <= atol + rtol * np.abs(n)))
    return JacobianCheck([t for t, _ in pairs], [n for _, n in pairs], worst, passed, atol, rtol)
