"""Gradient cases: TF's nn_grad.py (activations, convolutions, pooling, normalisation, losses, top-k) and their second order; CTC, LSTM blocks."""
from __future__ import annotations

import numpy as np

import bridge
from bridge import ops

from . import case, cplx, i32, i64, positive, signed  # noqa: F401


def _i32(value):
    return bridge.constant(np.asarray(value, dtype=np.int32))


def _f32(x):
    """The float32 ``U`` inputs (scale, offset, mean, variance) of fused batch norms."""
    return x if x.dtype == bridge.float32 else ops.cast(x, DstT=bridge.float32)


def _no_stats():
    return bridge.constant(np.zeros([0], np.float32))


def _old_graph(producer: int) -> None:
    """Lower the default graph's GraphDef producer version below ``producer`` (by importing an
    empty GraphDef of version producer - 1), so ops removed from GraphDefs at ``producer``
    (TopK, BatchNormWithGlobalNormalization) can still be built, as in an old imported model."""
    bridge.get_default_graph().import_graph_def(bytes([0x22, 0x02, 0x08, producer - 1]))


S1 = (1, 1, 1, 1)
S2 = (1, 2, 2, 1)
K2 = (1, 2, 2, 1)
S1_3D = (1, 1, 1, 1, 1)
K2_3D = (1, 2, 2, 2, 1)

# Values away from the kinks of Relu6 (0 and 6), distinct (max pooling has no ties).
RELU6_IN = np.array([[-1.3, 0.4, 2.5, 7.2], [5.1, -0.3, 6.8, 3.3]])


def _distinct(*shape):
    """Distinct values, spaced so float16/bfloat16 rounding keeps them distinct (max pooling, top-k)."""
    n = int(np.prod(shape))
    values = np.linspace(-1.0, 1.0, n) + 0.3 / n * signed(n, low=0.0, high=1.0)
    return np.random.default_rng(n).permutation(values).reshape(shape)


def _conv2d(x, f, strides=S1, padding="VALID", **kw):
    return ops.conv2d(x, f, strides=strides, padding=padding, **kw)


def _bn(version, training, data_format="NHWC"):
    fn = {0: ops.fused_batch_norm, 1: ops.fused_batch_norm_v2, 2: ops.fused_batch_norm_v3}[version]

    def build(x, scale, offset, mean=None, var=None):
        if training:
            mean, var = _no_stats(), _no_stats()
        else:
            mean, var = _f32(mean), ops.add(_f32(var), bridge.constant(np.float32(0.5)))
        out = fn(x, _f32(scale), _f32(offset), mean, var, epsilon=0.01, is_training=training,
                 data_format=data_format)
        return out[0]
    return build


def _bn_grad(version, training, data_format="NHWC"):
    """FusedBatchNormGrad*(dy, x, scale, statistics of x from the forward op)."""
    fwd = {0: ops.fused_batch_norm, 1: ops.fused_batch_norm_v2, 2: ops.fused_batch_norm_v3}[version]
    bwd = {0: ops.fused_batch_norm_grad, 1: ops.fused_batch_norm_grad_v2, 2: ops.fused_batch_norm_grad_v3}[version]

    def build(dy, x, scale):
        channels = x.shape[1] if data_format == "NCHW" else x.shape[-1]
        if training:
            f = fwd(ops.stop_gradient(x), _f32(ops.stop_gradient(scale)),
                    bridge.constant(np.zeros([channels], np.float32)), _no_stats(), _no_stats(),
                    epsilon=0.01, is_training=True, data_format=data_format)
            stats = [f[3], f[4]] + ([f[5]] if version == 2 else [])
        else:
            stats = [bridge.constant(np.linspace(-0.2, 0.3, channels).astype(np.float32)),
                     bridge.constant(np.linspace(0.5, 1.5, channels).astype(np.float32))]
            if version == 2:
                stats.append(_no_stats())
        out = bwd(dy, x, _f32(scale), *stats, epsilon=0.01, is_training=training, data_format=data_format)
        return out[:3]
    return build


CASES = [
    # --- activations and their gradient ops (second order of the latter: third order of the former)
    case("Relu", ops.relu, signed(2, 3)),
    case("ReluGrad", ops.relu_grad, signed(2, 3), signed(2, 3)),
    case("Relu6", ops.relu6, RELU6_IN),
    case("Relu6Grad", ops.relu6_grad, signed(2, 4), RELU6_IN),
    case("Elu", ops.elu, signed(2, 3)),
    case("EluGrad", lambda g, x: ops.elu_grad(g, ops.elu(x)), signed(2, 3), signed(2, 3)),
    case("Selu", ops.selu, signed(2, 3)),
    case("SeluGrad", lambda g, x: ops.selu_grad(g, ops.selu(x)), signed(2, 3), signed(2, 3)),
    case("LeakyRelu", lambda x: ops.leaky_relu(x, alpha=0.3), signed(2, 3)),
    case("LeakyReluGrad", lambda g, x: ops.leaky_relu_grad(g, x, alpha=0.3), signed(2, 3), signed(2, 3)),
    case("Softplus", ops.softplus, signed(2, 3)),
    case("SoftplusGrad", ops.softplus_grad, signed(2, 3), signed(2, 3)),
    case("Softsign", ops.softsign, signed(2, 3)),
    case("Softmax", ops.softmax, signed(2, 4)),
    case("LogSoftmax", ops.log_softmax, signed(2, 4)),
    # --- losses
    case("SoftmaxCrossEntropyWithLogits", lambda x, y: ops.softmax_cross_entropy_with_logits(x, y),
         signed(3, 4), positive(3, 4)),
    case("SparseSoftmaxCrossEntropyWithLogits",
         lambda x, y: ops.sparse_softmax_cross_entropy_with_logits(x, y), signed(3, 4), i32([0, 3, 1])),
    case("SparseSoftmaxCrossEntropyWithLogits",
         lambda x, y: ops.sparse_softmax_cross_entropy_with_logits(x, y), signed(2, 5), i64([4, 2]),
         label="int64"),
    case("L2Loss", ops.l2_loss, signed(2, 3)),
    # --- bias
    case("BiasAdd", ops.bias_add, signed(2, 3, 4), signed(4)),
    case("BiasAdd", lambda x, b: ops.bias_add(x, b, data_format="NCHW"), signed(2, 3, 2, 2), signed(3),
         label="NCHW"),
    case("BiasAddV1", ops.bias_add_v1, signed(2, 3, 4), signed(4)),
    case("BiasAddGrad", ops.bias_add_grad, signed(2, 3, 4)),
    case("BiasAddGrad", lambda g: ops.bias_add_grad(g, data_format="NCHW"), signed(2, 3, 2, 2), label="NCHW"),
    # --- convolutions
    case("Conv2D", _conv2d, signed(2, 4, 4, 2), signed(2, 2, 2, 3)),
    case("Conv2D", lambda x, f: _conv2d(x, f, S2, "SAME"), signed(1, 5, 5, 2), signed(3, 3, 2, 2),
         label="same_strided"),
    # Stock TF's CPU kernels (oneDNN) fail on dilated float64/float16 convolution gradients.
    case("Conv2D", lambda x, f: _conv2d(x, f, padding="SAME", dilations=(1, 2, 2, 1)), signed(1, 6, 6, 2),
         signed(2, 2, 2, 2), label="dilated", dtypes=("float32", "bfloat16")),
    case("Conv2D", lambda x, f: _conv2d(x, f, padding="EXPLICIT", explicit_paddings=(0, 0, 1, 0, 0, 1, 0, 0)),
         signed(1, 3, 3, 2), signed(2, 2, 2, 2), label="explicit"),
    case("Conv2DBackpropInput",
         lambda f, dy: ops.conv2d_backprop_input(_i32([1, 5, 5, 2]), f, dy, strides=S2, padding="SAME"),
         signed(3, 3, 2, 2), signed(1, 3, 3, 2)),
    case("Conv2DBackpropFilter",
         lambda x, dy: ops.conv2d_backprop_filter(x, _i32([3, 3, 2, 2]), dy, strides=S2, padding="SAME"),
         signed(1, 5, 5, 2), signed(1, 3, 3, 2)),
    case("DepthwiseConv2dNative",
         lambda x, f: ops.depthwise_conv2d_native(x, f, strides=S1, padding="VALID"),
         signed(1, 4, 4, 2), signed(2, 2, 2, 2)),
    case("DepthwiseConv2dNativeBackpropInput",
         lambda f, dy: ops.depthwise_conv2d_native_backprop_input(_i32([1, 4, 4, 2]), f, dy, strides=S1,
                                                                  padding="VALID"),
         signed(2, 2, 2, 2), signed(1, 3, 3, 4)),
    case("DepthwiseConv2dNativeBackpropFilter",
         lambda x, dy: ops.depthwise_conv2d_native_backprop_filter(x, _i32([2, 2, 2, 2]), dy, strides=S1,
                                                                   padding="VALID"),
         signed(1, 4, 4, 2), signed(1, 3, 3, 4)),
    case("Conv3D", lambda x, f: ops.conv3d(x, f, strides=S1_3D, padding="VALID"),
         signed(1, 3, 3, 3, 2), signed(2, 2, 2, 2, 2)),
    case("Conv3DBackpropInputV2",
         lambda f, dy: ops.conv3d_backprop_input_v2(_i32([1, 3, 3, 3, 2]), f, dy, strides=S1_3D,
                                                    padding="VALID"),
         signed(2, 2, 2, 2, 2), signed(1, 2, 2, 2, 2)),
    case("Conv3DBackpropFilterV2",
         lambda x, dy: ops.conv3d_backprop_filter_v2(x, _i32([2, 2, 2, 2, 2]), dy, strides=S1_3D,
                                                     padding="VALID"),
         signed(1, 3, 3, 3, 2), signed(1, 2, 2, 2, 2)),
    case("Dilation2D",
         lambda x, f: ops.dilation2d(x, f, strides=S1, rates=S1, padding="VALID"),
         _distinct(1, 4, 4, 2), _distinct(2, 2, 2)),
    # --- pooling
    case("MaxPool", lambda x: ops.max_pool(x, ksize=K2, strides=S2, padding="VALID"), _distinct(2, 4, 4, 2)),
    case("MaxPool", lambda x: ops.max_pool(x, ksize=(1, 3, 3, 1), strides=S2, padding="SAME"),
         _distinct(1, 5, 5, 2), label="same"),
    case("MaxPoolV2", lambda x: ops.max_pool_v2(x, _i32(K2), _i32(S2), padding="VALID"), _distinct(1, 4, 4, 2)),
    case("MaxPoolGrad",
         lambda x, g: ops.max_pool_grad(x, ops.max_pool(x, ksize=K2, strides=S2, padding="VALID"), g,
                                        ksize=K2, strides=S2, padding="VALID"),
         _distinct(1, 4, 4, 2), signed(1, 2, 2, 2)),
    case("MaxPoolGradV2",
         lambda x, g: ops.max_pool_grad_v2(x, ops.max_pool(x, ksize=K2, strides=S2, padding="VALID"), g,
                                           _i32(K2), _i32(S2), padding="VALID"),
         _distinct(1, 4, 4, 2), signed(1, 2, 2, 2)),
    case("MaxPoolGradGrad",
         lambda x, g: ops.max_pool_grad_grad(x, ops.max_pool(x, ksize=K2, strides=S2, padding="VALID"), g,
                                             ksize=K2, strides=S2, padding="VALID"),
         _distinct(1, 4, 4, 2), signed(1, 4, 4, 2)),
    case("MaxPoolWithArgmax",
         lambda x: ops.max_pool_with_argmax(x, ksize=K2, strides=S2, padding="VALID"), _distinct(2, 4, 4, 2)),
    case("MaxPoolWithArgmax",
         lambda x: ops.max_pool_with_argmax(x, ksize=K2, strides=S2, padding="SAME", include_batch_in_index=True),
         _distinct(2, 3, 3, 2), label="batch_in_index"),
    case("AvgPool", lambda x: ops.avg_pool(x, ksize=K2, strides=S2, padding="VALID"), signed(2, 4, 4, 2)),
    case("AvgPool", lambda x: ops.avg_pool(x, ksize=(1, 3, 3, 1), strides=S2, padding="SAME"),
         signed(1, 5, 5, 2), label="same"),
    case("AvgPoolGrad",
         lambda g: ops.avg_pool_grad(_i32([1, 4, 4, 2]), g, ksize=K2, strides=S2, padding="VALID"),
         signed(1, 2, 2, 2)),
    case("MaxPool3D", lambda x: ops.max_pool3d(x, ksize=K2_3D, strides=K2_3D, padding="VALID"),
         _distinct(1, 4, 4, 4, 2)),
    case("MaxPool3DGrad",
         lambda x, g: ops.max_pool3d_grad(x, ops.max_pool3d(x, ksize=K2_3D, strides=K2_3D, padding="VALID"), g,
                                          ksize=K2_3D, strides=K2_3D, padding="VALID"),
         _distinct(1, 4, 4, 4, 2), signed(1, 2, 2, 2, 2)),
    case("MaxPool3DGradGrad",
         lambda x, g: ops.max_pool3d_grad_grad(x, ops.max_pool3d(x, ksize=K2_3D, strides=K2_3D, padding="VALID"),
                                               g, ksize=K2_3D, strides=K2_3D, padding="VALID"),
         _distinct(1, 4, 4, 4, 2), signed(1, 4, 4, 4, 2), dtypes=("float32",)),
    case("AvgPool3D", lambda x: ops.avg_pool3d(x, ksize=K2_3D, strides=K2_3D, padding="VALID"),
         signed(1, 4, 4, 4, 2)),
    case("AvgPool3DGrad",
         lambda g: ops.avg_pool3d_grad(_i32([1, 4, 4, 4, 2]), g, ksize=K2_3D, strides=K2_3D, padding="VALID"),
         signed(1, 2, 2, 2, 2)),
    case("FractionalMaxPool",
         lambda x: ops.fractional_max_pool(x, pooling_ratio=(1.0, 1.5, 1.5, 1.0), pseudo_random=True,
                                           deterministic=True, seed=3, seed2=5),
         _distinct(1, 6, 6, 2)),
    case("FractionalAvgPool",
         lambda x: ops.fractional_avg_pool(x, pooling_ratio=(1.0, 1.5, 1.5, 1.0), overlapping=True,
                                           deterministic=True, seed=3, seed2=5),
         signed(1, 6, 6, 2)),
    # --- normalisation
    case("LRN", lambda x: ops.lrn(x, depth_radius=2, bias=1.5, alpha=0.3, beta=0.75), signed(1, 2, 2, 5)),
    case("FusedBatchNorm", _bn(0, True), signed(2, 2, 2, 3), signed(3), signed(3)),
    case("FusedBatchNorm", _bn(0, False), signed(2, 2, 2, 3), signed(3), signed(3), signed(3), positive(3),
         label="inference"),
    case("FusedBatchNormV2", _bn(1, True), signed(2, 2, 2, 3), signed(3), signed(3)),
    case("FusedBatchNormV2", _bn(1, False), signed(2, 2, 2, 3), signed(3), signed(3), signed(3), positive(3),
         label="inference"),
    case("FusedBatchNormV3", _bn(2, True), signed(2, 2, 2, 3), signed(3), signed(3)),
    case("FusedBatchNormV3", _bn(2, False), signed(2, 2, 2, 3), signed(3), signed(3), signed(3), positive(3),
         label="inference"),
    case("FusedBatchNormV3", _bn(2, True, "NCHW"), signed(2, 3, 2, 2), signed(3), signed(3), label="NCHW"),
    case("FusedBatchNormV3", _bn(2, False, "NCHW"), signed(2, 3, 2, 2), signed(3), signed(3), signed(3),
         positive(3), label="inference_NCHW"),
    case("FusedBatchNormGrad", _bn_grad(0, True), signed(2, 2, 2, 3), signed(2, 2, 2, 3), signed(3)),
    case("FusedBatchNormGrad", _bn_grad(0, False), signed(2, 2, 2, 3), signed(2, 2, 2, 3), signed(3),
         label="inference"),
    case("FusedBatchNormGradV2", _bn_grad(1, True), signed(2, 2, 2, 3), signed(2, 2, 2, 3), signed(3)),
    case("FusedBatchNormGradV2", _bn_grad(1, False), signed(2, 2, 2, 3), signed(2, 2, 2, 3), signed(3),
         label="inference"),
    case("FusedBatchNormGradV3", _bn_grad(2, True), signed(2, 2, 2, 3), signed(2, 2, 2, 3), signed(3)),
    case("FusedBatchNormGradV3", _bn_grad(2, False), signed(2, 2, 2, 3), signed(2, 2, 2, 3), signed(3),
         label="inference"),
    case("FusedBatchNormGradV3", _bn_grad(2, True, "NCHW"), signed(2, 3, 2, 2), signed(2, 3, 2, 2), signed(3),
         label="NCHW"),
    case("BatchNormWithGlobalNormalization",
         lambda x, m, v, b, g: (_old_graph(9), ops.batch_norm_with_global_normalization(
             x, m, ops.add(v, bridge.constant(0.5, dtype=v.dtype)), b, g, variance_epsilon=0.01,
             scale_after_normalization=True))[1],
         signed(2, 2, 2, 3), signed(3), positive(3), signed(3), signed(3)),
    case("BatchNormWithGlobalNormalization",
         lambda x, m, v, b, g: (_old_graph(9), ops.batch_norm_with_global_normalization(
             x, m, v, b, g, variance_epsilon=0.1, scale_after_normalization=False))[1],
         signed(1, 2, 2, 3), signed(3), positive(3), signed(3), signed(3), label="unscaled"),
    # --- selection
    case("TopKV2", lambda x: ops.top_kv2(x, _i32(2)), _distinct(3, 5)),
    case("TopKV2", lambda x: ops.top_kv2(x, _i32(3), sorted_=False), _distinct(2, 2, 4), label="unsorted"),
    # TopK is on tests/grad/test_parity.py's EXCLUDED: no kernel, and TF's gradient cannot run on it.
    case("NthElement", lambda x: ops.nth_element(x, _i32(1)), _distinct(3, 4)),
    case("NthElement", lambda x: ops.nth_element(x, _i32(2), reverse=True), _distinct(2, 5), label="reverse"),
    case("ApproxTopK", lambda x: ops.approx_top_k(x, k=2), _distinct(3, 5)),
    case("IsotonicRegression", lambda x: ops.isotonic_regression(x, output_dtype=x.dtype),
         np.array([[0.9, 0.3, 0.5, 1.4, 1.2], [-0.4, 0.2, 0.1, 0.6, 0.8]])),
    # --- CTC, LSTM blocks (no second order: TF's gradients are fused ops without gradients)
    case("CTCLoss", lambda x, idx, val, n: ops.ctc_loss(x, idx, val, n)[0], signed(4, 2, 4),
         i64([[0, 0], [0, 1], [1, 0]]), i32([1, 2, 1]), i32([4, 3])),
    case("CTCLoss", lambda x, idx, val, n: ops.ctc_loss(x, idx, val, n, preprocess_collapse_repeated=True,
                                                        ctc_merge_repeated=False)[0],
         signed(5, 1, 3), i64([[0, 0], [0, 1], [0, 2]]), i32([1, 1, 0]), i32([5]), label="collapse"),
    # CTCLossV2 runs on cuDNN only (GPU): its case is skipped on CPU.
    case("CTCLossV2", lambda x, idx, val, n: ops.ctc_loss_v2(x, idx, val, n)[0], signed(4, 2, 4),
         i64([[0, 0], [0, 1], [1, 0]]), i32([1, 2, 3]), i32([4, 3]), dtypes=("float32",)),
    case("BlockLSTM", lambda n, *xs: ops.block_lstm(n, *xs), i64(3), signed(3, 2, 2), signed(2, 3), signed(2, 3),
         signed(5, 12, high=0.6), signed(3), signed(3), signed(3), signed(12)),
    case("BlockLSTM", lambda n, *xs: ops.block_lstm(n, *xs, use_peephole=True, forget_bias=0.5, cell_clip=-1.0),
         i64(2), signed(3, 1, 2), signed(1, 3), signed(1, 3), signed(5, 12, high=0.6), signed(3), signed(3),
         signed(3), signed(12), label="peephole"),
    case("BlockLSTMV2", lambda n, *xs: ops.block_lstmv2(n, *xs, use_peephole=True), i64(3), signed(3, 2, 2),
         signed(2, 3), signed(2, 3), signed(5, 12, high=0.6), signed(3), signed(3), signed(3), signed(12)),
    # cuDNN RNNs: GPU only, the cases are skipped on CPU.
    case("CudnnRNN", lambda x, h, c, p: ops.cudnn_rnn(x, h, c, p)[:3], signed(2, 1, 2), signed(1, 1, 2),
         signed(1, 1, 2), signed(48)),
    case("CudnnRNNV2", lambda x, h, c, p: ops.cudnn_rnnv2(x, h, c, p)[:3], signed(2, 1, 2), signed(1, 1, 2),
         signed(1, 1, 2), signed(48)),
    case("CudnnRNNV3", lambda x, h, c, p, n: ops.cudnn_rnnv3(x, h, c, p, n)[:3], signed(2, 1, 2),
         signed(1, 1, 2), signed(1, 1, 2), signed(48), i32([2])),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset()
