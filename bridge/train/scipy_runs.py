"""The Session runs of one ``ScipyOptimizer.minimize`` call: reading the
starting point, each evaluation and Hessian-vector product, assigning the
optimum.

Each is a PreparedRun (bridge/framework/prepared_run.py) where the session
offers one: per evaluation that leaves TF_SessionRun and a copy of the point
in and of the loss and gradient out, where a ``make_callable`` function
spends about 8 us more (a feed dict's arrays are still converted at each
evaluation, as a callback may change them).  The optimizer keeps them between calls (detached
from the session, without the feed dict's values), so a loop of short
minimizations prepares them once.  Elsewhere (a ``julia_thread`` session, a
feed key that is not a tensor of the graph, a fetch of two tensors) the runs
go through ``make_callable`` and ``Session.run`` as before.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from bridge.framework.graph import Output
from bridge.framework.tensor import Tensor

__all__ = ["MinimizeRuns"]

# Feed dict values that cannot change during the minimization, converted once.
# Others (a numpy array, a list) are converted at each evaluation, as each
# Session.run converted them: a callback may change one in place.
_FED_ONCE = (Tensor, int, float, complex, str, bytes, np.generic)


class MinimizeRuns:
    """The runs of one ``minimize`` call of ``opt`` on ``session``, with
    ``feed_dict`` added to each evaluation.  :meth:`prepare` before the first
    run, :meth:`close` after the last (gives the prepared runs back to ``opt``)."""

    def __init__(self, opt: Any, session: Any, feed_dict: dict):
        self.opt, self.session = opt, session
        self.base_values = list(feed_dict.values())
        self.fed = list(feed_dict) + [r for reads in opt._reads for r in reads]
        self.fused = opt._fused is not None
        self._fetch_run = self._initial_run = self._assign_run = self._hessp_run = None
        self._run_fetch = None
        # The feed dict values converted again at each run (see _FED_ONCE).
        self._refed = [i for i, value in enumerate(self.base_values) if not isinstance(value, _FED_ONCE)]
        graph = opt.graph
        try:
            self._feeds: Optional[list] = [k if type(k) is Output else graph.as_graph_element(k) for k in self.fed]
        except (TypeError, ValueError, KeyError):
            self._feeds = None
        if self._feeds is None or not all(type(f) is Output and f.op.graph is graph for f in self._feeds):
            self._feeds = None
            self._callable()  # raises what make_callable says of such a key, as minimize always did
        self.run_hessp = (session.make_callable(opt._hessp, self.fed + [opt._vector]) if opt._hessp is not None
                          else None)

    def _callable(self) -> None:
        opt = self.opt
        self._run_fetch = self.session.make_callable(opt._fused if self.fused else opt._fetch, self.fed)

    def prepare(self) -> None:
        """Take (or make) the prepared runs this session offers; feed the feed dict's values."""
        opt = self.opt
        fetch = opt._fused if self.fused else opt.loss if opt._grad is None else None
        if fetch is not None and self._feeds is not None:
            run = self._take_fed("fetch", fetch, self._feeds)
            if run is not None and opt._feed_parts is None and not self._refed:  # x itself is the one value
                call = run.caller(len(self.base_values))
                # In place of the method (close() takes it away): a function that holds no reference to self.
                self.fetch = call if self.fused else lambda x: (call(x),)
        if opt._hessp is not None and self._feeds is not None:
            self._take_fed("hessp", opt._hessp, self._feeds + [opt._vector])
        if self._fetch_run is None and self._run_fetch is None:
            self._callable()
        self._initial_run = self._take("initial", opt._initial, [], ())
        self._assign_run = self._take("assign", None, [opt._x], [opt._assign_all])

    def _take_fed(self, name: str, fetch: Output, feeds: list) -> Any:
        """_take, for a run fed the feed dict's values (fed here) and then
        values written at each run (each of them must be writable)."""
        run = self._take(name, fetch, feeds, ())
        if run is None:
            return None
        n = len(self.base_values)
        if not all(run.writable(k) for k in range(n, len(feeds))):
            run.close()
            return None
        setattr(self, f"_{name}_run", run)  # close() gives it back whatever happens below
        for i, value in enumerate(self.base_values):
            run.feed(i, value)
        return run

    def _take(self, name: str, fetch: Optional[Output], feeds: list, targets: tuple) -> Any:
        prepare = getattr(self.session, "_prepare", None)
        if prepare is None:
            return None
        spares = self.opt._spare_runs.setdefault(name, [])
        try:
            reuse = spares.pop()  # atomic: two threads never take the same one
        except IndexError:
            reuse = None
        run = prepare(fetch, feeds, targets, reuse=reuse)
        if reuse is not None and run is not reuse:
            spares.append(reuse)  # not for this session: left for the next call
        return run

    def initial(self) -> np.ndarray:
        """The variables' values as one float64 vector (a new array)."""
        if self._initial_run is not None:
            return self._initial_run.run()
        return np.array(self.session.run(self.opt._initial), dtype=np.float64)

    def fetch(self, x: np.ndarray) -> Any:
        """The fetched value at ``x`` (one run): the fused float64 vector
        [loss, gradient...] where the optimizer has one, else a sequence of
        the loss (and the gradient)."""
        run = self._fetch_run
        if run is None:
            return self._run_fetch(*self.base_values, *self.opt._read_values(x))
        self._fill(run, x)
        out = run.run()
        return out if self.fused else (out,)

    def hessp(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The Hessian-vector product at ``x`` along ``p`` (one run), float64."""
        run = self._hessp_run
        p = np.asarray(p, dtype=np.float64)
        if run is None:
            return np.array(self.run_hessp(*self.base_values, *self.opt._read_values(x), p), dtype=np.float64)
        run.write(self._fill(run, x), p)
        return run.run()

    def _fill(self, run: Any, x: np.ndarray) -> int:
        """Feed ``run`` the re-fed base values and write the variables' values at
        ``x``; returns the index of the next feed."""
        values = self.base_values
        for i in self._refed:
            run.feed(i, values[i])
        k = len(values)
        for value in self.opt._read_values(x):
            run.write(k, value)
            k += 1
        return k

    def assign_all(self, x: np.ndarray) -> None:
        """Assign the float64 vector ``x`` to the variables (one run)."""
        run = self._assign_run
        if run is None:
            self.session.run(self.opt._assign_all, {self.opt._x: x})
            return
        run.write(0, x)
        run.run()

    def close(self) -> None:
        """Give the prepared runs back to the optimizer, detached (one spare of each)."""
        spare_runs = self.opt._spare_runs
        for name, run in (("fetch", self._fetch_run), ("initial", self._initial_run), ("assign", self._assign_run),
                          ("hessp", self._hessp_run)):
            if run is None:
                continue
            run.detach()
            spares = spare_runs.setdefault(name, [])
            if spares:
                run.close()
            else:
                spares.append(run)
        self._fetch_run = self._initial_run = self._assign_run = self._hessp_run = None
        self.__dict__.pop("fetch", None)  # back to the method
