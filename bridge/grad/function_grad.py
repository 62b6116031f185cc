"""Gradients of calls of functions: ``bridge.function`` ones, and those of an imported
graph's library (a call op of the function's type, or ``PartitionedCall`` /
``StatefulPartitionedCall`` naming it in ``f``, as ``tf.function`` calls).

The gradient of a call op is a call of a second function, built (and cached)
per set of outputs that receive gradients: it takes the call's inputs and
those output gradients, inlines the body (importing its GraphDef), and runs
:func:`bridge.gradients` on it.  So the forward body is recomputed inside the
gradient function rather than its intermediates kept; in exchange the
gradient function is an ordinary function again, differentiable to any
order, and bodies containing Julia ops, nested functions, conds and while
loops differentiate like any graph.  Random ops in a body draw new numbers
in that recomputation.
"""
from __future__ import annotations

import weakref
from typing import Optional, Sequence

from bridge.framework.func_graph import FuncGraph, TracedFunction
from bridge.framework.functions import lookup
from bridge.framework.graph import Operation, Output
from bridge.framework.indexed_slices import convert_to_tensor
from ._helpers import is_differentiable
from .api import gradients
from .registry import ACCEPTS_NONE, GradientFunction, RegisterGradient, add_gradient_source

__all__ = ["vjp", "call_gradient"]

VJP = tuple[TracedFunction, tuple[bool, ...]]

# function -> (output mask, wrt) -> its gradient function and input mask
_vjps: "weakref.WeakKeyDictionary[TracedFunction, dict[tuple, VJP]]" = weakref.WeakKeyDictionary()


def vjp(f: TracedFunction, out_mask: Sequence[bool], wrt: Optional[Sequence[bool]] = None) -> VJP:
    """The gradient function of ``f`` for outputs ``out_mask`` that receive gradients.

    It takes (all inputs..., the masked outputs' gradients...) and returns
    the inputs' gradients for the returned input mask: the inputs with a
    gradient, or exactly ``wrt`` (zeros where unconnected) when given.  A
    variable handle in ``wrt`` must be read on the way to those outputs (its
    gradient, of the value's dtype, has no zeros to stand in for it).
    """
    key = (tuple(bool(m) for m in out_mask), None if wrt is None else tuple(bool(w) for w in wrt))
    cache = _vjps.setdefault(f, {})
    cached = cache.get(key)
    if cached is not None:
        return cached
    fg = FuncGraph(f"{f.graph.name}_grad")
    with fg.as_default():
        xs = [fg.add_input(t.dtype, t.shape, name=f"x{i}") for i, t in enumerate(f.inputs)]
        dys = [fg.add_input(t.dtype, t.shape, name=f"dy{i}")
               for i, (t, m) in enumerate(zip(f.outputs, key[0])) if m]
        outs = f.inline(xs, name="forward")
        ys = [o for o, m in zip(outs, key[0]) if m]
        grads = gradients(ys, xs, grad_ys=dys, name="grad") if ys else [None] * len(xs)
        grads = [convert_to_tensor(g) for g in grads]  # a function returns tensors, not IndexedSlices
        if key[1] is None:
            in_mask = tuple(g is not None for g in grads)
            results = [g for g in grads if g is not None]
        else:
            in_mask = key[1]
            results = []
            for x, g, w in zip(xs, grads, in_mask):
                if w:
                    if g is None and not is_differentiable(x.dtype):
                        # (A variable handle the body reads has its value's gradient.)
                        raise TypeError(f"no gradient for {x.dtype.name} input '{x.name}'")
                    results.append(g if g is not None else fg.create_op("ZerosLike", [x]).output(0))
    cache[key] = (TracedFunction(fg, xs + dys, results), in_mask)
    return cache[key]


def call_gradient(op: Operation, *grads: Optional[Output]) -> list[Optional[Output]]:
    """Gradient of a call of a traced function: a call of its gradient function."""
    name = op.get_attr("f") if op.type in _CALL_OPS else op.type
    f = lookup(op.graph, name)
    if f is None:
        raise LookupError(f"operation '{op.name}' calls function '{name}', which is neither traced by "
                          "the bridge nor in the graph's library, so it has no gradient")
    n = op.num_inputs
    out_mask = tuple(g is not None for g in grads)
    if not any(out_mask):
        return [None] * n
    grad_fn, in_mask = vjp(f, out_mask)
    if not any(in_mask):
        return [None] * n
    call = grad_fn.call(op.inputs + [g for g in grads if g is not None], name=f"{op.type}_grad")
    outs = iter(call.outputs)
    return [next(outs) if m else None for m in in_mask]


setattr(call_gradient, ACCEPTS_NONE, True)

# The ops tf.function calls a function with (its ``f`` attribute).  TF differentiates them with
# a SymbolicGradient op, which has no gradient itself; the gradient function here does
# (TF Python's own gradient of a PartitionedCall of a function it traced is this one).
_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
for _type in _CALL_OPS:
    RegisterGradient(_type)(call_gradient)


def _function_call_source(op: Operation) -> Optional[GradientFunction]:
    return call_gradient if lookup(op.graph, op.type) is not None else None


add_gradient_source(_function_call_source)
