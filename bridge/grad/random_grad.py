"""Gradients of random ops with reparameterised samples (RandomGamma, ...), after TF's random_grad.py.

The sample is differentiated with respect to the distribution's parameters by
implicit differentiation (Figurnov et al., 2018, "Implicit Reparameterization
Gradients"); the shape and seed inputs get None.
"""
from __future__ import annotations

import numpy as np

from bridge.framework.graph import Output
from ._helpers import _c, _const, _mul, _node, _op, _ones
from .registry import RegisterGradient


def _int(value) -> Output:
    return _const(value, "int32")


def _gamma_grad_alpha(alpha: Output, sample: Output, grad: Output, num_sample_dims: Output) -> Output:
    """d(sum grad * sample)/d alpha: alpha gets ``num_sample_dims`` leading unit dimensions
    to broadcast against the sample, and the gradient is summed over them."""
    ones = _op("Fill", [_op("Reshape", [num_sample_dims, _int([1])]), _int(1)])
    broadcastable = _op("Reshape", [alpha, _op("ConcatV2", [[ones, _op("Shape", [alpha])], _int(0)])])
    partial_alpha = _op("RandomGammaGrad", [broadcastable, sample])
    sample_axes = _op("Range", [_int(0), num_sample_dims, _int(1)])
    return _op("Sum", [_mul(grad, partial_alpha), sample_axes])


@RegisterGradient("RandomGamma")
def _random_gamma_grad(op, grad):
    shape, alpha = op.inputs
    # The sample's shape is shape + alpha's shape.
    return None, _gamma_grad_alpha(alpha, op.outputs[0], grad, _op("Size", [shape]))


def _stateless_gamma_grad_alpha(shape: Output, alpha: Output, sample: Output, grad: Output) -> Output:
    # The sample's shape is ``shape``, which ends in alpha's shape.
    num_sample_dims = _op("Sub", [_op("Size", [shape]), _op("Rank", [alpha])])
    return _gamma_grad_alpha(alpha, sample, grad, num_sample_dims)


@RegisterGradient("StatelessRandomGammaV2")
def _stateless_random_gamma_v2_grad(op, grad):
    shape, _, alpha = op.inputs
    return None, None, _stateless_gamma_grad_alpha(shape, alpha, op.outputs[0], grad)


@RegisterGradient("StatelessRandomGammaV3")
def _stateless_random_gamma_v3_grad(op, grad):
    shape, alpha = op.inputs[0], op.inputs[4]
    return None, None, None, None, _stateless_gamma_grad_alpha(shape, alpha, op.outputs[0], grad)


def _ndtr(x: Output) -> Output:
    """The standard normal CDF, accurate in both tails (TF's random_grad._Ndtr)."""
    half_sqrt_2 = _c(x, 0.5 * np.sqrt(2.0))
    w = _mul(x, half_sqrt_2)
    z = _op("Abs", [w])
    erfc_z = _op("Erfc", [z])
    tails = _op("SelectV2", [_op("Greater", [w, _c(x, 0.0)]), _op("Sub", [_c(x, 2.0), erfc_z]), erfc_z])
    y = _op("SelectV2", [_op("Less", [z, half_sqrt_2]), _op("AddV2", [_c(x, 1.0), _op("Erf", [w])]), tails])
    return _mul(_c(x, 0.5), y)


@RegisterGradient("StatelessParameterizedTruncatedNormal")
def _stateless_parameterized_truncated_normal_grad(op, grad):
    shape = op.inputs[0]
    mean, stddev, minval, maxval = op.inputs[2:]
    sample = op.outputs[0]

    def standardized(v: Output) -> Output:
        return _op("RealDiv", [_op("Sub", [v, mean]), stddev])

    minval_std, maxval_std, sample_std = standardized(minval), standardized(maxval), standardized(sample)
    ndtr_min = _ndtr(minval_std)
    cdf_sample = _op("RealDiv", [_op("Sub", [_ndtr(sample_std), ndtr_min]),
                                 _op("Sub", [_ndtr(maxval_std), ndtr_min])])
    # Clipped so that the logs below stay finite.
    info = np.finfo(mean.dtype.as_numpy_dtype)
    cdf_sample = _op("ClipByValue", [cdf_sample, _c(mean, info.tiny), _c(mean, 1 - info.eps)])

    def half_sq_diff(v: Output) -> Output:
        return _mul(_c(v, 0.5), _op("Sub", [_op("Square", [sample_std]), _op("Square", [v])]))

    dmaxval = _op("Exp", [_op("AddV2", [half_sq_diff(maxval_std), _op("Log", [cdf_sample])])])
    dminval = _op("Exp", [_op("AddV2", [half_sq_diff(minval_std), _op("Log1p", [_op("Neg", [cdf_sample])])])])
    dmean = _ones(sample_std)
    dstddev = sample_std

    # Sum over the leading dimensions ``shape`` adds to the parameters' broadcast shape,
    # then over the dimensions each parameter was broadcast along.
    shapes = [_op("Shape", [v]) for v in (mean, stddev, minval, maxval)]
    broadcast_shape = shapes[0]
    for s in shapes[1:]:
        broadcast_shape = _op("BroadcastArgs", [s, broadcast_shape])
    extra_dims = _op("Range", [_int(0), _op("Sub", [_op("Size", [shape]), _op("Size", [broadcast_shape])]),
                               _int(1)])
    grads = []
    for partial, s in zip((dmean, dstddev, dminval, dmaxval), shapes):
        g = _op("Sum", [_mul(grad, partial), extra_dims])
        reduce_axes = _node("BroadcastGradientArgs", [broadcast_shape, s]).outputs[1]
        grads.append(_op("Reshape", [_op("Sum", [g, reduce_axes], {"keep_dims": True}), s]))
    return (None, None, *grads)
