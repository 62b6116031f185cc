"""TensorFlow's ``tf.compat.v1.train`` optimizers, each on its resource training kernel.

Same names, defaults, slot names and update order as TF (see
``bridge.train.optimizer``): a checkpoint of the bridge's training state
holds the names TF's holds (``w/Adam``, ``w/Adam_1``, ``beta1_power``, ...).

| optimizer | kernel (dense; IndexedSlices) | slots (``get_slot`` name: variable name) |
| --- | --- | --- |
| GradientDescentOptimizer | ResourceApplyGradientDescent; ResourceScatterAdd of ``-grad * lr`` | none |
| MomentumOptimizer | ResourceApplyMomentum; ResourceSparseApplyMomentum | momentum: ``<var>/Momentum`` |
| AdamOptimizer | ResourceApplyAdam; TF's fallback: ``m = m * beta1`` then ResourceScatterAdd, ``v`` likewise, ``var -= lr_t * m / (sqrt(v) + eps)`` | m: ``<var>/Adam``, v: ``<var>/Adam_1`` (+ ``beta1_power``, ``beta2_power``) |
| RMSPropOptimizer | ResourceApply(Centered)RMSProp; ResourceSparseApply(Centered)RMSProp | rms: ``<var>/RMSProp``, (mg: ``<var>/RMSProp_1``,) momentum |
| AdagradOptimizer | ResourceApplyAdagrad; ResourceSparseApplyAdagrad | accumulator: ``<var>/Adagrad`` |

The sparse kernels get the gradient's rows summed per index first (see
``Optimizer._resource_apply_sparse_duplicate_indices``), as TF's; TF's
sparse Adam, followed here for equal values, still reads and writes the
whole of ``m``, ``v`` and the variable each step.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from bridge.framework.builders import Variable, constant
from bridge.framework.graph import Operation, Output
from bridge import ops
from .optimizer import Optimizer, cast, filled, group, to_output

__all__ = ["GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "RMSPropOptimizer", "AdagradOptimizer"]


class GradientDescentOptimizer(Optimizer):
    """``var -= learning_rate * grad`` (ResourceApplyGradientDescent)."""

    def __init__(self, learning_rate: Any, use_locking: bool = False, name: str = "GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor: Output | None = None

    def _prepare(self) -> None:
        self._learning_rate_tensor = to_output(self._call_if_callable(self._learning_rate), "learning_rate")

    def _resource_apply_dense(self, grad: Output, var: Variable) -> Operation:
        return ops.resource_apply_gradient_descent(
            var.handle, cast(self._learning_rate_tensor, grad.dtype), grad, use_locking=self._use_locking)

    def _resource_apply_sparse_duplicate_indices(self, grad: Output, var: Variable, indices: Output) -> Operation:
        # Repeated indices add up in the scatter itself: no deduplication (TF's override).
        return ops.resource_scatter_add(
            var.handle, indices, ops.mul(ops.neg(grad), cast(self._learning_rate_tensor, grad.dtype)))


class MomentumOptimizer(Optimizer):
    """``accum = momentum * accum + grad; var -= lr * accum`` (Nesterov:
    ``var -= lr * grad + lr * momentum * accum``), ResourceApplyMomentum."""

    def __init__(self, learning_rate: Any, momentum: Any, use_locking: bool = False,
                 name: str = "Momentum", use_nesterov: bool = False):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = to_output(self._call_if_callable(self._learning_rate), "learning_rate")
        self._momentum_tensor = to_output(self._call_if_callable(self._momentum), "momentum")

    def _resource_apply_dense(self, grad: Output, var: Variable) -> Operation:
        mom = self.get_slot(var, "momentum")
        return ops.resource_apply_momentum(
            var.handle, mom.handle, cast(self._learning_rate_tensor, grad.dtype), grad,
            cast(self._momentum_tensor, grad.dtype), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov)

    def _resource_apply_sparse(self, grad: Output, var: Variable, indices: Output) -> Operation:
        mom = self.get_slot(var, "momentum")
        return ops.resource_sparse_apply_momentum(
            var.handle, mom.handle, cast(self._learning_rate_tensor, grad.dtype), grad, indices,
            cast(self._momentum_tensor, grad.dtype), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov)


class AdamOptimizer(Optimizer):
    """Adam (Kingma and Ba), ResourceApplyAdam; ``beta1_power`` and
    ``beta2_power`` (non-slot variables, in the dtype of ``beta1``/``beta2``:
    float32 for Python floats) are multiplied by the betas after the updates."""

    def __init__(self, learning_rate: Any = 0.001, beta1: Any = 0.9, beta2: Any = 0.999,
                 epsilon: Any = 1e-8, use_locking: bool = False, name: str = "Adam"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._graph = None  # where the beta powers were made (the last apply_gradients)

    def _get_beta_accumulators(self) -> tuple[Variable, Variable]:
        return (self._get_non_slot_variable("beta1_power", self._graph),
                self._get_non_slot_variable("beta2_power", self._graph))

    def _create_slots(self, var_list: list[Variable]) -> None:
        # As TF: the beta powers live with the first variable by name.
        first_var = min(var_list, key=lambda v: v.name)
        self._graph = first_var.graph
        self._create_non_slot_variable(self._beta1, "beta1_power", first_var)
        self._create_non_slot_variable(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _prepare(self) -> None:
        c = self._call_if_callable
        self._lr_t = to_output(c(self._lr), "learning_rate")
        self._beta1_t = to_output(c(self._beta1), "beta1")
        self._beta2_t = to_output(c(self._beta2), "beta2")
        self._epsilon_t = to_output(c(self._epsilon), "epsilon")

    def _learning_rate_output(self) -> Optional[Output]:
        return self._lr_t

    def _resource_apply_dense(self, grad: Output, var: Variable) -> Operation:
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        beta1_power, beta2_power = self._get_beta_accumulators()
        dt = grad.dtype
        return ops.resource_apply_adam(
            var.handle, m.handle, v.handle,
            cast(beta1_power.read_value(), dt), cast(beta2_power.read_value(), dt),
            cast(self._lr_t, dt), cast(self._beta1_t, dt), cast(self._beta2_t, dt),
            cast(self._epsilon_t, dt), grad, use_locking=self._use_locking)

    def _resource_apply_sparse(self, grad: Output, var: Variable, indices: Output) -> Operation:
        """TF's ``_apply_sparse_shared`` with ``_resource_scatter_add``: the same
        ops in the same order, so the values are TF's to the bit."""
        graph = var.graph
        dt = var.dtype
        beta1_power, beta2_power = self._get_beta_accumulators()
        beta1_power = cast(beta1_power.read_value(), dt)
        beta2_power = cast(beta2_power.read_value(), dt)
        lr_t, beta1_t = cast(self._lr_t, dt), cast(self._beta1_t, dt)
        beta2_t, epsilon_t = cast(self._beta2_t, dt), cast(self._epsilon_t, dt)
        one = lambda: constant(np.asarray(1, dt.as_numpy_dtype), name="sub/x")  # noqa: E731
        lr = ops.real_div(ops.mul(lr_t, ops.sqrt(ops.sub(one(), beta2_power, name="sub"), name="Sqrt"), name="mul"),
                          ops.sub(one(), beta1_power, name="sub"), name="truediv")
        m = self.get_slot(var, "m")
        m_scaled_g_values = ops.mul(grad, ops.sub(one(), beta1_t, name="sub"), name="mul")
        m_t = m.assign(ops.mul(m.read_value(), beta1_t, name="mul"))
        with graph.control_dependencies([m_t]):
            m_t = self._resource_scatter_add(m, indices, m_scaled_g_values)
        v = self.get_slot(var, "v")
        v_scaled_g_values = ops.mul(ops.mul(grad, grad, name="mul"), ops.sub(one(), beta2_t, name="sub"), name="mul")
        v_t = v.assign(ops.mul(v.read_value(), beta2_t, name="mul"))
        with graph.control_dependencies([v_t]):
            v_t = self._resource_scatter_add(v, indices, v_scaled_g_values)
        v_sqrt = ops.sqrt(v_t, name="Sqrt")
        var_update = var.assign_sub(ops.real_div(ops.mul(lr, m_t, name="mul"),
                                                 ops.add_v2(v_sqrt, epsilon_t, name="add"), name="truediv"))
        return group([var_update, m_t.op, v_t.op], "group_deps")

    @staticmethod
    def _resource_scatter_add(x: Variable, i: Output, v: Output) -> Output:
        graph = x.graph
        with graph.control_dependencies([ops.resource_scatter_add(x.handle, i, v)]):
            return x.read_value()

    def _finish(self, update_ops: list[Operation], name_scope: str) -> Operation:
        beta1_power, beta2_power = self._get_beta_accumulators()
        graph = beta1_power.graph
        with graph.control_dependencies(update_ops), graph.colocate_with(beta1_power.op):
            update_beta1 = beta1_power.assign(ops.mul(beta1_power.read_value(), self._beta1_t, name="mul"))
            update_beta2 = beta2_power.assign(ops.mul(beta2_power.read_value(), self._beta2_t, name="mul"))
        return group(list(update_ops) + [update_beta1, update_beta2], name_scope)


class RMSPropOptimizer(Optimizer):
    """RMSProp (ResourceApplyRMSProp; ``centered=True``: ResourceApplyCenteredRMSProp).
    The ``rms`` slot starts at ones, ``momentum`` (and ``mg``) at zeros."""

    def __init__(self, learning_rate: Any, decay: Any = 0.9, momentum: Any = 0.0, epsilon: Any = 1e-10,
                 use_locking: bool = False, centered: bool = False, name: str = "RMSProp"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v, lambda v=v: filled(v.shape, 1, v.dtype, "ones", like=v.value()), "rms", self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        c = self._call_if_callable
        self._learning_rate_tensor = to_output(c(self._learning_rate), "learning_rate")
        self._decay_tensor = to_output(c(self._decay), "decay")
        self._momentum_tensor = to_output(c(self._momentum), "momentum")
        self._epsilon_tensor = to_output(c(self._epsilon), "epsilon")

    def _resource_apply_dense(self, grad: Output, var: Variable) -> Operation:
        return self._apply(grad, var)

    def _resource_apply_sparse(self, grad: Output, var: Variable, indices: Output) -> Operation:
        return self._apply(grad, var, indices)

    def _apply(self, grad: Output, var: Variable, indices: Optional[Output] = None) -> Operation:
        """ResourceApply(Centered)RMSProp, or its ResourceSparseApply form for ``indices``."""
        dt = grad.dtype
        hyper = (cast(self._learning_rate_tensor, dt), cast(self._decay_tensor, dt),
                 cast(self._momentum_tensor, dt), cast(self._epsilon_tensor, dt))
        slots = [self.get_slot(var, "rms").handle, self.get_slot(var, "momentum").handle]
        if self._centered:
            slots.insert(0, self.get_slot(var, "mg").handle)
        kernel = ("resource_sparse_apply" if indices is not None else "resource_apply") + \
            ("_centered" if self._centered else "") + "_rms_prop"
        sparse = (indices,) if indices is not None else ()
        return getattr(ops, kernel)(var.handle, *slots, *hyper, grad, *sparse, use_locking=self._use_locking)


class AdagradOptimizer(Optimizer):
    """Adagrad (ResourceApplyAdagrad, as TF's compat.v1 optimizer uses: no
    epsilon); the ``accumulator`` slot starts at ``initial_accumulator_value``
    in the variable's dtype."""

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 use_locking: bool = False, name: str = "Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: %s" % initial_accumulator_value)
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list: list[Variable]) -> None:
        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v, lambda v=v: filled(v.shape, self._initial_accumulator_value, v.dtype, "Const",
                                      like=v.value()), "accumulator", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = to_output(self._call_if_callable(self._learning_rate), "learning_rate")

    def _resource_apply_dense(self, grad: Output, var: Variable) -> Operation:
        acc = self.get_slot(var, "accumulator")
        return ops.resource_apply_adagrad(
            var.handle, acc.handle, cast(self._learning_rate_tensor, grad.dtype), grad,
            use_locking=self._use_locking)

    def _resource_apply_sparse(self, grad: Output, var: Variable, indices: Output) -> Operation:
        acc = self.get_slot(var, "accumulator")
        return ops.resource_sparse_apply_adagrad(
            var.handle, acc.handle, cast(self._learning_rate_tensor, grad.dtype), grad, indices,
            use_locking=self._use_locking)
