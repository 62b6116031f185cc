"""Oracle: stock TensorFlow's values of models with ``tf.custom_gradient``.

The models are tests/support/custom_gradient_cases.py, written against a small API
that this script maps to TF (tf.compat.v1 graph mode) and the test maps to
the bridge.

Request::   {"cases": [name, ...]}
Response::  {"cases": {name: {"loss": float, "grads": [array per x and Variable],
                              "second": [array or None per x and Variable]}
                       or {"error": "..."}}}
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import tensorflow as tf

import _common

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import support.custom_gradient_cases as cases  # noqa: E402


def _api() -> SimpleNamespace:
    variables: list = []

    def variable(value, name):
        v = tf.Variable(value, name=name)
        variables.append(v)
        return v

    return SimpleNamespace(
        custom_gradient=tf.custom_gradient, exp=tf.exp, log1p=tf.math.log1p, sin=tf.sin, cos=tf.cos,
        tanh=tf.tanh, square=tf.square, round=tf.round, sum=tf.reduce_sum, clip_by_norm=tf.clip_by_norm,
        constant=tf.constant, variable=variable, variables=variables,
        while_loop=lambda c, b, v: tf.while_loop(c, b, v),
        cond=lambda p, t, f: tf.cond(p, t, f))


def _case(name: str) -> dict:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [len(cases.X)], name="x")
        api = _api()
        loss = cases.CASES[name](api, x)
        xs = [x] + sorted(api.variables, key=lambda v: v.name)
        grads = tf.compat.v1.gradients(loss, xs)
        total = tf.add_n([tf.reduce_sum(g) for g in grads if g is not None])
        second = tf.compat.v1.gradients(total, xs)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        sess.run(init)
        feed = {x: cases.X}
        return {"loss": float(sess.run(loss, feed)),
                "grads": [np.asarray(sess.run(g, feed)) for g in grads],
                "second": [None if g is None else np.asarray(sess.run(g, feed)) for g in second]}


def handle(request: Any, out_dir: Path) -> dict:
    out: dict = {}
    for name in request["cases"]:
        try:
            out[name] = _case(name)
        except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return {"cases": out}


if __name__ == "__main__":
    _common.main(handle)
