"""Oracle: Keras models (and tf.Modules) saved with ``tf.saved_model.save``, with what stock TF serves from them.

Request: None, or ``{"seed": int}`` (default 0).

Writes into OUT_DIR, each a SavedModel folder:

- ``sequential/``: ``tf.saved_model.save`` of a Keras Sequential model
  (Dense, BatchNormalization with trained moving statistics, Dropout,
  Dense softmax).  Keras 3 variables make the saved graph hold each variable
  twice: the handles the signature reads and copies the TF1 restore fills.
- ``functional/``: a Keras functional model with two inputs (a float
  matrix, int32 ids through an Embedding) and two outputs.
- ``lazy_module/``: a ``tf.Module`` whose variables are made on the first
  call of its ``tf.function`` (two of them with the same name).
- ``signatures/``: a Keras model saved with several signatures (the model,
  its hidden layer, a two-input scaled output) sharing its variables.
- ``export/``: the functional model exported with Keras 3's ``model.export``.

Response::

    {"tf_version": str, "keras_version": str | None, "keras_error": str | None,
     "models": {name: {"path": str,
                       "signatures": {signature: {"inputs": {key: dtype name}, "outputs": [key],
                                                  "feeds": {key: ndarray},
                                                  "expected": {key: ndarray}}}}}}

Expected values come from ``tf.saved_model.load(path).signatures[...]``: they
check the files, not the Python objects that wrote them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common


def _describe(path: Path, feeds: dict) -> dict:
    loaded = tf.saved_model.load(str(path))
    assert set(loaded.signatures) == set(feeds), (sorted(loaded.signatures), sorted(feeds))
    signatures = {}
    for name, inputs in feeds.items():
        fn = loaded.signatures[name]
        _, kwargs = fn.structured_input_signature
        result = fn(**{k: tf.constant(v) for k, v in inputs.items()})
        signatures[name] = {"inputs": {k: spec.dtype.name for k, spec in kwargs.items()},
                            "outputs": sorted(fn.structured_outputs),
                            "feeds": inputs,
                            "expected": {k: v.numpy() for k, v in result.items()}}
    return {"path": str(path), "signatures": signatures}


def _input_specs(path: Path, name: str = "serving_default") -> dict:
    loaded = tf.saved_model.load(str(path))
    _, kwargs = loaded.signatures[name].structured_input_signature
    return kwargs


def _sequential(keras, rng: np.random.Generator) -> Any:
    model = keras.Sequential([keras.Input((4,), name="features"),
                              keras.layers.Dense(8, activation="relu"),
                              keras.layers.BatchNormalization(),
                              keras.layers.Dropout(0.5),
                              keras.layers.Dense(3, activation="softmax")])
    # Moving statistics away from 0 and 1, so a variable left at its initial value shows.
    model(rng.standard_normal((16, 4)).astype(np.float32) * 3 + 1, training=True)
    return model


def _functional(keras, rng: np.random.Generator) -> Any:
    features = keras.Input((4,), name="features")
    ids = keras.Input((2,), dtype="int32", name="ids")
    embedded = keras.layers.Flatten()(keras.layers.Embedding(10, 3)(ids))
    hidden = keras.layers.Dense(6, activation="tanh")(keras.layers.Concatenate()([features, embedded]))
    score = keras.layers.Dense(1, name="score")(hidden)
    probs = keras.layers.Dense(3, activation="softmax", name="probs")(hidden)
    return keras.Model({"features": features, "ids": ids}, {"score": score, "probs": probs})


class _Lazy(tf.Module):
    """Variables made on the first call, two of them named alike."""

    def __init__(self):
        super().__init__()
        self.w = None
        self.b = None
        self.scale = None

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def __call__(self, x):
        if self.w is None:
            self.w = tf.Variable(tf.random.stateless_normal([3, 4], seed=[1, 2]), name="v")
            self.b = tf.Variable(tf.random.stateless_normal([4], seed=[3, 4]), name="v")
            self.scale = tf.Variable(tf.constant(2.5, tf.float64), name="scale")
        y = tf.matmul(x, self.w) + self.b
        return {"y": y, "scaled": tf.cast(y, tf.float64) * self.scale}


def _lazy_module(out: Path, rng: np.random.Generator) -> dict:
    path = out / "lazy_module"
    m = _Lazy()
    m(tf.zeros([1, 3]))
    m.b.assign_add(tf.ones([4]))        # saved values differ from the initializers
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.__call__})
    return _describe(path, {"serving_default": {"x": rng.standard_normal((5, 3)).astype(np.float32)}})


def _signatures(keras, out: Path, rng: np.random.Generator) -> dict:
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, activation="relu", name="hidden"),
                              keras.layers.Dense(2, name="logits")])
    hidden = model.get_layer("hidden")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(x):
        return {"logits": model(x)}

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def features(x):
        return {"hidden": hidden(x)}

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.float32, name="scale")])
    def scaled(x, scale):
        return {"scaled": model(x) * scale, "argmax": tf.argmax(model(x), axis=1)}

    path = out / "signatures"
    tf.saved_model.save(model, str(path), signatures={"serving_default": serve, "features": features,
                                                      "scaled": scaled})
    x = rng.standard_normal((3, 4)).astype(np.float32)
    return _describe(path, {"serving_default": {"x": x}, "features": {"x": x},
                            "scaled": {"x": x, "scale": np.float32(-1.5)}})


def _feeds_for(path: Path, values: dict, name: str = "serving_default") -> dict:
    """A signature's feeds, by the input keys the saved signature has (Keras
    names them itself: ``inputs``, ``inputs_1``, ...): each value goes to the
    one input whose dtype and shape fit it."""
    feeds = {}
    for key, spec in _input_specs(path, name).items():
        (fits,) = [k for k, v in values.items()
                   if tf.as_dtype(v.dtype) == spec.dtype and spec.shape.is_compatible_with(v.shape)]
        feeds[key] = values[fits]
    assert len(feeds) == len(values), (sorted(feeds), sorted(values))
    return feeds


def handle(request: Any, out_dir: Path) -> dict:
    seed = (request or {}).get("seed", 0)
    rng = np.random.default_rng(seed)
    response: dict = {"models": {"lazy_module": _lazy_module(out_dir, rng)},
                      "keras_version": None, "keras_error": None}
    try:
        import keras
        response["keras_version"] = keras.__version__
    except Exception as exc:  # the tests say why they skip
        response["keras_error"] = _common.error_string(exc)
        return response
    keras.utils.set_random_seed(_common.SEED)
    models = response["models"]

    path = out_dir / "sequential"
    tf.saved_model.save(_sequential(keras, rng), str(path))
    x = rng.standard_normal((5, 4)).astype(np.float32)
    models["sequential"] = _describe(path, {"serving_default": _feeds_for(path, {"x": x})})

    functional = _functional(keras, rng)
    values = {"features": rng.standard_normal((4, 4)).astype(np.float32),
              "ids": rng.integers(0, 10, (4, 2)).astype(np.int32)}
    path = out_dir / "functional"
    tf.saved_model.save(functional, str(path))
    models["functional"] = _describe(path, {"serving_default": _feeds_for(path, values)})

    models["signatures"] = _signatures(keras, out_dir, rng)

    path = out_dir / "export"
    functional.export(str(path), verbose=False)
    names = list(tf.saved_model.load(str(path)).signatures)   # serving_default and Keras' own "serve"
    models["export"] = _describe(path, {name: _feeds_for(path, values, name) for name in names})
    return response


if __name__ == "__main__":
    _common.main(handle)
