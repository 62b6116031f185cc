"""Gradient cases: TF's math_grad.py (arithmetic, reductions, scans, segment ops, complex numbers, matmuls), AccumulateNV2, ClipByValue."""
from __future__ import annotations

import numpy as np

import bridge
from bridge import ops

from . import case, cplx, i32, i64, positive, signed


def _real_dtype(x):
    """The real dtype of complex x's parts (Tout of Real, Imag, Angle, ComplexAbs)."""
    return bridge.as_dtype("float64" if x.dtype.name == "complex128" else "float32")


def _complex_dtype(x):
    """The complex dtype with parts of real x's dtype (Tout of Complex)."""
    return bridge.as_dtype("complex128" if x.dtype.name == "float64" else "complex64")


def _with_zero(x: np.ndarray) -> np.ndarray:
    """x with one entry set to 0 (for the NoNan ops)."""
    x = x.copy()
    x.flat[1] = 0.0
    return x


def _unary(op: str, fn, real, complex_too: bool = True):
    """Cases for a unary op: a real input and (where the op takes complex) a complex one."""
    out = [case(op, fn, real)]
    if complex_too:
        out.append(case(op, fn, cplx(2, 3), label="complex"))
    return out


_BOOL = np.array([[True, False, True], [False, False, True]])

CASES = [
    case("Tanh", ops.tanh, signed(2, 3)),
    case("MatMul", lambda a, b: ops.mat_mul(a, b), signed(2, 3), signed(3, 4)),
    case("Cumsum", lambda x: ops.cumsum(x, 1), signed(2, 3)),
    case("Log", ops.log, positive(2, 3)),

    # --- unary -------------------------------------------------------------------------------
    *_unary("Abs", ops.abs, signed(2, 3), complex_too=False),
    *_unary("Neg", ops.neg, signed(2, 3)),
    *_unary("Sign", ops.sign, signed(2, 3)),
    *_unary("Square", ops.square, signed(2, 3)),
    *_unary("Sqrt", ops.sqrt, positive(2, 3)),
    *_unary("Rsqrt", ops.rsqrt, positive(2, 3)),
    *_unary("Reciprocal", ops.reciprocal, signed(2, 3)),
    *_unary("Inv", ops.inv, signed(2, 3)),
    *_unary("Exp", ops.exp, signed(2, 3)),
    *_unary("Expm1", ops.expm1, signed(2, 3)),
    *_unary("Log1p", ops.log1p, signed(2, 3, high=0.8)),
    *_unary("Sigmoid", ops.sigmoid, signed(2, 3)),
    *_unary("Sin", ops.sin, signed(2, 3)),
    *_unary("Cos", ops.cos, signed(2, 3)),
    *_unary("Tan", ops.tan, signed(2, 3, high=1.0)),
    *_unary("Sinh", ops.sinh, signed(2, 3)),
    *_unary("Cosh", ops.cosh, signed(2, 3)),
    *_unary("Asin", ops.asin, signed(2, 3, high=0.8)),
    *_unary("Acos", ops.acos, signed(2, 3, high=0.8)),
    *_unary("Atan", ops.atan, signed(2, 3)),
    *_unary("Asinh", ops.asinh, signed(2, 3)),
    *_unary("Acosh", ops.acosh, positive(2, 3, low=1.2, high=2.0)),
    *_unary("Atanh", ops.atanh, signed(2, 3, high=0.8)),
    case("Floor", ops.floor, signed(2, 3)),
    case("Ceil", ops.ceil, signed(2, 3)),
    case("Round", ops.round, signed(2, 3)),
    case("Rint", ops.rint, signed(2, 3)),

    # --- first-derivative ops (their gradients give the second order of Sqrt, Tanh, ...) -----
    case("SqrtGrad", ops.sqrt_grad, positive(2, 3), signed(2, 3)),
    case("SqrtGrad", ops.sqrt_grad, cplx(2, 3), cplx(2, 3), label="complex"),
    case("RsqrtGrad", ops.rsqrt_grad, positive(2, 3), signed(2, 3)),
    case("RsqrtGrad", ops.rsqrt_grad, cplx(2, 3), cplx(2, 3), label="complex"),
    case("ReciprocalGrad", ops.reciprocal_grad, signed(2, 3), signed(2, 3)),
    case("ReciprocalGrad", ops.reciprocal_grad, cplx(2, 3), cplx(2, 3), label="complex"),
    case("InvGrad", ops.inv_grad, signed(2, 3), signed(2, 3)),
    case("InvGrad", ops.inv_grad, cplx(2, 3), cplx(2, 3), label="complex"),
    case("SigmoidGrad", ops.sigmoid_grad, positive(2, 3), signed(2, 3)),
    case("SigmoidGrad", ops.sigmoid_grad, cplx(2, 3), cplx(2, 3), label="complex"),
    case("TanhGrad", ops.tanh_grad, signed(2, 3, high=0.9), signed(2, 3)),
    case("TanhGrad", ops.tanh_grad, cplx(2, 3), cplx(2, 3), label="complex"),

    # --- binary, with broadcasting ------------------------------------------------------------
    case("Add", ops.add, signed(2, 3), signed(3)),
    case("Add", ops.add, cplx(2, 1), cplx(1, 3), label="complex"),
    case("AddV2", ops.add_v2, signed(2, 1), signed(1, 3)),
    case("AddV2", ops.add_v2, cplx(2, 3), cplx(3), label="complex"),
    case("Sub", ops.sub, signed(2, 3), signed(3)),
    case("Sub", ops.sub, cplx(3), cplx(2, 3), label="complex"),
    case("Mul", ops.mul, signed(2, 3), signed(2, 1)),
    case("Mul", ops.mul, cplx(2, 3), cplx(3), label="complex"),
    case("Mul", lambda x: ops.mul(x, ops.tanh(x)), signed(2, 3), label="self"),
    case("Div", ops.div, signed(2, 3), signed(3)),
    case("Div", ops.div, cplx(2, 3), cplx(3), label="complex"),
    case("RealDiv", ops.real_div, signed(3), signed(2, 3)),
    case("RealDiv", ops.real_div, cplx(2, 3), cplx(2, 1), label="complex"),
    case("DivNoNan", ops.div_no_nan, signed(2, 3), _with_zero(signed(2, 3))),
    case("DivNoNan", ops.div_no_nan, signed(2, 3), signed(3), label="broadcast"),
    case("DivNoNan", ops.div_no_nan, cplx(2, 3), _with_zero(cplx(2, 3)), label="complex"),
    case("MulNoNan", ops.mul_no_nan, signed(2, 3), _with_zero(signed(2, 3))),
    case("MulNoNan", ops.mul_no_nan, signed(2, 3), signed(3), label="broadcast"),
    case("MulNoNan", ops.mul_no_nan, cplx(2, 3), _with_zero(cplx(2, 3)), label="complex"),
    case("Maximum", ops.maximum, signed(2, 3), signed(3)),
    case("Minimum", ops.minimum, signed(2, 3), signed(2, 1)),
    case("SquaredDifference", ops.squared_difference, signed(2, 3), signed(3)),
    case("SquaredDifference", ops.squared_difference, cplx(2, 3), cplx(3), label="complex"),
    case("Pow", ops.pow, positive(2, 3), signed(3)),
    case("Pow", ops.pow, signed(2, 3), np.array([2.0, 3.0, 1.0]), label="negative_base"),
    case("Pow", ops.pow, cplx(2, 3), cplx(2, 3), label="complex"),
    case("Atan2", ops.atan2, signed(2, 3), signed(3)),
    case("FloorMod", ops.floor_mod, signed(2, 3, low=0.3, high=2.5), positive(3, low=0.4)),
    case("FloorDiv", ops.floor_div, signed(2, 3), positive(3)),
    case("TruncateDiv", ops.truncate_div, signed(2, 3), positive(3)),
    case("NextAfter", ops.next_after, signed(2, 3), signed(3)),
    case("AddN", lambda a, b, c: ops.add_n([a, b, c]), signed(2, 3), signed(2, 3), signed(2, 3)),
    case("AddN", lambda a, b: ops.add_n([a, b, a]), cplx(2, 3), cplx(2, 3), label="complex"),
    case("AccumulateNV2", lambda a, b, c: ops.accumulate_nv2([a, b, c], shape=[2, 3]),
         signed(2, 3), signed(2, 3), signed(2, 3)),
    case("ClipByValue", ops.clip_by_value, signed(2, 3), np.float64(-0.5), np.float64(0.6)),
    case("ClipByValue", ops.clip_by_value, signed(2, 3), signed(2, 3, low=-1.0, high=-0.1),
         positive(2, 3, low=0.1, high=1.0), label="elementwise"),
    case("Select", ops.select, _BOOL, signed(2, 3), signed(2, 3)),
    case("Select", ops.select, np.array([True, False]), signed(2, 3), signed(2, 3), label="vector"),
    case("Select", ops.select, _BOOL, cplx(2, 3), cplx(2, 3), label="complex"),
    case("SelectV2", ops.select_v2, _BOOL, signed(2, 3), signed(2, 3)),
    case("SelectV2", ops.select_v2, np.array([True, False, True]), signed(2, 1), signed(3),
         label="broadcast"),
    case("Cross", ops.cross, signed(2, 3), signed(2, 3)),

    # --- casts, argmax: TF's gradient is None where a side is not float -------------------------
    case("Cast", lambda x: ops.cast(ops.square(x), DstT=bridge.float64), signed(2, 3)),
    case("Cast", lambda x: ops.cast(x, DstT=bridge.complex128), signed(2, 3), label="to_complex"),
    case("Cast", lambda x: ops.cast(x, DstT=bridge.float64), cplx(2, 3), label="to_real"),
    case("Cast", lambda x: ops.cast(ops.cast(x, DstT=bridge.int32), DstT=bridge.float64),
         signed(2, 3, low=1.2, high=3.0), label="through_int"),
    case("ArgMax", lambda x: ops.cast(ops.arg_max(x, 1), DstT=x.dtype), signed(2, 3)),
    case("ArgMin", lambda x: ops.cast(ops.arg_min(x, 0), DstT=x.dtype), signed(2, 3)),

    # --- reductions ---------------------------------------------------------------------------
    case("Sum", lambda x: ops.sum(x, [1]), signed(2, 3)),
    case("Sum", lambda x: ops.sum(x, [0, -1], keep_dims=True), signed(2, 3, 2), label="keep_dims"),
    case("Sum", lambda x: ops.sum(x, [0]), cplx(2, 3), label="complex"),
    case("Mean", lambda x: ops.mean(x, [0]), signed(2, 3)),
    case("Mean", lambda x: ops.mean(x, [1, 2], keep_dims=True), signed(2, 3, 2), label="keep_dims"),
    case("Mean", lambda x: ops.mean(x, [1]), cplx(2, 3), label="complex"),
    case("Prod", lambda x: ops.prod(x, [1]), signed(2, 3)),
    case("Prod", lambda x: ops.prod(x, [0, 2], keep_dims=True), signed(2, 3, 2), label="keep_dims"),
    case("Prod", lambda x: ops.prod(x, [0]), cplx(2, 3), label="complex"),
    case("Prod", lambda x: ops.prod(x, [1]), np.array([[0.5, 0.0, -0.7], [0.0, 0.6, 0.0]]), label="zeros"),
    case("Prod", lambda x: ops.prod(x, -1), signed(3, 2), label="scalar_axis"),
    case("Max", lambda x: ops.max(x, [1]), signed(2, 3)),
    case("Max", lambda x: ops.max(x, [0, 2], keep_dims=True), signed(2, 3, 2), label="keep_dims"),
    case("Min", lambda x: ops.min(x, [0]), signed(2, 3)),
    case("Min", lambda x: ops.min(x, [-1], keep_dims=True), signed(2, 3, 2), label="keep_dims"),
    case("EuclideanNorm", lambda x: ops.euclidean_norm(x, [1]), signed(2, 3)),
    case("EuclideanNorm", lambda x: ops.euclidean_norm(x, [0, 2], keep_dims=True), signed(2, 3, 2),
         label="keep_dims"),
    case("EuclideanNorm", lambda x: ops.euclidean_norm(x, [1]), cplx(2, 3), label="complex"),

    # --- scans --------------------------------------------------------------------------------
    case("Cumprod", lambda x: ops.cumprod(x, 1), signed(2, 4)),
    case("Cumprod", lambda x: ops.cumprod(x, 0, exclusive=True, reverse=True), signed(3, 2),
         label="exclusive_reverse"),
    case("Cumprod", lambda x: ops.cumprod(x, 1, exclusive=True), cplx(2, 3), label="complex"),
    case("CumulativeLogsumexp", lambda x: ops.cumulative_logsumexp(x, 1), signed(2, 4)),
    case("CumulativeLogsumexp", lambda x: ops.cumulative_logsumexp(x, 0, exclusive=True, reverse=True),
         signed(3, 2), label="exclusive_reverse"),

    # --- segment ops --------------------------------------------------------------------------
    case("SegmentSum", ops.segment_sum, signed(5, 2), i32([0, 0, 1, 3, 3])),
    case("SegmentSum", ops.segment_sum, cplx(4, 2), i64([0, 1, 1, 2]), label="complex"),
    case("SegmentMean", ops.segment_mean, signed(5, 2), i32([0, 0, 1, 3, 3])),
    case("SegmentProd", ops.segment_prod, signed(5, 2), i32([0, 0, 1, 2, 2])),
    case("SegmentMax", ops.segment_max, signed(5, 2), i32([0, 0, 1, 2, 2])),
    case("SegmentMin", ops.segment_min, signed(5, 2), i64([0, 0, 0, 1, 2])),
    case("SegmentMax", ops.segment_max, np.array([[0.5, -0.3], [0.5, 0.7], [0.2, 0.7], [-0.4, 0.1]]),
         i32([0, 0, 1, 1]), label="ties"),
    case("SegmentProd", ops.segment_prod, np.array([[0.5, 0.0], [0.0, 0.7], [0.3, 0.0], [0.0, 0.6], [0.4, 0.8]]),
         i32([0, 0, 1, 1, 1]), label="zeros"),
    case("UnsortedSegmentProd", ops.unsorted_segment_prod,
         np.array([[0.5, 0.0], [0.0, 0.7], [0.3, 0.0], [0.0, 0.6], [0.4, 0.8]]), i32([1, 1, -1, 0, 0]), i32(3),
         label="zeros_negative_ids", second=False),  # TF's own second order is NaN at the zeros (0/0)
    case("UnsortedSegmentSum", ops.unsorted_segment_sum, signed(5, 2), i32([2, 0, -1, 0, 2]), i32(4)),
    case("UnsortedSegmentSum", ops.unsorted_segment_sum, cplx(4, 2), i64([1, 0, 1, 0]), i32(2),
         label="complex"),
    case("UnsortedSegmentProd", ops.unsorted_segment_prod, signed(5, 2), i32([2, 0, 1, 0, 2]), i32(3)),
    case("UnsortedSegmentMax", ops.unsorted_segment_max, signed(5, 2), i32([2, 0, 1, 0, 2]), i32(3)),
    case("UnsortedSegmentMin", ops.unsorted_segment_min, signed(2, 5, 2), i32([[2, 0, 1, 0, 2],
                                                                             [1, 1, 0, 2, 2]]), i64(3)),
    case("SparseSegmentSum", ops.sparse_segment_sum, signed(4, 2), i32([0, 2, 1, 3, 0]),
         i32([0, 0, 1, 2, 2])),
    case("SparseSegmentSum", lambda d, i, s: ops.sparse_segment_sum(d, i, s, sparse_gradient=True),
         signed(4, 2), i32([0, 2, 1, 3, 0]), i32([0, 0, 1, 2, 2]), label="sparse_gradient"),
    case("SparseSegmentMean", lambda d, i, s: ops.sparse_segment_mean(d, i, s, sparse_gradient=True),
         signed(4, 2), i32([0, 2, 1, 3, 0]), i32([0, 0, 1, 2, 2]), label="sparse_gradient"),
    case("SparseSegmentSqrtNWithNumSegments",
         lambda d, i, s, n: ops.sparse_segment_sqrt_n_with_num_segments(d, i, s, n, sparse_gradient=True),
         signed(4, 2), i64([0, 2, 1, 3, 0]), i32([0, 0, 1, 3, 3]), i32(5), label="sparse_gradient"),
    case("SparseSegmentMean", ops.sparse_segment_mean, signed(4, 2), i64([0, 2, 1, 3, 0]),
         i32([0, 0, 1, 2, 2])),
    case("SparseSegmentSqrtN", ops.sparse_segment_sqrt_n, signed(4, 2), i32([0, 2, 1, 3, 0]),
         i64([0, 0, 1, 2, 2])),
    case("SparseSegmentSumWithNumSegments", ops.sparse_segment_sum_with_num_segments, signed(4, 2),
         i32([0, 2, 1, 3, 0]), i32([0, 0, 1, 3, 3]), i32(5)),
    case("SparseSegmentMeanWithNumSegments", ops.sparse_segment_mean_with_num_segments, signed(4, 2),
         i32([0, 2, 1, 3, 0]), i32([0, 0, 1, 3, 3]), i64(5)),
    case("SparseSegmentSqrtNWithNumSegments", ops.sparse_segment_sqrt_n_with_num_segments,
         signed(4, 2), i64([0, 2, 1, 3, 0]), i64([0, 0, 1, 3, 3]), i32(5)),

    # --- complex numbers ----------------------------------------------------------------------
    case("Complex", lambda a, b: ops.complex(a, b, Tout=_complex_dtype(a)), signed(2, 3), signed(2, 3)),
    case("Complex", lambda a, b: ops.complex(a, b, Tout=_complex_dtype(a)), signed(2, 3), signed(3),
         label="broadcast"),
    case("Real", lambda x: ops.real(x, Tout=_real_dtype(x)), cplx(2, 3)),
    case("Imag", lambda x: ops.imag(x, Tout=_real_dtype(x)), cplx(2, 3)),
    case("Angle", lambda x: ops.angle(x, Tout=_real_dtype(x)), cplx(2, 3)),
    case("ComplexAbs", lambda x: ops.complex_abs(x, Tout=_real_dtype(x)), cplx(2, 3)),
    case("Conj", ops.conj, cplx(2, 3)),

    # --- matmuls ------------------------------------------------------------------------------
    case("BatchMatMul", ops.batch_mat_mul, signed(2, 2, 3), signed(2, 3, 4)),
    case("BatchMatMul", lambda a, b: ops.batch_mat_mul(a, b, adj_x=True, adj_y=True),
         cplx(2, 3, 2), cplx(2, 4, 3), label="adj_complex"),
    case("BatchMatMulV2", ops.batch_mat_mul_v2, signed(2, 1, 2, 3), signed(3, 3, 4)),
    case("BatchMatMulV2", lambda a, b: ops.batch_mat_mul_v2(a, b, adj_x=True), signed(3, 2), signed(2, 3, 4),
         label="adj_x_broadcast"),
    case("BatchMatMulV2", lambda a, b: ops.batch_mat_mul_v2(a, b, adj_y=True), cplx(2, 2, 3), cplx(1, 4, 3),
         label="adj_y_complex"),
    case("BatchMatMulV3", lambda a, b: ops.batch_mat_mul_v3(a, b, Tout=a.dtype), signed(2, 2, 3),
         signed(1, 3, 4), dtype_attr="Ta"),
    case("BatchMatMulV3", lambda a, b: ops.batch_mat_mul_v3(a, b, Tout=a.dtype, adj_x=True, adj_y=True),
         cplx(2, 3, 2), cplx(4, 3), dtype_attr="Ta", label="adj_complex"),
    case("SparseMatMul", ops.sparse_mat_mul, signed(2, 3), signed(3, 4), dtype_attr="Ta"),
    case("SparseMatMul", lambda a, b: ops.sparse_mat_mul(a, b, transpose_a=True, transpose_b=True,
                                                         a_is_sparse=True),
         signed(3, 2), signed(4, 3), dtype_attr="Ta", label="transposed"),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING: frozenset[str] = frozenset()
