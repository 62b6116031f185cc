"""Gradients of ragged tensors, composite-tensor variants and optionals, after TF's
ragged_*_ops.py, composite_tensor_ops.py and optional_grad.py.

A ragged tensor is its row partitions (integer splits or row ids: no
gradient) and its flat values.  Where TF returns IndexedSlices, the bridge
sums them into a dense tensor (as ``tf.convert_to_tensor`` would).
"""
from __future__ import annotations

from bridge.framework.graph import Output
from ._helpers import _const, _node, _op
from .registry import NotDifferentiable, RegisterGradient

NotDifferentiable("RaggedRange")
# Where a second derivative reaches this gradient op, it is only through the
# int64 splits it shares with its forward op: TF's walk, which follows only
# outputs gradients can flow through, never reaches it, so it adds nothing.
NotDifferentiable("RaggedTensorToVariantGradient")


def _i32(value) -> Output:
    return _const(value, "int32")


def _scatter_rows(values: Output, indices: Output, like: Output) -> Output:
    """Rows ``values`` summed into the rows ``indices`` of a zero tensor shaped like ``like``."""
    n = _op("GatherV2", [_op("Shape", [like]), _i32(0), _i32(0)])
    return _op("UnsortedSegmentSum", [values, indices, n])


def _boolean_mask(x: Output, mask: Output, mask_rank: int) -> Output:
    """The elements of x (over mask's leading dims) where mask is true, stacked."""
    rest = _op("StridedSlice", [_op("Shape", [x]), _i32([mask_rank]), _i32([0]), _i32([1])], {"end_mask": 1})
    flat = _op("Reshape", [x, _op("ConcatV2", [[_i32([-1]), rest], _i32(0)])])
    where = _op("Reshape", [_op("Where", [_op("Reshape", [mask, _i32([-1])])]), _i32([-1])])
    return _op("GatherV2", [flat, where, _i32(0)])


@RegisterGradient("RaggedTensorToTensor")
def _ragged_tensor_to_tensor_grad(op, grad):
    values, default = op.inputs[1], op.inputs[2]
    partitions = op.inputs[3:]
    types = op.get_attr("row_partition_types")
    ragged_rank = sum(1 for t in types if t not in (b"FIRST_DIM_SIZE", "FIRST_DIM_SIZE"))
    # indices[i...] is the flat value output[i...] came from, or -1 where it is the default.
    n = _op("GatherV2", [_op("Shape", [values]), _i32(0), _i32(0)])
    outer_shape = _op("StridedSlice", [_op("Shape", [grad]), _i32([0]), _i32([1 + ragged_rank]), _i32([1])])
    indices = _op("RaggedTensorToTensor",
                  [outer_shape, _op("Range", [_i32(0), n, _i32(1)]), _i32(-1), list(partitions)],
                  {"row_partition_types": list(types)})
    mask = _op("NotEqual", [indices, _i32(-1)])
    values_grad = _op("UnsortedSegmentSum", [_boolean_mask(grad, mask, 1 + ragged_rank),
                                             _boolean_mask(indices, mask, 1 + ragged_rank), n])
    # The default is broadcast to every position not filled, over its own trailing dims.
    default_grads = _boolean_mask(grad, _op("LogicalNot", [mask]), 1 + ragged_rank)
    shape = default.shape
    default_rank = len(shape) - next((k for k, d in enumerate(shape) if d != 1), len(shape))
    reduced = _op("Sub", [_op("Rank", [default_grads]), _i32(default_rank)])
    default_grad = _op("Sum", [default_grads, _op("Range", [_i32(0), reduced, _i32(1)])])
    default_grad = _op("Reshape", [default_grad, _op("Shape", [default])])
    return [None, values_grad, default_grad] + [None] * len(partitions)


@RegisterGradient("RaggedTensorToSparse")
def _ragged_tensor_to_sparse_grad(op, _indices_grad, values_grad, _shape_grad):
    values = op.inputs[-1]
    return [None] * (len(op.inputs) - 1) + [_op("Reshape", [values_grad, _op("Shape", [values])])]


@RegisterGradient("RaggedGather")
def _ragged_gather_grad(op, *grads):
    # Row r of params covers flat values combined_splits[r]:combined_splits[r+1];
    # the gathered rows' ranges, in order, are where the output's values came from.
    splits, values, indices = op.inputs[:-2], op.inputs[-2], op.inputs[-1]
    combined = splits[0]
    for row_splits in splits[1:]:
        combined = _op("GatherV2", [row_splits, combined, _i32(0)])
    flat_indices = _op("Reshape", [indices, _i32([-1])])
    starts = _op("GatherV2", [combined, flat_indices, _i32(0)])
    limits = _op("GatherV2", [_op("StridedSlice", [combined, _i32([1]), _i32([0]), _i32([1])], {"end_mask": 1}),
                              flat_indices, _i32(0)])
    ranges = _node("RaggedRange", [starts, limits, _op("OnesLike", [starts])], {"Tsplits": combined.dtype})
    return [None] * len(splits) + [_scatter_rows(grads[-1], ranges.output(1), values), None]


@RegisterGradient("RaggedFillEmptyRows")
def _ragged_fill_empty_rows_grad(op, _rowids_grad, values_grad, _indicator_grad, _map_grad):
    d_values, d_default = _node("RaggedFillEmptyRowsGrad", [op.outputs[3], values_grad]).outputs
    return None, d_values, None, d_default


@RegisterGradient("RaggedTensorFromVariant")
def _ragged_tensor_from_variant_grad(op, *grads):
    rank = len(op.inputs[0].shape) if not op.inputs[0].shape.unknown_rank else None
    if rank is None:
        batched = op.get_attr("output_ragged_rank") > 0
    elif rank <= 1:
        batched = rank == 1
    else:
        raise ValueError("Unable to compute gradient: RaggedTensorToVariant can currently only "
                         "generate 0D or 1D output.")
    return _op("RaggedTensorToVariant", [list(op.outputs[:-1]), grads[-1]], {"batched_input": batched})


@RegisterGradient("RaggedTensorToVariant")
def _ragged_tensor_to_variant_grad(op, encoded_grad):
    values = op.inputs[-1]
    ragged_rank = len(op.inputs) - 1
    row_splits = op.inputs[0] if ragged_rank else _const(0, "int64")
    values_grad = _op("RaggedTensorToVariantGradient",
                      [encoded_grad, row_splits, _op("Shape", [values])], {"Tvalues": values.dtype})
    return [None] * ragged_rank + [values_grad]


# --- composite tensors and optionals --------------------------------------------------------------

@RegisterGradient("CompositeTensorVariantFromComponents")
def _composite_tensor_from_components_grad(op, grad):
    return _node("CompositeTensorVariantToComponents", [grad],
                 {"metadata": op.get_attr("metadata"), "Tcomponents": op.get_attr("Tcomponents")}).outputs


@RegisterGradient("CompositeTensorVariantToComponents")
def _composite_tensor_to_components_grad(op, *grads):
    # Components without a gradient keep their value (TF's choice).
    components = [o if g is None else g for o, g in zip(op.outputs, grads)]
    return _op("CompositeTensorVariantFromComponents", [components], {"metadata": op.get_attr("metadata")})


@RegisterGradient("OptionalFromValue")
def _optional_from_value_grad(op, grad):
    return _node("OptionalGetValue", [grad], {"output_types": [t.dtype for t in op.inputs],
                                              "output_shapes": [t.shape for t in op.inputs]}).outputs


@RegisterGradient("OptionalGetValue")
def _optional_get_value_grad(op, *grads):
    return _op("OptionalFromValue", [list(grads)])
