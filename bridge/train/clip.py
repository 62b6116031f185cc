"""Gradient clipping with TF's exact formulas (TF has these at top level:
``tf.clip_by_norm``, ``tf.linalg.global_norm``, ``tf.clip_by_global_norm``;
the bridge keeps them in ``bridge.train``).

Each builds the op sequence TF Python builds (L2Loss, Sum, Sqrt, Select,
Maximum, ...), so the clipped values agree with TF's to the last bit.  As
TF's, they take ``IndexedSlices`` (a gather's gradient) too: the norms are
those of their ``values`` (rows gathered twice count twice, as in TF), and
a clipped IndexedSlices keeps its indices.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework import dtypes
from bridge.framework.builders import Variable, constant, convert_to_output
from bridge.framework.graph import Output, get_default_graph
from bridge.framework.indexed_slices import IndexedSlices
from bridge import ops
from .optimizer import cast

__all__ = ["clip_by_norm", "global_norm", "clip_by_global_norm"]


def _scalar(value: float, dtype: dtypes.DType, name: str = "Const") -> Output:
    return constant(np.asarray(value, dtype.as_numpy_dtype), name=name)


def _all_axes(t: Output) -> Output:
    """TF's reduction indices for "every axis": a Const when the rank is known."""
    shape = t.shape
    if getattr(shape, "unknown_rank", False):
        return ops.range(_scalar(0, dtypes.int32, "range/start"), ops.rank(t),
                         _scalar(1, dtypes.int32, "range/delta"), name="range")
    return constant(np.arange(len(shape), dtype=np.int32), name="Const")


def _values(t: Any) -> Any:
    return t.values if isinstance(t, IndexedSlices) else t


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: Optional[str] = None) -> Any:
    """``t * clip_norm / max(l2norm(t), clip_norm)``: ``t`` rescaled so that its
    L2 norm (over ``axes``, default all) is at most ``clip_norm``; of an
    IndexedSlices, its values (the result keeps its indices)."""
    if isinstance(t, IndexedSlices):
        return IndexedSlices(clip_by_norm(t.values, clip_norm, axes, name), t.indices, t.dense_shape)
    g = get_default_graph()
    with g.name_scope(name or "clip_by_norm") as scope:
        values = convert_to_output(t, name="t")
        dt = values.dtype
        if np.isscalar(clip_norm):
            clip = _scalar(max(clip_norm, 0), dt)
        else:
            given = convert_to_output(clip_norm, name="clip_norm")
            clip = cast(ops.maximum(given, _scalar(0, given.dtype)), dt)
        square = ops.mul(values, values)
        reduce_axes = _all_axes(values) if axes is None else convert_to_output(axes, name="axes")
        l2sum = ops.sum(square, reduce_axes, keep_dims=True)
        pred = ops.greater(l2sum, _scalar(0, dt))
        l2sum_safe = ops.select(pred, l2sum, ops.ones_like(l2sum))
        l2norm = ops.select(pred, ops.sqrt(l2sum_safe), l2sum)
        intermediate = ops.mul(values, clip)
        return ops.identity(ops.real_div(intermediate, ops.maximum(l2norm, clip), name="truediv"),
                            name=scope)


def global_norm(t_list: Sequence[Any], name: Optional[str] = None) -> Output:
    """``sqrt(sum(l2norm(t) ** 2 for t in t_list))``, None entries ignored."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.")
    g = get_default_graph()
    with g.name_scope(name or "global_norm"):
        values = [None if t is None else convert_to_output(_values(t), name=f"t_{i}") for i, t in enumerate(t_list)]
        half_squared_norms = []
        for v in values:
            if v is not None:
                with g.colocate_with(v.op):
                    half_squared_norms.append(ops.l2_loss(v))
        if not half_squared_norms:
            raise ValueError("global_norm: every tensor of t_list is None")
        stacked = ops.pack(half_squared_norms, name="stack")
        half_squared_norm = ops.sum(stacked, _all_axes(stacked))
        return ops.sqrt(ops.mul(half_squared_norm, _scalar(2.0, half_squared_norm.dtype)),
                        name="global_norm")


def clip_by_global_norm(t_list: Sequence[Any], clip_norm: Any, use_norm: Optional[Output] = None,
                        name: Optional[str] = None) -> tuple[list[Any], Output]:
    """``(clipped list, global norm)``: every tensor times
    ``clip_norm / max(global_norm, clip_norm)`` (None entries stay None; an
    IndexedSlices' values, its indices kept).
    Pass ``use_norm`` to reuse a norm already computed."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.")
    t_list = list(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    g = get_default_graph()
    with g.name_scope(name or "clip_by_global_norm") as scope:
        dt = use_norm.dtype
        clip = convert_to_output(clip_norm, name="clip_norm") if isinstance(clip_norm, (Output, Variable)) \
            else _scalar(clip_norm, dt, "x")
        # clip_norm * min(1 / norm, 1 / clip_norm), plus (norm - norm): NaN when the norm is not finite.
        scale_for_finite = ops.mul(clip, ops.minimum(
            ops.real_div(_scalar(1.0, dt), use_norm, name="truediv"),
            ops.real_div(_scalar(1.0, dt), clip, name="truediv")))
        scale = ops.add_v2(scale_for_finite, ops.sub(use_norm, use_norm))
        clipped: list[Optional[Output]] = []
        for i, t in enumerate(t_list):
            if t is None:
                clipped.append(None)
                continue
            v = convert_to_output(_values(t), name=f"t_{i}")
            with g.colocate_with(v.op):
                c_v = ops.identity(ops.mul(v, cast(scale, v.dtype)), name=f"{scope}_{i}")
            clipped.append(IndexedSlices(c_v, t.indices, t.dense_shape) if isinstance(t, IndexedSlices) else c_v)
    return clipped, use_norm
