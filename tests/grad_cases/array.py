"""Gradient cases: TF's array_grad.py (shapes, slicing, gathers, scatters, pads, diagonals), manip, check, data-flow, logging and debug ops."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "BatchToSpace", "BatchToSpaceND", "BroadcastTo", "CheckNumerics", "CheckNumericsV2",
    "Concat", "ConcatV2", "ConjugateTranspose", "DebugGradientIdentity",
    "DebugGradientRefIdentity", "DebugIdentityV2", "DepthToSpace", "Diag", "DiagPart",
    "DynamicPartition", "DynamicStitch", "EnsureShape", "ExpandDims", "ExtractImagePatches",
    "ExtractVolumePatches", "FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars",
    "FakeQuantWithMinMaxVarsPerChannel", "Fill", "Gather", "GatherNd", "GatherV2", "Identity",
    "IdentityN", "MatrixBandPart", "MatrixDiag", "MatrixDiagPart", "MatrixDiagPartV2",
    "MatrixDiagPartV3", "MatrixDiagV2", "MatrixDiagV3", "MatrixSetDiag", "MatrixSetDiagV2",
    "MatrixSetDiagV3", "MirrorPad", "MirrorPadGrad", "Pack", "Pad", "PadV2",
    "ParallelDynamicStitch", "PlaceholderWithDefault", "PreventGradient", "Print",
    "QuantizeAndDequantize", "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3",
    "QuantizeAndDequantizeV4", "QuantizeAndDequantizeV4Grad", "RefIdentity", "Reshape",
    "ResourceGatherNd", "Reverse", "ReverseSequence", "ReverseV2", "Roll", "ScatterNd",
    "ScatterNdNonAliasingAdd", "Slice", "SpaceToBatch", "SpaceToBatchND", "SpaceToDepth",
    "Split", "SplitV", "Squeeze", "StridedSlice", "StridedSliceGrad", "TensorScatterAdd",
    "TensorScatterMax", "TensorScatterMin", "TensorScatterSub", "TensorScatterUpdate",
    "TensorStridedSliceUpdate", "Tile", "Transpose", "Unpack", "_EagerConst",
})
