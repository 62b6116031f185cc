"""Losses with ``tf.compat.v1.losses``' names, defaults and formulas.

Every loss computes the per-element losses, then :func:`compute_weighted_loss`
weights and reduces them as TF does: in float32 (whatever the input dtype,
cast back at the end, exactly as TF's losses_impl.py), with the default
reduction ``Reduction.SUM_BY_NONZERO_WEIGHTS``: the weighted sum divided by
the number of non-zero weights (broadcast to the losses' shape), which for
``weights=1.0`` is the mean.  Each loss is added to the graph collection
"losses" (:func:`get_losses`, :func:`get_total_loss`).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from bridge.framework import dtypes
from bridge import ops
from bridge.framework.graph import Output, get_default_graph
from . import nn_ops as _nn
from .nn_ops import _cast, _convert, name_scope

__all__ = ["Reduction", "compute_weighted_loss", "mean_squared_error", "absolute_difference",
           "softmax_cross_entropy", "sparse_softmax_cross_entropy", "sigmoid_cross_entropy",
           "add_loss", "get_losses", "get_regularization_losses", "get_total_loss", "LOSSES"]

#: The graph collection every loss is added to (TF's GraphKeys.LOSSES).
LOSSES = "losses"
#: Regularization terms get_total_loss adds (TF's GraphKeys.REGULARIZATION_LOSSES).
REGULARIZATION_LOSSES = "regularization_losses"


class Reduction:
    """How :func:`compute_weighted_loss` reduces the weighted losses (TF's names and values)."""

    NONE = "none"                                             # the weighted losses, unreduced
    SUM = "weighted_sum"                                      # their sum
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"      # sum / number of elements
    MEAN = "weighted_mean"                                    # sum / sum of the weights
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"  # sum / number of non-zero weights
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple:
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key: str) -> None:
        if key not in cls.all():
            raise ValueError(f"invalid reduction {key!r}; expected one of {cls.all()}")




def _reduce_sum(x: Output, name: Optional[str] = None) -> Output:
    """math_ops.reduce_sum over every axis."""
    if x.shape.unknown_rank:
        axes: Any = ops.range(np.int32(0), ops.rank(x), np.int32(1))
    else:
        axes = np.arange(len(x.shape), dtype=np.int32)
    return ops.sum(x, axes, name=name or "Sum")


def _static_dims(x: Output) -> Optional[list]:
    return None if x.shape.unknown_rank else list(x.shape)


def _check_broadcastable(weights: Output, losses: Output) -> None:
    """The static part of TF's weights_broadcast_ops.assert_broadcastable: weights
    must be a scalar or have the losses' rank with each dimension 1 or equal."""
    w, v = _static_dims(weights), _static_dims(losses)
    if w is None or v is None or len(w) == 0:
        return
    if len(w) != len(v):
        raise ValueError(f"weights can not be broadcast to values: values.rank={len(v)}, weights.rank={len(w)} "
                         f"(values.shape={v}, weights.shape={w})")
    for i, (a, b) in enumerate(zip(w, v)):
        if a is not None and b is not None and a not in (1, b):
            raise ValueError(f"weights can not be broadcast to values: mismatch at dim {i} "
                             f"(values.shape={v}, weights.shape={w})")


def _broadcast_weights(weights: Output, values: Output) -> Output:
    ws, vs = _static_dims(weights), _static_dims(values)
    if ws is not None and vs is not None and ws == vs and all(d is not None for d in ws):
        return weights
    return ops.mul(weights, ops.ones_like(values), name="broadcast_weights")


def _num_present(losses: Output, weights: Output) -> Output:
    """Number of elements of ``losses`` whose broadcast weight is non-zero."""
    with name_scope(None, "num_present", [losses, weights]) as scope:
        weights = _cast(weights, dtypes.float32)
        zero = np.float32(0.0)
        present = ops.select(ops.equal(weights, zero), ops.zeros_like(weights), ops.ones_like(weights))
        present = _broadcast_weights(present, losses)
        return _reduce_sum(present, name=scope)


def _num_elements(losses: Output) -> Output:
    with name_scope(None, "num_elements", [losses]) as scope:
        return _cast(ops.size(losses, name=scope), losses.dtype)


def _safe_mean(total: Output, num_present: Output) -> Output:
    return ops.div_no_nan(total, num_present, name="value")


def compute_weighted_loss(losses: Any, weights: Any = 1.0, scope: Optional[str] = None,
                          loss_collection: Optional[str] = LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Output:
    """``losses * weights`` reduced by ``reduction`` (in float32, cast back to
    the losses' dtype); ``weights`` a scalar or broadcastable to ``losses``."""
    Reduction.validate(reduction)
    with name_scope(scope, "weighted_loss", [losses, weights]):
        losses = _convert(losses, "losses")
        input_dtype = losses.dtype
        losses = _cast(losses, dtypes.float32)
        weights = _cast(_convert(weights, "weights"), dtypes.float32)
        _check_broadcastable(weights, losses)
        weighted = ops.mul(losses, weights, name="Mul")
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = _reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = _safe_mean(loss, _reduce_sum(ops.mul(ops.ones_like(losses), weights)))
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = _safe_mean(loss, _num_present(losses, weights))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _safe_mean(loss, _num_elements(losses))
        loss = _cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _check_same_shape(a: Output, b: Output, what: str) -> None:
    x, y = _static_dims(a), _static_dims(b)
    if x is None or y is None:
        return
    if len(x) != len(y) or any(p is not None and q is not None and p != q for p, q in zip(x, y)):
        raise ValueError(f"{what}: shapes {x} ('{a.name}') and {y} ('{b.name}') are incompatible")


def _required(value: Any, name: str, fn: str) -> None:
    if value is None:
        raise ValueError(f"{fn}: argument {name} must not be None")


def _pointwise_loss(fn: str, pointwise, labels: Any, predictions: Any, weights: Any, scope: Optional[str],
                    loss_collection: Optional[str], reduction: str) -> Output:
    """TF's losses of one elementwise term of (predictions, labels), both cast
    to float32 and of one shape, then weighted and reduced."""
    _required(labels, "labels", fn)
    _required(predictions, "predictions", fn)
    with name_scope(scope, fn, [predictions, labels, weights]) as scope:
        predictions = _cast(_convert(predictions, "predictions"), dtypes.float32)
        labels = _cast(_convert(labels, "labels"), dtypes.float32)
        _check_same_shape(predictions, labels, fn)
        return compute_weighted_loss(pointwise(predictions, labels), weights, scope, loss_collection,
                                     reduction=reduction)


def mean_squared_error(labels: Any, predictions: Any, weights: Any = 1.0, scope: Optional[str] = None,
                       loss_collection: Optional[str] = LOSSES,
                       reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Output:
    """Weighted mean of (predictions - labels) ** 2 (float32, as TF)."""
    return _pointwise_loss("mean_squared_error", ops.squared_difference, labels, predictions, weights, scope,
                           loss_collection, reduction)


def absolute_difference(labels: Any, predictions: Any, weights: Any = 1.0, scope: Optional[str] = None,
                        loss_collection: Optional[str] = LOSSES,
                        reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Output:
    """Weighted mean of |predictions - labels| (float32, as TF)."""
    return _pointwise_loss("absolute_difference", lambda p, q: ops.abs(ops.sub(p, q)), labels, predictions,
                           weights, scope, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels: Any, logits: Any, weights: Any = 1.0, label_smoothing: float = 0,
                          scope: Optional[str] = None, loss_collection: Optional[str] = LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Output:
    """Weighted mean of the softmax cross entropies of ``logits`` [batch, classes]
    against ``onehot_labels``; with ``label_smoothing`` the labels become
    ``labels * (1 - s) + s / classes``.  No gradient flows into the labels."""
    _required(onehot_labels, "onehot_labels", "softmax_cross_entropy")
    _required(logits, "logits", "softmax_cross_entropy")
    with name_scope(scope, "softmax_cross_entropy_loss", [logits, onehot_labels, weights]) as scope:
        logits = _convert(logits, "logits")
        onehot_labels = _cast(_convert(onehot_labels, "onehot_labels"), logits.dtype)
        _check_same_shape(logits, onehot_labels, "softmax_cross_entropy")
        if label_smoothing > 0:
            np_dtype = logits.dtype.as_numpy_dtype
            last = ops.strided_slice(ops.shape(onehot_labels), np.asarray([-1], np.int32),
                                     np.asarray([0], np.int32), np.asarray([1], np.int32),
                                     end_mask=1, shrink_axis_mask=1)
            num_classes = _cast(last, logits.dtype)
            smooth_negatives = ops.real_div(np.asarray(label_smoothing, np_dtype), num_classes)
            onehot_labels = ops.add_v2(ops.mul(onehot_labels, np.asarray(1.0 - label_smoothing, np_dtype)),
                                       smooth_negatives)
        onehot_labels = ops.stop_gradient(onehot_labels, name="labels_stop_gradient")
        losses = _nn.softmax_cross_entropy_with_logits(labels=onehot_labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def _remove_squeezable_dimensions(labels: Output, predictions: Output, weights: Optional[Output],
                                  expected_rank_diff: int) -> tuple:
    """Squeeze a trailing size-1 dimension off labels (or predictions) when their
    ranks differ by one more or less than expected, and off weights when they
    have one dimension more than the labels (static shapes, as TF when they are known)."""
    lr, pr = _static_dims(labels), _static_dims(predictions)
    if lr is not None and pr is not None:
        diff = len(pr) - len(lr)
        if diff == expected_rank_diff + 1 and pr[-1] in (1, None):
            predictions = ops.squeeze(predictions, squeeze_dims=[-1])
        elif diff == expected_rank_diff - 1 and lr[-1] in (1, None):
            labels = ops.squeeze(labels, squeeze_dims=[-1])
    if weights is not None:
        lr, wr = _static_dims(labels), _static_dims(weights)
        if lr is not None and wr is not None and len(wr) - len(lr) == 1:
            weights = ops.squeeze(weights, squeeze_dims=[-1])
    return labels, predictions, weights


def sparse_softmax_cross_entropy(labels: Any, logits: Any, weights: Any = 1.0, scope: Optional[str] = None,
                                 loss_collection: Optional[str] = LOSSES,
                                 reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Output:
    """Weighted mean of the cross entropies of ``logits`` [..., classes] against
    integer class ``labels`` [...] (a trailing size-1 label dimension is squeezed)."""
    _required(labels, "labels", "sparse_softmax_cross_entropy")
    _required(logits, "logits", "sparse_softmax_cross_entropy")
    with name_scope(scope, "sparse_softmax_cross_entropy_loss", [logits, labels, weights]) as scope:
        labels = _convert(labels, "labels")
        logits = _convert(logits, "logits")
        weights = _convert(weights, "weights")
        labels, logits, weights = _remove_squeezable_dimensions(labels, logits, weights, expected_rank_diff=1)
        losses = _nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def sigmoid_cross_entropy(multi_class_labels: Any, logits: Any, weights: Any = 1.0, label_smoothing: float = 0,
                          scope: Optional[str] = None, loss_collection: Optional[str] = LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Output:
    """Weighted mean of the elementwise logistic losses; with ``label_smoothing``
    the labels become ``labels * (1 - s) + s / 2``."""
    _required(multi_class_labels, "multi_class_labels", "sigmoid_cross_entropy")
    _required(logits, "logits", "sigmoid_cross_entropy")
    with name_scope(scope, "sigmoid_cross_entropy_loss", [logits, multi_class_labels, weights]) as scope:
        logits = _convert(logits, "logits")
        labels = _cast(_convert(multi_class_labels, "multi_class_labels"), logits.dtype)
        _check_same_shape(logits, labels, "sigmoid_cross_entropy")
        if label_smoothing > 0:
            np_dtype = logits.dtype.as_numpy_dtype
            labels = ops.add_v2(ops.mul(labels, np.asarray(1 - label_smoothing, np_dtype)),
                                np.asarray(0.5 * label_smoothing, np_dtype))
        losses = _nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


# --- the losses collection -----------------------------------------------------------------

def add_loss(loss: Output, loss_collection: Optional[str] = LOSSES) -> None:
    """Add ``loss`` to the graph collection ``loss_collection`` (None: to none)."""
    if loss_collection:
        loss.graph.collections.setdefault(loss_collection, []).append(loss)


def get_losses(scope: Optional[str] = None, loss_collection: str = LOSSES, graph=None) -> list[Output]:
    """The losses in ``loss_collection``, those whose name starts with ``scope`` when given."""
    items = (graph or get_default_graph()).collections.get(loss_collection, [])
    return [x for x in items if scope is None or x.name.startswith(scope)]


def get_regularization_losses(scope: Optional[str] = None, graph=None) -> list[Output]:
    """The tensors in the "regularization_losses" collection."""
    return get_losses(scope, REGULARIZATION_LOSSES, graph)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss", scope: Optional[str] = None,
                   graph=None) -> Output:
    """The sum of every loss (and regularization term) collected (AddN)."""
    items = get_losses(scope, graph=graph)
    if add_regularization_losses:
        items = items + get_regularization_losses(scope, graph)
    if not items:
        raise ValueError("get_total_loss: no losses in the graph's collections")
    return ops.add_n(items, name=name)
