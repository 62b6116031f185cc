"""Gradients of TensorLists (FromTensor, GetItem, SetItem, Stack, Gather, Scatter, ...), after TF's list_ops.py.

A list's gradient is a list of its elements' gradients (a variant tensor);
elements that received none stay unset, which the list ops read as zeros.
PushBack and PopBack (what while loops keep) are in :mod:`control_flow_grad`.
"""
from __future__ import annotations

from typing import Optional

from bridge.framework import dtypes
from bridge.framework.graph import Operation, Output
from ._helpers import _const, _node, _op
from .registry import NotDifferentiable, RegisterGradient

# As in TF: shapes and lengths of lists carry no gradient.
for _type in ("TensorListConcatLists", "TensorListElementShape", "TensorListLength", "TensorListPushBackBatch"):
    NotDifferentiable(_type)


def _dtype_attr(dtype) -> tuple[dict, dict]:
    return {"element_dtype": dtype}, {"element_dtype": "type"}


def _element_shape(t: Output) -> Output:
    """shape(t)[1:]: the shape of t's rows, as lists made from t hold them."""
    return _op("Slice", [_op("Shape", [t]), _const([1], dtypes.int32, name="begin"),
                         _const([-1], dtypes.int32, name="size")])


def _list_element_shape(lst: Output) -> Output:
    return _op("TensorListElementShape", [lst], {"shape_type": dtypes.int32}, {"shape_type": "type"})


def _length(lst: Output) -> Output:
    return _op("TensorListLength", [lst])


def _gather(lst: Output, indices: Output, like: Output) -> Output:
    """The rows of ``lst`` at ``indices``, stacked like ``like``'s rows."""
    return _op("TensorListGather", [lst, indices, _element_shape(like)], *_dtype_attr(like.dtype))


@RegisterGradient("TensorListStack")
def _stack_grad(op: Operation, dtensor: Output) -> list:
    return [_op("TensorListFromTensor", [dtensor, _element_shape(dtensor)]), None]


@RegisterGradient("TensorListFromTensor")
def _from_tensor_grad(op: Operation, dlist: Output) -> list:
    t = op.inputs[0]
    dims = t.shape
    n = dims[0] if not dims.unknown_rank and len(dims) and dims[0] is not None else -1
    attrs, types = _dtype_attr(t.dtype)
    stacked = _op("TensorListStack", [dlist, _element_shape(t)], {**attrs, "num_elements": int(n)},
                  {**types, "num_elements": "int"})
    return [stacked, None]


def _concat_grad(op: Operation, dtensor: Output, dlengths: Optional[Output] = None) -> list:
    # Split the gradient into the elements' lengths the forward concat reported.
    dlist = _op("TensorListSplit", [dtensor, _list_element_shape(op.inputs[0]), op.outputs[1]])
    return [dlist] + [None] * (op.num_inputs - 1)


RegisterGradient("TensorListConcat")(_concat_grad)
RegisterGradient("TensorListConcatV2")(_concat_grad)


@RegisterGradient("TensorListSplit")
def _split_grad(op: Operation, dlist: Output) -> list:
    tensor, _, lengths = op.inputs
    shape = _op("ConcatV2", [[_const([-1], dtypes.int32, name="leading"), _element_shape(tensor)],
                             _const(0, dtypes.int32, name="axis")])
    concat = _node("TensorListConcatV2", [dlist, shape, lengths], *_dtype_attr(tensor.dtype))
    return [concat.output(0), None, None]


@RegisterGradient("TensorListGetItem")
def _get_item_grad(op: Operation, ditem: Output) -> list:
    lst, index = op.inputs[0], op.inputs[1]
    # A list of lst's length holding ditem at index (the other elements unset: zeros).
    reserved = _op("TensorListReserve", [_list_element_shape(lst), _length(lst)], *_dtype_attr(ditem.dtype))
    return [_op("TensorListSetItem", [reserved, index, ditem]), None, None]


@RegisterGradient("TensorListSetItem")
def _set_item_grad(op: Operation, dlist: Output) -> list:
    lst, index, item = op.inputs
    list_grad = _op("TensorListSetItem", [dlist, index, _op("ZerosLike", [item])])
    item_grad = _op("TensorListGetItem", [dlist, index, _op("Shape", [item])], *_dtype_attr(item.dtype))
    if op.get_attr("resize_if_index_out_of_bounds"):
        # The forward list grew to reach index: the input list's gradient has its own length.
        list_grad = _op("TensorListResize", [list_grad, _length(lst)])
    return [list_grad, None, item_grad]


@RegisterGradient("TensorListResize")
def _resize_grad(op: Operation, dlist: Output) -> list:
    return [_op("TensorListResize", [dlist, _length(op.inputs[0])]), None]


@RegisterGradient("TensorListGather")
def _gather_grad(op: Operation, dtensor: Output) -> list:
    lst, indices = op.inputs[0], op.inputs[1]
    reserved = _op("TensorListReserve", [_list_element_shape(lst), _length(lst)], *_dtype_attr(dtensor.dtype))
    return [_op("TensorListScatterIntoExistingList", [reserved, dtensor, indices]), None, None]


def _scatter_grad(op: Operation, dlist: Output) -> list:
    tensor, indices = op.inputs[0], op.inputs[1]
    return [_gather(dlist, indices, tensor)] + [None] * (op.num_inputs - 1)


RegisterGradient("TensorListScatter")(_scatter_grad)
RegisterGradient("TensorListScatterV2")(_scatter_grad)


@RegisterGradient("TensorListScatterIntoExistingList")
def _scatter_into_existing_grad(op: Operation, dlist: Output) -> list:
    _, tensor, indices = op.inputs
    # The scattered rows were overwritten: the input list's gradient has zeros there.
    zeroed = _op("TensorListScatterIntoExistingList", [dlist, _op("ZerosLike", [tensor]), indices])
    return [zeroed, _gather(dlist, indices, tensor), None]
