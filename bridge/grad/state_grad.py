"""Gradients through the reference tensors of TF1 variables (after TF's state_grad.py).

A ``VariableV2`` (``tf.compat.v1`` variables with ``use_resource=False``)
outputs a reference (``float64_ref``); ``Identity``, ``RefIdentity``,
``RefSwitch``, ``RefMerge`` pass it on, and any op may read it.  Gradients
flow through references as through their values (``is_differentiable`` in
``_helpers`` looks at the base type).  TF's C++ gradient functions, though,
build their ops from the input's type, which for a reference is no value
type (``Square``'s gradient crashes the process): so an op reading a
reference is differentiated here instead, as a copy of it reading the
reference's value through an ``Identity``, the copy given to the C++
registry alone.
"""
from __future__ import annotations

from typing import Optional

from bridge.framework.graph import Operation, Output
from bridge.framework.opdef import op_def
from ._helpers import _op, is_differentiable
from .cpp import add_cpp_gradients, clone_op
from .registry import ACCEPTS_NONE, GradientFunction, RegisterGradient, add_gradient_source

_REF_OFFSET = 100


def _is_ref(t: Output) -> bool:
    return t.dtype.enum > _REF_OFFSET


@RegisterGradient("RefIdentity")
def _ref_identity_grad(op: Operation, grad: Output) -> Output:
    return grad


def _deref_gradient(op: Operation, *grads: Optional[Output]) -> list[Optional[Output]]:
    """The C++ gradient of a copy of ``op`` whose inputs are all fresh Identity ops
    (values, not references; fresh, so no input depends on another)."""
    if op.type in ("Identity", "Snapshot"):
        return [grads[0]]
    inputs = op.inputs
    ys = [o for o, g in zip(op.outputs, grads) if g is not None]
    dys = [g for g in grads if g is not None]
    if not ys:
        return [None] * len(inputs)
    values = [_op("Identity", [t], name="deref" if _is_ref(t) else "isolate") for t in inputs]
    clone = clone_op(op, dict(zip(inputs, values)), f"{op.name}_of_value")
    wanted = [i for i, t in enumerate(inputs) if is_differentiable(t.dtype)]
    result = add_cpp_gradients(op.graph, [clone.output(o.index) for o in ys], [values[i] for i in wanted],
                               dys, f"{op.name}_grad")
    out: list[Optional[Output]] = [None] * len(inputs)
    for i, g in zip(wanted, result):
        out[i] = g
    return out


setattr(_deref_gradient, ACCEPTS_NONE, True)


def _reads_a_reference(op: Operation) -> Optional[GradientFunction]:
    """The gradient of an op that reads a reference but takes values (not one of the
    ref-taking ops such as Assign, whose OpDef asks for references)."""
    if not any(_is_ref(t) for t in op.inputs):
        return None
    try:
        if any(arg.is_ref for arg in op_def(op.type, op.graph).input_args):
            return None
    except Exception:  # noqa: BLE001 (an op type the graph cannot describe: leave it to C++)
        return None
    return _deref_gradient


add_gradient_source(_reads_a_reference)
