"""The graph around a function under a gradient check (``gradcheck``,
``compute_gradient``): one placeholder per input array, the outputs to
differentiate, a session to evaluate them at any x.

A function (or an op type name) that ``gradcheck`` builds itself may be
built at double precision although x0 is float32, float16 or complex64
(``promote``): the roundoff of the low-precision evaluation then no longer
hides the convergence of the Taylor remainders.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework.graph import Graph, Output
from bridge.framework.session import Session

__all__ = ["Problem", "PROMOTED"]

#: The dtype a low-precision input is promoted to (``Problem(promote=True)``).
PROMOTED = {np.dtype(np.float16): np.dtype(np.float64), np.dtype(np.float32): np.dtype(np.float64),
            np.dtype(np.complex64): np.dtype(np.complex128)}


class Problem:
    """The graph around ``f``, with a session to evaluate it at any x.

    ``x0`` keeps the caller's arrays (and dtypes); ``dtypes`` are those of
    the placeholders the graph was built with, which differ from x0's where
    the build was promoted to double precision (``promoted`` is then True:
    with ``promote=True``, when f is a function or an op type name and x0
    holds a float32, float16 or complex64 array, the graph is built with
    float64/complex128 placeholders first; when that build raises, say
    because a custom op takes float32 only, it is built again at x0's
    dtypes).  ``promote_error`` keeps why a promotion was given up."""

    def __init__(self, f: Any, x0: Any, x: Any = None, feed_dict: Optional[dict] = None,
                 session: Optional[Session] = None, attrs: Optional[dict] = None, promote: bool = False):
        self.single = not isinstance(x0, (list, tuple))
        self.x0 = [np.array(v, dtype=np.float64 if np.asarray(v).dtype.kind in "iub" else None)
                   for v in ([x0] if self.single else x0)]
        for i, v in enumerate(self.x0):
            if v.dtype.kind not in "fc":
                raise TypeError(f"gradcheck: x0[{i}] has dtype {v.dtype}; gradients need floating values")
        self.feed = dict(feed_dict or {})
        self._own_session = False
        self.promoted = False
        self.promote_error = ""
        if isinstance(f, Output) or (isinstance(f, (list, tuple)) and f and isinstance(f[0], Output)):
            if x is None:
                raise TypeError("gradcheck: with Outputs of an existing graph, pass x= (the tensors x0 feeds)")
            self.ys = [f] if isinstance(f, Output) else list(f)
            self.xs = [x] if isinstance(x, Output) else list(x)
            self.graph = self.ys[0].graph
            self.dtypes = [np.dtype(t.dtype.as_numpy_dtype) for t in self.xs]
        else:
            if not (isinstance(f, str) or callable(f)):
                raise TypeError(f"gradcheck: f must be a function, an op type name or Outputs, not {f!r}")
            native = [v.dtype for v in self.x0]
            wider = [PROMOTED.get(d, d) for d in native]
            built = None
            if promote and wider != native:
                try:
                    built = self._build(f, wider, attrs)
                    self.promoted = True
                except Exception as exc:  # f refuses double precision: test it at its own dtype
                    self.promote_error = f"{type(exc).__name__}: {exc}".strip()
            if built is None:
                built = self._build(f, native, attrs)
            self.graph, self.xs, self.ys, self.dtypes = built
        if len(self.xs) != len(self.x0):
            raise ValueError(f"gradcheck: {len(self.x0)} arrays in x0 for {len(self.xs)} x tensors")
        self.ys = [y for y in self.ys if y.dtype.is_floating or y.dtype.is_complex]
        if not self.ys:
            raise ValueError("gradcheck: f has no floating output to differentiate")
        if session is None:
            session, self._own_session = Session(self.graph), True
        self.session = session

    def _build(self, f: Any, dtypes: Sequence[np.dtype], attrs: Optional[dict]) -> tuple:
        from bridge.framework import builders
        from bridge.framework.nest import flatten
        graph = Graph()
        with graph.as_default():
            xs = [builders.placeholder(d, v.shape, name=f"x{i}") for i, (d, v) in enumerate(zip(dtypes, self.x0))]
            if isinstance(f, str):
                result = graph.create_op(f, xs, attrs=attrs, name=f).outputs
            else:
                result = f(*xs)
            ys = [y for y in flatten(result) if isinstance(y, Output)]
        return graph, xs, ys, list(dtypes)

    def point(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``xs`` rounded to the placeholders' dtypes: the point f is evaluated at."""
        return [np.asarray(v).astype(d, copy=False) for v, d in zip(xs, self.dtypes)]

    def run(self, fetches: Any, xs: Sequence[np.ndarray]) -> Any:
        feed = dict(self.feed)
        feed.update(zip(self.xs, self.point(xs)))
        return self.session.run(fetches, feed)

    def close(self) -> None:
        if self._own_session:
            self.session.close()
