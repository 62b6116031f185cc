"""Gradient cases: TF's math_grad.py (arithmetic, reductions, scans, segment ops, complex numbers, matmuls), AccumulateNV2, ClipByValue."""
from __future__ import annotations

from bridge import ops

from . import case, i32, positive, signed

CASES = [
    case("Tanh", ops.tanh, signed(2, 3)),
    case("MatMul", lambda a, b: ops.mat_mul(a, b), signed(2, 3), signed(3, 4)),
    case("Cumsum", lambda x: ops.cumsum(x, 1), signed(2, 3)),
    case("Log", ops.log, positive(2, 3)),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "Abs", "AccumulateNV2", "Acos", "Acosh", "Add", "AddN", "AddV2", "Angle", "ArgMax",
    "ArgMin", "Asin", "Asinh", "Atan", "Atan2", "Atanh", "BatchMatMul", "BatchMatMulV2",
    "BatchMatMulV3", "Cast", "Ceil", "ClipByValue", "Complex", "ComplexAbs", "Conj", "Cos",
    "Cosh", "Cross", "Cumprod", "CumulativeLogsumexp", "Div", "DivNoNan", "EuclideanNorm",
    "Exp", "Expm1", "Floor", "FloorDiv", "FloorMod", "Imag", "Inv", "InvGrad", "Log1p", "Max",
    "Maximum", "Mean", "Min", "Minimum", "Mul", "MulNoNan", "Neg", "NextAfter", "Pow", "Prod",
    "Real", "RealDiv", "Reciprocal", "ReciprocalGrad", "Rint", "Round", "Rsqrt", "RsqrtGrad",
    "SegmentMax", "SegmentMean", "SegmentMin", "SegmentProd", "SegmentSum", "Select",
    "SelectV2", "Sigmoid", "SigmoidGrad", "Sign", "Sin", "Sinh", "SparseMatMul",
    "SparseSegmentMean", "SparseSegmentMeanWithNumSegments", "SparseSegmentSqrtN",
    "SparseSegmentSqrtNWithNumSegments", "SparseSegmentSum", "SparseSegmentSumWithNumSegments",
    "Sqrt", "SqrtGrad", "Square", "SquaredDifference", "Sub", "Sum", "Tan", "TanhGrad",
    "TruncateDiv", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd",
    "UnsortedSegmentSum",
})
