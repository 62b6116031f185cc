"""Oracle: values and gradients of complex functions written in TF ops (graph mode, tf.gradients).

The same functions are Julia ops in tests/customop/test_complex.py; TF's
gradients of the TF-op versions fix the convention the Julia gradient
functions must follow (TF's for complex: for y = f(z) holomorphic,
grad_z = grad_y * conj(f'(z))).

Request: ``{"z": complex128 (n,), "w": complex64 (m, k), "s": float64 (n,),
"grad_ys": [gy, gv, gr]}``, the upstream gradients of

    y = z^2 * exp(z) + s          (complex128, holomorphic in z; s real)
    v = sin(w)                    (complex64)
    r = z * conj(z) * z           (complex128, not holomorphic)

Response: ``{"y", "v", "r", "grad_z", "grad_w", "grad_s", "tf_version"}``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common


def handle(request: Any, out_dir: Path) -> dict:
    if request is None:  # by hand: a small example
        rng = np.random.default_rng(0)
        c = lambda *shape: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)  # noqa: E731
        request = {"z": c(3), "w": c(2, 2).astype(np.complex64), "s": rng.standard_normal(3),
                   "grad_ys": [c(3), c(2, 2).astype(np.complex64), c(3)]}
    graph = tf.Graph()
    with graph.as_default():
        z = tf.compat.v1.placeholder(tf.complex128, name="z")
        w = tf.compat.v1.placeholder(tf.complex64, name="w")
        s = tf.compat.v1.placeholder(tf.float64, name="s")
        y = tf.square(z) * tf.exp(z) + tf.cast(s, tf.complex128)
        v = tf.sin(w)
        r = z * tf.math.conj(z) * z
        grad_ys = [tf.constant(g) for g in request["grad_ys"]]
        grads = tf.compat.v1.gradients([y, v, r], [z, w, s], grad_ys=grad_ys)
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            values = sess.run([y, v, r] + grads, {z: request["z"], w: request["w"], s: request["s"]})
    names = ["y", "v", "r", "grad_z", "grad_w", "grad_s"]
    return {**dict(zip(names, values, strict=True)), "tf_version": tf.__version__}


if __name__ == "__main__":
    _common.main(handle)
