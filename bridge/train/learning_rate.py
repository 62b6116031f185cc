"""The global step and TF's learning-rate schedules over it (``tf.compat.v1.train``).

A schedule is an Output computed in ``learning_rate``'s dtype (float32 for a
Python float, as TF converts it); an optimizer casts it to each variable's
dtype, so a float64 model trains with ``float64(float32 schedule)``, as in TF.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework import dtypes
from bridge.framework.builders import Variable, constant
from bridge.framework.graph import Graph, Output, get_default_graph
from bridge import ops
from .optimizer import cast, to_output

__all__ = ["get_global_step", "create_global_step", "get_or_create_global_step",
           "assert_global_step", "exponential_decay", "piecewise_constant"]

#: The collection (and variable name) TF keeps the global step under.
GLOBAL_STEP = "global_step"


def assert_global_step(global_step: Any) -> None:
    """TypeError unless ``global_step`` is an integer scalar Variable or Output."""
    if not isinstance(global_step, (Variable, Output)):
        raise TypeError('Existing "global_step" must be a Variable or Tensor: %s.' % (global_step,))
    if not global_step.dtype.is_integer:
        raise TypeError('Existing "global_step" does not have integer type: %s' % (global_step.dtype,))
    shape = global_step.shape
    if not getattr(shape, "unknown_rank", False) and len(shape) != 0 and all(d is not None for d in shape):
        raise TypeError('Existing "global_step" is not scalar: %s' % (list(shape),))


def get_global_step(graph: Optional[Graph] = None) -> Optional[Variable]:
    """The graph's global step: the one Variable in its "global_step"
    collection, else a Variable named "global_step", else None."""
    graph = graph or get_default_graph()
    found = graph.collections.get(GLOBAL_STEP, [])
    if len(found) > 1:
        logging.getLogger(__name__).error("Multiple tensors in global_step collection.")
        return None
    if found:
        step = found[0]
    else:
        step = next((v for v in graph.collections.get("variables", []) if v.op.name == GLOBAL_STEP), None)
        if step is None:
            return None
    assert_global_step(step)
    return step


def create_global_step(graph: Optional[Graph] = None) -> Variable:
    """A new global step: the int64 scalar Variable "global_step" (at the graph's
    root, not trainable, starting at 0). ValueError if the graph has one."""
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
        step = Variable(np.zeros((), np.int64), name=GLOBAL_STEP, trainable=False, graph=graph)
    graph.collections.setdefault(GLOBAL_STEP, []).append(step)
    return step


def get_or_create_global_step(graph: Optional[Graph] = None) -> Variable:
    """The graph's global step, made (see ``create_global_step``) if it has none."""
    graph = graph or get_default_graph()
    return get_global_step(graph) or create_global_step(graph)


def _cast_value(value: Any, dtype: dtypes.DType) -> Output:
    """``tf.cast(value, dtype)`` of a Python value, a Variable or an Output:
    the value is converted with its own dtype first (an int to int32, a float to
    float32), then cast, exactly as TF does."""
    if isinstance(value, Output):
        return cast(value, dtype)
    if isinstance(value, Variable):
        return cast(value.read_value(), dtype)
    g = get_default_graph()
    with g.name_scope("Cast") as scope:
        x = constant(value, name="x")
        return x if x.dtype == dtype else ops.cast(x, DstT=dtype, name=scope)


def exponential_decay(learning_rate: Any, global_step: Any, decay_steps: Any, decay_rate: Any,
                      staircase: bool = False, name: Optional[str] = None) -> Output:
    """``learning_rate * decay_rate ** (global_step / decay_steps)`` (the
    exponent floored with ``staircase``), in ``learning_rate``'s dtype."""
    if global_step is None:
        raise ValueError("global_step is required for exponential_decay.")
    g = get_default_graph()
    with g.name_scope(name or "ExponentialDecay") as scope:
        lr = to_output(learning_rate, "initial_learning_rate")
        dtype = lr.dtype
        steps = _cast_value(decay_steps, dtype)
        rate = _cast_value(decay_rate, dtype)
        step = _cast_value(global_step, dtype)
        p = ops.real_div(step, steps, name="truediv")
        if staircase:
            p = ops.floor(p)
        return ops.mul(lr, ops.pow(rate, p), name=scope)


def piecewise_constant(x: Any, boundaries: Sequence[Any], values: Sequence[Any],
                       name: Optional[str] = None) -> Output:
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < x <= boundaries[i]``, ``values[-1]`` after the last
    boundary.  Boundaries take x's dtype (int32 boundaries are cast to an int64
    x, other mismatches are a ValueError); values must share one dtype.

    TF picks the value with ``tf.case``; here a chain of SelectV2 picks the same
    value (the values are computed either way), with no control flow.
    """
    boundaries, values = list(boundaries), list(values)
    bounds = [to_output(b, "Const") for b in boundaries]
    vals = [to_output(v, "Const") for v in values]
    xr = to_output(x, "x")
    for i, b in enumerate(bounds):
        if b.dtype != xr.dtype:
            if b.dtype == dtypes.int32 and xr.dtype == dtypes.int64:
                bounds[i] = cast(b, xr.dtype)
            else:
                raise ValueError("Boundaries (%s) must have the same dtype as x (%s)." %
                                 (b.dtype.name, xr.dtype.name))
    for v in vals[1:]:
        if v.dtype != vals[0].dtype:
            raise ValueError("Values must have elements all with the same dtype (%s vs %s)." %
                             (vals[0].dtype.name, v.dtype.name))
    if len(bounds) != len(vals) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    if not bounds:
        return vals[0]
    g = get_default_graph()
    with g.name_scope(name or "PiecewiseConstant"):
        result = vals[-1]
        for b, v in zip(reversed(bounds), reversed(vals[:-1])):
            result = ops.select_v2(ops.less_equal(xr, b), v, result)
        return result
