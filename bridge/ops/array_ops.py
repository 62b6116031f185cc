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

__all__ = ["boolean_mask", "concat", "expand_dims", "gather", "one_hot", "ones", "ones_like", "rank", "shape", "size",
           "split", "squeeze", "stack", "transpose", "unstack", "where", "zeros", "zeros_like"]


def _ops() -> Any:
    from . import gen_ops  # the generated functions: generated or loaded on first use
    return gen_ops


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


# --- TF Python's array functions under tf.<name> (TF 2's top level) ----------------------------

def _scope_graph(*values: Any):
    """The graph a function of ``values`` builds in: the first Output's, else the default."""
    for v in values:
        if isinstance(v, Output):
            return v.graph
    return get_default_graph()


def _known_dims(x: Output) -> Optional[list]:
    shape = x.shape
    if shape.unknown_rank or any(d is None for d in shape):
        return None
    return [int(d) for d in shape]


def shape(input: Any, out_type: Any = dtypes.int32, name: Optional[str] = None) -> Output:  # noqa: A002 (TF's name)
    """``tf.shape``: a Const where the static shape is known, else a Shape op."""
    graph = _scope_graph(input)
    out_type = dtypes.as_dtype(out_type)
    with graph.as_default(), graph.name_scope(name or "Shape") as scope:
        x = _to_output(input, "input")
        dims = _known_dims(x)
        if dims is not None:
            return constant(np.array(dims, out_type.as_numpy_dtype), out_type, name=scope)
        return _ops().shape(x, out_type=out_type, name=scope)


def size(input: Any, out_type: Any = dtypes.int32, name: Optional[str] = None) -> Output:  # noqa: A002
    """``tf.size``: the number of elements, a Const where the static shape tells it."""
    graph = _scope_graph(input)
    out_type = dtypes.as_dtype(out_type)
    with graph.as_default(), graph.name_scope(name or "Size") as scope:
        x = _to_output(input, "input")
        dims = _known_dims(x)
        if dims is not None:
            return constant(np.array(int(np.prod(dims, dtype=np.int64)), out_type.as_numpy_dtype), out_type,
                            name=scope)
        if not x.shape.unknown_rank and any(d == 0 for d in x.shape):
            return constant(np.array(0, out_type.as_numpy_dtype), out_type, name=scope)
        return _ops().size(x, out_type=out_type, name=scope)


def rank(input: Any, name: Optional[str] = None) -> Output:  # noqa: A002
    """``tf.rank``: a Const named "Rank" where the rank is known, else a Rank op."""
    graph = _scope_graph(input)
    with graph.as_default(), graph.name_scope(name or "Rank") as scope:
        x = _to_output(input, "input")
        if not x.shape.unknown_rank:
            return constant(np.int32(len(x.shape)), dtypes.int32, name=scope)
        return _ops().rank(x, name=scope)


def concat(values: Any, axis: Any, name: str = "concat") -> Output:
    """``tf.concat``: ``values`` joined along ``axis`` (one value: an Identity, as TF)."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    if len(values) == 1:
        graph = _scope_graph(values[0])
        with graph.as_default(), graph.name_scope(name) as scope:
            dim = constant(axis, dtypes.int32, name="concat_dim") if not isinstance(axis, Output) else axis
            if not dim.shape.unknown_rank and len(dim.shape) != 0:
                raise ValueError(f"concat: axis must be a scalar, got shape {list(dim.shape)}")
            return _ops().identity(values[0], name=name)   # TF: "concat/concat"
    return _ops().concat_v2(list(values), axis, name=name)


def stack(values: Any, axis: int = 0, name: str = "stack") -> Output:
    """``tf.stack``: ``values`` (same shape) packed into one tensor along a new ``axis``."""
    if axis == 0:
        return _autopack(values, name)
    first = _to_output(values[0], name)
    if not first.shape.unknown_rank:
        expanded = len(first.shape) + 1
        if axis < -expanded or axis >= expanded:
            raise ValueError(f"Argument `axis` = {axis} not in range [{-expanded}, {expanded})")
    return _ops().pack([first] + list(values[1:]), axis=axis, name=name)


def _autopack(values: Any, name: str) -> Output:
    """TF's conversion of a list: one Const when it holds no tensor, else a
    Pack of its elements (nested lists with tensors packed first, other
    values as Consts of the first tensor's dtype named by their position)."""
    flat = _flatten(values)
    tensors = [_to_output(v, "Const") for v in flat if isinstance(v, Output) or _is_variable(v)]
    if not tensors:
        return constant(values, name=name)
    return _pack_nested(values, dtypes.base_dtype(tensors[0].dtype), name, _scope_graph(*tensors))


def _pack_nested(values: Any, dtype: dtypes.DType, name: str, graph) -> Output:
    with graph.as_default(), graph.name_scope(name) as scope:
        elems = []
        for i, v in enumerate(values):
            has_tensor = any(isinstance(w, Output) or _is_variable(w) for w in _flatten(v))
            if isinstance(v, (list, tuple)) and has_tensor:
                elems.append(_pack_nested(v, dtype, str(i), graph))
            elif has_tensor:
                elems.append(_to_output(v, str(i)))
            else:
                if isinstance(v, (list, tuple)):   # TF enters (so takes) the scope of every nested list
                    with graph.name_scope(str(i)):
                        pass
                elems.append(constant(v, dtype, name=str(i)))
            if dtypes.base_dtype(elems[-1].dtype) != dtype:
                raise TypeError(f"Cannot convert a list containing a tensor of dtype {elems[-1].dtype.name} to "
                                f"{dtype.name} (Tensor is: {elems[-1].name!r})")
        return _ops().pack(elems, axis=0, name=scope)


def _is_variable(value: Any) -> bool:
    from bridge.framework.builders import Variable
    return isinstance(value, Variable)


def _flatten(values: Any) -> list:
    if isinstance(values, (list, tuple)):
        return [w for v in values for w in _flatten(v)]
    return [values]


def unstack(value: Any, num: Optional[int] = None, axis: int = 0, name: str = "unstack") -> list:
    """``tf.unstack``: the slices of ``value`` along ``axis``, as a list."""
    value = _to_output(value, "Const")
    if num is None:
        if not value.shape.unknown_rank:
            ndims = len(value.shape)
            if axis < -ndims or axis >= ndims:
                raise ValueError(f"Argument `axis` = {axis} not in range [{-ndims}, {ndims})")
            num = value.shape[axis]
        if num is None:
            raise ValueError(f"Cannot infer argument `num` from shape {value.shape}")
    return list(_ops().unpack(value, num=num, axis=axis, name=name))


def transpose(a: Any, perm: Any = None, conjugate: bool = False, name: str = "transpose") -> Output:
    """``tf.transpose``: dimensions permuted by ``perm`` (default: reversed);
    ``conjugate`` conjugates complex values too."""
    graph = _scope_graph(a)
    with graph.as_default(), graph.name_scope(name) as scope:
        a = _to_output(a, "a")
        fn = _ops().conjugate_transpose if conjugate and a.dtype.is_complex else _ops().transpose
        if perm is None:
            if a.shape.unknown_rank:
                perm = _ops().range(_ops().rank(a) - 1, -1, -1)
            else:
                perm = np.arange(len(a.shape) - 1, -1, -1, dtype=np.int32)
        return fn(a, perm, name=scope)


def _filled(value: Any, kind: str, shape_value: Any, dtype: Any, name: Optional[str]) -> Output:
    """``tf.zeros``/``tf.ones``: a Const under 1000 elements, else Fill."""
    dtype = dtypes.base_dtype(dtypes.as_dtype(dtype))
    graph = _scope_graph(shape_value)
    with graph.as_default(), graph.name_scope(name or kind) as scope:
        fill = (False if kind == "zeros" else True) if dtype == dtypes.bool else value
        if dtype == dtypes.string and kind == "zeros":
            fill = ""
        if not isinstance(shape_value, Output):
            listed = hasattr(shape_value, "__iter__")   # TF's small constant takes only a list of dims
            dims = [int(d) for d in (list(shape_value) if listed else [shape_value])]
            if listed and np.prod(dims, dtype=np.int64) < 1000:
                return constant(fill, dtype, shape=dims, name=scope)
            big = any(d >= 2**31 for d in dims)
            shape_value = constant(np.array(dims, np.int64 if big else np.int32), name="shape_as_tensor")
        if shape_value.shape.unknown_rank or len(shape_value.shape) == 0:
            shape_value = _ops().reshape(shape_value, [-1])
        return _ops().fill(shape_value, constant(fill, dtype, name="Const"), name=scope)


def zeros(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> Output:
    """``tf.zeros``: a tensor of ``shape`` filled with zeros."""
    return _filled(0, "zeros", shape, dtype, name)


def ones(shape: Any, dtype: Any = dtypes.float32, name: Optional[str] = None) -> Output:
    """``tf.ones``: a tensor of ``shape`` filled with ones."""
    return _filled(1, "ones", shape, dtype, name)


def _like(kind: str, raw: str, input: Any, dtype: Any, name: Optional[str]) -> Output:  # noqa: A002
    graph = _scope_graph(input)
    with graph.as_default(), graph.name_scope(name or f"{kind}_like") as scope:
        x = _to_output(input, "tensor")
        dtype = None if dtype is None else dtypes.as_dtype(dtype)
        dims = _known_dims(x)
        if dims is not None and x.dtype != dtypes.variant:
            return _filled(0 if kind == "zeros" else 1, kind, dims, dtype or x.dtype, scope)
        if dtype is not None and dtype != x.dtype and dtype != dtypes.variant:
            return _filled(0 if kind == "zeros" else 1, kind, shape(x), dtype, scope)
        return getattr(_ops(), raw)(x, name=scope)


def zeros_like(input: Any, dtype: Any = None, name: Optional[str] = None) -> Output:  # noqa: A002
    """``tf.zeros_like``: zeros of ``input``'s shape (and dtype, unless ``dtype``)."""
    return _like("zeros", "zeros_like", input, dtype, name)


def ones_like(input: Any, dtype: Any = None, name: Optional[str] = None) -> Output:  # noqa: A002
    """``tf.ones_like``: ones of ``input``'s shape (and dtype, unless ``dtype``)."""
    return _like("ones", "ones_like", input, dtype, name)


def expand_dims(input: Any, axis: Any, name: Optional[str] = None) -> Output:  # noqa: A002
    """``tf.expand_dims``: a dimension of size 1 inserted at ``axis``."""
    return _ops().expand_dims(input, axis, name=name)


def squeeze(input: Any, axis: Any = None, name: Optional[str] = None) -> Output:  # noqa: A002
    """``tf.squeeze``: dimensions of size 1 removed (only those in ``axis``, if given)."""
    if axis is not None and np.isscalar(axis):
        axis = [axis]
    return _ops().squeeze(input, squeeze_dims=list(axis or []), name=name)


def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: Optional[int] = None,
          name: str = "split") -> list:
    """``tf.split``: ``value`` cut along ``axis`` into that many equal parts, or parts of those sizes."""
    if isinstance(num_or_size_splits, (int, np.integer)):
        return list(_ops().split(axis, value, num_split=int(num_or_size_splits), name=name))
    sizes = _to_output(num_or_size_splits, "Const")
    if not sizes.shape.unknown_rank and len(sizes.shape) == 0:
        raise ValueError("Rank-0 tensors are not supported as the num_or_size_splits argument to split. "
                         f"Argument provided: {num_or_size_splits}")
    if num is None:
        num = None if sizes.shape.unknown_rank else sizes.shape[0]
        if num is None:
            raise ValueError(f"Cannot infer argument `num` from shape {num_or_size_splits}")
    return list(_ops().split_v(value, sizes, axis, num_split=num, name=name))


def where(condition: Any, x: Any = None, y: Any = None, name: Optional[str] = None) -> Output:
    """``tf.where`` (TF 2's): with ``x`` and ``y``, elements of ``x`` where
    ``condition`` holds, else of ``y``, broadcast (SelectV2); alone, the
    coordinates of the true elements (Where)."""
    if x is None and y is None:
        graph = _scope_graph(condition)
        with graph.as_default(), graph.name_scope(name or "Where") as scope:
            cond = _to_output(condition, "condition")
            return _ops().where(cond, name=scope)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _ops().select_v2(condition, x, y, name=name)


def one_hot(indices: Any, depth: Any, on_value: Any = None, off_value: Any = None, axis: Optional[int] = None,
            dtype: Any = None, name: Optional[str] = None) -> Output:
    """``tf.one_hot``: ``on_value`` (1) at each index along a new ``axis`` (last) of
    size ``depth``, ``off_value`` (0) elsewhere, of ``dtype`` (float32 unless the values say)."""
    graph = _scope_graph(indices, depth, on_value, off_value)
    dtype = None if dtype is None else dtypes.as_dtype(dtype)
    with graph.as_default(), graph.name_scope(name or "one_hot") as scope:
        on = None if on_value is None else _hinted(on_value, dtype)
        off = None if off_value is None else _hinted(off_value, dtype)
        given = [v for v in (on, off) if v is not None]
        if given:
            for v, what in ((on, "on_value"), (off, "off_value")):
                if v is not None and dtype is not None and dtypes.base_dtype(v.dtype) != dtype:
                    raise TypeError(f"dtype {v.dtype.name} of {what} does not match dtype parameter {dtype.name}")
            dtype = dtype or dtypes.base_dtype(given[0].dtype)
        dtype = dtype or dtypes.float32
        on = on if on is not None else constant(1, dtype, name="on_value")
        off = off if off is not None else constant(0, dtype, name="off_value")
        if dtypes.base_dtype(on.dtype) != dtypes.base_dtype(off.dtype):
            raise TypeError(f"dtype {on.dtype.name} of on_value does not match dtype {off.dtype.name} of off_value")
        return _ops().one_hot(indices, depth, on, off, axis=-1 if axis is None else axis, name=scope)


def _hinted(value: Any, dtype_hint: Optional[dtypes.DType]) -> Output:
    """``ops.convert_to_tensor(value, dtype_hint=...)``: of the hinted dtype where the value fits it."""
    if isinstance(value, Output) or _is_variable(value) or dtype_hint is None:
        return _to_output(value, "Const")
    try:
        return constant(value, dtype_hint, name="Const")
    except (TypeError, ValueError):
        return constant(value, name="Const")
