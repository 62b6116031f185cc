"""Gradient cases: TF's nn_grad.py (activations, convolutions, pooling, normalisation, losses, top-k) and their second order; CTC, LSTM blocks."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "ApproxTopK", "AvgPool", "AvgPool3D", "AvgPool3DGrad", "AvgPoolGrad",
    "BatchNormWithGlobalNormalization", "BiasAdd", "BiasAddGrad", "BiasAddV1", "BlockLSTM",
    "BlockLSTMV2", "CTCLoss", "CTCLossV2", "Conv2D", "Conv2DBackpropFilter",
    "Conv2DBackpropInput", "Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2",
    "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "Dilation2D",
    "Elu", "EluGrad", "FractionalAvgPool", "FractionalMaxPool", "FusedBatchNorm",
    "FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3", "FusedBatchNormV2",
    "FusedBatchNormV3", "IsotonicRegression", "L2Loss", "LRN", "LeakyRelu", "LeakyReluGrad",
    "LogSoftmax", "MaxPool", "MaxPool3D", "MaxPool3DGrad", "MaxPool3DGradGrad", "MaxPoolGrad",
    "MaxPoolGradGrad", "MaxPoolGradV2", "MaxPoolV2", "MaxPoolWithArgmax", "NthElement", "Relu",
    "Relu6", "Relu6Grad", "ReluGrad", "Selu", "SeluGrad", "Softmax",
    "SoftmaxCrossEntropyWithLogits", "Softplus", "SoftplusGrad", "Softsign",
    "SparseSoftmaxCrossEntropyWithLogits", "TopK", "TopKV2",
})
