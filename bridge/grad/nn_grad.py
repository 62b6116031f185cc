"""Gradients of neural-network ops TensorFlow's C++ registry lacks or gets
wrong (after TF's nn_grad.py and nn_fused_batch_norm_grad.py)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from bridge.framework import dtypes
from bridge.framework.graph import Output
from bridge.framework.opdef import op_def
from ._helpers import _c, _const, _mul, _node, _op, _zeros_like
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

    sparse = op.type == "SparseSoftmaxCrossEntropyWithLogits"  # integer labels: no gradient
    grad = None
    # TF gets zeros for a grad_loss nothing flows into (then the labels' gradient is zeros).
    dlabels = None if sparse else _zeros_like(op.inputs[1])
    if grad_loss is not None:
        grad = batch_mul(grad_loss, op.outputs[1])
        if not sparse:
            dlabels = batch_mul(grad_loss, _op("Neg", [_op("LogSoftmax", [logits])]))
    if grad_grad is not None:
        softmax = _op("Softmax", [logits])
        # TF's batched matmul of [B, 1, C] by [B, C, 1], as a sum (no float16 CPU kernel for it)
        inner = _op("Sum", [_op("Mul", [grad_grad, softmax]), minus_one], {"keep_dims": True})
        extra = _op("Mul", [_op("Sub", [grad_grad, inner]), softmax])
        grad = extra if grad is None else _op("AddV2", [grad, extra])
    return grad, dlabels


setattr(_softmax_xent_grad, ACCEPTS_NONE, True)
RegisterGradient("SoftmaxCrossEntropyWithLogits")(_softmax_xent_grad)
RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")(_softmax_xent_grad)


# --- helpers ---------------------------------------------------------------------------------

def _same(target: str, op, inputs: Sequence[Output], names: Sequence[str]) -> Output:
    """A ``target`` op over ``inputs`` with op's attrs ``names`` (typed from target's OpDef,
    so empty lists such as explicit_paddings=[] work)."""
    d = op_def(target)
    return _op(target, inputs, {n: op.get_attr(n) for n in names}, {n: d.attr(n).type for n in names})


def _shape(x: Output) -> Output:
    return _op("Shape", [x])


def _cast(x: Output, dtype) -> Output:
    return _op("Cast", [x], {"DstT": dtypes.as_dtype(dtype)})


def _last_dim(shape: Output, dtype) -> Output:
    """The last entry of a shape vector, as ``dtype``."""
    last = _op("Sub", [_op("Size", [shape]), _const(1, "int32")])
    return _cast(_op("GatherV2", [shape, last, _const(0, "int32")]), dtype)


def _stop(x: Output) -> Output:
    return _op("StopGradient", [x])


_CONV2D = ("strides", "padding", "explicit_paddings", "use_cudnn_on_gpu", "data_format", "dilations")
_DEPTHWISE = ("strides", "padding", "explicit_paddings", "data_format", "dilations")
_CONV3D = ("strides", "padding", "data_format", "dilations")
_POOL = ("ksize", "strides", "padding", "data_format")


# --- activations -----------------------------------------------------------------------------

@RegisterGradient("SeluGrad")
def _selu_grad_grad(op, grad):
    dy, selu_x = op.inputs
    negative = _op("Less", [selu_x, _c(selu_x, 0.0)])
    return (_op("SeluGrad", [grad, selu_x]),
            _op("SelectV2", [negative, _mul(grad, dy), _zeros_like(selu_x)]))


@RegisterGradient("LeakyReluGrad")
def _leaky_relu_grad_grad(op, grad):
    # TF's C++ version returns no gradient for the features; TF Python zeros.
    x = op.inputs[1]
    return _same("LeakyReluGrad", op, [grad, x], ["alpha"]), _zeros_like(x)


# --- convolutions ----------------------------------------------------------------------------

def _register_convolution(conv: str, backprop_input: str, backprop_filter: str, attrs, forward: bool = True):
    """The gradients of a convolution and of its two backprops, each built from
    the other two ops of the family (TF's nn_grad.py)."""
    if forward:
        @RegisterGradient(conv)
        def _conv_grad(op, grad):
            x, f = op.inputs
            return (_same(backprop_input, op, [_shape(x), f, grad], attrs),
                    _same(backprop_filter, op, [x, _shape(f), grad], attrs))

    @RegisterGradient(backprop_input)
    def _backprop_input_grad(op, grad):
        _, f, dy = op.inputs
        return None, _same(backprop_filter, op, [grad, _shape(f), dy], attrs), _same(conv, op, [grad, f], attrs)

    @RegisterGradient(backprop_filter)
    def _backprop_filter_grad(op, grad):
        x, _, dy = op.inputs
        return _same(backprop_input, op, [_shape(x), grad, dy], attrs), None, _same(conv, op, [x, grad], attrs)


# Conv2D's: TF's C++ version drops explicit_paddings (padding="EXPLICIT" fails).
_register_convolution("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", _CONV2D)
# DepthwiseConv2dNative's own gradient is TF's C++ one.
_register_convolution("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                      "DepthwiseConv2dNativeBackpropFilter", _DEPTHWISE, forward=False)
_register_convolution("Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", _CONV3D)


@RegisterGradient("Dilation2D")
def _dilation2d_grad(op, grad):
    x, f = op.inputs
    names = ("strides", "rates", "padding")
    return (_same("Dilation2DBackpropInput", op, [x, f, grad], names),
            _same("Dilation2DBackpropFilter", op, [x, f, grad], names))


# --- bias ------------------------------------------------------------------------------------

@RegisterGradient("BiasAddV1")
def _bias_add_v1_grad(op, grad):
    rank_minus_one = _op("Sub", [_op("Rank", [grad]), _const(1, "int32")])
    return grad, _op("Sum", [grad, _op("Range", [_const(0, "int32"), rank_minus_one, _const(1, "int32")])])


@RegisterGradient("BiasAddGrad")
def _bias_add_grad_grad(op, grad):
    # Broadcast the bias gradient back over out_backprop's shape.
    shape = _shape(op.inputs[0])
    one = _const([1], "int32")
    size = _op("Size", [grad], {"out_type": "int32"}, {"out_type": "type"})
    if op.get_attr("data_format") == b"NCHW":
        batch = _op("Slice", [shape, _const([0], "int32"), one])
        rest = _op("Slice", [shape, _const([2], "int32"), _const([-1], "int32")])
        expanded = _op("ConcatV2", [[_op("OnesLike", [batch]), _op("Reshape", [size, one]),
                                     _op("OnesLike", [rest])], _const(0, "int32")])
        multiples = _op("ConcatV2", [[batch, one, rest], _const(0, "int32")])
    else:
        lead = _op("Slice", [shape, _const([0], "int32"), _op("Sub", [_op("Size", [shape]), _const([1], "int32")])])
        expanded = _op("ConcatV2", [[_op("OnesLike", [lead]), _op("Reshape", [size, one])], _const(0, "int32")])
        multiples = _op("ConcatV2", [[lead, one], _const(0, "int32")])
    return _op("Tile", [_op("Reshape", [grad, expanded]), multiples])


# --- pooling ---------------------------------------------------------------------------------

@RegisterGradient("AvgPoolGrad")
def _avg_pool_grad_grad(op, grad):
    return None, _same("AvgPool", op, [grad], _POOL)


@RegisterGradient("AvgPool3DGrad")
def _avg_pool3d_grad_grad(op, grad):
    return None, _same("AvgPool3D", op, [grad], _POOL)


def _max_pool_grad_grad(forward: str, backward: str, names=_POOL):
    """Gradient of a max-pool gradient op (of type forward): zeros for the pooled input and
    output (the pooling regions are piecewise constant), ``backward`` for the incoming gradient."""
    def grad_fn(op, grad):
        x, y = op.inputs[0], op.inputs[1]
        extra = list(op.inputs[3:])  # ksize, strides of the V2 ops
        return (_zeros_like(x), _zeros_like(y), _same(backward, op, [x, y, grad] + extra, names),
                *([None] * len(extra)))
    RegisterGradient(forward)(grad_fn)


_max_pool_grad_grad("MaxPoolGrad", "MaxPoolGradGrad")
_max_pool_grad_grad("MaxPoolGradGrad", "MaxPoolGrad")
_max_pool_grad_grad("MaxPoolGradV2", "MaxPoolGradGradV2", ("padding", "data_format"))
_max_pool_grad_grad("MaxPool3DGrad", "MaxPool3DGradGrad")
_max_pool_grad_grad("MaxPool3DGradGrad", "MaxPool3DGrad")


@RegisterGradient("MaxPoolWithArgmax")
def _max_pool_with_argmax_grad(op, grad, _argmax_grad):
    return _same("MaxPoolGradWithArgmax", op, [op.inputs[0], grad, op.outputs[1]],
                 ("ksize", "strides", "padding", "include_batch_in_index"))


# --- normalisation ---------------------------------------------------------------------------

@RegisterGradient("LRN")
def _lrn_grad(op, grad):
    # TF's C++ version drops the attrs (depth_radius, bias, alpha, beta: their defaults are used).
    return _same("LRNGrad", op, [grad, op.inputs[0], op.outputs[0]], ("depth_radius", "bias", "alpha", "beta"))


def _to_channels_last(x: Output, rank: int) -> Output:
    return _op("Transpose", [x, _const([0] + list(range(2, rank)) + [1], "int32")])


def _fused_batch_norm_grad(op, grad_y, *_unused):
    """FusedBatchNorm, V2, V3: the fused gradient op of the same version (after TF's
    _BaseFusedBatchNormGrad; the mean and variance inputs get no gradient)."""
    grad_type = {"FusedBatchNorm": "FusedBatchNormGrad", "FusedBatchNormV2": "FusedBatchNormGradV2",
                 "FusedBatchNormV3": "FusedBatchNormGradV3"}[op.type]
    x, scale = op.inputs[0], op.inputs[1]
    data_format = op.get_attr("data_format")
    training = op.get_attr("is_training")
    extra = [op.outputs[5]] if op.type == "FusedBatchNormV3" else []
    attrs = {"epsilon": op.get_attr("epsilon"), "is_training": training}
    if training:
        stats = [op.outputs[3], op.outputs[4]]
        attrs["data_format"] = data_format
    else:
        # Inference: the population statistics, in channels-last layout (as TF).
        stats = [op.inputs[3], op.inputs[4]]
        rank = len(data_format)
        if data_format in (b"NCHW", b"NCDHW"):
            x, grad_y = _to_channels_last(x, rank), _to_channels_last(grad_y, rank)
        attrs["data_format"] = "NHWC" if rank == 4 else "NDHWC"
    dx, dscale, doffset = _node(grad_type, [grad_y, x, scale] + stats + extra, attrs).outputs[:3]
    if not training and data_format in (b"NCHW", b"NCDHW"):
        rank = len(data_format)
        dx = _op("Transpose", [dx, _const([0, rank - 1] + list(range(1, rank - 1)), "int32")])
    return dx, dscale, doffset, None, None


for _type in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
    RegisterGradient(_type)(_fused_batch_norm_grad)


@RegisterGradient("BatchNormWithGlobalNormalization")
def _batch_norm_with_global_normalization_grad(op, grad):
    t, m, v, _beta, gamma = op.inputs
    return tuple(_node("BatchNormWithGlobalNormalizationGrad", [t, m, v, gamma, grad],
                       {"variance_epsilon": op.get_attr("variance_epsilon"),
                        "scale_after_normalization": op.get_attr("scale_after_normalization")}).outputs)


def _batch_norm_grad(grad_y, x, scale, pop_mean, pop_var, epsilon, data_format, training):
    """The math of a fused batch norm gradient as differentiable ops (TF's
    nn_fused_batch_norm_grad._BatchNormGrad): differentiated for its second order."""
    x_dtype = x.dtype
    if x_dtype.name in ("float16", "bfloat16"):  # as TF: too imprecise, compute in float32
        x, grad_y = _cast(x, "float32"), _cast(grad_y, "float32")
    channels_first = data_format in (b"NCHW", b"NCDHW")
    rank = len(data_format)
    axes = _const([0] + list(range(2, rank)) if channels_first else list(range(rank - 1)), "int32")
    keep = {"keep_dims": channels_first}

    def per_channel(v):  # a [C] vector, broadcastable against x
        if not channels_first:
            return v
        return _op("Reshape", [v, _const([1, -1] + [1] * (rank - 2), "int32")])

    def mean(v, keep_dims=keep):
        return _op("Mean", [v, axes], keep_dims)

    scale = per_channel(scale)
    eps = _c(x, epsilon)
    if training:
        mean_x = mean(x)
        var_x = mean(_op("SquaredDifference", [x, _stop(mean_x)]))
        x_offset = _op("Sub", [x, mean_x])
        grad_y_offset = _op("Sub", [grad_y, mean(grad_y)])
        var_eps = _op("AddV2", [var_x, eps])
        m = mean(_mul(grad_y, x_offset))
        grad_x = _mul(scale, _op("Rsqrt", [var_eps]),
                      _op("Sub", [grad_y_offset, _mul(_op("Reciprocal", [var_eps]), m, x_offset)]))
        grad_scale = _mul(_op("Rsqrt", [var_eps]), _op("Sum", [_mul(grad_y, x_offset), axes], keep))
        if channels_first:
            grad_scale = _op("Squeeze", [grad_scale])
    else:
        pop_mean, pop_var = per_channel(pop_mean), per_channel(pop_var)
        var_rsqrt = _op("Rsqrt", [_op("AddV2", [pop_var, eps])])
        grad_scale = _op("Sum", [_mul(grad_y, _op("Sub", [x, pop_mean]), var_rsqrt), axes])
        grad_x = _mul(grad_y, scale, var_rsqrt)
    grad_offset = _op("Sum", [grad_y, axes])
    if grad_x.dtype != x_dtype:
        grad_x = _cast(grad_x, x_dtype)
    return grad_x, grad_scale, grad_offset


def _fused_batch_norm_grad_grad(op, grad_grad_x, grad_grad_scale, grad_grad_offset, *_unused):
    """FusedBatchNormGrad, V2, V3: the gradient of the same math built from differentiable ops."""
    from bridge.framework.indexed_slices import convert_to_tensor
    from .api import gradients
    grad_y, x, scale, pop_mean, pop_var = op.inputs[:5]
    outs = _batch_norm_grad(grad_y, x, scale, pop_mean, pop_var, op.get_attr("epsilon"),
                            op.get_attr("data_format"), op.get_attr("is_training"))
    ggy, gx, gscale = (convert_to_tensor(g) for g in gradients(
        list(outs), [grad_y, x, scale], grad_ys=[grad_grad_x, grad_grad_scale, grad_grad_offset]))
    return (ggy, gx, gscale) + (None,) * (len(op.inputs) - 3)


for _type in ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"):
    RegisterGradient(_type)(_fused_batch_norm_grad_grad)


# --- selection -------------------------------------------------------------------------------

@RegisterGradient("TopKV2")
@RegisterGradient("TopK")
def _top_k_grad(op, grad, _indices_grad):
    """Scatter grad to the selected positions of each row (last axis) of the input."""
    x, indices = op.inputs[0], op.outputs[1]
    in_shape = _shape(x)
    idx_dtype = indices.dtype
    last = _const(-1, "int32")
    in_last = _last_dim(in_shape, idx_dtype)
    k = _last_dim(_shape(indices), idx_dtype)
    ind_2d = _op("Reshape", [indices, _op("Pack", [[_const(-1, idx_dtype), k]])])
    rows = _cast(_op("GatherV2", [_shape(ind_2d), _const(0, "int32"), _const(0, "int32")]), idx_dtype)
    row_start = _op("Range", [_const(0, idx_dtype), _op("Mul", [rows, in_last]), in_last])
    flat = _op("Reshape", [_op("AddV2", [ind_2d, _op("ExpandDims", [row_start, last])]), _const([-1], "int32")])
    size = _op("Prod", [in_shape, _const([0], "int32")], {"keep_dims": True})
    scattered = _op("ScatterNd", [_op("ExpandDims", [flat, last]),
                                  _op("Reshape", [grad, _const([-1], "int32")]),
                                  _cast(size, idx_dtype)])
    return [_op("Reshape", [scattered, in_shape])] + [None] * (len(op.inputs) - 1)  # TopK: k is an attr


@RegisterGradient("ApproxTopK")
def _approx_top_k_grad(op, grad, _indices_grad):
    """Scatter grad to the selected positions along reduction_dimension (static shapes, as TF)."""
    indices = op.outputs[1]
    shape = [int(d) for d in indices.shape]
    rank = len(shape)
    axis = op.get_attr("reduction_dimension") % rank
    lifted = shape + [1]
    coords = []
    for d in range(rank):
        if d == axis:
            coords.append(_op("Reshape", [indices, _const(lifted, "int32")]))
        else:
            iota_shape = [1] * (rank + 1)
            iota_shape[d] = shape[d]
            iota = _op("Reshape", [_op("Range", [_const(0, "int32"), _const(shape[d], "int32"), _const(1, "int32")]),
                                   _const(iota_shape, "int32")])
            coords.append(_op("BroadcastTo", [iota, _const(lifted, "int32")]))
    n = int(np.prod(shape))
    flat_idx = _op("Reshape", [_op("ConcatV2", [coords, _const(rank, "int32")]), _const([n, rank], "int32")])
    flat_grad = _op("Reshape", [grad, _const([n], "int32")])
    return _op("ScatterNd", [flat_idx, flat_grad, _const([int(d) for d in op.inputs[0].shape], "int32")])


@RegisterGradient("NthElement")
def _nth_element_grad(op, grad):
    """grad goes to the input entries equal to the selected value, split evenly among ties."""
    x, y = op.inputs[0], op.outputs[0]
    last = _const(-1, "int32")
    indicators = _cast(_op("Equal", [_op("ExpandDims", [y, last]), x]), grad.dtype)
    num_selected = _op("ExpandDims", [_op("Sum", [indicators, last]), last])
    return _mul(_op("RealDiv", [indicators, num_selected]), _op("ExpandDims", [grad, last])), None


@RegisterGradient("IsotonicRegression")
def _isotonic_regression_grad(op, grad_output, _grad_segments):
    """Each entry gets the mean of grad_output over its segment (segments are per row)."""
    segments = op.outputs[1]  # [rows, n] int32, ids 0.. within each row
    shape = _shape(segments)
    n = _op("GatherV2", [shape, _const(1, "int32"), _const(0, "int32")])
    rows = _op("GatherV2", [shape, _const(0, "int32"), _const(0, "int32")])
    # Segment ids unique across rows: row r's ids are offset by r * n.
    offsets = _op("ExpandDims", [_op("Range", [_const(0, "int32"), _op("Mul", [rows, n]), n]), _const(-1, "int32")])
    ids = _op("AddV2", [segments, offsets])
    num = _op("Mul", [rows, n])
    sums = _op("UnsortedSegmentSum", [grad_output, ids, num])
    counts = _op("UnsortedSegmentSum", [_op("OnesLike", [grad_output]), ids, num])
    means = _op("RealDiv", [sums, _op("Maximum", [counts, _c(counts, 1.0)])])
    return _op("GatherV2", [means, ids, _const(0, "int32")])
