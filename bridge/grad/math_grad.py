"""Gradients of math ops TensorFlow's C++ registry lacks (after TF's math_grad.py).

Second derivatives need the gradients of first-derivative ops (``TanhGrad``...).
"""
from __future__ import annotations

import numpy as np

from ..graph import Output, get_default_graph
from ._helpers import _c, _mul, _op
from .registry import NotDifferentiable, RegisterGradient


def _reduce_to(grad: Output, x: Output, other: Output) -> Output:
    """Sum a broadcast gradient back to x's shape."""
    rx, _ = get_default_graph().create_op(
        "BroadcastGradientArgs", [_op("Shape", [x]), _op("Shape", [other])]).outputs
    return _op("Reshape", [_op("Sum", [grad, rx]), _op("Shape", [x])])


@RegisterGradient("TanhGrad")
def _tanh_grad_grad(op, grad):
    y, dy = op.inputs
    return _mul(grad, _c(y, -2.0), dy, y), _op("TanhGrad", [y, grad])


@RegisterGradient("SigmoidGrad")
def _sigmoid_grad_grad(op, grad):
    y, dy = op.inputs
    one_minus_2y = _op("Sub", [_c(y, 1.0), _mul(_c(y, 2.0), y)])
    return _mul(grad, dy, one_minus_2y), _op("SigmoidGrad", [y, grad])


@RegisterGradient("SqrtGrad")
def _sqrt_grad_grad(op, grad):
    y = op.inputs[0]
    ga = _op("RealDiv", [grad, y])
    return _op("Neg", [_mul(ga, op.outputs[0])]), _mul(_c(y, 0.5), ga)


@RegisterGradient("RsqrtGrad")
def _rsqrt_grad_grad(op, grad):
    y, dy = op.inputs
    return _mul(_c(y, -1.5), grad, dy, _op("Square", [y])), _op("RsqrtGrad", [y, grad])


@RegisterGradient("InvGrad")  # InvGrad is ReciprocalGrad's older name
@RegisterGradient("ReciprocalGrad")
def _reciprocal_grad_grad(op, grad):
    y, dy = op.inputs
    return _mul(grad, _c(y, -2.0), dy, y), _op(op.type, [y, grad])


@RegisterGradient("Erfc")
def _erfc_grad(op, grad):
    x = op.inputs[0]
    scale = _c(x, -2.0 / np.sqrt(np.pi))
    return _mul(grad, scale, _op("Exp", [_op("Neg", [_op("Square", [x])])]))


@RegisterGradient("Xlogy")
def _xlogy_grad(op, grad):
    x, y = op.inputs
    not_zero_x = _op("Cast", [_op("NotEqual", [x, _c(x, 0.0)])], {"DstT": x.dtype})
    gx = _op("Xlogy", [not_zero_x, y])
    gy = _op("Xdivy", [x, y])
    return _reduce_to(_mul(gx, grad), x, y), _reduce_to(_mul(gy, grad), y, x)


@RegisterGradient("Xdivy")
def _xdivy_grad(op, grad):
    x, y = op.inputs
    not_zero_x = _op("Cast", [_op("NotEqual", [x, _c(x, 0.0)])], {"DstT": x.dtype})
    gx = _op("Xdivy", [not_zero_x, y])
    gy = _op("Neg", [_op("Xdivy", [x, _op("Square", [y])])])
    return _reduce_to(_mul(gx, grad), x, y), _reduce_to(_mul(gy, grad), y, x)


@RegisterGradient("MulNoNan")
def _mul_no_nan_grad(op, grad):
    x, y = op.inputs
    return (_reduce_to(_op("MulNoNan", [grad, y]), x, y),
            _reduce_to(_op("MulNoNan", [x, grad]), y, x))


for _t in ("Round", "Rint", "Ceil", "FloorDiv", "TruncateDiv"):
    NotDifferentiable(_t)
del _t
