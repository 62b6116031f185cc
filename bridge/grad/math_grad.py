"""Gradients of math ops TensorFlow's C++ registry lacks or gets wrong (after TF's math_grad.py).

Second derivatives need the gradients of first-derivative ops (``TanhGrad``...).
Some ops TF's C++ registry does know are here anyway: its complex gradients
of Acos, Atan and Prod lack TF Python's conjugation (and SquaredDifference's
has one TF Python's lacks), its Complex/Real/Imag/Angle gradients come out in complex64/float32 whatever the
input, Atan2's does not reduce broadcast inputs, and BatchMatMul(V2)'s build
BatchMatMulV3, which has no float16 CPU kernel.
"""
from __future__ import annotations

import numpy as np

from bridge.framework import dtypes
from bridge.framework.graph import Output, get_default_graph
from bridge.framework.indexed_slices import IndexedSlices
from ._helpers import _c, _const, _mul, _node, _op, _ones, _zeros_like
from .registry import NotDifferentiable, RegisterGradient, register_sparse_passthrough, returns_indexed_slices


def _reduce_to(grad: Output, x: Output, other: Output) -> Output:
    """Sum a broadcast gradient back to x's shape."""
    rx, _ = get_default_graph().create_op(
        "BroadcastGradientArgs", [_op("Shape", [x]), _op("Shape", [other])]).outputs
    return _op("Reshape", [_op("Sum", [grad, rx]), _op("Shape", [x])])


# --- helpers ---------------------------------------------------------------------------------

def _i32(value) -> Output:
    return _const(value, "int32")


def _conj(x: Output) -> Output:
    """conj(x), x itself for real x (as TF's math_ops.conj)."""
    return _op("Conj", [x]) if x.dtype.is_complex else x


def _shape(x: Output) -> Output:
    return _op("Shape", [x])


def _static_same_shape(x: Output, y: Output) -> bool:
    sx, sy = x.shape, y.shape
    return (not sx.unknown_rank and not sy.unknown_rank and None not in sx and tuple(sx) == tuple(sy))


def _reduce_pair(x: Output, y: Output, gx: Output, gy: Output) -> tuple:
    """gx, gy summed back to the shapes of x and y of a broadcasting binary op."""
    if _static_same_shape(x, y):
        return gx, gy
    sx, sy = _shape(x), _shape(y)
    rx, ry = _node("BroadcastGradientArgs", [sx, sy]).outputs
    return (_op("Reshape", [_op("Sum", [gx, rx], {"keep_dims": True}), sx]),
            _op("Reshape", [_op("Sum", [gy, ry], {"keep_dims": True}), sy]))


def _kept_dims_shape(input_shape: Output, axes: Output) -> Output:
    """input_shape with the reduced axes set to 1 (TF's math_ops.reduced_shape)."""
    rank = _op("Size", [input_shape])
    axes = _op("Cast", [axes], {"DstT": dtypes.int32})
    axes = _op("FloorMod", [_op("AddV2", [axes, rank]), rank])
    ones = _op("Fill", [_shape(axes), _const(1, input_shape.dtype)])
    return _op("DynamicStitch", [[_op("Range", [_i32(0), rank, _i32(1)]), axes], [input_shape, ones]])


def _dim0(x: Output) -> Output:
    return _op("StridedSlice", [_shape(x), _i32([0]), _i32([1]), _i32([1])], {"shrink_axis_mask": 1})


def _gather(params: Output, indices: Output) -> Output:
    return _op("GatherV2", [params, indices, _i32(0)])


def _real_dtype(complex_dtype) -> dtypes.DType:
    return dtypes.as_dtype("float64" if complex_dtype.name == "complex128" else "float32")


# --- unary ops whose complex gradient the C++ registry gets wrong ----------------------------

@RegisterGradient("Acos")
def _acos_grad(op, grad):
    x = _conj(op.inputs[0])
    den = _op("Sqrt", [_op("Sub", [_c(x, 1.0), _op("Square", [x])])])
    return _mul(_op("Neg", [grad]), _op("Reciprocal", [den]))


@RegisterGradient("Atan")
def _atan_grad(op, grad):
    x = _conj(op.inputs[0])
    return _mul(grad, _op("Reciprocal", [_op("AddV2", [_c(x, 1.0), _op("Square", [x])])]))


# --- first-derivative ops (second order of Tanh, Sigmoid, Sqrt, Rsqrt, Reciprocal) ------------

@RegisterGradient("TanhGrad")
def _tanh_grad_grad(op, grad):
    a, b = _conj(op.inputs[0]), _conj(op.inputs[1])
    return _mul(grad, _c(a, -2.0), b, a), _op("TanhGrad", [a, grad])


@RegisterGradient("SigmoidGrad")
def _sigmoid_grad_grad(op, grad):
    a, b = _conj(op.inputs[0]), _conj(op.inputs[1])
    gb = _mul(grad, b)
    return _op("Sub", [gb, _mul(_c(a, 2.0), gb, a)]), _op("SigmoidGrad", [a, grad])


@RegisterGradient("SqrtGrad")
def _sqrt_grad_grad(op, grad):
    ga = _op("RealDiv", [grad, op.inputs[0]])
    return _mul(_op("Neg", [_conj(ga)]), op.outputs[0]), _mul(_c(ga, 0.5), ga)


@RegisterGradient("RsqrtGrad")
def _rsqrt_grad_grad(op, grad):
    ca, b = _conj(op.inputs[0]), op.inputs[1]
    return _mul(_c(ca, -1.5), _conj(grad), b, _op("Square", [ca])), _op("RsqrtGrad", [ca, grad])


@RegisterGradient("InvGrad")  # InvGrad is ReciprocalGrad's older name
@RegisterGradient("ReciprocalGrad")
def _reciprocal_grad_grad(op, grad):
    ca, b = _conj(op.inputs[0]), op.inputs[1]
    return _mul(_conj(grad), _c(ca, -2.0), b, ca), _op("ReciprocalGrad", [ca, grad])


# --- binary ops ------------------------------------------------------------------------------

@RegisterGradient("SquaredDifference")
def _squared_difference_grad(op, grad):
    # TF Python does not conjugate here (for complex inputs either).
    x, y = op.inputs
    gx = _mul(_mul(_c(grad, 2.0), grad), _op("Sub", [x, y]))
    return _reduce_pair(x, y, gx, _op("Neg", [gx]))


@RegisterGradient("Atan2")
def _atan2_grad(op, grad):
    y, x = op.inputs
    grad_inv = _op("RealDiv", [grad, _op("AddV2", [_op("Square", [y]), _op("Square", [x])])])
    return _reduce_pair(y, x, _mul(x, grad_inv), _mul(_op("Neg", [y]), grad_inv))


@RegisterGradient("FloorMod")
def _floor_mod_grad(op, grad):
    x, y = op.inputs
    gy = _mul(grad, _op("Neg", [_op("FloorDiv", [_conj(x), _conj(y)])]))
    return _reduce_pair(x, y, grad, gy)


@RegisterGradient("NextAfter")
def _next_after_grad(op, grad):
    # d/dx1 is 1, d/dx2 is 0 (TF builds them as ones * grad and zeros * grad).
    x1, x2 = op.inputs
    zeros = _op("Fill", [_shape(x2), _const(0, x2.dtype)])
    return _reduce_pair(x1, x2, _mul(_ones(x1), grad), _mul(zeros, grad))


@RegisterGradient("Cross")
def _cross_grad(op, grad):
    u, v = op.inputs
    return _op("Cross", [v, grad]), _op("Cross", [grad, u])


@RegisterGradient("AccumulateNV2")
def _accumulate_nv2_grad(op, grad):
    return [grad] * len(op.inputs)


# --- reductions and scans --------------------------------------------------------------------

@RegisterGradient("EuclideanNorm")
def _euclidean_norm_grad(op, grad):
    x, axes = op.inputs
    out = op.outputs[0]
    if not op.get_attr("keep_dims"):
        kept = _kept_dims_shape(_shape(x), axes)
        out, grad = _op("Reshape", [out, kept]), _op("Reshape", [grad, kept])
    return _op("RealDiv", [x, _op("RealDiv", [out, grad])]), None


@RegisterGradient("Prod")
def _prod_grad(op, grad):
    # Products of the entries before and after each one (two exclusive
    # cumprods over the reduced axes packed into one): no division, so zeros are fine.
    x, axes = op.inputs
    input_shape = _shape(x)
    axes = _op("Reshape", [axes, _i32([-1])])
    if not op.get_attr("keep_dims"):
        grad = _op("Reshape", [grad, _kept_dims_shape(input_shape, axes)])
    grad = _op("BroadcastTo", [grad, input_shape])
    rank = _op("Rank", [x])
    reduced = _op("FloorMod", [_op("AddV2", [_op("Cast", [axes], {"DstT": dtypes.int32}), rank]), rank])
    other = _node("ListDiff", [_op("Range", [_i32(0), rank, _i32(1)]), reduced], {"out_idx": dtypes.int32}).outputs[0]
    perm = _op("ConcatV2", [[reduced, other], _i32(0)])
    reduced_num = _op("Prod", [_gather(input_shape, reduced), _i32(0)])
    other_num = _op("Prod", [_gather(input_shape, other), _i32(0)])
    permuted = _op("Transpose", [x, perm])
    reshaped = _op("Reshape", [permuted, _op("Pack", [[reduced_num, other_num]])])
    left = _op("Cumprod", [reshaped, _i32(0)], {"exclusive": True})
    right = _op("Cumprod", [reshaped, _i32(0)], {"exclusive": True, "reverse": True})
    y = _op("Reshape", [_mul(_conj(left), _conj(right)), _shape(permuted)])
    out = _mul(grad, _op("Transpose", [y, _op("InvertPermutation", [perm])]))
    return _op("Reshape", [out, input_shape]), None


@RegisterGradient("Cumprod")
def _cumprod_grad(op, grad):
    x, axis = op.inputs
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    prod = _op("Cumprod", [x, axis], {"exclusive": exclusive, "reverse": reverse})
    out = _op("Cumsum", [_mul(prod, grad), axis], {"exclusive": exclusive, "reverse": not reverse})
    return _op("DivNoNan", [out, x]), None


def _lowest(dtype) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(dtypes.as_dtype(dtype).as_numpy_dtype).min)


@RegisterGradient("CumulativeLogsumexp")
def _cumulative_logsumexp_grad(op, grad):
    # The positive and negative parts of grad summed separately in log space (stable).
    x, axis = op.inputs
    out = op.outputs[0]
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    lowest = _c(grad, _lowest(grad.dtype))
    zero = _c(grad, 0.0)
    log_pos = _op("SelectV2", [_op("Greater", [grad, zero]), _op("Log", [grad]), lowest])
    log_neg = _op("SelectV2", [_op("Less", [grad, zero]), _op("Log", [_op("Neg", [grad])]), lowest])

    def part(log_grad):
        acc = _op("CumulativeLogsumexp", [_op("Sub", [log_grad, out]), axis],
                  {"exclusive": exclusive, "reverse": not reverse})
        return _op("Exp", [_op("AddV2", [acc, x])])
    return _op("Sub", [part(log_pos), part(log_neg)]), None


# --- segment ops -----------------------------------------------------------------------------

@RegisterGradient("SegmentMean")
def _segment_mean_grad(op, grad):
    data, ids = op.inputs
    ids_shape = _shape(ids)
    remaining = _op("Fill", [_op("ExpandDims", [_op("Sub", [_op("Rank", [data]), _i32(1)]), _i32(0)]),
                             _const(1, ids_shape.dtype)])
    ones = _op("Fill", [_op("ConcatV2", [[ids_shape, remaining], _i32(0)]), _c(grad, 1.0)])
    scaled = _op("RealDiv", [grad, _op("SegmentSum", [ones, ids])])
    return _gather(scaled, ids), None


@RegisterGradient("SegmentMax")
@RegisterGradient("SegmentMin")
def _segment_min_or_max_grad(op, grad):
    # Split each segment's gradient evenly among the entries equal to its extremum.
    data, ids = op.inputs
    is_selected = _op("Equal", [data, _gather(op.outputs[0], ids)])
    num_selected = _op("SegmentSum", [_op("Cast", [is_selected], {"DstT": grad.dtype}), ids])
    gathered = _gather(_op("RealDiv", [grad, num_selected]), ids)
    return _op("SelectV2", [is_selected, gathered, _zeros_like(data)]), None


@RegisterGradient("SegmentProd")
def _segment_prod_grad(op, grad):
    # Per segment: no zero -> prod / entry; one zero -> the others' product at the
    # zero, 0 elsewhere; two or more zeros -> 0 everywhere.
    data, ids = op.inputs
    is_zero = _op("Equal", [data, _c(data, 0.0)])
    num_zeros = _op("SegmentSum", [_op("Cast", [is_zero], {"DstT": dtypes.int32}), ids])
    grad = _op("SelectV2", [_op("Greater", [num_zeros, _i32(1)]), _zeros_like(grad), grad])
    non_zero_data = _op("SelectV2", [is_zero, _ones(data), data])
    non_zero_prod = _op("SegmentProd", [non_zero_data, ids])
    divided = _op("RealDiv", [_gather(op.outputs[0], ids), non_zero_data])
    partial = _op("SelectV2", [is_zero, _gather(non_zero_prod, ids), divided])
    return _mul(_gather(grad, ids), partial), None


def _gather_drop_negatives(params, ids, zero_clipped=None):
    """params gathered at max(ids, 0), zeros where ids < 0; (gathered, clipped ids)."""
    if zero_clipped is None:
        zero_clipped = _op("Maximum", [ids, _zeros_like(ids)])
    gathered = _gather(params, zero_clipped)
    is_positive = _op("GreaterEqual", [ids, _const(0, ids.dtype)])
    # SelectV2 broadcasts from the right: give is_positive gathered's rank.
    extra = _op("Fill", [_op("ExpandDims", [_op("Sub", [_op("Rank", [gathered]), _op("Rank", [is_positive])]),
                                            _i32(0)]), _i32(1)])
    is_positive = _op("Reshape", [is_positive, _op("ConcatV2", [[_shape(is_positive), extra], _i32(0)])])
    return _op("SelectV2", [is_positive, gathered, _zeros_like(gathered)]), zero_clipped


@RegisterGradient("UnsortedSegmentProd")
def _unsorted_segment_prod_grad(op, grad):
    # As SegmentProd's; entries with a negative segment id get 0.
    data, ids, num_segments = op.inputs
    is_zero = _op("Equal", [data, _c(data, 0.0)])
    num_zeros = _op("UnsortedSegmentSum", [_op("Cast", [is_zero], {"DstT": dtypes.int32}), ids, num_segments])
    grad = _op("SelectV2", [_op("Greater", [num_zeros, _i32(1)]), _zeros_like(grad), grad])
    non_zero_data = _op("SelectV2", [is_zero, _ones(data), data])
    non_zero_prod = _op("UnsortedSegmentProd", [non_zero_data, ids, num_segments])
    clipped = _op("Maximum", [ids, _zeros_like(ids)])
    divided = _op("RealDiv", [_gather(op.outputs[0], clipped), data])
    partial = _op("SelectV2", [is_zero, _gather(non_zero_prod, clipped), divided])
    gathered_grad, _ = _gather_drop_negatives(grad, ids, clipped)
    return _mul(gathered_grad, partial), None, None


def _sparse_segment_grad(kind: str):
    """Gradient of SparseSegment<kind>[WithNumSegments]: the <kind>Grad op scatters
    grad back to data's rows (with sparse_gradient, TF's IndexedSlices of the
    <kind>GradV2 rows)."""
    @returns_indexed_slices
    def grad_fn(op, grad):
        data, indices, segment_ids = op.inputs[:3]
        none = [None] * (len(op.inputs) - 1)
        if op.get_attr("sparse_gradient"):
            data_shape = _shape(data)
            dim0 = _op("StridedSlice", [data_shape, _i32([0]), _i32([1]), _i32([1])], {"shrink_axis_mask": 1})
            values, unique = _node(f"SparseSegment{kind}GradV2", [grad, indices, segment_ids, dim0]).outputs
            return [IndexedSlices(values, unique, data_shape)] + none
        return [_op(f"SparseSegment{kind}Grad", [grad, indices, segment_ids, _dim0(data)])] + none
    return grad_fn


for _kind in ("Sum", "Mean", "SqrtN"):
    RegisterGradient(f"SparseSegment{_kind}")(_sparse_segment_grad(_kind))
    RegisterGradient(f"SparseSegment{_kind}WithNumSegments")(_sparse_segment_grad(_kind))
del _kind


_CAST_DIFFERENTIABLE = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.bfloat16,
                        dtypes.complex64, dtypes.complex128)


def _cast_grad(op, grad):
    """TF's _CastGrad: the gradient cast back (an IndexedSlices' values only)."""
    src = op.inputs[0].dtype
    if src not in _CAST_DIFFERENTIABLE or grad.dtype not in _CAST_DIFFERENTIABLE:
        return None
    if isinstance(grad, IndexedSlices):
        return IndexedSlices(_op("Cast", [grad.values], {"DstT": src}), grad.indices, grad.dense_shape)
    return _op("Cast", [grad], {"DstT": src})


# Where IndexedSlices reach a Cast (C++ takes the dense case).
register_sparse_passthrough("Cast", _cast_grad)


# --- complex numbers -------------------------------------------------------------------------

@RegisterGradient("Complex")
def _complex_grad(op, grad):
    x, y = op.inputs
    gx = _op("Real", [grad], {"Tout": x.dtype})
    gy = _op("Imag", [grad], {"Tout": y.dtype})
    return _reduce_pair(x, y, gx, gy)


@RegisterGradient("Real")
def _real_grad(op, grad):
    return _op("Complex", [grad, _c(grad, 0.0)], {"Tout": op.inputs[0].dtype})


@RegisterGradient("Imag")
def _imag_grad(op, grad):
    return _op("Complex", [_c(grad, 0.0), grad], {"Tout": op.inputs[0].dtype})


@RegisterGradient("Angle")
def _angle_grad(op, grad):
    # -grad / (Im(x) + i Re(x))
    x = op.inputs[0]
    real = _real_dtype(x.dtype)
    re, im = _op("Real", [x], {"Tout": real}), _op("Imag", [x], {"Tout": real})
    z = _op("Reciprocal", [_op("Complex", [im, re], {"Tout": x.dtype})])
    complex_grad = _op("Complex", [grad, _c(grad, 0.0)], {"Tout": x.dtype})
    return _mul(_op("Neg", [complex_grad]), z)


@RegisterGradient("ComplexAbs")
def _complex_abs_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    as_complex = lambda t: _op("Complex", [t, _zeros_like(t)], {"Tout": x.dtype})  # noqa: E731
    return _op("DivNoNan", [_mul(as_complex(grad), x), as_complex(y)])


# --- matmuls ---------------------------------------------------------------------------------

def _batch_matmul(a, b, adj_a, adj_b, **grad_flags):
    return _op("BatchMatMulV2", [a, b], {"adj_x": adj_a, "adj_y": adj_b, **grad_flags})


def _batch_matmul_grads(op, grad, **flags):
    """TF's _BatchMatMul(V2): the two products for (adj_x, adj_y), as BatchMatMulV2."""
    x, y = op.inputs
    fx = {"grad_x": True} if flags else {}
    fy = {"grad_y": True} if flags else {}
    adj_x, adj_y = op.get_attr("adj_x"), op.get_attr("adj_y")
    if not adj_x and not adj_y:
        return _batch_matmul(grad, y, False, True, **fx), _batch_matmul(x, grad, True, False, **fy)
    if not adj_x:
        return _batch_matmul(grad, y, False, False, **fx), _batch_matmul(grad, x, True, False, **fy)
    if not adj_y:
        return _batch_matmul(y, grad, False, True, **fx), _batch_matmul(x, grad, False, False, **fy)
    return _batch_matmul(y, grad, True, True, **fx), _batch_matmul(grad, x, True, True, **fy)


@RegisterGradient("BatchMatMul")
def _batch_mat_mul_grad(op, grad):
    return _batch_matmul_grads(op, grad)


@RegisterGradient("BatchMatMulV2")
def _batch_mat_mul_v2_grad(op, grad):
    x, y = op.inputs
    gx, gy = _batch_matmul_grads(op, grad, grad_flags=True)
    sx, sy = x.shape, y.shape
    if (not sx.unknown_rank and not sy.unknown_rank
            and (len(sx) <= 2 and len(sy) <= 2
                 or (None not in sx[:-2] and None not in sy[:-2] and tuple(sx[:-2]) == tuple(sy[:-2])))):
        return gx, gy
    # Sum over the broadcast batch dimensions.
    shape_x, shape_y = _shape(x), _shape(y)
    batch = lambda s: _op("StridedSlice", [s, _i32([0]), _i32([-2]), _i32([1])])  # noqa: E731
    rx, ry = _node("BroadcastGradientArgs", [batch(shape_x), batch(shape_y)]).outputs
    return (_op("Reshape", [_op("Sum", [gx, rx]), shape_x]), _op("Reshape", [_op("Sum", [gy, ry]), shape_y]))


@RegisterGradient("SparseMatMul")
def _sparse_mat_mul_grad(op, grad):
    a, b = op.inputs
    is_sparse = {a: op.get_attr("a_is_sparse"), b: op.get_attr("b_is_sparse"),
                 grad: grad.op.type == "ReluGrad"}  # TF's guess that grad might be sparse

    def matmul(t1, t2, out_dtype, transpose_a=False, transpose_b=False):
        # TF's math_ops.matmul for 2-D operands: SparseMatMul when one is sparse, else MatMul.
        s1, s2 = is_sparse[t1], is_sparse[t2]
        if transpose_b:
            t2 = _op("Transpose", [t2, _i32([1, 0])])
        if s1 or s2 or t1.dtype != t2.dtype:
            prod = _op("SparseMatMul", [t1, t2], {"transpose_a": transpose_a, "a_is_sparse": s1,
                                                  "b_is_sparse": s2})
            if t1.dtype == t2.dtype == dtypes.bfloat16:
                prod = _op("Cast", [prod], {"DstT": dtypes.bfloat16})
        else:
            prod = _op("MatMul", [t1, t2], {"transpose_a": transpose_a})
        return prod if prod.dtype == out_dtype else _op("Cast", [prod], {"DstT": out_dtype})

    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if not ta and not tb:
        return matmul(grad, b, a.dtype, transpose_b=True), matmul(a, grad, b.dtype, transpose_a=True)
    if not ta:
        return matmul(grad, b, a.dtype), matmul(grad, a, b.dtype, transpose_a=True)
    if not tb:
        return matmul(b, grad, a.dtype, transpose_b=True), matmul(a, grad, b.dtype)
    return (matmul(b, grad, a.dtype, transpose_a=True, transpose_b=True),
            matmul(grad, a, b.dtype, transpose_a=True, transpose_b=True))


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
