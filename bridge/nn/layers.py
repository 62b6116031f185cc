"""Layers with ``tf.compat.v1.layers``' names, defaults and variables.

Each function creates its variables (``bridge.Variable``) and ops in one
call, as the TF1 functional layers do:

* variables are named ``<layer>/<weight>`` with the layer named ``dense``,
  ``dense_1``, ... (per graph, ignoring name scopes, as TF's variable
  scopes do) or by ``name=``; a second layer with the same ``name`` raises
  ValueError unless ``reuse=True``, which shares the first one's variables;
* initializers default as TF's: kernels ``glorot_uniform``, biases and
  beta ``zeros``, gamma and the moving variance ``ones``;
* ``batch_normalization`` with ``training`` True (or a bool Output) puts
  its two moving-average updates (AssignSubVariableOp, as TF) in the graph
  collection "update_ops" (:func:`update_ops`): run them with the training
  step, e.g. ``with g.control_dependencies(bridge.layers.update_ops()):
  train = opt.minimize(loss)``.

``training`` may be a Python bool or a scalar bool Output fed at run time
(then dropout selects between the dropped and the unchanged input, and batch
normalization between batch and moving statistics, with SelectV2).
"""
from __future__ import annotations

import functools
import numbers
import weakref
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from bridge.framework import dtypes
from . import initializers, nn_ops as nn
from bridge import ops
from bridge.framework.builders import Variable, constant, global_variables
from bridge.framework.graph import Graph, Operation, Output, get_default_graph
from .nn_ops import _cast, _convert, _graph_of

__all__ = ["dense", "conv2d", "max_pooling2d", "average_pooling2d", "dropout", "flatten",
           "batch_normalization", "update_ops", "UPDATE_OPS", "REGULARIZATION_LOSSES"]

#: The graph collection of batch normalization's moving-average updates (TF's GraphKeys.UPDATE_OPS).
UPDATE_OPS = "update_ops"
#: Where kernel/bias regularizers' penalties go (TF's GraphKeys.REGULARIZATION_LOSSES;
#: bridge.losses.get_total_loss adds them).
REGULARIZATION_LOSSES = "regularization_losses"

_ACTIVATIONS = ("relu", "relu6", "leaky_relu", "elu", "selu", "softplus", "softsign", "sigmoid", "tanh",
                "softmax", "log_softmax")

# Per graph: how often each layer scope name was opened (TF's variable scope counts).
_scope_counts: "weakref.WeakKeyDictionary[Graph, dict[str, int]]" = weakref.WeakKeyDictionary()




def _in_inputs_graph(layer: Callable) -> Callable:
    """Build the layer in the graph of its ``inputs`` (the default graph for
    numpy inputs), made the default for the call."""
    @functools.wraps(layer)
    def wrapper(inputs, *args, **kwargs):
        with _graph_of([inputs]).as_default():
            return layer(inputs, *args, **kwargs)
    return wrapper


def update_ops(graph: Optional[Graph] = None) -> list[Operation]:
    """The moving-average updates batch normalization layers made in ``graph`` (the default graph)."""
    return list((graph or get_default_graph()).collections.get(UPDATE_OPS, []))


def _layer_name(graph: Graph, name: Optional[str], default_name: str) -> str:
    """``name``, or ``default_name`` made unique per graph (dense, dense_1, ...)."""
    counts = _scope_counts.setdefault(graph, {})
    if name is None:
        scope = default_name
        idx = 1
        while counts.get(scope, 0) > 0:
            scope = f"{default_name}_{idx}"
            idx += 1
    else:
        if not isinstance(name, str) or not name or name.endswith("/"):
            raise ValueError(f"layer name must be a non-empty string without a trailing '/', not {name!r}")
        scope = name
    counts[scope] = counts.get(scope, 0) + 1
    return scope


def _get_variable(graph: Graph, name: str, shape: Sequence[int], dtype: dtypes.DType, initializer: Callable,
                  trainable: bool, reuse: Optional[bool], regularizer: Optional[Callable] = None) -> Variable:
    """The variable ``name`` (as TF's get_variable): created with ``initializer``'s
    value, or with ``reuse=True`` the existing one, whose shape and dtype must match.
    A new variable's ``regularizer(value)`` joins the "regularization_losses" collection."""
    existing = next((v for v in global_variables(graph) if v.op.name == name), None)
    if existing is not None:
        if not reuse:
            raise ValueError(f"Variable {name} already exists, disallowed. Did you mean to set reuse=True? "
                             f"(give the layer another name, or reuse=True to share it)")
        if list(existing.shape) != list(shape) or existing.dtype != dtype:
            raise ValueError(f"Trying to share variable {name}, but specified shape {list(shape)} and dtype "
                             f"{dtype.name} and found shape {list(existing.shape)} and dtype {existing.dtype.name}")
        return existing
    if reuse:
        raise ValueError(f"Variable {name} does not exist: reuse=True needs a layer that created it first")
    # As TF's init_scope: the initial value ignores the control dependencies around the layer.
    with graph.control_dependencies(None):
        with graph.name_scope(f"{name}/Initializer/"):
            init = initializer(list(shape), dtype)
        if not isinstance(init, Output) or init.dtype != dtype:
            raise TypeError(f"the initializer of {name} returned {init!r}, not an Output of dtype {dtype.name}")
        var = Variable(init, name=f"{name}/", trainable=trainable, graph=graph)
    if regularizer is not None:
        with graph.name_scope(f"{name}/Regularizer/"):
            penalty = regularizer(var.value())
        if penalty is not None:
            graph.collections.setdefault(REGULARIZATION_LOSSES, []).append(penalty)
    return var


def _float_inputs(inputs: Any, layer: str) -> Output:
    x = _convert(inputs, "inputs")
    if not (x.dtype.is_floating or x.dtype.is_complex):
        raise TypeError(f"{layer}: inputs '{x.name}' must be floating point, not {x.dtype.name}")
    return x


def _known_dim(x: Output, axis: int, layer: str) -> int:
    shape = x.shape
    if shape.unknown_rank:
        raise ValueError(f"{layer}: the rank of inputs '{x.name}' must be known")
    d = shape[axis]
    if d is None:
        raise ValueError(f"{layer}: dimension {axis} of inputs '{x.name}' (shape {shape!r}) must be known")
    return int(d)


def _activation(activation: Any) -> Optional[Callable]:
    """None, a callable, or a name: "relu", "tanh", ... (a bridge.nn function), "linear" (none)."""
    if activation is None or callable(activation):
        return activation
    if activation == "linear":
        return None
    if isinstance(activation, str) and activation in _ACTIVATIONS:
        return getattr(nn, activation)
    raise ValueError(f"unknown activation {activation!r}: pass a callable or one of "
                     f"{', '.join(_ACTIVATIONS + ('linear',))}")


def _activate(outputs: Output, activation: Any) -> Output:
    fn = _activation(activation)
    return outputs if fn is None else fn(outputs)


def _pair(value: Any, name: str) -> list[int]:
    if isinstance(value, numbers.Integral):
        return [int(value)] * 2
    value = [int(v) for v in value]
    if len(value) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, not {value}")
    return value


def _padding(padding: str) -> str:
    p = padding.upper() if isinstance(padding, str) else padding
    if p not in ("VALID", "SAME"):
        raise ValueError(f"padding must be 'valid' or 'same', not {padding!r}")
    return p


def _data_format(data_format: str) -> str:
    if data_format == "channels_last":
        return "NHWC"
    if data_format == "channels_first":
        return "NCHW"
    raise ValueError(f"data_format must be 'channels_last' or 'channels_first', not {data_format!r}")


# --- dense and convolution ---------------------------------------------------------------------

@_in_inputs_graph
def dense(inputs: Any, units: int, activation: Any = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None, kernel_regularizer: Optional[Callable] = None,
          bias_regularizer: Optional[Callable] = None, trainable: bool = True, name: Optional[str] = None,
          reuse: Optional[bool] = None) -> Output:
    """``activation(inputs @ kernel + bias)`` with variables ``<name>/kernel``
    [in, units] and ``<name>/bias`` [units] (``tf.compat.v1.layers.dense``).
    Inputs of rank > 2 are multiplied along their last axis.  ``activation``
    a callable or a name ("relu"); initializers Initializers or names
    ("he_normal"); a regularizer maps the variable's value to a penalty
    (e.g. ``lambda w: 1e-4 * bridge.nn.l2_loss(w)``), collected in
    "regularization_losses"."""
    graph = get_default_graph()
    x = _float_inputs(inputs, "dense")
    in_dim = _known_dim(x, -1, "dense")
    units = int(units)
    if units <= 0:
        raise ValueError(f"dense: units must be positive, not {units}")
    layer = _layer_name(graph, name, "dense")
    with graph.name_scope(layer):
        kernel = _get_variable(graph, f"{layer}/kernel", [in_dim, units], x.dtype,
                               initializers.get(kernel_initializer) or initializers.glorot_uniform(),
                               trainable, reuse, kernel_regularizer)
        bias = None
        if use_bias:
            bias = _get_variable(graph, f"{layer}/bias", [units], x.dtype,
                                 initializers.get(bias_initializer) or initializers.zeros(), trainable, reuse,
                                 bias_regularizer)
        w = kernel.read_value()
        rank = len(x.shape)
        if rank == 2:
            outputs = ops.mat_mul(x, w, name="MatMul")
        else:
            # tensordot over the last axis: [..., in] -> [-1, in] @ kernel -> [..., units]
            flat = ops.reshape(x, np.asarray([-1, in_dim], np.int32))
            prod = ops.mat_mul(flat, w)
            lead = ops.strided_slice(ops.shape(x), np.asarray([0], np.int32), np.asarray([-1], np.int32),
                                     np.asarray([1], np.int32))
            outputs = ops.reshape(prod, ops.concat_v2([lead, np.asarray([units], np.int32)], 0), name="Tensordot")
            outputs.set_shape(list(x.shape)[:-1] + [units])
        if bias is not None:
            outputs = nn.bias_add(outputs, bias.read_value())
        return _activate(outputs, activation)


@_in_inputs_graph
def conv2d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate: Any = (1, 1), activation: Any = None,
           use_bias: bool = True, kernel_initializer: Any = None, bias_initializer: Any = None,
           kernel_regularizer: Optional[Callable] = None, bias_regularizer: Optional[Callable] = None,
           trainable: bool = True, name: Optional[str] = None, reuse: Optional[bool] = None) -> Output:
    """2-D convolution layer (``tf.compat.v1.layers.conv2d``): kernel
    ``<name>/kernel`` [kh, kw, in, filters], bias ``<name>/bias`` [filters];
    ``padding`` "valid" or "same"; ``strides``/``kernel_size``/``dilation_rate`` an int or a pair."""
    graph = get_default_graph()
    x = _float_inputs(inputs, "conv2d")
    fmt = _data_format(data_format)
    if not x.shape.unknown_rank and len(x.shape) != 4:
        raise ValueError(f"conv2d: inputs '{x.name}' must have rank 4, not shape {x.shape!r}")
    in_ch = _known_dim(x, 3 if fmt == "NHWC" else 1, "conv2d")
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(strides, "strides")
    dh, dw = _pair(dilation_rate, "dilation_rate")
    pad = _padding(padding)
    layer = _layer_name(graph, name, "conv2d")
    with graph.name_scope(layer):
        kernel = _get_variable(graph, f"{layer}/kernel", [kh, kw, in_ch, int(filters)], x.dtype,
                               initializers.get(kernel_initializer) or initializers.glorot_uniform(),
                               trainable, reuse, kernel_regularizer)
        bias = None
        if use_bias:
            bias = _get_variable(graph, f"{layer}/bias", [int(filters)], x.dtype,
                                 initializers.get(bias_initializer) or initializers.zeros(), trainable, reuse,
                                 bias_regularizer)
        outputs = nn.conv2d(x, kernel.read_value(), strides=[sh, sw], padding=pad, data_format=fmt,
                            dilations=[dh, dw], name="Conv2D")
        if bias is not None:
            outputs = nn.bias_add(outputs, bias.read_value(), data_format=fmt)
        return _activate(outputs, activation)


def _pooling(kind: str, inputs: Any, pool_size: Any, strides: Any, padding: str, data_format: str,
             name: Optional[str]) -> Output:
    graph = get_default_graph()
    x = _convert(inputs, "inputs")
    fmt = _data_format(data_format)
    layer = _layer_name(graph, name, kind)
    with graph.name_scope(layer):
        fn = nn.max_pool2d if kind == "max_pooling2d" else nn.avg_pool2d
        return fn(x, _pair(pool_size, "pool_size"), _pair(strides, "strides"), _padding(padding),
                  data_format=fmt, name="MaxPool" if kind == "max_pooling2d" else "AvgPool")


@_in_inputs_graph
def max_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> Output:
    """Max pooling layer (``tf.compat.v1.layers.max_pooling2d``)."""
    return _pooling("max_pooling2d", inputs, pool_size, strides, padding, data_format, name)


@_in_inputs_graph
def average_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> Output:
    """Average pooling layer (``tf.compat.v1.layers.average_pooling2d``)."""
    return _pooling("average_pooling2d", inputs, pool_size, strides, padding, data_format, name)


# --- dropout and flatten -------------------------------------------------------------------

def _training_value(training: Any, layer: str) -> Union[bool, Output]:
    """A Python bool, or a scalar bool Output."""
    if isinstance(training, (bool, np.bool_)):
        return bool(training)
    if isinstance(training, Output):
        if training.dtype != dtypes.bool:
            raise TypeError(f"{layer}: training must be a bool or a bool Output, '{training.name}' is "
                            f"{training.dtype.name}")
        if not training.shape.unknown_rank and len(training.shape) != 0:
            raise ValueError(f"{layer}: training '{training.name}' must be a scalar")
        return training
    raise TypeError(f"{layer}: training must be a bool or a scalar bool Output, not {training!r}")


@_in_inputs_graph
def dropout(inputs: Any, rate: float = 0.5, noise_shape: Any = None, seed: Optional[int] = None,
            training: Any = False, name: Optional[str] = None) -> Output:
    """``bridge.nn.dropout(inputs, rate)`` when ``training``, else ``inputs``
    unchanged (an Identity) (``tf.compat.v1.layers.dropout``)."""
    graph = get_default_graph()
    x = _convert(inputs, "inputs")
    training = _training_value(training, "dropout")
    layer = _layer_name(graph, name, "dropout")
    with graph.name_scope(layer):
        def dropped():
            return nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed)

        def kept():
            return ops.identity(x, name="Identity")

        if isinstance(training, bool):
            return dropped() if training else kept()
        # A SelectV2, not bridge.cond: cond's gradient recomputes its branch, and a
        # recomputed random op would draw another mask than the forward pass used.
        # (So the mask is drawn in every run, also when training is false.)
        return ops.select_v2(training, dropped(), kept(), name="cond")


@_in_inputs_graph
def flatten(inputs: Any, name: Optional[str] = None, data_format: str = "channels_last") -> Output:
    """[batch, d1, d2, ...] -> [batch, d1 * d2 * ...] (``tf.compat.v1.layers.flatten``);
    ``channels_first`` inputs are moved to channels-last order first, as TF does."""
    graph = get_default_graph()
    x = _convert(inputs, "inputs")
    layer = _layer_name(graph, name, "flatten")
    with graph.name_scope(layer):
        shape = x.shape
        if shape.unknown_rank:
            raise ValueError(f"flatten: the rank of inputs '{x.name}' must be known")
        dims = list(shape)
        if data_format == "channels_first" and len(dims) > 1:
            perm = [0] + list(range(2, len(dims))) + [1]
            x = ops.transpose(x, np.asarray(perm, np.int32))
            dims = [dims[p] for p in perm]
        elif data_format != "channels_last":
            raise ValueError(f"flatten: data_format must be 'channels_last' or 'channels_first', not {data_format!r}")
        if len(dims) == 1:
            return ops.expand_dims(x, np.int32(1))
        rest = dims[1:]
        if all(d is not None for d in rest):
            target: Any = np.asarray([-1, int(np.prod(rest, dtype=np.int64))], np.int32)
        elif dims[0] is not None:
            target = np.asarray([dims[0], -1], np.int32)
        else:
            first = ops.strided_slice(ops.shape(x), np.asarray([0], np.int32), np.asarray([1], np.int32),
                                      np.asarray([1], np.int32))
            target = ops.concat_v2([first, np.asarray([-1], np.int32)], 0)
        return ops.reshape(x, target, name="Reshape")


# --- batch normalization ----------------------------------------------------------------------

def _fused_ok(dtype: dtypes.DType, axis_arg: int, axis: int, rank: int, fused: Optional[bool]) -> Optional[str]:
    """The data format of TF's fused path (FusedBatchNormV3) for this layer, or None: TF
    fuses float16/bfloat16/float32 inputs of rank 4 (axis 1 or 3) and 5 (axis 1 or 4)."""
    if fused is False:
        return None
    ok = dtype.name in ("float16", "bfloat16", "float32") and axis_arg in (-4, -3, -1, 1, 3, 4)
    fmt = {(4, 1): "NCHW", (4, 3): "NHWC", (5, 1): "NCDHW", (5, 4): "NDHWC"}.get((rank, axis))
    if fused and (not ok or fmt is None):
        raise ValueError(f"batch_normalization: fused=True needs float16/bfloat16/float32 inputs of rank 4 "
                         f"(axis 1 or 3) or 5 (axis 1 or 4), not {dtype.name} rank {rank} axis {axis_arg}")
    return fmt if ok else None


def _moving_average_update(graph: Graph, var: Variable, value: Output, decay: Callable[[], Output],
                           name: str) -> Operation:
    """``var -= (var - value) * decay()`` (AssignSubVariableOp) in scope ``name``, as TF's
    _assign_moving_average; ``decay`` builds the decay inside that scope."""
    with graph.name_scope(name), graph.colocate_with(var.handle):
        d = _cast(decay(), var.dtype)
        delta = ops.mul(ops.sub(var.read_value(), _cast(value, var.dtype), name="sub"), d, name="mul")
        return ops.assign_sub_variable_op(var.handle, delta, name="AssignSubVariableOp")


@_in_inputs_graph
def batch_normalization(inputs: Any, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                        center: bool = True, scale: bool = True, beta_initializer: Any = None,
                        gamma_initializer: Any = None, moving_mean_initializer: Any = None,
                        moving_variance_initializer: Any = None, training: Any = False, trainable: bool = True,
                        name: Optional[str] = None, reuse: Optional[bool] = None,
                        fused: Optional[bool] = None) -> Output:
    """Batch normalization layer (``tf.compat.v1.layers.batch_normalization``).

    Variables ``<name>/gamma``, ``beta`` (trainable), ``moving_mean``,
    ``moving_variance`` (not trainable), each of the size of ``axis``.
    ``training`` False: normalize with the moving statistics.  True (or a
    bool Output that is true): with the batch's, and put two updates
    ``moving -= (moving - batch) * (1 - momentum)`` in "update_ops".

    As TF, float16/bfloat16/float32 inputs of rank 4 or 5 with the channel
    axis first or last use the fused kernel (FusedBatchNormV3), whose batch
    variance for the moving average is the unbiased one; other inputs use
    ``nn.moments`` (biased variance) and ``nn.batch_normalization``.
    """
    graph = get_default_graph()
    x = _float_inputs(inputs, "batch_normalization")
    if x.shape.unknown_rank:
        raise ValueError(f"batch_normalization: the rank of inputs '{x.name}' must be known")
    rank = len(x.shape)
    if not isinstance(axis, numbers.Integral):
        raise TypeError(f"batch_normalization: axis must be an int, not {axis!r}")
    axis_arg = int(axis)
    if not -rank <= axis_arg < rank:
        raise ValueError(f"batch_normalization: axis {axis_arg} is out of range for inputs of rank {rank}")
    axis = axis_arg % rank
    channels = _known_dim(x, axis, "batch_normalization")
    training = _training_value(training, "batch_normalization")
    param_dtype = dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype
    fmt = _fused_ok(x.dtype, axis_arg, axis, rank, fused)
    layer = _layer_name(graph, name, "batch_normalization")
    with graph.name_scope(layer):
        shape = [channels]
        gamma = beta = None
        if scale:
            gamma = _get_variable(graph, f"{layer}/gamma", shape, param_dtype,
                                  initializers.get(gamma_initializer) or initializers.ones(), trainable, reuse)
        if center:
            beta = _get_variable(graph, f"{layer}/beta", shape, param_dtype,
                                 initializers.get(beta_initializer) or initializers.zeros(), trainable, reuse)
        moving_mean = _get_variable(graph, f"{layer}/moving_mean", shape, param_dtype,
                                    initializers.get(moving_mean_initializer) or initializers.zeros(), False, reuse)
        moving_variance = _get_variable(graph, f"{layer}/moving_variance", shape, param_dtype,
                                        initializers.get(moving_variance_initializer) or initializers.ones(),
                                        False, reuse)
        if fmt is not None:
            return _fused(graph, x, gamma, beta, moving_mean, moving_variance, shape, param_dtype, momentum,
                          epsilon, training, fmt, layer)

        reduction_axes = [i for i in range(rank) if i != axis]
        broadcast_shape = [1] * rank
        broadcast_shape[axis] = channels

        def _broadcast(v):
            if v is not None and reduction_axes != list(range(rank - 1)):
                return ops.reshape(v, np.asarray(broadcast_shape, np.int32))
            return v

        gamma_v = None if gamma is None else gamma.read_value()
        beta_v = None if beta is None else beta.read_value()
        if training is False:
            mean, variance = moving_mean.read_value(), moving_variance.read_value()
        else:
            batch_mean, batch_variance = nn.moments(_cast(x, param_dtype), reduction_axes)
            if isinstance(training, Output):
                mean = ops.select_v2(training, batch_mean, moving_mean.read_value())
                variance = ops.select_v2(training, batch_variance, moving_variance.read_value())
            else:
                mean, variance = batch_mean, batch_variance
            def decay():
                # TF converts 1 - momentum (a Python float) to a float32 "decay", then casts it.
                return constant(np.float32(1.0 - momentum), dtypes.float32, name="decay")

            graph.collections.setdefault(UPDATE_OPS, []).extend([
                _moving_average_update(graph, moving_mean, mean, decay, "AssignMovingAvg"),
                _moving_average_update(graph, moving_variance, variance, decay, "AssignMovingAvg"),
            ])
        mean, variance = _cast(mean, x.dtype), _cast(variance, x.dtype)
        offset = None if beta_v is None else _cast(beta_v, x.dtype)
        scale_t = None if gamma_v is None else _cast(gamma_v, x.dtype)
        work = _cast(x, dtypes.float32) if x.dtype in (dtypes.float16, dtypes.bfloat16) else x
        outputs = nn.batch_normalization(work, _broadcast(mean), _broadcast(variance), _broadcast(offset),
                                         _broadcast(scale_t), epsilon)
        if work is not x:
            outputs = _cast(outputs, x.dtype)
        outputs.set_shape(list(x.shape))
        return outputs


def _fused(graph: Graph, x: Output, gamma: Optional[Variable], beta: Optional[Variable], moving_mean: Variable,
           moving_variance: Variable, shape: list, param_dtype: dtypes.DType, momentum: float, epsilon: float,
           training: Union[bool, Output], fmt: str, layer: str) -> Output:
    """TF's fused path: FusedBatchNormV3, its batch statistics feeding the moving averages."""
    np_dtype = param_dtype.as_numpy_dtype
    g = gamma.read_value() if gamma is not None else constant(np.ones(shape, np_dtype), param_dtype)
    b = beta.read_value() if beta is not None else constant(np.zeros(shape, np_dtype), param_dtype)

    def run(is_training: bool):
        return nn.fused_batch_norm(x, g, b, mean=moving_mean.read_value(), variance=moving_variance.read_value(),
                                   epsilon=epsilon, is_training=is_training, data_format=fmt,
                                   name="FusedBatchNormV3")

    if training is False:
        return run(False)[0]
    y, mean, variance = run(True)
    if isinstance(training, Output):
        # As TF's smart_cond: inference output and momentum 1 (no update) when not training.
        y = ops.select_v2(training, y, run(False)[0])
        momentum_t = ops.select_v2(training, np.float32(momentum), np.float32(1.0))
    else:
        momentum_t = constant(np.float32(momentum), dtypes.float32, name="Const")
    def decay():
        # TF: 1.0 - momentum as a float32 tensor, so 1 - 0.99 rounds in float32 here.
        return ops.sub(np.float32(1.0), momentum_t, name="sub")

    graph.collections.setdefault(UPDATE_OPS, []).extend([
        _moving_average_update(graph, moving_mean, mean, decay, "AssignMovingAvg"),
        _moving_average_update(graph, moving_variance, variance, decay, "AssignMovingAvg"),
    ])
    return y
