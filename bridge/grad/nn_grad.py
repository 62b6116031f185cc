"""Gradients of neural-network ops TensorFlow's C++ registry lacks or gets
wrong (after TF's nn_grad.py)."""
from __future__ import annotations

from ..graph import Output
from ._helpers import _c, _const, _mul, _op, _zeros_like
from .registry import ACCEPTS_NONE, RegisterGradient


@RegisterGradient("ReluGrad")
def _relu_grad_grad(op, grad):
    features = op.inputs[1]
    return _op("ReluGrad", [grad, features]), _zeros_like(features)


@RegisterGradient("Relu6Grad")
def _relu6_grad_grad(op, grad):
    features = op.inputs[1]
    return _op("Relu6Grad", [grad, features]), _zeros_like(features)


@RegisterGradient("EluGrad")
def _elu_grad_grad(op, grad):
    dy, elu_x = op.inputs
    negative = _op("Less", [elu_x, _c(elu_x, 0.0)])
    return (_op("EluGrad", [grad, elu_x]),
            _op("SelectV2", [negative, _mul(grad, dy), _zeros_like(elu_x)]))


@RegisterGradient("SoftplusGrad")
def _softplus_grad_grad(op, grad):
    dy, x = op.inputs
    denom = _op("AddV2", [_op("AddV2", [_op("Exp", [_op("Neg", [x])]), _c(x, 2.0)]), _op("Exp", [x])])
    return _op("SoftplusGrad", [grad, x]), _op("RealDiv", [_mul(grad, dy), denom])


def _softmax_xent_grad(op, grad_loss, grad_grad):
    # TF's C++ version builds a float32 constant into float64 graphs and lacks the labels' gradient.
    logits = op.inputs[0]
    minus_one = _const(-1, "int32", name="minus_one")

    def batch_mul(vec: Output, mat: Output) -> Output:
        return _op("Mul", [_op("ExpandDims", [vec, minus_one]), mat])

    grad = dlabels = None
    if grad_loss is not None:
        grad = batch_mul(grad_loss, op.outputs[1])
        dlabels = batch_mul(grad_loss, _op("Neg", [_op("LogSoftmax", [logits])]))
    if grad_grad is not None:
        softmax = _op("Softmax", [logits])
        inner = _op("BatchMatMulV2", [_op("ExpandDims", [grad_grad, _const(1, "int32")]),
                                      _op("ExpandDims", [softmax, _const(2, "int32")])])
        inner = _op("Squeeze", [inner], {"squeeze_dims": [1]})
        extra = _op("Mul", [_op("Sub", [grad_grad, inner]), softmax])
        grad = extra if grad is None else _op("AddV2", [grad, extra])
    return grad, dlabels


setattr(_softmax_xent_grad, ACCEPTS_NONE, True)
RegisterGradient("SoftmaxCrossEntropyWithLogits")(_softmax_xent_grad)
