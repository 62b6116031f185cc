"""Gradients of array ops TensorFlow's C++ registry lacks (after TF's array_grad.py)."""
from __future__ import annotations

from bridge.framework import dtypes
from bridge.framework.graph import get_default_graph
from bridge.framework.indexed_slices import IndexedSlices, constant_value, indexed_slices_to_tensor
from ._helpers import _const, _op
from .registry import (NotDifferentiable, RegisterGradient, accepts_indexed_slices, add_gradient_source,
                       register_sparse_passthrough, returns_indexed_slices)


def _shape(x, out_type="int32"):
    return _op("Shape", [x], {"out_type": out_type}, {"out_type": "type"})


@RegisterGradient("PreventGradient")
def _prevent_gradient_grad(op, _grad):
    message = op.get_attr("message")
    raise LookupError(f"gradient explicitly disabled for '{op.name}'"
                      + (f": {message.decode(errors='replace')}" if message else ""))


# TF's C++ registry lacks OnesLike's (empty) gradient.
NotDifferentiable("OnesLike")


# --- identities -----------------------------------------------------------------------------

@RegisterGradient("EnsureShape")
@RegisterGradient("PlaceholderWithDefault")
@accepts_indexed_slices
def _identity_grad(op, grad):
    return grad


@RegisterGradient("IdentityN")
@accepts_indexed_slices
def _identity_n_grad(op, *grads):
    return list(grads)


# TF's _IdGrad passes IndexedSlices on; the C++ gradient keeps the dense case.
register_sparse_passthrough("Identity", _identity_grad)


@RegisterGradient("CheckNumericsV2")
def _check_numerics_v2_grad(op, grad):
    message = op.get_attr("message")
    message = message.decode(errors="replace") if isinstance(message, bytes) else message
    return _op("CheckNumericsV2", [grad], {"message": "Not a number (NaN) or infinity (Inf) values "
                                                      f"detected in gradient. {message}"})


# --- reordering -----------------------------------------------------------------------------

@RegisterGradient("ConjugateTranspose")
def _conjugate_transpose_grad(op, grad):
    return _op("ConjugateTranspose", [grad, _op("InvertPermutation", [op.inputs[1]])]), None


@RegisterGradient("Reverse")
def _reverse_grad(op, grad):
    return _op("Reverse", [grad, op.inputs[1]]), None


@RegisterGradient("Concat")
def _concat_grad(op, grad):
    # Concat(concat_dim, values): slice each value's part out of grad (ConcatV2 is in C++).
    dim, values = op.inputs[0], op.inputs[1:]
    dim = _op("FloorMod", [dim, _op("Rank", [values[0]])])
    shapes = [_shape(v) for v in values]
    offsets = get_default_graph().create_op("ConcatOffset", [dim, shapes]).outputs
    return [None] + [_op("Slice", [grad, o, s]) for o, s in zip(offsets, shapes)]


def _dense_no_warning(grad):
    """TF's ``_IndexedSlicesToTensorNoWarning``."""
    return indexed_slices_to_tensor(grad, warn=False) if isinstance(grad, IndexedSlices) else grad


def _rows_gradient(params_shape, indices, grad):
    """TF's axis-0 gather gradient: IndexedSlices of grad's rows at the flat indices."""
    size = _op("ExpandDims", [_op("Size", [indices]), _const(0, "int32")])
    rest = _op("StridedSlice", [params_shape, _const([1], "int32"), _const([0], "int32"),
                                _const([1], "int32")], {"end_mask": 1})
    values = _op("Reshape", [_dense_no_warning(grad), _op("ConcatV2", [[size, rest], _const(0, "int32")])])
    flat = _op("Reshape", [indices, size])
    return IndexedSlices(values, flat, params_shape)


@RegisterGradient("Gather")
@accepts_indexed_slices
@returns_indexed_slices
def _gather_grad(op, grad):
    params, indices = op.inputs
    return _rows_gradient(_shape(params), indices, grad), None


@accepts_indexed_slices
@returns_indexed_slices
def _gather_v2_axis0_grad(op, grad):
    """TF's _GatherV2Grad for a static axis of 0: IndexedSlices (other axes: C++)."""
    params, indices, _ = op.inputs
    return _rows_gradient(_shape(params), indices, grad), None, None


@returns_indexed_slices
def _gather_nd_rows_grad(op, grad):
    """TF's _GatherNdGrad for [n, 1] indices: IndexedSlices of whole rows (others: C++'s ScatterNd)."""
    ref, indices = op.inputs
    ref_shape = _shape(ref, indices.dtype)
    return IndexedSlices(grad, _op("Squeeze", [indices], {"squeeze_dims": [-1]}), ref_shape), None


def _gather_rows(indices) -> bool:
    shape = indices.shape
    return not shape.unknown_rank and len(shape) == 2 and shape[1] == 1


def _sparse_gather_source(op):
    """GatherV2 on a constant axis 0 and GatherNd of whole rows get TF's
    IndexedSlices gradients; the other cases keep TF's C++ (dense) ones."""
    if op.type == "GatherV2":
        axis = constant_value(op.inputs[2])
        if axis is not None and axis.ndim == 0 and int(axis) == 0:
            return _gather_v2_axis0_grad
    elif op.type == "GatherNd" and _gather_rows(op.inputs[1]):
        return _gather_nd_rows_grad
    return None


add_gradient_source(_sparse_gather_source)


# --- strided slices -------------------------------------------------------------------------

_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _strided(op_type, op, inputs):
    """An ``op_type`` op over ``inputs`` with ``op``'s five slice masks."""
    return _op(op_type, inputs, {m: op.get_attr(m) for m in _SLICE_MASKS})


@RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    return None, None, None, None, _strided("StridedSlice", op, [grad, begin, end, strides])


def _strided_slice_int64_grad(op, grad):
    x, begin, end, strides = op.inputs
    return _strided("StridedSliceGrad", op, [_shape(x, begin.dtype), begin, end, strides, grad]), None, None, None


def _strided_slice_int64_source(op):
    """StridedSlice with int64 indices: TF's C++ gradient reads the input's shape
    as int32 and fails ("Inconsistent values for attr 'Index'"); TF Python's
    asks for the shape in the indices' dtype.  int32 slices keep the C++
    gradient, so they stay inside C++ blocks."""
    if op.type == "StridedSlice" and op.get_attr("Index") == dtypes.int64:
        return _strided_slice_int64_grad
    return None


add_gradient_source(_strided_slice_int64_source)


# TF's C++ gradient of Split/SplitV concatenates the pieces' gradients with a ConcatV2, which
# needs at least two: with one piece (num_split=1) it fails.  TF Python's concat of one tensor
# is an Identity of it, which this gives; other splits stay with C++.
def _split_one_grad(op, grad):
    g = _op("Identity", [grad])
    return [None, g] if op.type == "Split" else [g, None, None]


def _split_one_source(op):
    if op.type in ("Split", "SplitV") and op.num_outputs == 1:
        return _split_one_grad
    return None


add_gradient_source(_split_one_source)


@RegisterGradient("TensorStridedSliceUpdate")
def _tensor_strided_slice_update_grad(op, grad):
    _, begin, end, strides, value = op.inputs
    dy = _strided("StridedSlice", op, [grad, begin, end, strides])
    dx = _strided("TensorStridedSliceUpdate", op, [grad, begin, end, strides, _op("ZerosLike", [dy])])
    # value is broadcast to the slice's shape: sum dy back to value's shape.
    value_shape = _shape(value, begin.dtype)
    _, axes = get_default_graph().create_op(
        "BroadcastGradientArgs", [_shape(dy, begin.dtype), value_shape]).outputs
    dvalue = _op("Reshape", [_op("Sum", [dy, axes], {"keep_dims": True}), value_shape])
    return dx, None, None, None, dvalue


# --- scatters -------------------------------------------------------------------------------

@RegisterGradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op, grad):
    indices, updates = op.inputs[1], op.inputs[2]
    tensor_grad = _op("TensorScatterUpdate", [grad, indices, _op("ZerosLike", [updates])])
    return tensor_grad, None, _op("GatherNd", [grad, indices])


@RegisterGradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op, grad):
    return grad, None, _op("GatherNd", [grad, op.inputs[1]])


@RegisterGradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op, grad):
    return grad, None, _op("Neg", [_op("GatherNd", [grad, op.inputs[1]])])


@RegisterGradient("TensorScatterMax")
@RegisterGradient("TensorScatterMin")
def _tensor_scatter_min_max_grad(op, grad):
    # The gradient goes to the elements equal to the result, split evenly between ties.
    x, indices, y = op.inputs
    out = op.outputs[0]

    def indicator(a, b):
        return _op("Cast", [_op("Equal", [a, b])], {"DstT": grad.dtype})

    x_ind = indicator(x, out)
    y_ind = indicator(y, _op("GatherNd", [out, indices]))
    indicators = _op("AddV2", [x_ind, _op("ScatterNd", [indices, y_ind, _shape(x, indices.dtype)])])
    x_grad = _op("RealDiv", [_op("Mul", [grad, x_ind]), indicators])
    y_grad = _op("Mul", [_op("GatherNd", [_op("RealDiv", [grad, indicators]), indices]), y_ind])
    return x_grad, None, y_grad


# --- diagonals ------------------------------------------------------------------------------

def _dim(shape, index):
    """shape[index] (a scalar) of a 1-D shape tensor."""
    return _op("StridedSlice", [shape, _const([index], "int32"), _const([index + 1], "int32"),
                                _const([1], "int32")], {"shrink_axis_mask": 1})


def _matrix_diag(diagonal, k, like, align="RIGHT_LEFT"):
    """MatrixDiagV3 of ``diagonal`` in matrices shaped like ``like``'s (zero padding)."""
    shape = _shape(like)
    zero = _const(0, diagonal.dtype)
    return _op("MatrixDiagV3", [diagonal, k, _dim(shape, -2), _dim(shape, -1), zero], {"align": align})


def _align(op):
    # TF's gradients of the V2 ops call the V3 ops with their default alignment.
    return op.get_attr("align") if op.type.endswith("V3") else "RIGHT_LEFT"


@RegisterGradient("MatrixDiagPart")
def _matrix_diag_part_grad(op, grad):
    return _matrix_diag(grad, _const(0, "int32"), op.inputs[0])


@RegisterGradient("MatrixDiagPartV2")
@RegisterGradient("MatrixDiagPartV3")
def _matrix_diag_part_v3_grad(op, grad):
    return _matrix_diag(grad, op.inputs[1], op.inputs[0], _align(op)), None, None


@RegisterGradient("MatrixDiagV2")
@RegisterGradient("MatrixDiagV3")
def _matrix_diag_v3_grad(op, grad):
    part = _op("MatrixDiagPartV3", [grad, op.inputs[1], _const(0, grad.dtype)], {"align": _align(op)})
    return part, None, None, None, None


@RegisterGradient("MatrixSetDiag")
@RegisterGradient("MatrixSetDiagV2")
@RegisterGradient("MatrixSetDiagV3")
def _matrix_set_diag_grad(op, grad):
    k = op.inputs[2] if len(op.inputs) > 2 else _const(0, "int32")
    align = {"align": _align(op)}
    grad_diag = _op("MatrixDiagPartV3", [grad, k, _const(0, grad.dtype)], align)
    grad_input = _op("MatrixSetDiagV3", [grad, _op("ZerosLike", [grad_diag]), k], align)
    return (grad_input, grad_diag) + ((None,) if len(op.inputs) > 2 else ())


# --- patches --------------------------------------------------------------------------------

def _patches_grad(op, grad, extract, attrs):
    """Gradient of ExtractImagePatches / ExtractVolumePatches, as TF computes the former:
    extract patches of the input's element numbers (1-based, 0 is padding), then sum
    grad's entries into the elements they came from."""
    x = op.inputs[0]
    rank = len(attrs["ksizes"])
    in_shape, out_shape = _shape(x), _shape(op.outputs[0])
    spatial = _op("StridedSlice", [in_shape, _const([1], "int32"), _const([rank - 1], "int32"),
                                   _const([1], "int32")])
    batch, channels = _dim(in_shape, 0), _dim(in_shape, rank - 1)
    n_in = _op("Prod", [spatial, _const(0, "int32")])
    ones = _const([1], "int32")
    numbers = _op("Range", [_const(1, "float32"), _op("Cast", [_op("AddV2", [n_in, _const(1, "int32")])],
                                                             {"DstT": dtypes.float32}), _const(1, "float32")])
    numbers = _op("Reshape", [numbers, _op("ConcatV2", [[ones, spatial, ones], _const(0, "int32")])])
    patched = _op("Cast", [_op(extract, [numbers], attrs)], {"DstT": dtypes.int32})
    # grad: [batch, *out_spatial, k1*...*channels] -> [*out_spatial, *ksizes, batch, channels]
    ksizes = _const(attrs["ksizes"][1:-1], "int32")
    out_spatial = _op("StridedSlice", [out_shape, _const([1], "int32"), _const([rank - 1], "int32"),
                                       _const([1], "int32")])
    full = _op("ConcatV2", [[_op("ExpandDims", [batch, _const(0, "int32")]), out_spatial, ksizes,
                             _op("ExpandDims", [channels, _const(0, "int32")])], _const(0, "int32")])
    n = 2 * rank - 3
    perm = list(range(1, n)) + [0, n]
    expanded = _op("Transpose", [_op("Reshape", [grad, full]), _const(perm, "int32")])
    flat = _op("Reshape", [expanded, _op("Pack", [[_const(-1, "int32"), _op("Mul", [batch, channels])]])])
    segments = _op("Sub", [_op("Reshape", [patched, _const([-1], "int32")]), _const(1, "int32")])
    summed = _op("UnsortedSegmentSum", [flat, segments, n_in])  # padding (-1) is dropped
    summed = _op("Reshape", [summed, _op("ConcatV2", [[spatial, _op("Pack", [[batch, channels]])],
                                                      _const(0, "int32")])])
    back = [rank - 2] + list(range(rank - 2)) + [rank - 1]
    return _op("Transpose", [summed, _const(back, "int32")])


@RegisterGradient("ExtractImagePatches")
def _extract_image_patches_grad(op, grad):
    attrs = {a: op.get_attr(a) for a in ("ksizes", "strides", "rates", "padding")}
    return _patches_grad(op, grad, "ExtractImagePatches", attrs)


@RegisterGradient("ExtractVolumePatches")
def _extract_volume_patches_grad(op, grad):
    attrs = {a: op.get_attr(a) for a in ("ksizes", "strides", "padding")}
    return _patches_grad(op, grad, "ExtractVolumePatches", attrs)


# --- quantization ---------------------------------------------------------------------------

@RegisterGradient("QuantizeAndDequantize")
def _quantize_and_dequantize_grad(op, grad):
    return grad  # straight through


@RegisterGradient("QuantizeAndDequantizeV2")
def _quantize_and_dequantize_v2_grad(op, grad):
    return grad, None, None  # straight through; the range gets None


# TF's C++ gradient of QuantizeAndDequantizeV4 builds its Grad op with a wrong T: TF Python's
# one (below) replaces it.  The grad op passes grad where input is within [min, max].
@RegisterGradient("QuantizeAndDequantizeV4")
def _quantize_and_dequantize_v4_grad(op, grad):
    x, lo, hi = op.inputs
    return get_default_graph().create_op("QuantizeAndDequantizeV4Grad", [grad, x, lo, hi],
                                         {"axis": op.get_attr("axis")}).outputs


@RegisterGradient("QuantizeAndDequantizeV4Grad")
def _quantize_and_dequantize_v4_grad_grad(op, grad, *_range_grads):
    # Linear in the incoming gradients (masked where input is outside [min, max]), piecewise
    # constant in the rest.  (TF's own function here fails: it takes one output gradient.)
    _, x, lo, hi = op.inputs
    masked = get_default_graph().create_op("QuantizeAndDequantizeV4Grad", [grad, x, lo, hi],
                                           {"axis": op.get_attr("axis")}).outputs[0]
    return masked, None, None, None


def _fake_quant_attrs(op):
    return {a: op.get_attr(a) for a in ("num_bits", "narrow_range")}


@RegisterGradient("FakeQuantWithMinMaxArgs")
def _fake_quant_args_grad(op, grad):
    attrs = dict(_fake_quant_attrs(op), min=op.get_attr("min"), max=op.get_attr("max"))
    return _op("FakeQuantWithMinMaxArgsGradient", [grad, op.inputs[0]], attrs)


@RegisterGradient("FakeQuantWithMinMaxVars")
@RegisterGradient("FakeQuantWithMinMaxVarsPerChannel")
def _fake_quant_vars_grad(op, grad):
    return get_default_graph().create_op(f"{op.type}Gradient", [grad] + list(op.inputs),
                                         _fake_quant_attrs(op)).outputs


for _t in ("FakeQuantWithMinMaxArgsGradient", "FakeQuantWithMinMaxVarsGradient",
           "FakeQuantWithMinMaxVarsPerChannelGradient"):
    NotDifferentiable(_t)
del _t


# --- logging and debugging: identities for the gradient -------------------------------------

@RegisterGradient("Print")
def _print_grad(op, *grads):
    return list(grads) + [None] * (len(op.inputs) - 1)


@RegisterGradient("DebugIdentityV2")
@RegisterGradient("DebugGradientIdentity")
@RegisterGradient("DebugGradientRefIdentity")
def _debug_identity_grad(op, grad):
    # TF's DebugGradient*Identity gradient also hands grad to the tfdbg GradientsDebugger
    # named in the op's name; the bridge has no such debugger.
    return grad


@RegisterGradient("_EagerConst")
def _eager_const_grad(op, _grad):
    raise LookupError(f"operation '{op.name}' (_EagerConst) should never interact with gradients "
                      "(TensorFlow raises here too)")
