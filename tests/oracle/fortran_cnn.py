"""Oracle: a small CNN SavedModel written the TF2 way, for the Fortran tests.

Request: None, or ``{"seed": int}`` (default 0).

Writes OUT_DIR/cnn/: ``tf.saved_model.save`` of a ``tf.Module``:
image[?,8,8,2] -> Conv2D(3x3, 4 filters, SAME) + bias -> ReLU -> MaxPool 2x2
-> flatten -> dense 64x3, signature ``serving_default`` (input ``image``,
outputs ``logits`` float32 and ``label`` int64).

Response::

    {"path": str, "image": ndarray[3,8,8,2], "logits": ndarray[3,3], "label": ndarray[3]}

The expected values come from ``tf.saved_model.load`` of the written folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common


class Cnn(tf.Module):
    def __init__(self, rng: np.random.Generator) -> None:
        super().__init__()
        self.filters = tf.Variable(rng.normal(0, 0.5, (3, 3, 2, 4)).astype(np.float32), name="filters")
        self.bias = tf.Variable(rng.normal(0, 0.1, (4,)).astype(np.float32), name="bias")
        self.dense = tf.Variable((rng.normal(0, 1, (64, 3)) / 8).astype(np.float32), name="dense")

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 2], tf.float32, name="image")])
    def serve(self, image):
        y = tf.nn.relu(tf.nn.conv2d(image, self.filters, strides=1, padding="SAME") + self.bias)
        y = tf.nn.max_pool2d(y, ksize=2, strides=2, padding="VALID")
        logits = tf.matmul(tf.reshape(y, [-1, 64]), self.dense)
        return {"logits": logits, "label": tf.argmax(logits, axis=1)}


def handle(request: Any, out_dir: Path) -> dict:
    rng = np.random.default_rng(int((request or {}).get("seed", 0)))
    model = Cnn(rng)
    path = out_dir / "cnn"
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})
    image = rng.normal(0, 1, (3, 8, 8, 2)).astype(np.float32)
    out = tf.saved_model.load(str(path)).signatures["serving_default"](image=tf.constant(image))
    return {"path": str(path), "image": image, "logits": _common.to_numpy(out["logits"]),
            "label": _common.to_numpy(out["label"])}


if __name__ == "__main__":
    _common.main(handle)
