"""Array functions TF Python composes from several ops (``tf.boolean_mask``).

Each builds the ops TF Python's ``array_ops.py`` builds, in its order and
with its names, so a graph the bridge writes reads like stock TF's and the
gradients through it are TF's.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from bridge.framework import dtypes
from bridge.framework.builders import constant, convert_to_output
from bridge.framework.graph import Output, get_default_graph

__all__ = ["boolean_mask", "gather"]


def _ops() -> Any:
    from bridge import ops  # the generated functions load on first use
    return ops


def _to_output(value: Any, name: str) -> Output:
    """``ops.convert_to_tensor(value, name=name)``: Outputs pass, Variables are
    read, values become a Const of their own dtype."""
    return convert_to_output(value, name=name)


def _shape(value: Output) -> Output:
    """``tf.compat.v1.shape(value)``: named "Shape", a Const where the static
    shape is fully known (TF's ``shape_internal(optimize=True)`` folds it), else
    a Shape op."""
    static = value.shape
    if not static.unknown_rank and all(d is not None for d in static):
        return constant(np.array(list(static), np.int32), dtypes.int32, name="Shape")
    return _ops().shape(value, out_type=dtypes.int32, name="Shape")


def _concat(values: list, axis: int) -> Output:
    """``tf.concat(values, axis)``: a list among ``values`` is packed first, as
    TF's conversion of a list input does (``concat/values_<i>``)."""
    parts = [_ops().pack(v, name=f"concat/values_{i}") if isinstance(v, list) else v for i, v in enumerate(values)]
    return _ops().concat_v2(parts, axis, name="concat")


def gather(params: Any, indices: Any, validate_indices: Any = None, name: Optional[str] = None,
           axis: Any = None, batch_dims: int = 0) -> Output:
    """``tf.compat.v1.gather``: slices of ``params`` along ``axis`` (default
    ``batch_dims``) at ``indices``.  On axis 0, a Variable is read by its
    ``sparse_read`` (one ``ResourceGather``, as TF's resource variables), so
    the gradient is IndexedSlices of the rows read; a tensor through
    ``GatherV2``, whose gradient is IndexedSlices too."""
    from bridge.framework.builders import Variable
    from bridge.framework.indexed_slices import constant_value
    del validate_indices
    if axis is None:
        axis = batch_dims
    static_axis = constant_value(axis) if isinstance(axis, Output) else np.asarray(axis)
    if static_axis is None or static_axis.ndim != 0 or int(static_axis) != 0:
        return _ops().gather_v2(params, indices, axis, batch_dims=batch_dims, name=name or "GatherV2")
    if isinstance(params, Variable):
        return params.sparse_read(indices, name=name)
    return _ops().gather_v2(params, indices, axis, name=name or "GatherV2")


def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: Optional[int] = None) -> Output:
    """``tf.boolean_mask``: the entries of ``tensor`` where ``mask`` is True.

    ``mask`` (bool, rank k >= 1, its rank known) covers dimensions
    ``axis .. axis + k - 1`` of ``tensor``; they are flattened into one and
    gathered at the mask's True positions.  ``x[mask]`` builds the same ops.
    """
    if axis is not None and not isinstance(axis, (int, np.integer)):
        raise TypeError(f"boolean_mask: axis must be a Python int, got {type(axis).__name__}")
    graph = tensor.graph if isinstance(tensor, Output) else get_default_graph()
    with graph.as_default(), graph.name_scope(name):
        tensor = _to_output(tensor, "tensor")
        mask = _to_output(mask, "mask")
        if dtypes.base_dtype(mask.dtype) != dtypes.bool:
            raise TypeError(f"boolean_mask: the mask '{mask.name}' is {mask.dtype.name}, not bool")
        shape_mask, shape_tensor = mask.shape, tensor.shape
        if shape_mask.unknown_rank:
            raise ValueError("Number of mask dimensions must be specified, even if some dimensions are None.  "
                             "E.g. shape=[None] is ok, but shape=None is not.")
        ndims_mask = len(shape_mask)
        if ndims_mask == 0:
            raise ValueError("mask cannot be scalar.")
        axis = 0 if axis is None else int(axis)
        covered = None
        if not shape_tensor.unknown_rank:
            covered = list(shape_tensor)[axis:axis + ndims_mask]
            if len(covered) != ndims_mask or any(a is not None and b is not None and a != b
                                                 for a, b in zip(covered, shape_mask)):
                raise ValueError(f"Shapes {list(shape_tensor)[axis:axis + ndims_mask]} and {list(shape_mask)} "
                                 "are incompatible")
        ops = _ops()
        leading_size = ops.prod(_shape(tensor)[axis:axis + ndims_mask], [0])
        tensor = ops.reshape(tensor, _concat([_shape(tensor)[:axis], [leading_size],
                                              _shape(tensor)[axis + ndims_mask:]], 0))
        if not shape_tensor.unknown_rank:
            first = None if any(d is None for d in covered) else int(np.prod(covered, dtype=np.int64))
            dims = list(shape_tensor)
            tensor.set_shape(dims[:axis] + [first] + dims[axis + ndims_mask:])
        mask = ops.reshape(mask, [-1])
        indices = ops.squeeze(ops.where(mask), squeeze_dims=[1])
        return ops.gather_v2(tensor, indices, axis, batch_dims=0)
