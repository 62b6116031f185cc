"""The graph walk of one :func:`bridge.gradients` call, mixing two gradient registries.

TensorFlow's C++ gradient registry (reached through
``TF_AddGradientsWithPrefix``, :mod:`bridge.grad.cpp`) knows most standard
ops.  The Python registry (:mod:`bridge.grad.registry`) supplies the rest:
Julia custom ops, function calls (``bridge.function``), ``If``/``While`` from
``bridge.cond``/``bridge.while_loop``, second-order ops such as ``TanhGrad``,
and user overrides; see :mod:`bridge.grad.registry` for the order in which an
op's gradient is looked up.

:func:`bridge.gradients` finds the ops between ``xs`` and ``ys`` and gives each a
*level*: the largest number of Python-handled ops on a path from it to ys.
The C++-handled ops of one level form a block that no Python-handled op sits
inside (a path leaving the block through one could not come back to the same
level), so one ``TF_AddGradientsWithPrefix`` call differentiates the whole
block, given the summed gradients of its outputs (``dx``) and asked for its
boundary inputs.  Levels go from ys back: the block of level L, then the
Python ops of level L (their functions called with their outputs'
gradients), whose input gradients feed level L+1.  Without Python-handled ops
the whole subgraph is one block: TensorFlow's own path, one call.
Gradients reaching a tensor from several consumers are summed with ``AddN``.

Gathers' gradients are ``IndexedSlices`` (values, indices, dense_shape), as
in TF Python, aggregated as TF's ``_AggregatedGrads`` does: all IndexedSlices
concatenate (values and indices), a mix with dense gradients is an ``AddN``
of their densified forms; a tensor's contributions are taken in the order
TF's walk makes them (its consumers in the order of TF's queue from ys), so
concatenated rows come in TF's order.  Identity-like ops (Identity, Cast, ReadVariableOp)
pass them on: an op TF's C++ registry would take gets its IndexedSlices-aware
Python gradient where its output's gradient may arrive as IndexedSlices
(:func:`~bridge.grad.registry.register_sparse_passthrough`).  Every other
consumer, a C++ block included, gets them densified (``UnsortedSegmentSum``,
TF's ``convert_to_tensor``).

TF's builder works on whole nodes and computes *total* derivatives between
its ``x``: started from a block's boundary inputs it also walks any path that
leaves a producer another way and comes back into the block (say ``h`` feeding
both ``AddV2(h, f(h))`` and, through a Python op, ``f(h)``), and would count
that path twice.  The ops where such paths re-enter are taken one at a time
(the stretches between them are blocks again), and a single op whose inputs
depend on one another (``Mul(a, Tanh(a))``) is differentiated as a copy fed
through fresh ``Identity`` ops, which runs only when its gradient reads its
outputs (``Pow``).  The forward graph is never modified.

Every gradient op goes under a ``gradients`` name scope (``gradients_1``...).
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterable, Optional

from bridge.framework.errors import OpError
from bridge.framework.graph import Graph, Operation, Output
from bridge.framework.indexed_slices import IndexedSlices, convert_to_tensor
from ._helpers import _op, _zeros_like, aggregate_gradients, is_differentiable
from .cpp import add_cpp_gradients, clone_op, missing_types, note_missing_gradient
from .registry import (ACCEPTS_NONE, GradientFunction, gives_indexed_slices, gradient_source, no_gradient_error,
                       sparse_passthrough, takes_indexed_slices)

__all__ = ["Backprop", "current_call"]

# Per thread, the gradients() calls under way, innermost last (a gradient function may call gradients()).
_local = threading.local()


def _calls() -> list[str]:
    if not hasattr(_local, "calls"):
        _local.calls = []
    return _local.calls


def current_call() -> str:
    """A name for the gradients() call whose gradient functions run now: its name
    scope (``gradients``, ``gradients_1``, ``jacobian/row_0``...).  TensorArray
    gradients key their accumulators by it, as TF's by ``_GetGradSource``."""
    calls = _calls()
    return calls[-1] if calls else "gradients"


def _carries_gradient(t: Output) -> bool:
    """Whether a gradient can reach ``t``: float, complex and variant tensors, and
    resource handles (variables: their reads give the handle their gradient)."""
    return is_differentiable(t.dtype) or t.dtype.name == "resource"


def _reach(starts: Iterable[Operation], step: Callable[[Operation], Iterable[Operation]]) -> set[Operation]:
    """Every op reachable from ``starts`` by following ``step`` (asked once per op), starts included."""
    seen: set[Operation] = set()
    stack = list(starts)
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(n for n in step(op) if n not in seen)
    return seen


class Backprop:
    """One gradients() call: the ops between xs and ys, their levels and
    accumulated gradients (the module docstring tells how they are used)."""

    def __init__(self, graph: Graph, ys: list[Output], xs: list[Output], grad_ys: list[Output],
                 stops: set[Output], colocate: bool = False):
        self.graph = graph
        # colocate_gradients_with_ops: each op's gradient ops (and the sum of its
        # outputs' gradients) are colocated with it, so they go one op at a time.
        self.colocate = colocate
        self.ys, self.xs, self.grad_ys = ys, xs, grad_ys
        # As in TF's gradients_util (_StopOps): a stopped tensor stops its whole
        # producer, which is not differentiated (no gradient flows through any of
        # its outputs to its inputs); its outputs still receive gradients, so a
        # stopped tensor that is also an x gets its gradient.
        self.stop_ops: set[Operation] = {t.op for t in stops}
        self.xs_set = set(xs)
        self.xs_by_op: dict[Operation, list[Output]] = {}
        for x in self.xs_set:
            self.xs_by_op.setdefault(x.op, []).append(x)
        # t -> [(position of the consumer in TF's walk, gradient)]
        self.contribs: dict[Output, list[tuple[int, Any]]] = {}
        self.totals: dict[Output, Optional[Output]] = {}
        self.between = self._ops_between()
        self.order = self._reverse_topological_order()
        self.position = {op: i for i, op in enumerate(self.order)}
        self.kind: dict[Operation, Any] = {}
        self.fns: dict[Operation, GradientFunction] = {}
        # Tensors whose gradient may arrive as IndexedSlices (consumers come first in order).
        self.sparse: set[Output] = set()
        for op in self.order:
            fn = None
            try:
                kind, fn = gradient_source(op)
            except LookupError as exc:
                kind = exc  # raised only if a gradient actually reaches the op
            if kind == "cpp" and any(o in self.sparse for o in op.outputs) and sparse_passthrough(op.type):
                kind, fn = "python", sparse_passthrough(op.type)  # passes IndexedSlices on, as TF's
            if kind == "cpp" and op.type in missing_types:
                kind = "cpp alone"  # kept out of blocks: its own call raises the LookupError
            if op in self.stop_ops:
                kind = "none"  # never differentiated, so never in a C++ block either
            self.kind[op] = kind
            if kind == "python":
                self.fns[op] = fn
                if gives_indexed_slices(fn) or (takes_indexed_slices(fn)
                                                and any(o in self.sparse for o in op.outputs)):
                    self.sparse.update(op.inputs)
        self.level = self._levels()
        self.tf_position = self._tf_positions()
        self.scope = graph.get_name_scope() or "gradients"

    # which ops matter -----------------------------------------------------------------
    def _ops_between(self) -> set[Operation]:
        downstream = _reach((c for x in self.xs for c in x.consumers()),
                            lambda op: (c for out in op.outputs for c in out.consumers()))
        self.downstream = downstream
        return _reach((y.op for y in self.ys if y.op in downstream),
                      lambda op: () if op in self.stop_ops else (i.op for i in op.inputs if i.op in downstream))

    def _reverse_topological_order(self) -> list[Operation]:
        pending: dict[Operation, int] = {}
        producers: dict[Operation, set[Operation]] = {}
        for op in self.between:
            producers[op] = {i.op for i in op.inputs if i.op in self.between}
            pending.setdefault(op, 0)
            for p in producers[op]:
                pending[p] = pending.get(p, 0) + 1
        ready = [op for op in self.between if pending[op] == 0]
        order = []
        while ready:
            op = ready.pop()
            order.append(op)
            for p in producers[op]:
                pending[p] -= 1
                if pending[p] == 0:
                    ready.append(p)
        return order

    def _tf_positions(self) -> dict[Operation, int]:
        """Each op's turn in TF's gradients_util walk: a FIFO queue from ys' ops,
        an op joining it when its last consumer between has gone."""
        pending = dict.fromkeys(self.between, 0)
        for op in self.between:
            for t in op.inputs:
                if t.op in pending:
                    pending[t.op] += 1
        queue = collections.deque(dict.fromkeys(y.op for y in self.ys if pending.get(y.op) == 0))
        position: dict[Operation, int] = {}
        while queue:
            op = queue.popleft()
            position[op] = len(position)
            if op in self.stop_ops:
                continue
            for t in op.inputs:
                if t.op in pending:
                    pending[t.op] -= 1
                    if pending[t.op] == 0:
                        queue.append(t.op)
        return position

    def _levels(self) -> dict[Operation, int]:
        level: dict[Operation, int] = {}
        for op in self.order:  # consumers come first
            best = 0
            for out in op.outputs:
                for c in out.consumers():
                    if c in level:
                        best = max(best, level[c] + (self.kind[c] != "cpp"))
            level[op] = best
        return level

    def _wants(self, t: Output) -> bool:
        return (t.op in self.between or t in self.xs_set) and _carries_gradient(t)

    # accumulation ----------------------------------------------------------------------
    def _contribute(self, t: Output, g: Any, consumer: Optional[Operation] = None) -> None:
        if g is not None:
            key = -1 if consumer is None else self.tf_position.get(consumer, len(self.tf_position))
            self.contribs.setdefault(t, []).append((key, g))

    def _take(self, t: Output) -> list:
        """The gradients given to ``t``, in TF's order (see the module docstring)."""
        return [g for _, g in sorted(self.contribs.pop(t, []), key=lambda p: p[0])]

    def _total(self, t: Output) -> Any:
        """The summed gradient of ``t``: an Output, IndexedSlices or None."""
        if t not in self.totals:
            parts = self._take(t)
            self.totals[t] = aggregate_gradients(parts) if parts else None
        return self.totals[t]

    def run(self) -> list[Optional[Output]]:
        _calls().append(self.scope)
        try:
            return self._run()
        finally:
            _calls().pop()

    def _run(self) -> list[Optional[Output]]:
        for y, gy in zip(self.ys, self.grad_ys):
            if is_differentiable(y.dtype):
                self._contribute(y, gy)
        by_level: dict[int, tuple[list, list]] = {}
        for op in self.order:
            block, others = by_level.setdefault(self.level[op], ([], []))
            (block if self.kind[op] == "cpp" else others).append(op)
        for level in sorted(by_level):
            block, others = by_level[level]
            if block and self.colocate:
                for op in block:  # consumers first: the order of self.order
                    self._backprop_op(op)
            elif block:
                self._backprop_block(block, level)
            for op in others:
                self._backprop_op(op)
        return [self._colocated(x.op, lambda x=x: self._total(x)) for x in self.xs]

    def _colocated(self, op: Operation, make: Callable[[], Any]) -> Any:
        if not self.colocate:
            return make()
        with self.graph.colocate_with(op):
            return make()

    # one C++ call per block ---------------------------------------------------------------
    def _backprop_block(self, block: list[Operation], level: int) -> None:
        # Work items in processing order: ("block", ops) or ("op", op).
        work: list[tuple[str, Any]] = [("block", block)]
        while work:
            kind, item = work.pop(0)
            if kind == "op":
                self._backprop_op(item)
            else:
                work[0:0] = self._backprop_block_once(item, level)

    def _backprop_block_once(self, block: list[Operation], level: int) -> list[tuple[str, Any]]:
        """One C++ call over ``block``; or, where paths from outside re-enter it,
        the pieces to take instead: those ops alone, the stretches between them
        (in processing order) as blocks again."""
        members = set(block)
        boundary = list(dict.fromkeys(t for op in block for t in op.inputs
                                      if t.op not in members and self._wants(t)))
        inner_xs = [x for op in block for x in self.xs_by_op.get(op, ()) if self._wants(x)]
        seeded = [t for op in block for t in op.outputs if self.contribs.get(t)]
        if not seeded or not (boundary or inner_xs):
            return []
        reentry = self._reentry(members, boundary + inner_xs, level)
        if reentry:
            pieces: list[tuple[str, Any]] = []
            stretch: list[Operation] = []
            for op in block:
                if op in reentry:
                    if stretch:
                        pieces.append(("block", stretch))
                        stretch = []
                    pieces.append(("op", op))
                else:
                    stretch.append(op)
            if stretch:
                pieces.append(("block", stretch))
            return pieces
        # TF's builder rejects an x no y depends on (e.g. behind a None gradient).
        reachable = self._ancestors_within(members, [t.op for t in seeded])
        boundary = [t for t in boundary if any(c in reachable for c in t.consumers())]
        inner_xs = [x for x in inner_xs if x.op in reachable]
        if not (boundary or inner_xs):
            return []
        saved = {t: list(self.contribs[t]) for t in seeded}
        ys, dys = [], []
        for t in seeded:
            dys.append(convert_to_tensor(aggregate_gradients(self._take(t))))
            # TF's builder stops at a y's op and would drop paths through the op's
            # consumers inside the block; an Identity beyond the op keeps them.
            feeds_block = any(c in members for out in t.op.outputs for c in out.consumers())
            ys.append(_op("Identity", [t], name="seed") if feeds_block else t)
        try:
            result = add_cpp_gradients(self.graph, ys, boundary + inner_xs, dys, "grad")
        except OpError as exc:
            note_missing_gradient(exc)
            self.contribs.update(saved)  # the per-op walk pinpoints the op, or gets past it
            return [("op", op) for op in block]
        for t, g in zip(boundary, result):
            self._contribute(t, g, min((c for c in t.consumers() if c in members),
                                       key=lambda c: self.tf_position.get(c, len(self.tf_position))))
        for x, g in zip(inner_xs, result[len(boundary):]):
            self.totals[x] = g  # TF's result already includes the seed given to x
        for op in block:
            for x in self.xs_by_op.get(op, ()):
                self.totals.setdefault(x, None)  # no y depends on it through this block
        return []

    def _ancestors_within(self, members: set[Operation], starts: list[Operation]) -> set[Operation]:
        return _reach((op for op in starts if op in members),
                      lambda op: (t.op for t in op.inputs if t.op in members))

    def _reentry(self, members: set[Operation], xs: list[Output], level: int) -> set[Operation]:
        """The block ops TF's builder, started from the producers of ``xs``, would
        reach from outside the block: through another output of a producer or a
        path from one x to another (through a Python op, say), which C++ would
        differentiate too.  Empty when one call over the block is right."""
        # Ops processed before every block op come after them all in the graph.
        first = min(self.position[op] for op in members)

        def onward(op: Operation) -> Iterable[Operation]:
            if op in members:
                return ()  # reached the block: that is what is asked
            if op in self.between:
                if self.level[op] < level or self.position[op] < first:
                    return ()  # cannot lead back into the block
            elif not self.stop_ops:
                return ()  # not on a path to ys: cannot lead into the block
            # (with stop ops, a path may leave the ops between and come back
            # through a stop op, which TF's builder would differentiate)
            return (c for out in op.outputs for c in out.consumers())

        starts = (c for p in {x.op for x in xs} for out in p.outputs for c in out.consumers() if c not in members)
        return _reach(starts, onward) & members

    # one op at a time -----------------------------------------------------------------------
    def _backprop_op(self, op: Operation) -> None:
        if self.colocate:
            with self.graph.colocate_with(op):
                return self._backprop_op_here(op)
        return self._backprop_op_here(op)

    def _backprop_op_here(self, op: Operation) -> None:
        out_grads = [self._total(o) if _carries_gradient(o) else None for o in op.outputs]
        if all(g is None for g in out_grads):
            return
        inputs = op.inputs
        needed = [i for i, t in enumerate(inputs) if self._wants(t)]
        if not needed:
            return
        kind = self.kind[op]
        if isinstance(kind, LookupError):
            raise kind
        if kind == "none":
            return
        if kind == "python":
            grads = self._python_gradient(op, self.fns[op], out_grads)
            for i in needed:
                self._contribute(inputs[i], grads[i], op)
            return
        tensors = list(dict.fromkeys(inputs[i] for i in needed))
        out_grads = [convert_to_tensor(g) for g in out_grads]
        for t, g in zip(tensors, self._cpp_gradient(op, out_grads, tensors)):
            self._contribute(t, g, op)

    def _python_gradient(self, op: Operation, fn: GradientFunction,
                         out_grads: list[Optional[Output]]) -> list[Optional[Output]]:
        grads = list(out_grads)
        if not takes_indexed_slices(fn):
            grads = [convert_to_tensor(g) for g in grads]
        if not getattr(fn, ACCEPTS_NONE, False):
            for i, o in enumerate(op.outputs):
                if grads[i] is None and is_differentiable(o.dtype):
                    grads[i] = _zeros_like(o)
        with self.graph.name_scope(f"{op.name}_grad"):
            result = fn(op, *grads)
        n = op.num_inputs
        if isinstance(result, (Output, IndexedSlices)) or result is None:
            result = [result]
        result = list(result)
        if len(result) != n:
            raise ValueError(f"the gradient function of {op.type} returned {len(result)} gradients, "
                             f"but operation '{op.name}' has {n} inputs")
        for i, g in enumerate(result):
            if g is not None and not isinstance(g, (Output, IndexedSlices)):
                raise TypeError(f"the gradient function of {op.type} returned {g!r} for input {i} "
                                f"of '{op.name}'; expected an Output, IndexedSlices or None")
        return result

    def _cpp_gradient(self, op: Operation, out_grads: list[Optional[Output]],
                      tensors: list[Output]) -> list[Optional[Output]]:
        ys = [o for o, g in zip(op.outputs, out_grads) if g is not None]
        dys = [g for g in out_grads if g is not None]
        hint = f"{op.name}_grad"
        try:
            if self._interdependent(op, tensors):
                # Differentiate a copy fed through fresh Identity ops instead: its
                # inputs no longer depend on one another.  The copy only runs if
                # its gradient uses its outputs (as Pow's does).
                isolated = [_op("Identity", [t], name="isolate") for t in tensors]
                clone = clone_op(op, dict(zip(tensors, isolated)), f"{op.name}_isolated")
                ys = [clone.output(o.index) for o in ys]
                return add_cpp_gradients(self.graph, ys, isolated, dys, hint)
            return add_cpp_gradients(self.graph, ys, tensors, dys, hint)
        except OpError as exc:
            if note_missing_gradient(exc):
                raise no_gradient_error(op, exc.message) from None
            raise

    def _interdependent(self, op: Operation, tensors: list[Output]) -> bool:
        """Whether a data path leads from the producer of one of ``tensors`` to
        the producer of another.  TF's builder would then fold one input's
        gradient into another's, or (from another output of a multi-output
        producer) differentiate ops on that path, which may lack C++ gradients."""
        if len({t.op for t in tensors}) < 2:
            return False
        if self.stop_ops:
            # A path may leave the ops between and come back through a stop op
            # (Mul(x, StopOp(Square(x)))): look at every op downstream of xs.
            producers = {t.op for t in tensors}
            starts = {c for p in producers for out in p.outputs for c in out.consumers()
                      if c is not op and c in self.downstream}
            if not starts:
                return False
            reached = _reach(producers, lambda v: (i.op for i in v.inputs if i.op in self.downstream))
            return not reached.isdisjoint(starts)
        starts = {c for p in {t.op for t in tensors} for out in p.outputs for c in out.consumers()
                  if c is not op and c in self.between}
        if not starts:
            return False
        # Ops further upstream than every such consumer cannot lie on such a path.
        bound = max(self.position[c] for c in starts)
        upstream = lambda v: (i.op for i in v.inputs  # noqa: E731
                              if i.op in self.between and self.position[i.op] <= bound)
        reached = _reach((t.op for t in tensors if t.op in self.between), upstream)
        return not reached.isdisjoint(starts)
