"""Gradients of custom ops (Julia ops) from their gradient ops (``<Op>Grad``)."""
from __future__ import annotations

from typing import Optional

from bridge.framework.graph import Operation, Output
from bridge.framework.opdef import op_def
from ._helpers import _zeros_like
from .registry import register_gradient, registered

__all__ = ["register_custom_op_gradient", "register_custom_op_second_gradient"]

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


def register_custom_op_second_gradient(op_type: str) -> None:
    """Differentiate ``<op_type>Grad`` with ``<op_type>GradGrad`` (an op whose
    gradient comes from ForwardDiff, ``@gradient forwarddiff``).

    ``<Op>Grad`` computes gx = J(x)' gy from its inputs (gy..., the op's
    outputs..., the op's inputs...).  ``<Op>GradGrad`` takes the gradients v
    of gx, then <Op>Grad's inputs; its outputs are J(x) v (the gradients of
    gy) and d/dx [gy' J(x) v] (those of the op's float inputs).  <Op>Grad
    does not read the op's outputs (it computes them again), so they get no
    gradient.  A third order is refused with a LookupError naming the op.
    Calling this again for the same op is a no-op."""
    grad_type, second_type = f"{op_type}Grad", f"{op_type}GradGrad"
    _, existing = registered(grad_type)
    if existing is not None and getattr(existing, _GRAD_OP_TYPE, None) == second_type:
        return

    def _grad(op: Operation, *grads: Optional[Output]) -> list:
        ins = op.inputs
        n_outputs = len(op_def(op_type, op.graph).output_args)
        n_dys = len(ins) - n_outputs - len(op_def(op_type, op.graph).input_args)
        forward_ins = ins[n_dys + n_outputs:]
        float_ins = [i for i, x in enumerate(forward_ins) if x.dtype.is_differentiable]
        vs = [g if g is not None else _zeros_like(op.outputs[k]) for k, g in enumerate(grads)]
        attrs, types = _declared_attrs(op, second_type)
        gop = op.graph.create_op(second_type, vs + list(ins), attrs=attrs, attr_types=types, name=second_type)
        if gop.num_outputs != n_dys + len(float_ins):
            raise ValueError(f"{second_type} has {gop.num_outputs} outputs, but {grad_type} '{op.name}' has "
                             f"{n_dys + len(float_ins)} float inputs it differentiates")
        result: list = [gop.output(k) for k in range(n_dys)] + [None] * (len(ins) - n_dys)
        for k, i in enumerate(float_ins):
            result[n_dys + n_outputs + i] = gop.output(n_dys + k)
        return result

    def _third(op: Operation, *grads: Optional[Output]) -> list:
        raise LookupError(f"{second_type} ('{op.name}'), the second-order gradient op of {op_type} "
                          "(@gradient forwarddiff), has no gradient: derivatives of third order through "
                          f"{op_type} are not available")

    setattr(_grad, _GRAD_OP_TYPE, second_type)
    register_gradient(grad_type, _grad, replace=True)
    register_gradient(second_type, _third, replace=True)


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
