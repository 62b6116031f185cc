"""Oracle: SavedModels written the TF2 way, with what stock TF computes from them.

Request: None, or ``{"seed": int}`` (default 0).

Writes into OUT_DIR:

- ``module/``: ``tf.saved_model.save`` of a ``tf.Module`` with variables (a
  float matrix and bias, an int64 counter), a ``StaticHashTable`` (so the
  model has an ``__saved_model_init_op`` that fills it) and three
  signatures: ``serving_default`` (float input, a float and an int64
  output), ``strings`` (a string and an int32 input: table lookups, string
  lengths, a join) and ``ints`` (int64 input).
- ``keras/``: a Keras model exported with ``model.export`` (Keras 3's
  ``tf_saved_model`` format); absent when Keras cannot be imported.

Response::

    {"tf_version": str, "keras_version": str | None, "keras_error": str | None,
     "models": {"module" | "keras": {
         "path": str,
         "signatures": {name: {"inputs": {key: {"name": "serving_default_x:0", "dtype": "float32"}},
                               "outputs": {key: "StatefulPartitionedCall:0"},
                               "feeds": {key: ndarray},          # keyword arguments
                               "expected": {key: ndarray}}},     # stock TF's results for them
         "variables": {name: ndarray}}}}                       # module only

Expected values come from ``tf.saved_model.load`` of the written folder
(its ``signatures``), so they check the files, not the Python objects.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common


class _Module(tf.Module):
    def __init__(self, rng: np.random.Generator):
        super().__init__()
        self.w = tf.Variable(rng.standard_normal((3, 2)).astype(np.float32), name="w")
        self.b = tf.Variable(np.array([0.5, -1.0], np.float32), name="b")
        self.count = tf.Variable(np.int64(2**40 + 7), name="count")
        init = tf.lookup.KeyValueTensorInitializer(tf.constant(["alpha", "beta", "gamma"]),
                                                   tf.constant([10, 20, 30], tf.int64))
        self.table = tf.lookup.StaticHashTable(init, default_value=-1)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def predict(self, x):
        logits = tf.matmul(x, self.w) + self.b
        return {"y": tf.tanh(logits), "label": tf.argmax(logits, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words"),
                                  tf.TensorSpec([], tf.int32, name="times")])
    def strings(self, words, times):
        return {"ids": self.table.lookup(words),
                "lengths": tf.strings.length(words) * times,
                "joined": tf.strings.reduce_join(words, separator="+")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="n")])
    def ints(self, n):
        return {"total": tf.reduce_sum(n) + self.count, "cumsum": tf.cumsum(n)}


def _describe(loaded, name: str, feeds: dict) -> dict:
    fn = loaded.signatures[name]
    _, kwargs = fn.structured_input_signature
    outputs = fn.structured_outputs
    result = fn(**{k: tf.constant(v) for k, v in feeds.items()})
    return {"inputs": {k: {"dtype": spec.dtype.name} for k, spec in kwargs.items()},
            "outputs": sorted(outputs),
            "feeds": feeds,
            "expected": {k: _common.to_numpy(v.numpy()) for k, v in result.items()}}


def _module(out: Path, rng: np.random.Generator) -> dict:
    path = out / "module"
    m = _Module(rng)
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.predict, "strings": m.strings,
                                                  "ints": m.ints})
    feeds = {"serving_default": {"x": rng.standard_normal((4, 3)).astype(np.float32)},
             "strings": {"words": np.array([b"beta", b"delta", b"alpha"], dtype=object),
                         "times": np.int32(3)},
             "ints": {"n": np.array([1, -5, 2**35], np.int64)}}
    loaded = tf.saved_model.load(str(path))
    return {"path": str(path),
            "signatures": {name: _describe(loaded, name, f) for name, f in feeds.items()},
            "variables": {"w": m.w.numpy(), "b": m.b.numpy(), "count": m.count.numpy()}}


def _keras(out: Path, rng: np.random.Generator) -> dict:
    import keras
    keras.utils.set_random_seed(_common.SEED)
    model = keras.Sequential([keras.Input((4,), name="features"),
                              keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    path = out / "keras"
    model.export(str(path), verbose=False)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    loaded = tf.saved_model.load(str(path))
    names = list(loaded.signatures)
    _, kwargs = loaded.signatures["serving_default"].structured_input_signature
    (key,) = kwargs
    entry = {"path": str(path), "signatures": {"serving_default": _describe(loaded, "serving_default", {key: x})},
             "signature_names": names,
             "model_output": np.asarray(model(x))}
    return entry


def handle(request: Any, out_dir: Path) -> dict:
    seed = (request or {}).get("seed", 0)
    rng = np.random.default_rng(seed)
    response: dict = {"models": {"module": _module(out_dir, rng)}, "keras_version": None, "keras_error": None}
    try:
        import keras
        response["keras_version"] = keras.__version__
    except Exception as exc:  # the test says why it skips
        response["keras_error"] = _common.error_string(exc)
    else:
        response["models"]["keras"] = _keras(out_dir, rng)
    return response


if __name__ == "__main__":
    _common.main(handle)
