"""The base of TensorFlow's ``tf.compat.v1.train`` optimizers, on resource variables.

``Optimizer.minimize(loss)`` = ``compute_gradients`` (``bridge.gradients``
with respect to the variables' handles) + ``apply_gradients`` (one
``ResourceApply*`` kernel per variable, then the optimizer's ``_finish`` and
the global step's ``AssignAddVariableOp``).  The graph it builds is the one
TF Python builds, name for name where it matters:

- slot variables ``<var>/<Optimizer>``, ``<var>/<Optimizer>_1``, ... at the
  root of the graph (TF names them with a variable scope, which ignores name
  scopes), colocated with their variable, made with no control dependencies;
- non-slot variables (Adam's ``beta1_power``) in the current name scope;
- hyperparameters given as Python floats are float32 constants
  (``<Optimizer>/learning_rate``) cast to the variable's dtype, so a float64
  model sees ``float64(float32(lr))``, exactly as in TensorFlow;
- updates under ``<Optimizer>/update_<var>/``, the train op named
  ``<Optimizer>`` (a NoOp, or the global step's increment).

A subclass implements ``_create_slots``, ``_prepare``,
``_resource_apply_dense`` and ``_resource_apply_sparse`` (and may override
``_finish``), as in TF.  A gradient that is ``IndexedSlices`` (a gather's,
see ``bridge.gradients``) goes to ``_resource_apply_sparse_duplicate_indices``:
by default its repeated indices are summed first (``Unique`` +
``UnsortedSegmentSum``, TF's ``_deduplicate_indexed_slices``), then
``_resource_apply_sparse`` updates only those rows; GradientDescent
overrides it with one ``ResourceScatterAdd``, as TF's.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from bridge.framework import dtypes
from bridge import ops
from bridge.framework.builders import Variable, constant, trainable_variables
from bridge.framework.graph import Graph, Operation, Output, get_default_graph
from bridge.framework.indexed_slices import IndexedSlices

#: What TF's optimizers accept for the loss, the variables and the gradients.
VALID_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)




def to_output(value: Any, name: str) -> Output:
    """``value`` as an Output, as ``tf.convert_to_tensor`` would make it: Outputs
    pass through, a Variable is read, a Python float becomes a float32 Const."""
    if isinstance(value, Output):
        return value
    if isinstance(value, Variable):
        return value.read_value()
    return constant(value, name=name)


def cast(x: Output, dtype: dtypes.DType, name: str = "Cast") -> Output:
    """``tf.cast``: x itself when it already has ``dtype``."""
    if x.dtype == dtype:
        return x
    return ops.cast(x, DstT=dtype, name=name)


def group(deps: Sequence[Operation], name: str) -> Operation:
    """``tf.group``: a NoOp that runs after ``deps``."""
    graph = deps[0].graph if deps else get_default_graph()
    with graph.control_dependencies(list(deps)):
        return graph.create_op("NoOp", name=name)


def filled(shape: Sequence[Optional[int]], value: float, dtype: dtypes.DType, name: str,
           like: Optional[Output] = None) -> Output:
    """A tensor of ``shape`` holding ``value``: a Const below 1000 elements,
    else a Fill (TF's ``zeros``/``ones`` make the same choice, so a large
    slot does not put its whole initial value in the GraphDef)."""
    known = not getattr(shape, "unknown_rank", False) and all(d is not None for d in shape)
    if known and int(np.prod(shape, dtype=np.int64)) < 1000:
        return constant(np.full(tuple(shape), value, dtype=dtype.as_numpy_dtype), name=name)
    graph = get_default_graph()
    own = graph.unique_name(name, mark_as_used=False)
    with graph.name_scope(own + "/"):  # TF's layout: zeros/shape_as_tensor, zeros/Const -> zeros
        dims = (constant(np.asarray(shape, np.int32), name="shape_as_tensor") if known
                else ops.shape(like, name="Shape"))
        fill_value = constant(np.asarray(value, dtype.as_numpy_dtype), name="Const")
    return ops.fill(dims, fill_value, name=name)


def _var_key(var: Variable) -> tuple:
    return (var.graph, var.name)


#: Graph collection of (train op, its optimizer's learning-rate tensor) pairs, one per
#: apply_gradients: what train_loop(summary_dir=) logs as the learning rate.
LEARNING_RATES = "bridge.train.learning_rates"


class Optimizer:
    """Base class of the optimizers (``tf.compat.v1.train.Optimizer``).

    Use a subclass: ``AdamOptimizer(1e-3).minimize(loss)`` returns the train
    Operation; ``compute_gradients`` then ``apply_gradients`` lets the
    gradients be processed (clipped) in between.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict[str, dict[tuple, Variable]] = {}
        self._non_slot_dict: dict[tuple, Variable] = {}

    def get_name(self) -> str:
        return self._name

    # --- the public API ---------------------------------------------------
    def minimize(self, loss: Any, global_step: Optional[Variable] = None,
                 var_list: Optional[Sequence[Variable]] = None, gate_gradients: int = GATE_OP,
                 aggregation_method: Any = None, colocate_gradients_with_ops: bool = False,
                 name: Optional[str] = None, grad_loss: Optional[Output] = None) -> Operation:
        """Add the ops that minimize ``loss`` by updating ``var_list`` (default:
        the trainable variables); increment ``global_step`` after the updates.
        Returns the train Operation."""
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        if not any(g is not None for g, _ in grads_and_vars):
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops"
                " that do not support gradients, between variables %s and loss %s." %
                ([str(v) for _, v in grads_and_vars], loss))
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss: Any, var_list: Optional[Sequence[Any]] = None,
                          gate_gradients: int = GATE_OP, aggregation_method: Any = None,
                          colocate_gradients_with_ops: bool = False,
                          grad_loss: Optional[Output] = None) -> list[tuple[Optional[Output], Any]]:
        """``[(gradient, variable)]`` of ``loss`` for ``var_list`` (default: the
        trainable variables of the loss's graph); a gradient is None where the
        loss does not depend on the variable.

        ``aggregation_method`` is accepted for TF's signature; the bridge
        always sums with AddN (TF's default).  ``colocate_gradients_with_ops``
        places each gradient op with the op it differentiates (see
        ``bridge.gradients``).
        """
        from bridge.grad import gradients

        if callable(loss) and not isinstance(loss, (Output, Variable)):
            loss = loss()
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH):
            raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, "
                             "Optimizer.GATE_OP, Optimizer.GATE_GRAPH.  Not %s" % gate_gradients)
        if isinstance(loss, Variable):
            loss = loss.value()
        if not isinstance(loss, Output):
            raise TypeError(f"loss must be an Output (a tensor of the graph), got {type(loss).__name__}")
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            self._assert_valid_dtypes([grad_loss])
        if var_list is None:
            var_list = trainable_variables(loss.graph)
        else:
            var_list = list(var_list) if isinstance(var_list, (list, tuple)) else [var_list]
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            if not isinstance(v, (Variable, Output)):
                raise TypeError(f"var_list holds {v!r}: a bridge.Variable (or an Output) is needed")
        with loss.graph.as_default():
            grads = gradients(loss, var_list, grad_ys=grad_loss,
                              colocate_gradients_with_ops=colocate_gradients_with_ops)
            if gate_gradients == Optimizer.GATE_GRAPH:
                grads = _tuple(grads, loss.graph)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars
                                   if g is not None and v.dtype != dtypes.resource])
        return grads_and_vars

    def apply_gradients(self, grads_and_vars: Sequence[tuple[Any, Any]],
                        global_step: Optional[Variable] = None, name: Optional[str] = None) -> Operation:
        """The Operation that applies each gradient to its variable (skipping
        None gradients), then increments ``global_step`` (a Variable) by one.
        ``name`` defaults to the optimizer's name."""
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        for g, v in grads_and_vars:
            if g is not None:
                if isinstance(g, Variable):
                    g = g.value()
                if not isinstance(g, (Output, IndexedSlices)):
                    raise TypeError("Gradient must be convertible to a Tensor"
                                    " or IndexedSlices, or None: %s" % (g,))
            if isinstance(v, Output):
                raise NotImplementedError(f"Trying to update a Tensor {v.name}: only Variables can be updated")
            if not isinstance(v, Variable):
                raise NotImplementedError("Trying to optimize unsupported type %r" % (v,))
            converted.append((g, v))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError("No gradients provided for any variable: %s." %
                             ([str(v) for _, v in converted],))
        if global_step is not None and not isinstance(global_step, Variable):
            raise TypeError(f"global_step must be a bridge.Variable, got {type(global_step).__name__}")
        graph = var_list[0].graph
        with graph.as_default():
            self._create_slots(var_list)
            with graph.name_scope(name or self._name) as scope:
                self._prepare()
                update_ops = []
                for grad, var in converted:
                    if grad is None:
                        continue
                    if grad.dtype != var.dtype:
                        raise TypeError(f"gradient '{grad.name}' is {grad.dtype.name}, but variable "
                                        f"'{var.name}' is {var.dtype.name}")
                    with graph.name_scope("update_" + var.op.name), graph.colocate_with(var.op):
                        if isinstance(grad, IndexedSlices):
                            update_ops.append(self._resource_apply_sparse_duplicate_indices(
                                grad.values, var, grad.indices))
                        else:
                            update_ops.append(self._resource_apply_dense(grad, var))
                if global_step is None:
                    train_op = self._finish(update_ops, scope)
                else:
                    with graph.control_dependencies([self._finish(update_ops, "update")]):
                        with graph.colocate_with(global_step.op):
                            one = constant(np.asarray(1, global_step.dtype.as_numpy_dtype), name="Const")
                            train_op = graph.create_op(
                                "AssignAddVariableOp", [global_step.handle, one], name=scope,
                                attrs={"dtype": global_step.dtype}, attr_types={"dtype": "type"})
        train_ops = graph.collections.setdefault("train_op", [])
        if train_op not in train_ops:
            train_ops.append(train_op)
        learning_rate = self._learning_rate_output()
        if learning_rate is not None:   # what train_loop(summary_dir=) logs for this train op
            graph.collections.setdefault(LEARNING_RATES, []).append((train_op, learning_rate))
        return train_op

    def get_slot(self, var: Variable, name: str) -> Optional[Variable]:
        """The slot variable ``name`` (see ``get_slot_names``) made for ``var``, or None."""
        return self._slots.get(name, {}).get(_var_key(var))

    def get_slot_names(self) -> list[str]:
        """Names of the slots this optimizer made (e.g. ["m", "v"] for Adam)."""
        return sorted(self._slots)

    def variables(self) -> list[Variable]:
        """The optimizer's state in the default graph (slots and non-slot
        variables such as Adam's beta1_power), sorted by name."""
        graph = get_default_graph()
        found = [v for (_, g), v in self._non_slot_dict.items() if g is graph]
        for slots in self._slots.values():
            found.extend(v for v in slots.values() if v.graph is graph)
        return sorted(found, key=lambda v: v.name)

    # --- what subclasses implement ------------------------------------------
    def _create_slots(self, var_list: list[Variable]) -> None:
        """Make the slot variables ``var_list`` needs (none by default)."""

    def _prepare(self) -> None:
        """Make the hyperparameter tensors, inside the optimizer's name scope."""

    def _learning_rate_output(self) -> Optional[Output]:
        """The learning-rate tensor ``_prepare`` made (None for an optimizer without one)."""
        return getattr(self, "_learning_rate_tensor", None)

    def _resource_apply_dense(self, grad: Output, var: Variable) -> Operation:
        raise NotImplementedError()

    def _resource_apply_sparse_duplicate_indices(self, grad: Output, var: Variable, indices: Output) -> Operation:
        """Apply the rows ``grad`` at ``indices``, which may repeat: summed per
        index first (TF's ``_deduplicate_indexed_slices``), then
        ``_resource_apply_sparse``.  An optimizer whose update handles repeats
        itself overrides this instead."""
        summed_grad, unique_indices = _deduplicate_indexed_slices(grad, indices)
        return self._resource_apply_sparse(summed_grad, var, unique_indices)

    def _resource_apply_sparse(self, grad: Output, var: Variable, indices: Output) -> Operation:
        """Apply the rows ``grad`` at the unique ``indices`` (a ``ResourceSparseApply*`` kernel)."""
        raise NotImplementedError()

    def _finish(self, update_ops: list[Operation], name_scope: str) -> Operation:
        """The op that completes a step (a NoOp after ``update_ops``)."""
        return group(update_ops, name_scope)

    # --- helpers for subclasses ----------------------------------------------
    @staticmethod
    def _call_if_callable(param: Any) -> Any:
        return param() if callable(param) and not isinstance(param, (Output, Variable)) else param

    def _assert_valid_dtypes(self, tensors: Sequence[Any]) -> None:
        for t in tensors:
            dtype = dtypes.base_dtype(t.dtype)
            if dtype not in self._valid_dtypes():
                raise ValueError("Invalid type %r for %s, expected: %s." % (
                    dtype, _display_name(t), list(self._valid_dtypes())))

    def _valid_dtypes(self) -> tuple:
        return VALID_DTYPES

    def _slot_dict(self, slot_name: str) -> dict:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot_with_initializer(self, var: Variable, initializer: Callable[[], Output],
                                           slot_name: str, op_name: str) -> Variable:
        """The slot ``slot_name`` of ``var``, made on first use as the
        non-trainable Variable ``<var>/<op_name>`` (uniquified) holding
        ``initializer()`` (called inside ``<var>/<op_name>/Initializer``)."""
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = _create_slot(var, initializer, op_name)
        return named[key]

    def _zeros_slot(self, var: Variable, slot_name: str, op_name: str) -> Variable:
        return self._get_or_make_slot_with_initializer(
            var, lambda: filled(var.shape, 0, var.dtype, "zeros", like=var.value()), slot_name, op_name)

    def _create_non_slot_variable(self, initial_value: Any, name: str, colocate_with: Variable) -> Variable:
        """A non-trainable Variable ``name`` (in the current name scope) of the
        optimizer itself, one per graph (Adam's ``beta1_power``)."""
        graph = colocate_with.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            # TF makes it under init_scope: no control dependencies, the current name scope.
            with graph.control_dependencies(None), graph.colocate_with(colocate_with.op):
                v = Variable(initial_value, name=name, trainable=False, graph=graph)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name: str, graph: Optional[Graph] = None) -> Optional[Variable]:
        return self._non_slot_dict.get((name, graph or get_default_graph()))


def _create_slot(var: Variable, initializer: Callable[[], Output], op_name: str) -> Variable:
    graph = var.graph
    # TF's slot_creator names the slot with a variable scope "<var>/<op_name>"
    # (uniquified), which is rooted whatever the name scope, and builds it
    # under init_scope (no control dependencies), colocated with ``var``.
    with graph.as_default(), graph.control_dependencies(None), graph.name_scope(None), \
            graph.colocate_with(var.op):
        scope = graph.unique_name(f"{var.op.name}/{op_name}", mark_as_used=False)
        with graph.name_scope(scope + "/Initializer/"):
            init = initializer()
        return Variable(init, name=scope, trainable=False, graph=graph)


def _deduplicate_indexed_slices(values: Output, indices: Output) -> tuple[Output, Output]:
    """(values summed per unique index, the unique indices), TF's ``_deduplicate_indexed_slices``."""
    unique_indices, new_index_positions = ops.unique(indices)
    shape = ops.shape(unique_indices, name="Shape")
    rows = ops.strided_slice(shape, constant(np.array([0], np.int32), name="strided_slice/stack"),
                             constant(np.array([1], np.int32), name="strided_slice/stack_1"),
                             constant(np.array([1], np.int32), name="strided_slice/stack_2"),
                             shrink_axis_mask=1, name="strided_slice")
    return ops.unsorted_segment_sum(values, new_index_positions, rows), unique_indices


def _tuple(grads: list[Any], graph: Graph) -> list[Any]:
    """``tf.tuple``: each gradient through an Identity that waits for all of them
    (an IndexedSlices' values, as TF's ``with_dependencies``)."""
    present = [g for g in grads if g is not None]
    if not present:
        return grads
    with graph.name_scope("tuple"):
        gate = group([g.op for g in present], "group_deps")
        out = []
        for g in grads:
            if g is None:
                out.append(None)
                continue
            with graph.control_dependencies([gate]):
                if isinstance(g, IndexedSlices):
                    out.append(IndexedSlices(ops.identity(g.values, name="control_dependency"),
                                             g.indices, g.dense_shape))
                else:
                    out.append(ops.identity(g, name="control_dependency"))
        return out


def _display_name(t: Any) -> str:
    return t.name if isinstance(t, (Output, Variable)) else repr(t)
