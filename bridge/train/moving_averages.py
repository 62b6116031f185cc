"""``ExponentialMovingAverage``: shadow copies of variables that follow them
slowly, as TF's ``tf.compat.v1.train.ExponentialMovingAverage``.

``ema.apply(var_list)`` makes, once per variable, a non-trainable variable
``<var>/<name>`` colocated with it (the average, starting at the variable's
initial value), and returns an op updating every average::

    shadow -= (shadow - variable) * (1 - decay)

with TF's arithmetic: ``decay`` is float32 (``min(decay, (1 + n) / (10 + n))``
with ``num_updates`` n), ``1 - decay`` is computed in float32 and cast to the
variable's type, and the variables are read when the update runs (after its
control dependencies: ``SyncReplicasOptimizer`` runs it after the update).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from bridge import ops
from bridge.framework import dtypes
from bridge.framework.builders import Variable, constant, convert_to_output, trainable_variables
from bridge.framework.graph import Operation

from .optimizer import _create_slot, group

__all__ = ["ExponentialMovingAverage"]

_FLOATS = ("bfloat16", "float16", "float32", "float64")


class ExponentialMovingAverage:
    """TF's ``ExponentialMovingAverage(decay, num_updates=None, zero_debias=False,
    name="ExponentialMovingAverage")``; see the module docstring.  Variables
    only (TF also averages tensors, into zero-debiased slots)."""

    def __init__(self, decay: float, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict[tuple, Variable] = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list: Optional[Sequence[Variable]] = None) -> Operation:
        """Make the averages of ``var_list`` (default: the trainable variables)
        that do not exist yet; return the op (``<name>``) that updates them all."""
        if var_list is None:
            var_list = trainable_variables()
        var_list = list(var_list)
        for var in var_list:
            if not isinstance(var, Variable):
                raise TypeError(f"ExponentialMovingAverage.apply: the bridge averages variables only, not "
                                f"{type(var).__name__}")
            if var.dtype.name not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            key = (var.graph, var.name)
            if key not in self._averages:
                initial = var.initializer.inputs[1]
                self._averages[key] = _create_slot(var, lambda: ops.identity(initial), self._name)
                var.graph.collections.setdefault("moving_average_variables", []).append(var)
        graph = var_list[0].graph if var_list else None
        if graph is None:
            raise ValueError("ExponentialMovingAverage.apply: no variables to average")
        with graph.as_default(), graph.name_scope(self._name) as scope:
            decay = constant(np.float32(self._decay), name="decay")
            if self._num_updates is not None:
                # A variable is read when the update runs, after its control dependencies (TF reads anew).
                count = (self._num_updates.read_value() if isinstance(self._num_updates, Variable)
                         else convert_to_output(self._num_updates, None, graph, name="num_updates"))
                n = ops.cast(count, DstT=dtypes.float32, name="num_updates")
                decay = ops.minimum(decay, ops.real_div(ops.add_v2(constant(np.float32(1.0)), n),
                                                        ops.add_v2(constant(np.float32(10.0)), n)))
            updates = [_assign_moving_average(self._averages[(v.graph, v.name)], v, decay) for v in var_list]
            return group(updates, scope[:-1])

    def average(self, var: Variable) -> Optional[Variable]:
        """The average of ``var``, or None if ``apply`` never saw it."""
        return self._averages.get((var.graph, var.name))

    def average_name(self, var: Variable) -> str:
        """The name of ``var``'s average in a checkpoint: ``<var>/<name>``."""
        avg = self.average(var)
        return avg.op.name if avg is not None else f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables: Optional[Sequence[Variable]] = None) -> dict:
        """{checkpoint name: variable}, TF's: each of ``moving_avg_variables``
        (default: the averaged and the trainable variables) under its
        average's name, so that a Saver restores the averages into them; the
        other global variables under their own."""
        from bridge.framework.builders import global_variables

        graph = next(iter(self._averages))[0] if self._averages else None
        if graph is None:
            return {}
        if moving_avg_variables is None:
            moving_avg_variables = (list(graph.collections.get("moving_average_variables", []))
                                    + trainable_variables(graph))
        averaged = {v.name: v for v in moving_avg_variables}
        out = {self.average_name(v): v for v in averaged.values()}
        for v in global_variables(graph):
            if v.name not in averaged:
                out.setdefault(v.op.name, v)
        return out


def _assign_moving_average(avg: Variable, var: Variable, decay: Any) -> Operation:
    """TF's ``assign_moving_average(avg, var, decay, zero_debias=False)``."""
    graph = avg.graph
    with graph.name_scope("AssignMovingAvg"), graph.colocate_with(avg.handle):
        one_minus = ops.sub(constant(np.float32(1.0)), decay, name="decay")
        if avg.dtype != dtypes.float32:
            one_minus = ops.cast(one_minus, DstT=avg.dtype)
        delta = ops.mul(ops.sub(avg.read_value(), var.read_value()), one_minus)
        return ops.assign_sub_variable_op(avg.handle, delta, name="AssignMovingAvg")
