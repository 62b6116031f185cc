"""``ScipyOptimizer``: ``scipy.optimize.minimize`` over a graph's loss.

TensorFlow's ``tf.contrib.opt.ScipyOptimizerInterface`` workflow (and
ADCME's ``BFGS!``): the trained Variables are packed into one float64
vector ``x``; each evaluation of the loss and its gradient at ``x`` is ONE
``Session.run`` that feeds ``x`` (cast to each variable's dtype) in place
of the variables' reads and fetches the loss and the packed gradient (as one
float64 vector where the loss is known to be a scalar).  A first small run
reads the starting point from the variables; its evaluation is the method's
first (and the callback's iteration 0); at the end one more run assigns the
optimum to the Variables, unless they hold it already.

How ``x`` reaches the loss: every ``ReadVariableOp`` of a trained variable
that the loss (or its gradient) depends on is fed, as TensorFlow's
interface feeds variables.  A variable read some other way on that path
(``ResourceGather``, a function or loop taking its handle, ...) cannot be fed:
for it each evaluation first assigns ``x`` to the variable (one extra run
per evaluation), which ``ScipyOptimizer.assigns_first`` lists.  In that mode
the variable holds the last evaluated point if the minimization is
interrupted; otherwise the Variables change only at the end.

A loss, gradient or Hessian-vector product that is NaN or infinite stops the
minimization at once: scipy's methods do not recover from one (L-BFGS-B
reported success with ``fun=nan``, BFGS and CG went on from a NaN point).
The result then says so (``success`` False, ``status`` 98, ``nonfinite``,
a message naming the evaluation, the iteration and what was not finite, also
issued as a ``RuntimeWarning``), and the Variables hold the best point seen
whose loss and gradient were finite.
"""
from __future__ import annotations

import functools
import inspect
import math
import warnings
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from bridge.framework import dtypes
from bridge import ops
from bridge.framework.builders import Variable, placeholder, trainable_variables
from bridge.framework.graph import Output
from .progress import ScipyProgress
from .scipy_runs import MinimizeRuns

__all__ = ["ScipyOptimizer"]

# scipy.optimize.minimize's methods, by what they need from us.
_GRADIENT_FREE = frozenset({"nelder-mead", "powell", "cobyla", "cobyqa"})
_USES_JAC = frozenset({"cg", "bfgs", "newton-cg", "l-bfgs-b", "tnc", "slsqp", "trust-constr",
                       "trust-ncg", "trust-krylov"})
_USES_HESSP = frozenset({"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"})
_NEEDS_HESS = frozenset({"dogleg", "trust-exact"})  # the full Hessian matrix: not offered
_TAKE_BOUNDS = frozenset({"l-bfgs-b", "tnc", "slsqp", "trust-constr", "powell", "nelder-mead",
                          "cobyla", "cobyqa"})
# Methods whose callback may take ``intermediate_result`` (and stop by raising StopIteration).
_NEW_CALLBACK = frozenset({"nelder-mead", "powell", "cg", "bfgs", "newton-cg", "l-bfgs-b", "trust-constr",
                           "trust-ncg", "trust-krylov", "cobyqa", "cobyla", "slsqp"})

# Ops that take a variable's handle without reading its value.
_NO_VALUE_READ = frozenset({"VariableShape", "VarIsInitializedOp", "Identity"})
_RECENT = 8  # evaluated points remembered, to find the loss at scipy's iterates
_RESULT_SIGNATURE = inspect.Signature([inspect.Parameter("intermediate_result",
                                                         inspect.Parameter.POSITIONAL_OR_KEYWORD)])
_FLOAT64 = np.dtype(np.float64)


@functools.lru_cache(maxsize=None)
def _scipy_passes_results() -> bool:
    """Whether callbacks may take ``intermediate_result`` (scipy 1.11 on)."""
    import scipy

    try:
        return tuple(int(p) for p in scipy.__version__.split(".")[:2]) >= (1, 11)
    except ValueError:
        return True


class _Stopped(Exception):
    """The user's callback asked to stop, for methods scipy cannot stop."""


class _NonFinite(Exception):
    """An evaluation gave a NaN or infinite loss, gradient or Hessian-vector
    product: args (what, detail)."""


#: ``OptimizeResult.status`` when the callback stopped the minimization, and
#: when a non-finite value did.
STATUS_STOPPED, STATUS_NON_FINITE = 99, 98


class ScipyOptimizer:
    """Minimize ``loss`` over ``var_list`` with ``scipy.optimize.minimize``.

    ``loss``: a scalar floating Output.  ``var_list``: the Variables to train
    (default ``bridge.trainable_variables(loss.graph)``), each of a floating
    dtype and a fully known shape.  ``method``: any method name
    ``scipy.optimize.minimize`` accepts (default "L-BFGS-B") or a callable
    minimizer.  Gradient methods get the loss and gradient from one run;
    Newton-CG, trust-ncg, trust-krylov and trust-constr also get
    Hessian-vector products built with ``bridge.gradients`` (the gradient of
    ``grad . v``, one run per product); Nelder-Mead, Powell, COBYLA and
    COBYQA fetch the loss alone.  dogleg and trust-exact, which need the whole
    Hessian, are refused.

    ``var_to_bounds``: dict Variable -> (low, high), each a scalar, an array
    of the variable's shape (or broadcastable to it) or None (unbounded); only
    for methods that take bounds (L-BFGS-B, TNC, SLSQP, trust-constr, Powell,
    Nelder-Mead, COBYLA, COBYQA).  ``options``: scipy's ``options`` dict
    (``maxiter``, ``gtol``, ...).

    ``colocate_gradients_with_ops``: each gradient op on its forward op's
    device, as the optimizers' ``minimize`` (a model split over workers keeps
    its backward pass on them).

    ``verbose``: progress on stderr: True shows a tqdm bar on a terminal,
    else a line for the starting point, at most one a second, and one at the
    end; a number N, a line every N iterations and one at the end.

    ``minimize(session, feed_dict=None, callback=None)`` returns scipy's
    ``OptimizeResult``.  ``history`` holds the loss at the starting point
    (``history[0]``) and after each iteration, ``evaluations`` the
    evaluations of the loss (and gradient) in the last call, the starting
    point's included, ``hessp_evaluations`` its Hessian-vector products.

    A NaN or infinite loss, gradient or Hessian-vector product stops the
    minimization (see the module doc): ``success`` False, ``status`` 98,
    ``nonfinite`` "loss", "gradient" or "Hessian-vector product", and a
    ``message`` (also a ``RuntimeWarning``) naming the evaluation and the
    iteration; ``x``, ``fun`` and the Variables are the best point seen whose
    loss and gradient were finite (the starting point if none was).
    """

    def __init__(self, loss: Output, var_list: Optional[Sequence[Variable]] = None,
                 method: Union[str, Callable] = "L-BFGS-B",
                 var_to_bounds: Optional[dict] = None, options: Optional[dict] = None,
                 name: str = "ScipyOptimizer", verbose: Union[bool, int] = False,
                 colocate_gradients_with_ops: bool = False):
        if not isinstance(loss, Output):
            raise TypeError(f"ScipyOptimizer: loss must be an Output, got {type(loss).__name__}")
        if not loss.dtype.is_floating:
            raise TypeError(f"ScipyOptimizer: loss '{loss.name}' must be a floating tensor, is {loss.dtype.name}")
        shape = loss.shape
        if not shape.unknown_rank and len(shape) != 0:
            raise ValueError(f"ScipyOptimizer: loss '{loss.name}' must be a scalar, has shape {shape!r}")
        self.loss = loss
        self.colocate_gradients_with_ops = bool(colocate_gradients_with_ops)
        self.graph = graph = loss.graph
        self.method = method
        self._method = method.lower() if isinstance(method, str) else "_custom"
        if self._method in _NEEDS_HESS:
            raise ValueError(f"ScipyOptimizer: method {method!r} needs the full Hessian matrix, which is not "
                             "offered; use 'trust-ncg' or 'trust-krylov' (Hessian-vector products)")
        if not callable(method) and self._method not in _USES_JAC | _GRADIENT_FREE:
            raise ValueError(f"ScipyOptimizer: unknown method {method!r} (scipy.optimize.minimize's methods: "
                             f"{', '.join(sorted(_USES_JAC | _GRADIENT_FREE))}, or a callable)")
        self.options = dict(options or {})
        if not isinstance(verbose, (bool, int)) or verbose < 0:
            raise ValueError(f"ScipyOptimizer: verbose must be True, False or a number of iterations >= 0, "
                             f"got {verbose!r}")
        self.verbose = verbose
        self.var_list = self._check_vars(var_list)
        self._sizes = [int(np.prod(tuple(v.shape), dtype=np.int64)) for v in self.var_list]
        self._offsets = np.concatenate([[0], np.cumsum(self._sizes)]).astype(int)
        self.size = int(self._offsets[-1])
        self.bounds = self._check_bounds(var_to_bounds)
        self.history: list[float] = []
        self.evaluations = 0
        self.hessp_evaluations = 0
        self._spare_runs: dict = {}  # MinimizeRuns' prepared runs, kept between calls
        # Control dependencies around the constructor are not the optimizer's ops' business.
        with graph.as_default(), graph.name_scope(name), graph.control_dependencies(None):
            self._build()

    # --- checks ---------------------------------------------------------------

    def _check_vars(self, var_list: Optional[Sequence[Variable]]) -> list[Variable]:
        if var_list is None:
            var_list = trainable_variables(self.graph)
            if not var_list:
                raise ValueError(f"ScipyOptimizer: var_list is None and the graph of loss '{self.loss.name}' "
                                 "has no trainable variables")
        var_list = list(var_list)
        if not var_list:
            raise ValueError("ScipyOptimizer: var_list is empty")
        seen = set()
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"ScipyOptimizer: var_list must hold bridge.Variable objects, got {v!r}")
            if v.graph is not self.graph:
                raise ValueError(f"ScipyOptimizer: variable '{v.name}' belongs to another graph than "
                                 f"loss '{self.loss.name}'")
            if v.name in seen:
                raise ValueError(f"ScipyOptimizer: variable '{v.name}' appears twice in var_list")
            seen.add(v.name)
            if not v.dtype.is_floating:
                raise TypeError(f"ScipyOptimizer: variable '{v.name}' is {v.dtype.name}; only floating "
                                "variables can be optimized")
            if v.shape.unknown_rank or any(d is None for d in v.shape):
                raise ValueError(f"ScipyOptimizer: variable '{v.name}' needs a fully known shape, has {v.shape!r}")
        return var_list

    def _check_bounds(self, var_to_bounds: Optional[dict]) -> Any:
        if not var_to_bounds:
            return None
        if self._method not in _TAKE_BOUNDS and self._method != "_custom":
            raise ValueError(f"ScipyOptimizer: method {self.method!r} does not take bounds (var_to_bounds); "
                             f"methods that do: {', '.join(sorted(_TAKE_BOUNDS))}")
        from scipy.optimize import Bounds

        index = {v.name: i for i, v in enumerate(self.var_list)}
        low = np.full(self.size, -np.inf)
        high = np.full(self.size, np.inf)
        for var, pair in var_to_bounds.items():
            if not isinstance(var, Variable) or var.name not in index or self.var_list[index[var.name]] is not var:
                raise ValueError(f"ScipyOptimizer: var_to_bounds key {var!r} is not a variable of var_list")
            try:
                lo, hi = pair
            except (TypeError, ValueError):
                raise ValueError(f"ScipyOptimizer: bounds of variable '{var.name}' must be a pair (low, high), "
                                 f"got {pair!r}") from None
            i = index[var.name]
            sl = slice(self._offsets[i], self._offsets[i + 1])
            shape = tuple(var.shape)
            for side, value, fill, out in (("low", lo, -np.inf, low), ("high", hi, np.inf, high)):
                if value is None:
                    continue
                try:
                    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), shape)
                except ValueError:
                    raise ValueError(f"ScipyOptimizer: {side} bound of variable '{var.name}' has shape "
                                     f"{np.shape(value)}, not the variable's {shape} (or a scalar)") from None
                out[sl] = np.where(np.isnan(arr), fill, arr).ravel()
            if np.any(low[sl] > high[sl]):
                raise ValueError(f"ScipyOptimizer: bounds of variable '{var.name}' have low > high")
        return Bounds(low, high)

    # --- graph ----------------------------------------------------------------

    def _pack(self, tensors: list[Output], name: str) -> Output:
        """One float64 vector of ``tensors`` (Reshape, Cast, ConcatV2)."""

        flat = []
        for t in tensors:
            t = ops.reshape(t, [-1])
            if t.dtype != dtypes.float64:
                t = ops.cast(t, DstT=dtypes.float64)
            flat.append(t)
        if len(flat) == 1:
            return ops.identity(flat[0], name=name)
        return ops.concat_v2(flat, 0, name=name)

    def _unpack(self, vector: Output) -> list[Output]:
        """``vector``'s pieces as each variable's shape and dtype."""

        parts = []
        for v, off, size in zip(self.var_list, self._offsets, self._sizes):
            piece = ops.slice(vector, [int(off)], [int(size)])
            piece = ops.reshape(piece, np.array([int(d) for d in v.shape], np.int32))
            if v.dtype != dtypes.float64:
                piece = ops.cast(piece, DstT=v.dtype)
            parts.append(piece)
        return parts

    def _build(self) -> None:
        from bridge.framework.indexed_slices import convert_to_tensor
        from bridge.grad import gradients

        g = self.graph
        fetches = [self.loss]
        self._grad = self._hessp = self._vector = None
        if self._method not in _GRADIENT_FREE:
            colocate = self.colocate_gradients_with_ops
            grads = [convert_to_tensor(g) for g in gradients(self.loss, self.var_list, name="gradients",
                                                             colocate_gradients_with_ops=colocate)]
            for v, gr in zip(self.var_list, grads):
                if gr is None:
                    raise ValueError(f"ScipyOptimizer: loss '{self.loss.name}' has no gradient with respect to "
                                     f"variable '{v.name}' (it does not depend on it, or only through ops "
                                     "without a gradient); leave it out of var_list")
            self._grad = self._pack(grads, "packed_gradient")
            fetches.append(self._grad)
            if self._method in _USES_HESSP:
                with g.name_scope("hessp"):
                    self._vector = placeholder(dtypes.float64, [self.size], name="vector")
                    dots = []
                    for gr, piece in zip(grads, self._unpack(self._vector)):
                        dot = ops.sum(ops.reshape(ops.mul(gr, piece), [-1]), 0)
                        dots.append(dot if dot.dtype == dtypes.float64 else ops.cast(dot, DstT=dtypes.float64))
                    gv = dots[0] if len(dots) == 1 else ops.add_n(dots)
                    hv = [convert_to_tensor(g) for g in
                          gradients(gv, self.var_list, name="gradients", unconnected_gradients="zero",
                                    colocate_gradients_with_ops=colocate)]
                    self._hessp = self._pack(hv, "product")
                fetches.append(self._hessp)
        with g.name_scope("assign"):
            self._x = placeholder(dtypes.float64, [self.size], name="x")
            assigns = [v.assign(piece, name=f"assign_{i}")
                       for i, (v, piece) in enumerate(zip(self.var_list, self._unpack(self._x)))]
        self._reads, others = self._find_reads(fetches)
        self.assigns_first = [v for v, o in zip(self.var_list, others) if o]
        with g.control_dependencies(assigns):
            self._assign_all = ops.no_op(name="assign_all")
        self._assign_some = None
        if self.assigns_first:
            with g.control_dependencies([a for a, o in zip(assigns, others) if o]):
                self._assign_some = ops.no_op(name="assign_unfed")
        self._fetch = [self.loss] if self._grad is None else [self.loss, self._grad]
        # Loss and gradient as one float64 vector: one fetch to convert, not two.
        # Only where the loss is known to be a scalar (else its check at run time).
        self._fused = None
        if self._grad is not None and not self.loss.shape.unknown_rank:
            with g.name_scope("loss_and_gradient"):
                head = self.loss if self.loss.dtype == dtypes.float64 else ops.cast(self.loss, DstT=dtypes.float64)
                self._fused = ops.concat_v2([ops.reshape(head, [1]), self._grad], 0, name="packed")
        # What _read_values feeds: per variable read, x's slice as its shape and dtype.
        parts = [(int(off), int(off + size), tuple(int(d) for d in v.shape),
                  None if v.dtype == dtypes.float64 else v.dtype.as_numpy_dtype, len(reads))
                 for v, reads, off, size in zip(self.var_list, self._reads, self._offsets, self._sizes) if reads]
        whole = len(parts) == 1 and parts[0][2:] == ((self.size,), None, 1)
        self._feed_parts = None if whole else parts
        with g.name_scope("initial"):
            # Reads of their own: the ones the loss uses are fed during the minimization.
            self._initial = self._pack([v.read_value() for v in self.var_list], "x0")

    def _find_reads(self, fetches: list[Output]) -> tuple[list[list[Output]], list[list[str]]]:
        """For each variable, the ReadVariableOp outputs ``fetches`` depend on
        (to feed), and the other ops on the way that take its handle."""
        by_handle = {v.handle.op: i for i, v in enumerate(self.var_list)}
        reads: list[list[Output]] = [[] for _ in self.var_list]
        others: list[list[str]] = [[] for _ in self.var_list]

        def variable_of(t: Output) -> Optional[int]:
            op = t.op
            while op.type == "Identity":
                op = op.inputs[0].op
            return by_handle.get(op)

        seen: set = set()
        stack = [t.op for t in fetches]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            op_type = op.type
            inputs = op.inputs
            if op_type == "ReadVariableOp":
                k = variable_of(inputs[0])
                if k is not None:
                    reads[k].append(op.output(0))
                    continue  # fed: nothing behind it runs
            elif op_type not in _NO_VALUE_READ:
                for t in inputs:
                    if t.dtype == dtypes.resource:
                        k = variable_of(t)
                        if k is not None:
                            others[k].append(f"{op_type} '{op.name}'")
            stack.extend(t.op for t in inputs)
            stack.extend(op.control_inputs)
        return reads, others

    # --- running --------------------------------------------------------------

    def _read_values(self, x: np.ndarray) -> Sequence[np.ndarray]:
        """The value fed to each read of ``_reads`` (in order) for the point ``x``."""
        parts = self._feed_parts
        if parts is None:  # one float64 vector variable, read once: x itself
            return (x,)
        values = []
        for off, end, shape, np_dtype, count in parts:
            value = x[off:end].reshape(shape)
            if np_dtype is not None:
                value = value.astype(np_dtype)
            values.extend([value] * count)
        return values

    def initial_point(self, session: Any) -> np.ndarray:
        """The variables' current values as one float64 vector (one run)."""
        return np.array(session.run(self._initial), dtype=np.float64)

    def minimize(self, session: Any, feed_dict: Optional[dict] = None,
                 callback: Optional[Callable[[int, float], Any]] = None) -> Any:
        """Run the minimization from the variables' current values; at the end
        the Variables hold the optimum (``result.x``).

        ``feed_dict`` is added to every run (the data of the loss).
        ``callback(iteration, loss)`` is called first with the starting point
        (iteration 0, the loss at the variables' values), then after each
        iteration of the method (``history[iteration] == loss``); returning
        True stops the minimization (``result.success`` False).  Returns
        scipy's ``OptimizeResult``.

        The starting point is the variables' values, clipped into the bounds
        (as scipy's bounded methods clip it).  Session.run calls: one to read
        it, one per evaluation (``evaluations``; the starting point's is the
        method's first; two per evaluation for variables in
        ``assigns_first``), one per Hessian-vector product, and one to assign
        the optimum unless the Variables hold it already (say, it is the
        start).

        A NaN or infinite loss, gradient or Hessian-vector product stops the
        minimization there, with a ``RuntimeWarning``: the result has
        ``success`` False, ``status`` 98, ``nonfinite`` (which value), a
        ``message`` naming the evaluation (counting from 1: the starting
        point) and the iteration it happened in (numbered as ``history``),
        and ``x``/``fun`` the best point seen whose loss and gradient were
        finite, which the Variables then hold (their starting values if no
        point was finite).
        """
        from scipy.optimize import OptimizeResult
        from scipy.optimize import minimize as scipy_minimize

        if getattr(session, "graph", None) is not self.graph:
            raise ValueError("ScipyOptimizer.minimize: session runs another graph than loss "
                             f"'{self.loss.name}'")
        self.history = []
        self.evaluations = 0
        self.hessp_evaluations = 0
        run = _Minimization(self, session, dict(feed_dict or {}), callback)
        new_style = self._method in _NEW_CALLBACK and _scipy_passes_results()
        kwargs: dict = {"method": self.method, "callback": run.result_callback() if new_style else run.on_x,
                        "options": dict(self.options)}
        if self._grad is not None:
            kwargs["jac"] = True
        if self._hessp is not None:
            kwargs["hessp"] = run.hessp
        if self.bounds is not None:
            kwargs["bounds"] = self.bounds
        try:
            try:
                x0 = run.start()
                result = scipy_minimize(run.evaluate, x0, **kwargs)
            except _Stopped as stop:
                result = OptimizeResult(x=stop.args[0], fun=stop.args[1], success=False, status=STATUS_STOPPED,
                                        message="callback asked to stop", nit=max(len(self.history) - 1, 0),
                                        nfev=self.evaluations)
            except _NonFinite as stop:
                result = self._non_finite_result(stop, run)
            run.finish(result.x)
        except BaseException as exc:
            run.progress.close(None, exc)
            raise
        finally:
            run.runs.close()
        run.progress.close(result, None)
        return result

    def _non_finite_result(self, stop: "_NonFinite", run: "_Minimization") -> Any:
        """The result (and RuntimeWarning) when a non-finite value stopped the minimization."""
        from scipy.optimize import OptimizeResult

        what, detail = stop.args
        iteration = len(self.history)  # the one under way: history[iteration] would be its loss
        where = (f"at evaluation {self.evaluations} (the starting point)"
                 if what != "Hessian-vector product" and self.evaluations == 1 else
                 f"at evaluation {self.evaluations}, in iteration {iteration}"
                 if what != "Hessian-vector product" else
                 f"at Hessian-vector product {self.hessp_evaluations}, in iteration {iteration}")
        best_f, best_x, best_evaluation = run.best
        if best_x is None:
            x_best, f_best = run.x0, float("nan")
            kept = "no point had a finite loss and gradient: the variables keep their starting values"
        else:
            x_best, f_best = np.frombuffer(best_x, np.float64).copy(), best_f
            kept = (f"the variables hold the best finite point seen: loss {f_best:.6g}, "
                    f"evaluation {best_evaluation}")
        message = (f"ScipyOptimizer ({self.method}): the {what} of '{self.loss.name}' is not finite "
                   f"({detail}) {where}; stopped there, {kept}")
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return OptimizeResult(x=x_best, fun=f_best, success=False, status=STATUS_NON_FINITE,
                              message=message, nonfinite=what, nit=max(iteration - 1, 0), nfev=self.evaluations,
                              nhev=self.hessp_evaluations)

    def _where_not_finite(self, vector: np.ndarray) -> str:
        """'nan in 3 of 10 entries, first in variable 'w' at index (1, 0)'."""
        bad = ~np.isfinite(vector)
        first = int(np.argmax(bad))
        k = int(np.searchsorted(self._offsets, first, side="right") - 1)
        var = self.var_list[k]
        index = np.unravel_index(first - int(self._offsets[k]), tuple(int(d) for d in var.shape))
        return (f"{vector[first]} in {int(bad.sum())} of {vector.size} entries, first in variable '{var.name}' "
                f"at index {tuple(int(i) for i in index)}")

    def __repr__(self) -> str:
        names = ", ".join(v.name for v in self.var_list)
        return f"<bridge.train.ScipyOptimizer method={self.method!r} loss='{self.loss.name}' vars=[{names}]>"


class _Minimization:
    """One call of ``minimize``: the runs it makes (worked out once), the
    best finite point, the loss at recent points, and the progress shown."""

    def __init__(self, opt: ScipyOptimizer, session: Any, feed_dict: dict, callback: Optional[Callable]):
        self.opt, self.session, self.callback = opt, session, callback
        self.feed_dict = feed_dict
        # Every evaluation runs the same fetches and feeds: prepared once (scipy_runs.py).
        self.runs = runs = MinimizeRuns(opt, session, feed_dict)
        self.base_values, self.fused = runs.base_values, runs.fused
        self.best: list = [np.inf, None, 0]  # the best finite point: loss, x's float64 bytes, evaluation
        # The loss at recent points, for callbacks that pass the iterate but not
        # its loss (scipy's old style; every method's intermediate_result has it).
        self.recent: Optional[dict[bytes, float]] = (
            None if opt._method in _NEW_CALLBACK and _scipy_passes_results() else {})
        self.x0: Optional[np.ndarray] = None
        self.start_value: Optional[tuple] = None  # (x0's bytes, what evaluate returns there), used once
        self.held: Optional[bytes] = None  # the point the Variables hold, where known
        options = opt.options
        self.progress = ScipyProgress(f"ScipyOptimizer ({opt.method})", opt.verbose, options.get("maxiter"), opt)

    def start(self) -> np.ndarray:
        """Read the starting point from the variables (one small run), clipped
        into the bounds as scipy's bounded methods clip it, and evaluate it
        (the method's first evaluation, kept for it); report it as iteration
        0.  Returns the starting point.

        The evaluation is an ordinary fed one rather than part of the reading
        run: a run of other fetches is another executor in TensorFlow, with
        its own copy of the graph's constants (a loss's data), and switching
        between two of them costs a pass over that data from memory."""
        opt = self.opt
        self.runs.prepare()
        self.x0 = x0 = self.runs.initial()
        self.held = x0.tobytes()
        if opt.bounds is not None:
            x0 = np.clip(x0, opt.bounds.lb, opt.bounds.ub)
        if x0.tobytes() != self.held and opt._assign_some is not None:
            self.session.run(opt._assign_some, {opt._x: x0})
            self.held = x0.tobytes() if len(opt.assigns_first) == len(opt.var_list) else None
        out = self._evaluated(x0, self.runs.fetch(x0))
        self.start_value = (x0.tobytes(), out)
        self.after_iteration(out if opt._grad is None else out[0], x0)
        return x0

    def evaluate(self, x: np.ndarray) -> Any:
        """scipy's objective: the loss (and gradient) at ``x``, one run."""
        opt = self.opt
        if self.start_value is not None:
            start, self.start_value = self.start_value, None
            if x.tobytes() == start[0]:  # the method starts where start() evaluated
                return start[1]
        if opt._assign_some is not None:
            self.session.run(opt._assign_some, {opt._x: x})
            self.held = x.tobytes() if len(opt.assigns_first) == len(opt.var_list) else None
        return self._evaluated(x, self.runs.fetch(x))

    def _evaluated(self, x: np.ndarray, values: Any) -> Any:
        """What ``evaluate`` returns for the fetched ``values`` at ``x``;
        counts the evaluation, raises _NonFinite, keeps the best point."""
        opt = self.opt
        opt.evaluations += 1
        if self.fused:  # one float64 vector: [loss, gradient...]
            f = values.item(0)
            # The sum of squares is finite only if every entry is (or, rarely, overflows: then look closer).
            if not math.isfinite(values.dot(values)):
                if not math.isfinite(f):
                    raise _NonFinite("loss", f"{f}")
                if not np.all(np.isfinite(values[1:])):
                    raise _NonFinite("gradient", opt._where_not_finite(values[1:]))
            # Writable, as scipy's methods may expect (a PreparedRun's array is, and is ours).
            grad = values[1:] if values.flags.writeable else values[1:].copy()
        else:
            loss = np.asarray(values[0])
            if loss.ndim:
                raise ValueError(f"ScipyOptimizer: loss '{opt.loss.name}' must be a scalar, evaluated to shape "
                                 f"{loss.shape}")
            f = float(loss)
            if not math.isfinite(f):
                raise _NonFinite("loss", f"{f}")
            grad = None if opt._grad is None else np.array(values[1], dtype=np.float64)
            if grad is not None and not np.all(np.isfinite(grad)):
                raise _NonFinite("gradient", opt._where_not_finite(grad))
        best = self.best
        if f < best[0]:  # x's bytes: a method may change its array later (Nelder-Mead's simplex)
            best[0], best[2] = f, opt.evaluations
            best[1] = x.tobytes() if x.dtype is _FLOAT64 and type(x) is np.ndarray else \
                np.array(x, dtype=np.float64).tobytes()
        recent = self.recent
        if recent is not None:
            if len(recent) >= _RECENT:
                del recent[next(iter(recent))]
            recent[x.tobytes()] = f
        return f if grad is None else (f, grad)

    def hessp(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        opt = self.opt
        if opt._assign_some is not None:
            self.session.run(opt._assign_some, {opt._x: x})
            self.held = x.tobytes() if len(opt.assigns_first) == len(opt.var_list) else None
        opt.hessp_evaluations += 1
        product = self.runs.hessp(x, p)
        if not np.all(np.isfinite(product)):
            raise _NonFinite("Hessian-vector product", opt._where_not_finite(product))
        return product

    def loss_at(self, x: np.ndarray) -> float:
        f = None if self.recent is None else self.recent.get(np.asarray(x, dtype=np.float64).tobytes())
        if f is None:  # an iterate the method never evaluated: one more run
            out = self.evaluate(np.asarray(x, dtype=np.float64).copy())
            f = out if self.opt._grad is None else out[0]
        return f

    def after_iteration(self, f: float, x: np.ndarray) -> None:
        """Record iteration ``len(history)``'s loss; the callback may stop here
        (_Stopped at ``x``; scipy's callbacks turn it into StopIteration)."""
        history = self.opt.history
        history.append(f)
        if self.progress.on:
            self.progress.iteration(len(history) - 1, f, self.opt.evaluations)
        if self.callback is not None and self.callback(len(history) - 1, f):
            raise _Stopped(np.array(x, dtype=np.float64), f)

    def on_result(self, intermediate_result) -> None:
        fun = intermediate_result.get("fun")
        if type(fun) is float or isinstance(fun, np.floating):  # what scipy's methods pass: no more to check
            f = float(fun)
        else:
            f = float(fun) if fun is not None and np.ndim(fun) == 0 else self.loss_at(intermediate_result.x)
        try:
            self.after_iteration(f, intermediate_result.x)
        except _Stopped:
            raise StopIteration from None

    def result_callback(self) -> Callable:
        """``on_result`` for scipy, as a function that carries its signature:
        scipy reads it (inspect.signature) at every minimize to see that it
        takes ``intermediate_result``, which costs more on a bound method.
        With no progress shown and no callback, a float loss is just recorded."""
        on_result = self.on_result
        record = None if self.progress.on or self.callback is not None else self.opt.history.append

        def callback(intermediate_result):
            if record is not None:
                fun = intermediate_result.get("fun")
                if type(fun) is float:  # what scipy's methods pass, from evaluate
                    return record(fun)
            return on_result(intermediate_result)
        callback.__signature__ = _RESULT_SIGNATURE
        return callback

    def on_x(self, xk, *state) -> None:  # trust-constr before scipy 1.11 adds its state
        self.after_iteration(self.loss_at(xk), xk)

    def finish(self, x: Any) -> None:
        """Assign ``x`` to the Variables, unless they hold it already."""
        x = np.asarray(x, dtype=np.float64)
        if x.tobytes() != self.held:
            self.runs.assign_all(x)
            self.held = x.tobytes()
