"""``bridge.custom_gradient``: TF's ``@tf.custom_gradient``, in graph mode.

As TF Python builds it (custom_gradient.py, ``_graph_mode_decorator``): the
decorated function's results, its inputs and the Variables it reads (a new
read of each) pass through one ``IdentityN`` op whose gradient is overridden by a gradient
registered under a fresh name (``CustomGradient-<n>``).  That gradient calls
the user's ``grad_fn`` and gives nothing to the results' own inputs, so
backpropagation never enters the function's ops: the numbers are
``grad_fn``'s alone.  ``grad_fn`` builds ordinary ops, so gradients of it
(second order) come from those ops, as in TF.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import threading
from typing import Any, Callable

from bridge.framework.builders import Variable, convert_to_output, global_variables
from bridge.framework.nest import flatten, pack_as
from bridge.framework.graph import Graph, Output, get_default_graph
from .registry import RegisterGradient

__all__ = ["custom_gradient"]

_ids = itertools.count(1)
_ids_lock = threading.Lock()

#: Op types through which a Variable's handle is read.
_READS = frozenset({"ReadVariableOp", "ResourceGather", "ResourceGatherNd"})


def custom_gradient(f: Callable = None) -> Callable:
    """Decorate ``f(*inputs) -> (result, grad_fn)`` so that the gradient of
    ``result`` with respect to ``inputs`` is ``grad_fn(*result_grads)``.

    ``grad_fn`` returns one gradient per input (a list or tuple for several
    inputs, None for none).  Where ``f`` reads Variables that are not among
    its inputs, ``grad_fn`` must take ``variables=`` (the Variables, sorted by
    name) and return ``(input_grads, variable_grads)``, as in TF::

        @bridge.custom_gradient
        def log1pexp(x):
            e = bridge.ops.exp(x)
            def grad(dy):
                return dy * (1 - 1 / (1 + e))
            return bridge.ops.log1p(e), grad
    """
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        return _graph_mode(f, args, kwargs)
    return decorated


def _graph_mode(f: Callable, args: tuple, kwargs: dict) -> Any:
    if kwargs:
        raise ValueError(f"custom_gradient: {f.__name__} was called with keyword arguments "
                         f"{sorted(kwargs)}; in graph mode (as in TF) it takes its inputs positionally")
    graph = get_default_graph()
    args = tuple(a.value() if isinstance(a, Variable) else a for a in args)
    args = pack_as(args, [convert_to_output(a, name="x") for a in flatten(args)])
    before = {id(v) for v in global_variables(graph)}
    result, grad_fn = f(*args)
    if not callable(grad_fn):
        raise TypeError(f"custom_gradient: {f.__name__} must return (result, grad_fn), got a second value "
                        f"of type {type(grad_fn).__name__}")
    flat_args = flatten(args)
    flat_result = [convert_to_output(r, name="result") for r in flatten(result)]
    made = [v for v in global_variables(graph) if id(v) not in before]
    used = _variables_read(graph, flat_result, flat_args)
    used.update((id(v), v) for v in made)
    variables = sorted(used.values(), key=lambda v: v.name)
    takes_variables = _accepts_variables(grad_fn)
    if variables and not takes_variables:
        raise TypeError(f"custom_gradient: {f.__name__}'s grad_fn must accept the keyword argument 'variables', "
                        f"since the function uses variables: {[v.name for v in variables]}")
    n_result = len(flat_result)

    name = f"CustomGradient-{_next_id()}"

    @RegisterGradient(name)
    def _grad(unused_op: Any, *result_grads: Output) -> list:
        grads = pack_as(result, list(result_grads[:n_result]))
        grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
        if variables:
            input_grads, variable_grads = grad_fn(*grads, variables=variables)
            variable_grads = list(variable_grads)
            if len(variable_grads) != len(variables):
                raise ValueError(f"custom_gradient: {f.__name__}'s grad_fn returned {len(variable_grads)} "
                                 f"variable gradients for {len(variables)} variables "
                                 f"{[v.name for v in variables]}")
        else:
            input_grads, variable_grads = grad_fn(*grads), []
        input_grads = flatten(input_grads) if isinstance(input_grads, (list, tuple)) else [input_grads]
        if len(input_grads) != len(flat_args):
            raise ValueError(f"custom_gradient: {f.__name__}'s grad_fn returned {len(input_grads)} gradients "
                             f"for {len(flat_args)} inputs")
        return [None] * n_result + input_grads + variable_grads

    # A Variable passes as a new read of it (TF converts it so): its gradient
    # flows on through ReadVariableOp's gradient to its handle.
    tensors = flat_result + list(flat_args) + [v.read_value() for v in variables]
    with graph.gradient_override_map({"IdentityN": name}):
        passed = graph.create_op("IdentityN", [tensors], {"T": [t.dtype for t in tensors]},
                                 name="IdentityN").outputs
    for t, out in zip(tensors, passed):
        if not t.shape.unknown_rank:
            out.set_shape(list(t.shape))
    return pack_as(result, passed[:n_result])


def _next_id() -> int:
    with _ids_lock:
        return next(_ids)


def _accepts_variables(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "variables" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _variables_read(graph: Graph, results: list, inputs: list) -> dict:
    """id -> Variable for the Variables of ``graph`` read on the way from
    ``inputs`` to ``results`` (TF's ``_get_dependent_variables``)."""
    by_handle = {v.handle.op.name: v for v in global_variables(graph)}
    stop = {t.op.name for t in inputs if isinstance(t, Output)}
    found: dict = {}
    seen: set = set()
    todo = [t.op for t in results]
    while todo:
        op = todo.pop()
        if op.name in seen or op.name in stop:
            continue
        seen.add(op.name)
        if op.type in _READS and op.inputs and op.inputs[0].op.name in by_handle:
            v = by_handle[op.inputs[0].op.name]
            found[id(v)] = v
        todo.extend(t.op for t in op.inputs)
    return found
