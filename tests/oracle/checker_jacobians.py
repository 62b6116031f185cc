"""Oracle: TF1's gradient checker (``tf.compat.v1.test.compute_gradient``) on complex functions.

Request: ``{"cases": [(name, [x0 arrays])]}`` with names of the functions
below.  Response: ``{"jacobians": {name: [(theoretical, numerical)]}}``,
one pair per input, each shaped as TF's checker returns them: (x real
size, y real size), a complex value counting as its real and imaginary
parts side by side.
"""
from __future__ import annotations

from pathlib import Path

import tensorflow as tf

import _common

tf1 = tf.compat.v1

FUNCTIONS = {
    "square": lambda z: z * z,
    "sin_exp": lambda z: tf.sin(z) * tf.exp(z),
    "abs": lambda z: tf.abs(z),
    "z_conj_z_z": lambda z: z * tf.math.conj(z) * z,
    "complex": lambda a, b: tf.complex(a, b),
    "scale": lambda z, s: z * tf.cast(s, z.dtype),
}


def handle(request: dict, out_dir: Path) -> dict:
    answers = {}
    for name, x0 in request["cases"]:
        pairs = []
        for k in range(len(x0)):  # one input differentiated at a time, the others constants
            graph = tf1.Graph()
            with graph.as_default(), tf1.Session(graph=graph, config=_common.SESSION_CONFIG):
                x = tf1.placeholder(x0[k].dtype, x0[k].shape)
                args = [x if i == k else tf.constant(v) for i, v in enumerate(x0)]
                y = FUNCTIONS[name](*args)
                pairs.append(tf1.test.compute_gradient(x, list(x0[k].shape), y, y.shape.as_list(),
                                                       x_init_value=x0[k], delta=1e-6))
        answers[name] = pairs
    return {"jacobians": answers}


if __name__ == "__main__":
    _common.main(handle)
