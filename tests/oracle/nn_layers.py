"""Oracle: nn functions, losses, layers, initializers and seeds under stock TensorFlow.

What ``tests/nn/test_layers.py`` (and tests/nn/test_initializers.py, tests/nn/test_losses.py)
compare ``bridge.nn``, ``bridge.losses``, ``bridge.layers`` and
``bridge.initializers`` with.  Every graph is built in TF1 graph mode
(``tf.Graph().as_default()``) with the functions TF users call:
``tf.nn.*``, ``tf.compat.v1.losses.*``, the TF1 layers
(``tensorflow.python.keras.legacy_tf_layers``: what ``tf.compat.v1.layers``
was before Keras 3; with Keras 3 installed the public alias refuses), and
``tf.compat.v1`` initializers.

Batch normalization: TF's TF1 layer (``tf.compat.v1.layers.batch_normalization``)
lives in the ``tf_keras`` package, which ``make setup`` installs beside the
TensorFlow wheel (without its dependencies: it asks for the ``tensorflow``
wheel, which would replace ``tensorflow-cpu``).  ``TF_USE_LEGACY_KERAS=1``
makes ``tf.compat.v1.layers`` that layer.  Without ``tf_keras`` this script
fails, saying how to install it: no hand-written copy stands in for the layer.

Request (every list optional)::

    {"functions": [{"fn": "nn.relu" | "losses.mean_squared_error" | ...,
                    "tensors": {arg: ndarray},      # placeholders of exactly that shape
                    "none_dims": {arg: [axis]},      # ...but these dims unknown
                    "kwargs": {arg: value},          # plain Python arguments
                    "wrt": [arg]}],                  # differentiate against these
     "layers": [{"layer": "dense" | "conv2d" | "batch_normalization" | "dropout" | "flatten"
                          | "max_pooling2d" | "average_pooling2d",
                 "x": ndarray, "kwargs": {...}, "activation": None | "relu" | ...,
                 "weights": {"kernel": ndarray, ...},   # constant initializers
                 "training": None | bool | "feed_true" | "feed_false"}],
     "random": [{"seed": None | int,                  # graph-level seed
                 "calls": [{"init": name, "kwargs": {...}, "shape": [...], "dtype": str}
                           | {"dropout": ndarray, "rate": float, "seed": int | None,
                              "noise_shape": None | list}
                           | {"dense": ndarray, "units": int}]}],
     "names": [[{"layer": name, "shape": [...], "kwargs": {...}, "scope": None | str}]]}

Each function and layer objective is ``sum(sin(y))`` over the float
outputs ``y``; the response holds the outputs and the gradients of that
objective::

    {"functions": [{"values": [ndarray], "grads": {arg: ndarray}} | "Error: ..."],
     "layers": [{"values": [ndarray], "grads": {"x" | var short name: ndarray},
                 "variables": [names], "trainable": [names], "update_ops": int,
                 "after_update": {var short name: ndarray}} | "Error: ..."],
     "random": [{"values": [ndarray]}], "names": [{"variables": [...], "trainable": [...]}],
     "batch_normalization_module": the module of the batch normalization layer that answered}
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

if importlib.util.find_spec("tf_keras") is None:
    sys.exit("nn_layers oracle: the tf_keras package is not installed, and TF's TF1 "
             "layers.batch_normalization lives there; install it as `make setup` does: "
             "pip install --no-deps 'tf-keras~=<TensorFlow's major.minor>.0'")
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.compat.v1.layers is tf_keras' (before TF is imported)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.keras.legacy_tf_layers import convolutional as tf1_conv  # noqa: E402
from tensorflow.python.keras.legacy_tf_layers import core as tf1_core  # noqa: E402
from tensorflow.python.keras.legacy_tf_layers import pooling as tf1_pooling  # noqa: E402

import _common  # noqa: E402

v1 = tf.compat.v1

#: Where tf.compat.v1.layers.batch_normalization comes from (tf_keras, checked by the tests).
BATCH_NORM_MODULE = v1.layers.batch_normalization.__module__

FUNCTIONS: dict[str, Callable] = {
    "nn.relu": tf.nn.relu, "nn.relu6": tf.nn.relu6, "nn.leaky_relu": tf.nn.leaky_relu, "nn.elu": tf.nn.elu,
    "nn.selu": tf.nn.selu, "nn.softplus": tf.nn.softplus, "nn.softsign": tf.nn.softsign,
    "nn.sigmoid": tf.nn.sigmoid, "nn.tanh": tf.nn.tanh, "nn.softmax": tf.nn.softmax,
    "nn.log_softmax": tf.nn.log_softmax, "nn.bias_add": tf.nn.bias_add, "nn.conv2d": tf.nn.conv2d,
    "nn.max_pool2d": tf.nn.max_pool2d, "nn.avg_pool2d": tf.nn.avg_pool2d, "nn.moments": tf.nn.moments,
    "nn.batch_normalization": tf.nn.batch_normalization, "nn.fused_batch_norm": v1.nn.fused_batch_norm,
    "nn.l2_loss": tf.nn.l2_loss, "nn.dropout": tf.nn.dropout,
    "nn.softmax_cross_entropy_with_logits": tf.nn.softmax_cross_entropy_with_logits,
    "nn.sparse_softmax_cross_entropy_with_logits": tf.nn.sparse_softmax_cross_entropy_with_logits,
    "nn.sigmoid_cross_entropy_with_logits": tf.nn.sigmoid_cross_entropy_with_logits,
    "losses.mean_squared_error": v1.losses.mean_squared_error,
    "losses.absolute_difference": v1.losses.absolute_difference,
    "losses.softmax_cross_entropy": v1.losses.softmax_cross_entropy,
    "losses.sparse_softmax_cross_entropy": v1.losses.sparse_softmax_cross_entropy,
    "losses.sigmoid_cross_entropy": v1.losses.sigmoid_cross_entropy,
    "losses.compute_weighted_loss": v1.losses.compute_weighted_loss,
}

ACTIVATIONS = {None: None, "relu": tf.nn.relu, "tanh": tf.nn.tanh, "sigmoid": tf.nn.sigmoid, "elu": tf.nn.elu}

INITIALIZERS: dict[str, Callable] = {
    "zeros": v1.zeros_initializer, "ones": v1.ones_initializer, "constant": v1.constant_initializer,
    "random_normal": v1.random_normal_initializer, "truncated_normal": v1.truncated_normal_initializer,
    "random_uniform": v1.random_uniform_initializer, "variance_scaling": v1.variance_scaling_initializer,
    "glorot_uniform": v1.glorot_uniform_initializer, "glorot_normal": v1.glorot_normal_initializer,
    "he_normal": v1.initializers.he_normal, "he_uniform": v1.initializers.he_uniform,
    "lecun_normal": v1.initializers.lecun_normal, "lecun_uniform": v1.initializers.lecun_uniform,
}


def _session(graph: tf.Graph) -> v1.Session:
    return v1.Session(graph=graph, config=_common.SESSION_CONFIG)


def _objective(outputs: list) -> tf.Tensor:
    """sum(sin(y)) over the float outputs: what every gradient below differentiates."""
    terms = [tf.reduce_sum(tf.sin(y)) for y in outputs if y.dtype.is_floating]
    total = terms[0]
    for t in terms[1:]:
        total = total + tf.cast(t, total.dtype)
    return total


def _flat(result: Any) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _placeholder(arr: np.ndarray, name: str, none_dims=()) -> tf.Tensor:
    shape = [None if i in none_dims else d for i, d in enumerate(arr.shape)]
    return v1.placeholder(tf.as_dtype(arr.dtype), shape, name=name)


# --- functions ----------------------------------------------------------------------------

def eval_function(case: dict) -> dict | str:
    try:
        graph = tf.Graph()
        with graph.as_default():
            feed, tensors = {}, {}
            for arg, arr in case.get("tensors", {}).items():
                ph = _placeholder(np.asarray(arr), arg, case.get("none_dims", {}).get(arg, ()))
                feed[ph], tensors[arg] = np.asarray(arr), ph
            outputs = _flat(FUNCTIONS[case["fn"]](**tensors, **case.get("kwargs", {})))
            wrt = case.get("wrt", [])
            grads = tf.gradients(_objective(outputs), [tensors[a] for a in wrt]) if wrt else []
        with _session(graph) as sess:
            values = sess.run(outputs, feed)
            gvals = sess.run([g for g in grads if g is not None], feed)
        it = iter(gvals)
        return {"values": [np.asarray(v) for v in values],
                "grads": {a: (None if g is None else np.asarray(next(it))) for a, g in zip(wrt, grads, strict=True)}}
    except Exception as exc:  # noqa: BLE001
        return _common.error_string(exc)


# --- layers ---------------------------------------------------------------------------------

def _const_init(weights: dict, key: str):
    return v1.constant_initializer(weights[key]) if key in weights else None


def _batch_norm(x, training, weights: dict, **kwargs):
    """TF's TF1 layer (tf_keras'), with the case's weights as constant initializers."""
    inits = {f"{k}_initializer": _const_init(weights, k) for k in ("gamma", "beta", "moving_mean", "moving_variance")
             if k in weights}
    before = len(v1.get_collection(v1.GraphKeys.UPDATE_OPS))
    out = v1.layers.batch_normalization(x, training=training, **inits, **kwargs)
    return out, v1.get_collection(v1.GraphKeys.UPDATE_OPS)[before:]


def _build_layer(case: dict, x, training):
    kind, kw, weights = case["layer"], dict(case.get("kwargs", {})), case.get("weights", {})
    act = ACTIVATIONS[case.get("activation")]
    if kind == "dense":
        return tf1_core.dense(x, activation=act, kernel_initializer=_const_init(weights, "kernel"),
                              bias_initializer=_const_init(weights, "bias") or v1.zeros_initializer(), **kw), []
    if kind == "conv2d":
        return tf1_conv.conv2d(x, activation=act, kernel_initializer=_const_init(weights, "kernel"),
                               bias_initializer=_const_init(weights, "bias") or v1.zeros_initializer(), **kw), []
    if kind == "dropout":
        return tf1_core.dropout(x, training=training, **kw), []
    if kind == "flatten":
        return tf1_core.flatten(x, **kw), []
    if kind == "max_pooling2d":
        return tf1_pooling.max_pooling2d(x, **kw), []
    if kind == "average_pooling2d":
        return tf1_pooling.average_pooling2d(x, **kw), []
    if kind == "batch_normalization":
        return _batch_norm(x, training, weights, **kw)
    raise ValueError(f"unknown layer {kind!r}")


def _run_layer(case: dict) -> dict:
    graph = tf.Graph()
    with graph.as_default():
        x_arr = np.asarray(case["x"])
        x = _placeholder(x_arr, "x")
        feed = {x: x_arr}
        training = case.get("training")
        if isinstance(training, str):
            ph = v1.placeholder(tf.bool, [], name="training")
            feed[ph] = training == "feed_true"
            training = ph
        elif training is None:
            training = False
        y, updates = _build_layer(case, x, training)
        variables = v1.global_variables()
        trainable = v1.trainable_variables()
        objective = _objective([y])
        short = [v.op.name.rsplit("/", 1)[-1] for v in trainable]
        grads = tf.gradients(objective, [x] + trainable)
        init = v1.global_variables_initializer()
    with _session(graph) as sess:
        sess.run(init)
        values = sess.run([y], feed)
        gvals = sess.run([g for g in grads if g is not None], feed)
        if updates:
            sess.run(updates, feed)
        after = {v.op.name.rsplit("/", 1)[-1]: sess.run(v) for v in variables}
    it = iter(gvals)
    named = dict(zip(["x"] + short, grads, strict=True))
    return {"values": [np.asarray(v) for v in values],
            "grads": {k: (None if g is None else np.asarray(next(it))) for k, g in named.items()},
            "variables": [v.op.name for v in variables], "trainable": [v.op.name for v in trainable],
            "update_ops": len(updates), "after_update": after if updates else {}}


def eval_layer(case: dict) -> dict | str:
    try:
        return _run_layer(case)
    except Exception as exc:  # noqa: BLE001
        return _common.error_string(exc)


# --- random values and names ------------------------------------------------------------------

def eval_random(case: dict) -> dict | str:
    try:
        graph = tf.Graph()
        with graph.as_default():
            if case.get("seed") is not None:
                v1.set_random_seed(case["seed"])
            outs, feed = [], {}
            for call in case["calls"]:
                if "init" in call:
                    init = INITIALIZERS[call["init"]](**call.get("kwargs", {}))
                    outs.append(init(call["shape"], tf.as_dtype(call.get("dtype", "float32"))))
                elif "dropout" in call:
                    arr = np.asarray(call["dropout"])
                    ph = _placeholder(arr, "x")
                    feed[ph] = arr
                    outs.append(tf.nn.dropout(ph, rate=call["rate"], seed=call.get("seed"),
                                              noise_shape=call.get("noise_shape")))
                elif "dense" in call:
                    arr = np.asarray(call["dense"])
                    outs.append(tf1_core.dense(tf.constant(arr), call["units"]))
                else:
                    raise ValueError(f"unknown random call {call}")
            init_op = v1.global_variables_initializer()
        with _session(graph) as sess:
            sess.run(init_op)
            return {"values": [np.asarray(v) for v in sess.run(outs, feed)], "graph_seed": graph.seed}
    except Exception as exc:  # noqa: BLE001
        return _common.error_string(exc)


def eval_names(program: list) -> dict | str:
    try:
        graph = tf.Graph()
        with graph.as_default():
            for step in program:
                x = v1.placeholder(tf.as_dtype(step.get("dtype", "float32")), step["shape"])
                layer = {"dense": tf1_core.dense, "conv2d": tf1_conv.conv2d, "dropout": tf1_core.dropout,
                         "flatten": tf1_core.flatten, "max_pooling2d": tf1_pooling.max_pooling2d,
                         "batch_normalization": None}[step["layer"]]
                kwargs = dict(step.get("kwargs", {}))
                scope = step.get("scope")
                with tf.name_scope(scope) if scope else _nullcontext():
                    if layer is None:
                        _batch_norm(x, False, {}, **kwargs)
                    else:
                        layer(x, **kwargs)
            return {"variables": [v.op.name for v in v1.global_variables()],
                    "trainable": [v.op.name for v in v1.trainable_variables()]}
    except Exception as exc:  # noqa: BLE001
        return _common.error_string(exc)


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def handle(request: Any, out_dir: Path) -> dict:
    request = request or {}
    response = {
        "functions": [eval_function(c) for c in request.get("functions", [])],
        "layers": [eval_layer(c) for c in request.get("layers", [])],
        "random": [eval_random(c) for c in request.get("random", [])],
        "names": [eval_names(p) for p in request.get("names", [])],
        "batch_normalization_module": BATCH_NORM_MODULE,
    }
    return response


if __name__ == "__main__":
    _common.main(handle)
