"""Gradients of reads of resource variables (ReadVariableOp, ResourceGather, ResourceGatherNd).

A read passes its gradient to the variable's *handle* (a resource tensor),
as in TF's resource_variable_ops.py: ReadVariableOp its gradient as it is
(IndexedSlices included), ResourceGather (and ResourceGatherNd with one index
per row) an ``IndexedSlices`` of the gathered rows.  Gradients from several
reads of one variable add up as any other (IndexedSlices concatenate, a mix
with dense ones is densified).
"""
from __future__ import annotations

from bridge.framework import dtypes
from bridge.framework.graph import Operation, Output
from bridge.framework.indexed_slices import IndexedSlices
from ._helpers import _const, _op
from .registry import RegisterGradient, accepts_indexed_slices, returns_indexed_slices


def _variable_shape(handle: Output, out_type=dtypes.int32) -> Output:
    return _op("VariableShape", [handle], {"out_type": out_type}, {"out_type": "type"})


def _with_variable_shape(grad: Output, handle: Output) -> Output:
    """``grad`` with the static shape of the variable behind ``handle``, where its
    VarHandleOp (through Identity ops) says it (the graph only knows it at run time)."""
    op = handle.op
    while op.type == "Identity":
        op = op.inputs[0].op
    if op.type == "VarHandleOp":
        shape = op.get_attr("shape")
        if not shape.unknown_rank:
            grad.set_shape(shape)
    return grad


@RegisterGradient("ReadVariableOp")
@accepts_indexed_slices
def _read_grad(op: Operation, grad: Output) -> list:
    return [grad]


@RegisterGradient("ResourceGather")
@returns_indexed_slices
def _resource_gather_grad(op: Operation, grad: Output) -> list:
    handle, indices = op.inputs
    if op.get_attr("batch_dims"):
        # TF's gradient ignores batch_dims (its rows land in the wrong places): say so, not guess.
        raise LookupError(f"operation '{op.name}' (ResourceGather with batch_dims="
                          f"{op.get_attr('batch_dims')}): TensorFlow has no correct gradient for "
                          "batch_dims != 0, nor has the bridge; read the variable and use GatherV2")
    params_shape = _variable_shape(handle)  # TF's variable_shape: int32
    size = _op("ExpandDims", [_op("Size", [indices]), _const(0, dtypes.int32, name="axis")])
    rest = _op("StridedSlice", [params_shape, _const([1], dtypes.int32, name="begin"),
                                _const([0], dtypes.int32, name="end"), _const([1], dtypes.int32, name="strides")],
               {"end_mask": 1}, {"end_mask": "int"})
    values_shape = _op("ConcatV2", [[size, rest], _const(0, dtypes.int32, name="axis")])
    values = _op("Reshape", [grad, values_shape])
    flat = _op("Reshape", [indices, size])
    return [IndexedSlices(values, flat, params_shape), None]


@RegisterGradient("ResourceGatherNd")
@returns_indexed_slices
def _resource_gather_nd_grad(op: Operation, grad: Output) -> list:
    handle, indices = op.inputs
    shape = _variable_shape(handle, indices.dtype)
    ishape = indices.shape
    if not ishape.unknown_rank and len(ishape) == 2 and ishape[1] == 1:
        # TF: whole rows, IndexedSlices; else ScatterNd.
        return [IndexedSlices(grad, _op("Squeeze", [indices], {"squeeze_dims": [-1]}), shape), None]
    return [_with_variable_shape(_op("ScatterNd", [indices, grad, shape]), handle), None]
