"""Gradients of custom ops (Julia ops) from their gradient ops (``<Op>Grad``)."""
from __future__ import annotations

from typing import Optional

from bridge.framework.graph import Operation, Output
from bridge.framework.opdef import op_def
from ._helpers import _zeros_like
from .registry import register_gradient, registered

__all__ = ["register_custom_op_gradient"]

_GRAD_OP_TYPE = "_bridge_grad_op_type"  # set on the registered function: its gradient op


def register_custom_op_gradient(op_type: str, grad_op_type: Optional[str] = None) -> None:
    """Differentiate ``op_type`` with its gradient op (``<Op>Grad`` by default).

    The gradient op's inputs are: the gradients of the op's differentiable
    (float and complex) outputs, then all the op's outputs, then all its
    inputs; its outputs are the gradients of the op's differentiable inputs,
    in order.  Attributes the gradient op
    declares are copied from the forward op.  Calling this again for the same
    pair is a no-op (``bridge.customop.load`` may run twice).
    """
    grad_op_type = grad_op_type or f"{op_type}Grad"
    _, existing = registered(op_type)
    if existing is not None and getattr(existing, _GRAD_OP_TYPE, None) == grad_op_type:
        return

    def _grad(op: Operation, *grads: Optional[Output]) -> list:
        outs, ins = op.outputs, op.inputs
        # The differentiable ones (float and complex: a Julia op's dtypes, bridge/julia/contract.py).
        float_outs = [i for i, o in enumerate(outs) if o.dtype.is_differentiable]
        float_ins = [i for i, x in enumerate(ins) if x.dtype.is_differentiable]
        dys = [grads[i] if grads[i] is not None else _zeros_like(outs[i]) for i in float_outs]
        attrs, types = _declared_attrs(op, grad_op_type)
        gop = op.graph.create_op(grad_op_type, dys + outs + ins, attrs=attrs, attr_types=types,
                                 name=grad_op_type)
        if gop.num_outputs != len(float_ins):
            raise ValueError(f"{grad_op_type} has {gop.num_outputs} outputs, but {op_type} "
                             f"'{op.name}' has {len(float_ins)} differentiable inputs")
        result: list = [None] * len(ins)
        for k, i in enumerate(float_ins):
            result[i] = gop.output(k)
        return result

    setattr(_grad, _GRAD_OP_TYPE, grad_op_type)
    register_gradient(op_type, _grad, replace=True)


def _declared_attrs(op: Operation, op_type: str) -> tuple[dict, dict]:
    """The forward op's values of the attributes ``op_type``'s OpDef declares
    (apart from the ones TensorFlow infers from the inputs), and their types."""
    definition = op_def(op_type, op.graph)
    inferred = definition.inferred_attrs
    have = set(op.attr_names)
    attrs, types = {}, {}
    for attr in definition.attrs:
        if attr.name in have and attr.name not in inferred:
            attrs[attr.name], types[attr.name] = op.get_attr(attr.name), attr.type
    return attrs, types
