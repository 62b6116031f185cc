"""Neural-network functions with TensorFlow's names and formulas (``tf.nn``).

Each function builds the ops TF Python builds for it in a graph
(tensorflow/python/ops/nn_ops.py, nn_impl.py): activations are their
kernels (Relu, Elu, Softplus, ...), ``softmax_cross_entropy_with_logits``
and ``sparse_softmax_cross_entropy_with_logits`` are TF's fused kernels
(SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits), and
composite ones (``moments``, ``batch_normalization``, ``dropout``) are the
same op sequence, so values, and gradients through ``bridge.gradients``,
equal TensorFlow's.  Arguments that are not Outputs (numpy arrays, Python
numbers, Variables) are converted as TF converts them.

``softmax_cross_entropy_with_logits`` is TF2's ``tf.nn`` function (also
``tf.compat.v1.nn.softmax_cross_entropy_with_logits_v2``): gradients flow
into ``labels`` too.  ``dropout`` takes TF2's ``rate`` (``keep_prob=`` of
the v1 function is accepted as a keyword).
"""
from __future__ import annotations

import contextlib
import numbers
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from bridge.framework import dtypes
from bridge import ops
from bridge.framework.builders import Variable, constant, convert_to_output
from bridge.framework.graph import Graph, Output, get_default_graph
from . import random_ops

__all__ = [
    "relu", "relu6", "leaky_relu", "elu", "selu", "softplus", "softsign", "sigmoid", "tanh",
    "softmax", "log_softmax", "bias_add", "conv2d", "max_pool2d", "avg_pool2d", "max_pool", "avg_pool",
    "dropout", "moments", "batch_normalization", "fused_batch_norm", "l2_loss",
    "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
    "embedding_lookup",
]




def _graph_of(values: Sequence[Any]) -> Graph:
    """The graph to build in: the default graph, unless the Outputs among
    ``values`` live in another one (that the default graph does not capture from)."""
    default = get_default_graph()
    for v in values:
        g = v.graph if isinstance(v, (Output, Variable)) else None
        if g is None or g is default:
            continue
        encloses = getattr(default, "encloses", None)
        if encloses is not None and encloses(g):
            continue
        return g
    return default


@contextlib.contextmanager
def name_scope(name: Optional[str], default_name: str, values: Sequence[Any] = ()) -> Iterator[str]:
    """TF's ``ops.name_scope(name, default_name, values)``: a unique scope on the
    values' graph, made the default; yields it ("dropout/"), which names the result op."""
    graph = _graph_of(values)
    with graph.as_default(), graph.name_scope(name or default_name) as scope:
        yield scope


def _convert(value: Any, name: str, dtype: Any = None) -> Output:
    """An Output: Outputs pass (checked against ``dtype``), Variables are read, values become a Const."""
    if isinstance(value, Output) and dtype is not None and value.dtype != dtypes.as_dtype(dtype):
        raise TypeError(f"'{value.name}' ({name}) is {value.dtype.name}, expected {dtypes.as_dtype(dtype).name}")
    return convert_to_output(value, dtype, name=name)


def _cast(x: Output, dtype: dtypes.DType, name: str = "Cast") -> Output:
    """math_ops.cast: ``x`` itself when it already has ``dtype``."""
    return x if x.dtype == dtype else ops.cast(x, DstT=dtype, name=name)


def _rank(x: Output, what: str) -> int:
    shape = x.shape
    if shape.unknown_rank:
        raise ValueError(f"{what}: the rank of '{x.name}' must be known when the graph is built")
    return len(shape)


# --- activations -------------------------------------------------------------------

def relu(features: Any, name: Optional[str] = None) -> Output:
    """max(features, 0) (Relu)."""
    return ops.relu(features, name=name)


def relu6(features: Any, name: Optional[str] = None) -> Output:
    """min(max(features, 0), 6) (Relu6)."""
    return ops.relu6(features, name=name)


def leaky_relu(features: Any, alpha: float = 0.2, name: Optional[str] = None) -> Output:
    """features where positive, else alpha * features (LeakyRelu)."""
    return ops.leaky_relu(features, alpha=float(alpha), name=name)


def elu(features: Any, name: Optional[str] = None) -> Output:
    """Exponential linear unit: exp(x) - 1 where x < 0 (Elu)."""
    return ops.elu(features, name=name)


def selu(features: Any, name: Optional[str] = None) -> Output:
    """Scaled exponential linear unit (Selu)."""
    return ops.selu(features, name=name)


def softplus(features: Any, name: Optional[str] = None) -> Output:
    """log(exp(features) + 1) (Softplus)."""
    return ops.softplus(features, name=name)


def softsign(features: Any, name: Optional[str] = None) -> Output:
    """features / (abs(features) + 1) (Softsign)."""
    return ops.softsign(features, name=name)


def sigmoid(x: Any, name: Optional[str] = None) -> Output:
    """1 / (1 + exp(-x)) (Sigmoid)."""
    return ops.sigmoid(x, name=name)


def tanh(x: Any, name: Optional[str] = None) -> Output:
    """Hyperbolic tangent (Tanh)."""
    return ops.tanh(x, name=name)


def _swap_axis(x: Output, dim: int, last: int, name: Optional[str] = None) -> Output:
    perm = list(range(last + 1))
    perm[dim], perm[last] = last, dim
    return ops.transpose(x, np.asarray(perm, np.int32), name=name)


def _along_axis(op: str, logits: Any, axis: Optional[int], name: Optional[str]) -> Output:
    """TF's _wrap_2d_function: the op on the last axis, other axes swapped there and back."""
    logits = _convert(logits, "logits")
    axis = -1 if axis is None else int(axis)
    compute = getattr(ops, op)
    if axis == -1:
        return compute(logits, name=name)
    rank = _rank(logits, op)
    if not -rank <= axis < rank:
        raise ValueError(f"{op}: axis {axis} is out of range for '{logits.name}' of rank {rank}")
    axis %= rank
    if axis == rank - 1:
        return compute(logits, name=name)
    out = compute(_swap_axis(logits, axis, rank - 1))
    result = _swap_axis(out, axis, rank - 1, name=name)
    result.set_shape(list(logits.shape))
    return result


def softmax(logits: Any, axis: Optional[int] = None, name: Optional[str] = None) -> Output:
    """exp(logits) / sum(exp(logits), axis) (Softmax; ``axis`` default -1)."""
    return _along_axis("softmax", logits, axis, name)


def log_softmax(logits: Any, axis: Optional[int] = None, name: Optional[str] = None) -> Output:
    """logits - log(sum(exp(logits), axis)) (LogSoftmax; ``axis`` default -1)."""
    return _along_axis("log_softmax", logits, axis, name)


# --- convolution and pooling ------------------------------------------------------------

def _get_sequence(value: Any, n: int, channel_index: int, name: str) -> list[int]:
    """TF's nn_ops._get_sequence: an int or 1, n or n + 2 values -> n + 2 values."""
    if value is None:
        return [1] * (n + 2)
    value = [int(value)] if isinstance(value, numbers.Integral) else [int(v) for v in value]
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    elif len(value) != n:
        raise ValueError(f"{name} should be of length 1, {n} or {n + 2}, not {value} (length {len(value)})")
    return [1, 1] + value if channel_index == 1 else [1] + value + [1]


def _convert_padding(padding: Any) -> tuple[str, list[int]]:
    """TF's convert_padding: "SAME"/"VALID", or explicit [[before, after]] * rank -> "EXPLICIT"."""
    if isinstance(padding, str):
        upper = padding.upper()
        if upper not in ("SAME", "VALID"):
            raise ValueError(f"padding must be 'SAME', 'VALID' or a list of [before, after] pairs, not {padding!r}")
        return upper, []
    pairs = [list(p) for p in padding]
    if any(len(p) != 2 for p in pairs):
        raise ValueError(f"explicit padding must be [before, after] pairs, not {padding!r}")
    return "EXPLICIT", [int(v) for p in pairs for v in p]


def _channel_index(data_format: Optional[str]) -> int:
    return 1 if (data_format or "NHWC").startswith("NC") else 3


def conv2d(input: Any, filters: Any, strides: Any, padding: Any, data_format: str = "NHWC",  # noqa: A002
           dilations: Any = None, name: Optional[str] = None) -> Output:
    """2-D convolution (Conv2D) of ``input`` [batch, h, w, in] with ``filters``
    [fh, fw, in, out]; ``strides``/``dilations`` an int or 1, 2 or 4 values;
    ``padding`` "SAME", "VALID" or explicit [[0, 0], [top, bottom], [left, right], [0, 0]]."""
    data_format = data_format or "NHWC"
    ci = _channel_index(data_format)
    padding, explicit = _convert_padding(padding)
    return ops.conv2d(input, filters, strides=_get_sequence(strides, 2, ci, "strides"), padding=padding,
                         explicit_paddings=explicit, data_format=data_format,
                         dilations=_get_sequence(dilations, 2, ci, "dilations"), name=name)


def max_pool2d(input: Any, ksize: Any, strides: Any, padding: Any, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Output:
    """Max pooling (MaxPool); ``ksize``/``strides`` an int or 1, 2 or 4 values."""
    data_format = data_format or "NHWC"
    ci = _channel_index(data_format)
    padding, explicit = _convert_padding(padding)
    with name_scope(name, "MaxPool2d", [input]) as scope:
        return ops.max_pool(input, ksize=_get_sequence(ksize, 2, ci, "ksize"),
                               strides=_get_sequence(strides, 2, ci, "strides"), padding=padding,
                               explicit_paddings=explicit, data_format=data_format, name=scope)


def avg_pool2d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",  # noqa: A002
               name: Optional[str] = None) -> Output:
    """Average pooling (AvgPool); ``ksize``/``strides`` an int or 1, 2 or 4 values."""
    data_format = data_format or "NHWC"
    ci = _channel_index(data_format)
    padding, _ = _convert_padding(padding)
    if padding == "EXPLICIT":
        raise ValueError("avg_pool2d: padding must be 'SAME' or 'VALID'")
    with name_scope(name, "AvgPool2D", [input]) as scope:
        return ops.avg_pool(input, ksize=_get_sequence(ksize, 2, ci, "ksize"),
                               strides=_get_sequence(strides, 2, ci, "strides"), padding=padding,
                               data_format=data_format, name=scope)


max_pool = max_pool2d
avg_pool = avg_pool2d


def bias_add(value: Any, bias: Any, data_format: Optional[str] = None, name: Optional[str] = None) -> Output:
    """value + bias along the channel axis (BiasAdd): the last one, or the
    second for ``data_format`` "NC..."."""
    with name_scope(name, "BiasAdd", [value, bias]) as scope:
        if data_format is not None:
            if data_format.startswith("NC"):
                data_format = "NCHW"
            elif data_format.startswith("N") and data_format.endswith("C"):
                data_format = "NHWC"
            else:
                raise ValueError(f"bias_add: data_format must be of the form 'N...C' or 'NC...', not {data_format!r}")
        value = _convert(value, "input")
        bias = _convert(bias, "bias", dtype=value.dtype)
        return ops.bias_add(value, bias, data_format=data_format or "NHWC", name=scope)


# --- dropout ---------------------------------------------------------------------------------

def _noise_shape(x: Output, noise_shape: Any) -> Any:
    """TF's _get_noise_shape: x's shape, or noise_shape with its unknown dims taken from x."""
    if noise_shape is None:
        return ops.shape(x)
    if isinstance(noise_shape, Output):
        return noise_shape
    dims = [None if d is None else int(d) for d in noise_shape]
    xs = x.shape
    if not xs.unknown_rank and len(xs) == len(dims):
        dims = [xd if nd is None and xd is not None else nd for nd, xd in zip(dims, xs)]
    if any(d is None for d in dims):
        raise ValueError(f"dropout: noise_shape {noise_shape} has unknown dimensions that '{x.name}' does not fill")
    return dims


def dropout(x: Any, rate: Any = None, noise_shape: Any = None, seed: Optional[int] = None,
            name: Optional[str] = None, keep_prob: Any = None) -> Output:
    """Zero each element with probability ``rate``, scale the kept ones by
    1 / (1 - rate) (``tf.nn.dropout``).  ``noise_shape`` decides which
    elements share a coin (e.g. [batch, 1, 1, channels]); ``seed`` as in
    :func:`bridge.framework.random_seed.get_seed`.  ``keep_prob`` (TF1) means rate = 1 - keep_prob."""
    if keep_prob is not None:
        if rate is not None:
            raise ValueError("dropout: pass rate or keep_prob, not both")
        rate = 1 - keep_prob
    if rate is None:
        raise ValueError("dropout: rate is required")
    with name_scope(name, "dropout", [x]) as scope:
        is_rate_number = isinstance(rate, numbers.Real) and not isinstance(rate, bool)
        if is_rate_number and not 0 <= rate < 1:
            raise ValueError(f"dropout: rate must be a scalar tensor or a float in [0, 1), not {rate}")
        x = _convert(x, "x")
        if not x.dtype.is_floating:
            raise ValueError(f"dropout: x must be a floating point tensor ('{x.name}' is {x.dtype.name})")
        g = get_default_graph()
        if is_rate_number and rate == 0:
            from bridge.framework.random_seed import get_seed
            get_seed(seed, g)  # as TF: the seed counter moves even when nothing is dropped
            return x
        if is_rate_number:
            scale = constant(np.asarray(1 / (1 - rate), x.dtype.as_numpy_dtype), x.dtype, name="Const")
            ret = ops.mul(x, scale, name="Mul")
            rate_t = constant(np.asarray(rate, x.dtype.as_numpy_dtype), x.dtype, name="rate")
        else:
            rate_t = _convert(rate, "rate")
            if not rate_t.shape.unknown_rank and len(rate_t.shape) != 0:
                raise ValueError(f"dropout: rate '{rate_t.name}' must be a scalar")
            rate_t = _cast(rate_t, x.dtype, name="rate")
            one = constant(np.asarray(1, x.dtype.as_numpy_dtype), x.dtype, name="Const")
            ret = ops.real_div(x, ops.sub(one, rate_t, name="Sub"), name="RealDiv")
        random_tensor = random_ops.random_uniform(_noise_shape(x, noise_shape), dtype=x.dtype, seed=seed)
        keep_mask = ops.greater_equal(random_tensor, rate_t, name="GreaterEqual")
        zero = constant(np.asarray(0, x.dtype.as_numpy_dtype), x.dtype, name="Const_1")
        out = ops.select_v2(keep_mask, ret, zero, name=scope)
        if not x.shape.unknown_rank:
            out.set_shape(list(x.shape))
        return out


# --- normalization -------------------------------------------------------------------------

def _axes(axes: Any) -> list[int]:
    return [int(axes)] if isinstance(axes, numbers.Integral) else [int(a) for a in axes]


def moments(x: Any, axes: Any, shift: Any = None, name: Optional[str] = None, keep_dims: Optional[bool] = None,
            keepdims: Optional[bool] = None) -> tuple[Output, Output]:
    """(mean, variance) of ``x`` over ``axes`` (the biased variance: mean of
    squared deviations, with the mean's gradient stopped as TF does).
    ``shift`` is unused, as in TF."""
    if keep_dims is not None and keepdims is not None and bool(keep_dims) != bool(keepdims):
        raise ValueError("moments: keep_dims and keepdims disagree")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    axes = _axes(axes)
    with name_scope(name, "moments", [x]):
        x = _convert(x, "x")
        y = _cast(x, dtypes.float32) if x.dtype == dtypes.float16 else x
        red = np.asarray(axes, np.int32)
        mean = ops.mean(y, red, keep_dims=True, name="mean")
        variance = ops.mean(ops.squared_difference(y, ops.stop_gradient(mean)), red, keep_dims=True,
                               name="variance")
        if not keep:
            mean = ops.squeeze(mean, squeeze_dims=axes)
            variance = ops.squeeze(variance, squeeze_dims=axes)
        if x.dtype == dtypes.float16:
            return _cast(mean, dtypes.float16), _cast(variance, dtypes.float16)
        return mean, variance


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any, variance_epsilon: float,
                        name: Optional[str] = None) -> Output:
    """scale * (x - mean) / sqrt(variance + variance_epsilon) + offset, computed
    as TF does: inv = rsqrt(variance + eps) * scale; x * inv + (offset - mean * inv).
    ``offset`` and ``scale`` may be None."""
    with name_scope(name, "batchnorm", [x, mean, variance, scale, offset]):
        x = _convert(x, "x")
        mean = _convert(mean, "mean")
        variance = _convert(variance, "variance")
        eps = constant(np.asarray(variance_epsilon, variance.dtype.as_numpy_dtype), variance.dtype, name="add/y")
        inv = ops.rsqrt(ops.add_v2(variance, eps, name="add"), name="Rsqrt")
        if scale is not None:
            inv = ops.mul(inv, _convert(scale, "scale", dtype=inv.dtype), name="mul")
        scaled = ops.mul(x, _cast(inv, x.dtype), name="mul_1")
        mean_inv = ops.mul(mean, inv, name="mul_2")
        if offset is not None:
            shift = ops.sub(_convert(offset, "offset", dtype=mean_inv.dtype), mean_inv, name="sub")
        else:
            shift = ops.neg(mean_inv, name="Neg")
        return ops.add_v2(scaled, _cast(shift, x.dtype), name="add_1")


def fused_batch_norm(x: Any, scale: Any, offset: Any, mean: Any = None, variance: Any = None,
                     epsilon: float = 0.001, data_format: str = "NHWC", is_training: bool = True,
                     name: Optional[str] = None, exponential_avg_factor: float = 1.0
                     ) -> tuple[Output, Output, Output]:
    """Batch normalization of a 4-D (or 5-D) tensor in one kernel (FusedBatchNormV3):
    (y, batch or running mean, batch or running variance).  In training the
    variance returned is the unbiased (Bessel-corrected) one, as TF's kernel gives it."""
    if (not is_training or exponential_avg_factor != 1.0) and (mean is None or variance is None):
        raise ValueError("fused_batch_norm: mean and variance are required when is_training is False "
                         "or exponential_avg_factor != 1.0")
    x = _convert(x, "input")
    scale = _convert(scale, "scale")
    offset = _convert(offset, "offset")
    empty = np.zeros([0], np.float32)
    mean = _convert(empty if mean is None else mean, "Const")
    variance = _convert(empty if variance is None else variance, "Const")
    out = ops.fused_batch_norm_v3(x, scale, offset, mean, variance, epsilon=float(epsilon),
                                     exponential_avg_factor=float(exponential_avg_factor), data_format=data_format,
                                     is_training=bool(is_training), name=name)
    return out[0], out[1], out[2]


def l2_loss(t: Any, name: Optional[str] = None) -> Output:
    """sum(t ** 2) / 2 (L2Loss)."""
    return ops.l2_loss(t, name=name)


def embedding_lookup(params: Any, ids: Any, partition_strategy: str = "mod", name: Optional[str] = None,
                     validate_indices: bool = True, max_norm: Any = None) -> Output:
    """``tf.compat.v1.nn.embedding_lookup`` of one table (a Variable, a tensor,
    or a list of one): the rows ``ids`` of ``params``, TF's graph
    (``embedding_lookup`` = ``ResourceGather`` for a Variable, ``GatherV2``
    for a tensor, colocated with the table, then ``embedding_lookup/Identity``).
    The gradient with respect to the table is IndexedSlices of those rows."""
    from bridge.ops.array_ops import gather
    del partition_strategy, validate_indices
    if params is None:
        raise ValueError("params must be specified")
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("Length of params is currently 0. Need at least one param.")
        if len(params) > 1:
            raise NotImplementedError("embedding_lookup: the bridge looks up one table; "
                                      "partitioned tables (several params) are not supported")
        params = params[0]
    if max_norm is not None:
        raise NotImplementedError("embedding_lookup: max_norm is not supported by the bridge")
    with name_scope(name, "embedding_lookup", [params, ids]) as scope:
        graph = get_default_graph()
        if not isinstance(params, Variable):
            params = _convert(params, "params")
        ids = _convert(ids, "ids")
        with graph.colocate_with(params if isinstance(params, Variable) else params.op):
            result = gather(params, ids, name=scope)
        return ops.identity(result, name="Identity")


# --- cross entropies ---------------------------------------------------------------------------

def _move_dim_to_end(x: Output, dim: int, rank: int) -> Output:
    perm = list(range(dim)) + list(range(dim + 1, rank)) + [dim]
    return ops.transpose(x, np.asarray(perm, np.int32))


def _flatten_outer_dims(x: Output) -> Output:
    """[d0, ..., dn-1, c] -> [d0 * ... * dn-1, c] (TF's _flatten_outer_dims)."""
    rank = ops.rank(x)
    last = ops.slice(ops.shape(x), ops.reshape(ops.sub(rank, 1), [1]), [1])
    out = ops.reshape(x, ops.concat_v2([np.asarray([-1], np.int32), last], 0))
    shape = x.shape
    if not shape.unknown_rank and all(d is not None for d in list(shape)[:-1]):
        out.set_shape([int(np.prod(list(shape)[:-1], dtype=np.int64)), shape[-1]])
    return out


def softmax_cross_entropy_with_logits(labels: Any = None, logits: Any = None, axis: int = -1,
                                      name: Optional[str] = None, dim: Optional[int] = None) -> Output:
    """-sum(labels * log_softmax(logits), axis) per example, by TF's fused
    SoftmaxCrossEntropyWithLogits kernel (``tf.nn.softmax_cross_entropy_with_logits``).
    ``labels`` are probabilities of ``logits``' shape; gradients flow into both."""
    if labels is None or logits is None:
        raise ValueError("softmax_cross_entropy_with_logits: pass labels= and logits=")
    if dim is not None:
        axis = dim
    with name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = _convert(logits, "logits")
        labels = _convert(labels, "labels")
        to_float32 = logits.dtype in (dtypes.float16, dtypes.bfloat16)
        precise = _cast(logits, dtypes.float32) if to_float32 else logits
        labels = _cast(labels, precise.dtype)
        static = logits.shape
        if axis != -1:
            rank = _rank(precise, "softmax_cross_entropy_with_logits")
            if not -rank <= axis < rank:
                raise ValueError(f"softmax_cross_entropy_with_logits: axis {axis} is out of range for rank {rank}")
            axis %= rank
            precise = _move_dim_to_end(precise, axis, rank)
            labels = _move_dim_to_end(labels, axis, rank)
        input_rank = ops.rank(precise)
        input_shape = ops.shape(precise)
        cost = ops.softmax_cross_entropy_with_logits(_flatten_outer_dims(precise), _flatten_outer_dims(labels),
                                                     name=scope).loss
        output_shape = ops.slice(input_shape, np.asarray([0], np.int32), ops.reshape(ops.sub(input_rank, 1), [1]))
        cost = ops.reshape(cost, output_shape)
        if not static.unknown_rank:
            dims = list(static)
            del dims[axis]
            cost.set_shape(dims)
        return _cast(cost, logits.dtype) if to_float32 else cost


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def sparse_softmax_cross_entropy_with_logits(labels: Any = None, logits: Any = None,
                                             name: Optional[str] = None) -> Output:
    """-log_softmax(logits)[label] per example, by TF's fused
    SparseSoftmaxCrossEntropyWithLogits kernel.  ``labels`` are int32/int64 class
    indices of shape ``logits.shape[:-1]``; the gradient flows into ``logits``."""
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits: pass labels= and logits=")
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]):
        labels = _convert(labels, "labels")
        logits = _convert(logits, "logits")
        if labels.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64, "
                            f"'{labels.name}' is {labels.dtype.name}")
        precise = _cast(logits, dtypes.float32) if logits.dtype == dtypes.float16 else logits
        ls, gs = labels.shape, logits.shape
        if not gs.unknown_rank and len(gs) == 0:
            raise ValueError(f"sparse_softmax_cross_entropy_with_logits: logits '{logits.name}' cannot be a scalar")
        if not gs.unknown_rank and not ls.unknown_rank:
            if len(ls) != len(gs) - 1:
                raise ValueError(f"sparse_softmax_cross_entropy_with_logits: labels.shape {ls!r} must be "
                                 f"logits.shape {gs!r} without its last dimension")
            if any(a is not None and b is not None and a != b for a, b in zip(ls, list(gs)[:-1])):
                raise ValueError(f"sparse_softmax_cross_entropy_with_logits: labels.shape {ls!r} must be "
                                 f"logits.shape {gs!r} without its last dimension")
        if not gs.unknown_rank and len(gs) == 2:
            cost = ops.sparse_softmax_cross_entropy_with_logits(precise, labels, name="xentropy").loss
        else:
            num_classes = ops.strided_slice(ops.shape(logits), ops.reshape(ops.sub(ops.rank(logits), 1), [1]),
                                            ops.reshape(ops.rank(logits), [1]), np.asarray([1], np.int32),
                                            shrink_axis_mask=1)
            flat_logits = ops.reshape(precise, ops.pack([np.int32(-1), num_classes]))
            flat_labels = ops.reshape(labels, np.asarray([-1], np.int32))
            cost = ops.sparse_softmax_cross_entropy_with_logits(flat_logits, flat_labels, name="xentropy").loss
            cost = ops.reshape(cost, ops.shape(labels))
            if not ls.unknown_rank:
                cost.set_shape(list(ls))
        return _cast(cost, dtypes.float16) if logits.dtype == dtypes.float16 else cost


def sigmoid_cross_entropy_with_logits(labels: Any = None, logits: Any = None,
                                      name: Optional[str] = None) -> Output:
    """Elementwise logistic loss, stable for large |logits|:
    max(x, 0) - x * z + log(1 + exp(-|x|)) (TF's formula and ops)."""
    if labels is None or logits is None:
        raise ValueError("sigmoid_cross_entropy_with_logits: pass labels= and logits=")
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = _convert(logits, "logits")
        labels = _convert(labels, "labels", dtype=logits.dtype)
        zeros = ops.zeros_like(logits)
        cond = ops.greater_equal(logits, zeros)
        relu_logits = ops.select(cond, logits, zeros)
        neg_abs_logits = ops.select(cond, ops.neg(logits), logits)
        return ops.add_v2(ops.sub(relu_logits, ops.mul(logits, labels)), ops.log1p(ops.exp(neg_abs_logits)),
                          name=scope)
