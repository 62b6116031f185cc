"""The verdicts of :func:`bridge.gradcheck`: its result, its default steps,
and the reading of the Taylor remainders' convergence (which steps are
above roundoff, which are fitted, when a slope means PASS, FAIL or that the
test cannot tell).  See ``gradient_check``'s module doc for what they mean."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

__all__ = ["GradcheckResult", "default_steps", "judge", "stopped", "PASS", "FAIL", "LINEAR", "QUADRATIC",
           "CONSTANT", "CANNOT_TEST", "DEFAULT_STEPS"]

#: The default steps of a float64 first-order test (see :func:`default_steps`).
DEFAULT_STEPS = tuple(10.0 ** -k for k in range(1, 6))

#: Verdicts of :func:`gradcheck` (see the module doc).
PASS, FAIL, LINEAR, QUADRATIC, CONSTANT, CANNOT_TEST = ("PASS", "FAIL", "LINEAR", "QUADRATIC", "CONSTANT",
                                                        "CANNOT TEST")
#: How the message of an order-2 test whose gradient has no gradient starts.
NOT_TWICE_DIFFERENTIABLE = "cannot test the Hessian: the gradient of f is not differentiable"
_EXACT = {0: CONSTANT, 1: LINEAR, 2: QUADRATIC}  # f a polynomial of this degree along v
_ORDINAL = {0: "zeroth", 1: "first", 2: "second"}

#: A remainder counts as above roundoff when it exceeds NOISE_FACTOR times
#: the noise of f measured near x (``_noise``), scaled to the outputs' size at
#: x+hv, and ROUNDOFF_ULPS ulps of the weighted outputs' size at x plus that
#: at x+hv.  float64 keeps a wide margin (it has steps to spare); float32 and
#: float16 rely on the measured noise, or too few steps would be left.
NOISE_FACTOR = 10.0
ROUNDOFF_ULPS = {True: 100.0, False: 2.0}  # by "is the precision float64?"
#: The slope is fitted over the steps above roundoff within this many decades
#: of the smallest one (at least MIN_FITTED steps): the smallest steps are the
#: ones where the Taylor terms above the remainder's order matter least.
WINDOW_DECADES = 1.0
MIN_FITTED = 3
#: A lower remainder must rise this far above roundoff for "f is a
#: polynomial along v" (LINEAR, QUADRATIC) to mean the derivatives are exact.
EXACT_MARGIN = 100.0


def default_steps(dtype: Any = np.float64, order: int = 1) -> tuple[float, ...]:
    """The steps :func:`gradcheck` takes by default when f is evaluated at
    ``dtype``'s precision: decades 1e-1 ... 1e-5 for float64 (half decades
    1e-1 ... 10^-3.5 for order 2); for float32 and float16, quarter decades down to where the
    remainder of a function whose derivatives are about as large as its
    values reaches roundoff, from 2.75 decades higher (at most 10^-0.25)."""
    eps = float(np.finfo(np.dtype(dtype)).eps)
    if eps <= 1e-15:
        # The second-order remainder falls by 1,000 a decade: half decades keep enough steps above roundoff.
        return DEFAULT_STEPS if order == 1 else tuple(10.0 ** -(k / 2) for k in range(2, 8))
    # The order-k remainder is about h^(k+1): it meets the roundoff level
    # (about 20 eps) there; half a decade lower shows where it stalls.
    low = np.floor(4 * (np.log10(20 * eps) / (order + 1) - 0.5)) / 4
    high = min(-0.25, low + 2.75)
    quarters = np.arange(high, low - 1e-9, -0.25)
    return tuple(float(10.0 ** q) for q in quarters)


@dataclass
class GradcheckResult:
    """Outcome of :func:`gradcheck`.

    ``verdict`` is one of ``PASS``, ``FAIL``, ``LINEAR``, ``QUADRATIC``,
    ``CONSTANT`` and ``CANNOT TEST`` (the module doc); ``passed`` is True for
    ``PASS``, and for ``LINEAR`` at order 1 and ``QUADRATIC`` at order 2.
    ``zeroth_order``, ``first_order`` and (order 2) ``second_order`` are the
    remainders per step; ``slope_*`` are NaN where no slope was fitted
    (fewer than two steps above roundoff); ``roundoff`` is the roundoff level
    each step's remainders are compared with; ``finite`` marks the steps
    where f(x+hv) was finite; ``fitted`` the steps whose order-k remainder
    was fitted; ``evaluated`` is False when the test stopped before the
    steps (a non-finite x0, f(x0) or gradient), whose remainders are then
    NaN.  ``dtype`` is the precision f was evaluated at (float64 where a
    float32 x0 was promoted).  ``resolution`` (on PASS): the smallest error
    of g v (order 2: of v'Hv), relative to it, that would have shown at the
    smallest fitted step; errors well below it go unseen."""

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
    order: int = 1
    second_order: Optional[np.ndarray] = field(default=None, repr=False)
    slope_second: float = float("nan")
    second_directional_derivative: float = float("nan")
    roundoff: Optional[np.ndarray] = field(default=None, repr=False)
    dtype: str = "float64"
    resolution: float = float("nan")

    @property
    def passed(self) -> bool:
        return self.verdict == PASS or self.verdict == _EXACT[self.order]

    @property
    def remainders(self) -> list[np.ndarray]:
        """The remainders of order 0 ... ``order``, per step."""
        found = [self.zeroth_order, self.first_order]
        return found + [self.second_order] if self.order == 2 else found

    @property
    def slopes(self) -> list[float]:
        found = [self.slope_zeroth, self.slope_first]
        return found + [self.slope_second] if self.order == 2 else found

    def __str__(self) -> str:
        head = f"gradcheck {self.verdict}" + (" (order 2)" if self.order == 2 else "")
        if self.verdict in (PASS, FAIL) and np.isfinite(self.slopes[self.order]):
            parts = [f"{_ORDINAL[k]}-order slope {_slope_text(self.slopes[k])} (want ~{k + 1})"
                     for k in range(self.order, -1, -1)]
            head += ": " + ", ".join(parts)
        rows = [head]
        if self.evaluated:
            labels = ["|f(x+hv)-f(x)|", "|f(x+hv)-f(x)-hgv|", "|...-h^2/2 v'Hv|"][:self.order + 1]
            rows.append(f"{'h':>10}" + "".join(f" {label:>20}" for label in labels))
            finite = self.finite if self.finite is not None else np.ones(len(self.steps), bool)
            main = self.remainders[self.order]
            for i, h in enumerate(self.steps):
                if self.fitted[i]:
                    note = ""
                elif not finite[i]:
                    note = "  (f(x+hv) not finite, not fitted)"
                elif self.roundoff is not None and self.fitted.any() and main[i] > self.roundoff[i]:
                    note = "  (not fitted: the fit takes the smallest steps above roundoff)"
                else:
                    note = "  (roundoff, not fitted)"
                rows.append(f"{h:10.1e}" + "".join(f" {r[i]:20.6e}" for r in self.remainders) + note)
        if self.message:
            rows.append(self.message)
        return "\n".join(rows)


def _slope_text(slope: float) -> str:
    return f"{slope:.2f}" if np.isfinite(slope) else "n/a"


def _slope(steps: np.ndarray, errors: np.ndarray, mask: np.ndarray) -> float:
    if mask.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log10(steps[mask]), np.log10(errors[mask]), 1)[0])


def stopped(verdict: str, message: str, steps: np.ndarray, order: int, dtype: str,
             value: float = float("nan")) -> GradcheckResult:
    """A result of a test that stopped before the steps."""
    empty = np.full(len(steps), np.nan)
    none = np.zeros(len(steps), bool)
    return GradcheckResult(steps, empty, empty.copy(), float("nan"), float("nan"), verdict, value,
                           float("nan"), none, None, message, none.copy(), evaluated=False, order=order,
                           second_order=empty.copy() if order == 2 else None, dtype=dtype)


def judge(result: GradcheckResult, min_order: float, eps: float, precision: np.dtype, notes: list) -> None:
    """Set the verdict, slopes and fitted steps of ``result`` from its remainders."""
    k = result.order
    steps, finite, roundoff = result.steps, result.finite, result.roundoff
    above = [finite & (r > roundoff) for r in result.remainders]
    windows = [_window(steps, a) for a in above]
    slopes = [_slope(steps, r, w) for r, w in zip(result.remainders, windows)]
    result.slope_zeroth, result.slope_first = slopes[0], slopes[1]
    if k == 2:
        result.slope_second = slopes[2]
    result.fitted = windows[k]
    need = min(MIN_FITTED, int(finite.sum()))
    exact = next((j for j in range(k + 1) if not above[j].any()), None)
    if exact is not None:
        # f is a polynomial of degree < exact along v, to roundoff.
        wrong = next((j for j in range(exact + 1, k + 1) if above[j].any()), None)
        if wrong is not None:  # ... but the derivative of order `wrong` is not 0
            clear = finite & (result.remainders[wrong] > 10 * roundoff)
            result.fitted = windows[wrong]
            if clear.sum() < min(2, need):
                result.verdict = CANNOT_TEST
                notes.append(f"cannot test: the {_ORDINAL[wrong]}-order remainder barely rises above the roundoff "
                             f"of {precision.name} (eps {eps:.1e}) while f {_moves(exact)}: "
                             f"{_more_precision(precision)}")
                return
            result.verdict = FAIL
            term = "g v" if wrong == 1 else "v'Hv"
            value = result.directional_derivative if wrong == 1 else result.second_directional_derivative
            notes.append(f"f {_moves(exact)} (the {_ORDINAL[exact]}-order remainder is at roundoff for every "
                         f"step), but {term} = {value:.6g} is not 0: the {'gradient' if wrong == 1 else 'Hessian'} "
                         "is wrong")
            return
        result.fitted = np.zeros(len(steps), bool)
        if exact >= 1:
            below = result.remainders[exact - 1]
            # Exact only as far as roundoff is small next to the term that moved.
            if not np.any(finite & (below > EXACT_MARGIN * roundoff)):
                result.verdict = CANNOT_TEST
                notes.append(f"cannot test: the {_ORDINAL[exact]}-order remainder is at roundoff for every step, "
                             f"but the {_ORDINAL[exact - 1]}-order one never rises {EXACT_MARGIN:.0f} times above "
                             f"the roundoff of {precision.name} (eps {eps:.1e}), so roundoff could hide an error "
                             f"of 1%: {_more_precision(precision)}")
                return
        result.verdict = _EXACT[exact]
        notes.append(_exact_note(exact, k))
        return
    if k == 2 and windows[1].sum() >= need:
        first = _settled(steps, result.first_order, roundoff, windows[1], 1.8, 1)
        if first == FAIL:
            result.verdict, result.fitted = FAIL, windows[1]
            notes.append(f"first-order remainder falls like O(h^{slopes[1]:.2f}), not O(h^2): the gradient is "
                         "wrong (fix it before testing the Hessian)")
            return
    if windows[k].sum() < need:
        result.verdict = CANNOT_TEST
        count = int(above[k].sum())
        where = {0: "no step rose", 1: "only one step rose"}.get(count, f"only {count} steps rose")
        notes.append(f"cannot test: {where} above the roundoff of {precision.name} (eps {eps:.1e}) in the "
                     f"{_ORDINAL[k]}-order remainder: {_more_precision(precision)}")
        return
    result.verdict = _settled(steps, result.remainders[k], roundoff, windows[k], min_order, k)
    if result.verdict == PASS:
        # An error e in g v (v'Hv) adds h e (h^2/2 e) to the remainder: at the
        # smallest fitted step, one much below the remainder goes unseen.
        h = steps[np.flatnonzero(windows[k])[-1]]
        r = result.remainders[k][np.flatnonzero(windows[k])[-1]]
        term = abs(result.directional_derivative) * h if k == 1 else \
            abs(result.second_directional_derivative) * h * h / 2
        result.resolution = float(r / term) if term > 0 else float("inf")
        if result.resolution > BLIND and precision != np.float64:
            result.verdict = CANNOT_TEST
            notes.append(f"cannot test: the {_ORDINAL[k]}-order remainder falls like O(h^{slopes[k]:.2f}), but at "
                         f"{precision.name}'s precision it stays so large next to "
                         f"{'h g v' if k == 1 else 'h^2/2 v' + chr(39) + 'Hv'} that an error of "
                         f"{_percent(result.resolution)} in {'g v' if k == 1 else 'v' + chr(39) + 'Hv'} would "
                         f"not show: {_more_precision(precision)}")
        elif 1e-3 < result.resolution < np.inf:
            notes.append(f"at {precision.name}'s precision this test cannot see an error in "
                         f"{'g v' if k == 1 else 'v' + chr(39) + 'Hv'} below about "
                         f"{_percent(result.resolution)} of it")
    elif result.verdict == FAIL:
        notes.append(f"{_ORDINAL[k]}-order remainder falls like O(h^{slopes[k]:.2f}), not O(h^{k + 1}): the "
                     f"{'gradient' if k == 1 else 'Hessian'} is wrong")
    elif result.verdict == CANNOT_TEST:
        tail = _local_slopes(steps, result.remainders[k], windows[k])
        notes.append(f"cannot test: the {_ORDINAL[k]}-order remainder has not settled into a power of h at the "
                     f"steps above the roundoff of {precision.name} (slope {slopes[k]:.2f} over them, local slopes "
                     f"{', '.join(f'{t:.2f}' for t in tail)} at the smallest): higher-order terms still dominate "
                     f"there: {_unsettled_advice(precision)}")


def _window(steps: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The steps of ``mask`` fitted: those within WINDOW_DECADES of its
    smallest step, or its MIN_FITTED smallest ones (steps are decreasing)."""
    chosen = np.zeros(len(steps), bool)
    where = np.flatnonzero(mask)
    if where.size == 0:
        return chosen
    smallest = steps[where[-1]]
    near = where[steps[where] <= smallest * 10 ** WINDOW_DECADES * (1 + 1e-9)]
    chosen[near if near.size >= MIN_FITTED else where[-MIN_FITTED:]] = True
    return chosen


#: A PASS below float64 must be able to see an error of this fraction of
#: g v (v'Hv): past it the verdict is CANNOT TEST.  (In float64 a coarse
#: resolution comes from the direction, say g v = 0 at a minimum, and is
#: only said.)
BLIND = 0.1

#: The local slopes of the smallest fitted steps agree this closely when the
#: remainder follows a power of h (the asymptotic regime of the Taylor test).
SETTLED = 0.5
#: "Far above roundoff": noise cannot make the slope between such steps.
STRONG = 10.0


def _local_slopes(steps: np.ndarray, remainder: np.ndarray, window: np.ndarray) -> list[float]:
    """The slopes between consecutive steps among the MIN_FITTED smallest of ``window``."""
    where = np.flatnonzero(window)[-MIN_FITTED:]
    logs_h, logs_r = np.log10(steps[where]), np.log10(remainder[where])
    return [float((logs_r[i] - logs_r[i + 1]) / (logs_h[i] - logs_h[i + 1])) for i in range(len(where) - 1)]


def _settled(steps: np.ndarray, remainder: np.ndarray, roundoff: np.ndarray, window: np.ndarray,
             min_order: float, order: int) -> str:
    """The verdict from the remainder's slopes over ``window`` and over its
    MIN_FITTED smallest steps (the most asymptotic ones), whose local
    slopes agree within SETTLED when the remainder follows a power of h:
    PASS when the smallest steps fall with slope >= min_order, settled or
    confirmed by the whole window; FAIL when the window falls more slowly
    and the smallest steps, settled, each fall closer to a wrong
    derivative's O(h^order) than to O(h^(order+1)); CANNOT TEST otherwise (larger steps'
    higher-order terms, which can make any slope, still dominate)."""
    tail = np.zeros(len(steps), bool)
    tail[np.flatnonzero(window)[-MIN_FITTED:]] = True
    overall, smallest = _slope(steps, remainder, window), _slope(steps, remainder, tail)
    local = _local_slopes(steps, remainder, window)
    settled = max(local) - min(local) <= SETTLED
    if smallest >= min_order and (settled or overall >= min_order):
        return PASS
    if overall < min_order and settled and max(local) < order + 0.5:
        return FAIL
    # A decade (or more) between the two smallest steps, both far above
    # roundoff: its slope alone is a measurement (float64's decades, where a
    # small error takes over from the h^(order+1) term only at the last step).
    last = np.flatnonzero(window)[-2:]
    if (overall < min_order and local[-1] < order + 0.5 and np.log10(steps[last[0]] / steps[last[1]]) >= 1 - 1e-9
            and np.all(remainder[last] > STRONG * roundoff[last])):
        return FAIL
    return CANNOT_TEST


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2g}%" if np.isfinite(fraction) else "all"


def _moves(degree: int) -> str:
    return "does not change along v" if degree == 0 else "is linear along v"


def _exact_note(degree: int, order: int) -> str:
    if degree == 0:
        return ("f does not change along v (every remainder at roundoff level for every step): the test saw "
                "nothing but derivatives along v of 0 = the finite differences, which checks nothing; try inputs "
                "where f's outputs depend on x")
    if degree == order == 1:
        return ("f is linear along v: f(x+hv) - f(x) equals h g v to roundoff at every step, so g v is "
                "exact; there is no convergence order to measure (no first-order slope)")
    if degree == 1:
        return ("f is linear along v: the gradient is exact along v (the first-order remainder is at roundoff for "
                "every step) and v'Hv = 0, but a zero second derivative checks no Hessian; test it where f curves")
    return ("f is quadratic along v: f(x+hv) - f(x) - h g v equals h^2/2 v'Hv to roundoff at every step, so "
            "v'Hv is exact; there is no convergence order to measure (no second-order slope)")


def _unsettled_advice(precision: np.dtype) -> str:
    if precision == np.float64:
        return "try other steps (steps=...), another direction (seed=...) or another x0"
    return _more_precision(precision)


def _more_precision(precision: np.dtype) -> str:
    if precision == np.float64:
        return "give larger steps (steps=...)"
    return (f"{precision.name} leaves too few usable steps for this function; test it in float64 (a double "
            "version of the op, or promote=True with a function that accepts float64), or give larger steps")
