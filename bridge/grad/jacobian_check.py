"""Full Jacobians against central differences: :func:`compute_gradient` and
:func:`compare_jacobians` compare the Jacobian from ``bridge.gradients`` with
central differences, as ``tf.test.compute_gradient`` does (the convergence
test along one direction is :func:`bridge.gradcheck`, in ``gradient_check``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from bridge.framework.indexed_slices import convert_to_tensor
from bridge.framework.session import Session
from .check_problem import Problem

__all__ = ["compute_gradient", "compare_jacobians", "JacobianCheck"]


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
    problem = Problem(f, x0, x, feed_dict, session, attrs)
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
