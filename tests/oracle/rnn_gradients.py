"""Oracle: SavedModels whose while loops read Variables (Keras RNNs among them), and TF2's gradients.

TensorFlow writes each model (``tf.saved_model.save``, or Keras 3's
``model.export``); its signature runs a functional ``While`` whose body reads
variables through handles the loop carries unchanged.  The expected values
are TF2's ``tf.GradientTape`` over the Python objects that were saved (TF2
differentiates the loaded signature to first order only: its second order
fails, "a variable without handle data"), their output and first order
checked against the loaded signature's.

Request: None or ``{"models": [name, ...]}`` (names from :data:`MODELS`).
Response::

    {"keras_version": str,
     "models": {name: {"path": str, "signature": str,
                       "input": str, "output": str,    # the signature's keys
                       "x": array, "gy": array, "v": array,
                       "y": array,                      # the output at x (the loaded signature's too)
                       "first": array,                  # d sum(y * gy) / dx
                       "second": array,                 # d sum(first * v) / dx
                       "variables": [{"name": str, "value": array, "first": array,
                                      "second": array}, ...],
                       "op_types": [str, ...]}}}       # of the graph and its library

``variables`` are the trainable variables, each with ``value``, ``first``
(``d sum(y * gy) / d variable``) and ``second`` (``d sum(first * v) /
d variable``, the mixed second order a gradient penalty needs); the test
finds each in the loaded graph by its value (they are drawn at random).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import tensorflow as tf

import _common

F64 = tf.float64
#: Small: a batch of 2 sequences of 3 steps of 2 features, 3 units.
BATCH, STEPS, FEATURES, UNITS = 2, 3, 2, 3


class _LoopReadsVariable(tf.Module):
    """A tf.while_loop whose body reads a Variable (its handle a loop invariant)."""

    def __init__(self, rng: np.random.Generator):
        super().__init__()
        self.w = tf.Variable(rng.uniform(0.5, 1.5, [3]), name="w")
        self.b = tf.Variable(rng.uniform(-0.5, 0.5, [3]), name="b")

    @tf.function(input_signature=[tf.TensorSpec([3], F64, name="x")])
    def __call__(self, x):
        def body(i, v):
            return i + 1, tf.sin(v * self.w) + self.b * v

        return {"y": tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1] * x}


def _keras_model(kind: str, rng: np.random.Generator, dtype: str = "float64", sequences: bool = True):
    import keras
    layer = {"simple_rnn": keras.layers.SimpleRNN, "gru": keras.layers.GRU, "lstm": keras.layers.LSTM}[kind]
    model = keras.Sequential([keras.Input((STEPS, FEATURES), dtype=dtype),
                              layer(UNITS, dtype=dtype, return_sequences=sequences)])
    # Weights away from the initializers (zero biases, orthogonal recurrent kernels).
    for w in model.trainable_variables:
        w.assign(rng.uniform(-0.8, 0.8, tuple(w.shape)))
    return model


def _op_types(path: Path) -> list[str]:
    from tensorflow.core.protobuf import saved_model_pb2
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((path / "saved_model.pb").read_bytes())
    gd = sm.meta_graphs[0].graph_def
    types = {n.op for n in gd.node}
    for fdef in gd.library.function:
        types.update(n.op for n in fdef.node_def)
    return sorted(types)


def _gradients(call: Callable, x: np.ndarray, gy: np.ndarray, v: np.ndarray, variables: list) -> dict:
    xt = tf.constant(x)
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(xt)
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(xt)
            y = call(xt)
            objective = tf.reduce_sum(y * gy)
        first = inner.gradient(objective, xt)
        z = tf.reduce_sum(first * v)
    second = outer.gradient(z, xt)
    var_first = inner.gradient(objective, variables)
    var_second = outer.gradient(z, variables)
    return {"y": y.numpy(), "first": first.numpy(), "second": second.numpy(),
            "variables": [{"name": w.name, "value": w.numpy(), "first": g.numpy(), "second": h.numpy()}
                          for w, g, h in zip(variables, var_first, var_second, strict=True)]}


def _case(path: Path, signature: str, call: Callable, variables: list, x: np.ndarray,
          rng: np.random.Generator) -> dict:
    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures[signature]
    _, kwargs = fn.structured_input_signature
    (input_key,) = kwargs
    (output_key,) = fn.structured_outputs
    gy = rng.uniform(-1, 1, np.shape(call(tf.constant(x)))).astype(x.dtype)
    v = rng.uniform(-1, 1, x.shape).astype(x.dtype)
    # TF2 differentiates the loaded signature to first order only (the second fails: "a variable
    # without handle data"), so the expected values come from the objects that were saved, their
    # output and first order checked against the loaded signature's (the files).
    got = _gradients(call, x, gy, v, variables)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        served = fn(**{input_key: xt})[output_key]
    served_first = tape.gradient(served, xt, output_gradients=tf.constant(gy))
    tight = dict(rtol=1e-12, atol=1e-14) if x.dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(served.numpy(), got["y"], **tight)
    np.testing.assert_allclose(served_first.numpy(), got["first"], **tight)
    return {"path": str(path), "signature": signature, "input": input_key, "output": output_key,
            "x": x, "gy": gy, "v": v, **got, "op_types": _op_types(path)}


def _loop_reads_variable(out: Path, rng: np.random.Generator) -> dict:
    module = _LoopReadsVariable(rng)
    path = out / "loop_reads_variable"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.__call__})
    return _case(path, "serving_default", lambda x: module(x)["y"], list(module.trainable_variables),
                 rng.uniform(-1, 1, [3]), rng)


def _keras_case(kind: str, how: str, out: Path, rng: np.random.Generator, dtype: str = "float64") -> dict:
    # (The float32 model returns the last state only, Keras' default.)
    model = _keras_model(kind, rng, dtype, sequences=dtype == "float64")
    path = out / f"{kind}_{how}_{dtype}"
    if how == "export":
        model.export(str(path), verbose=False)
        signature = "serve"
    else:
        tf.saved_model.save(model, str(path))
        signature = "serving_default"
    call = tf.function(lambda x: model(x))
    return _case(path, signature, call, list(model.trainable_variables),
                 rng.uniform(-1, 1, [BATCH, STEPS, FEATURES]).astype(dtype), rng)


MODELS: dict[str, Callable[[Path, np.random.Generator], dict]] = {
    "loop_reads_variable": _loop_reads_variable,
    **{f"{kind}_{how}_float64": (lambda out, rng, kind=kind, how=how: _keras_case(kind, how, out, rng))
       for kind in ("simple_rnn", "gru", "lstm") for how in ("export", "save")},
    "lstm_export_float32": lambda out, rng: _keras_case("lstm", "export", out, rng, "float32"),
}


def handle(request: Any, out_dir: Path) -> dict:
    import keras
    keras.utils.set_random_seed(_common.SEED)
    names = (request or {}).get("models") or list(MODELS)
    models = {}
    for k, name in enumerate(names):
        models[name] = MODELS[name](out_dir, np.random.default_rng(1000 + k))
    return {"keras_version": keras.__version__, "models": models}


if __name__ == "__main__":
    _common.main(handle)
