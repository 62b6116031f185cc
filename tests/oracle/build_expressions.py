"""Oracle: the graph stock TensorFlow builds for Python expressions on tensors.

Golden reference for the bridge's tensor operators (``x[1:3]``, ``x < 3``,
``x // y``, ``a @ b``, ...; tests/ops/test_operators.py).  Each case is built in
graph mode (TF1-style ``tf.Graph``), inside a name scope of its own, in one
graph, so that one process answers every case.

Request::

    {"cases": [{"id": "c0",                          # also the case's name scope
                "inputs": {"x": array | {"value": array, "shape": [None, 3]}},
                "expr": "x[1:3, ::-1]",               # Python over the inputs (and np)
                "grad": False}, ...]}                 # also d(sum(out * w))/d(float inputs)

Every input is a Placeholder named like it (inside the case's scope), of
the array's dtype and its shape (or ``shape``), fed the array.  ``expr``
may evaluate to a tensor or to a tuple of tensors; it may call
``boolean_mask`` (TF's ``tf.boolean_mask``) and ``tf`` (the bridge's
test evaluates it with ``tf`` bound to ``bridge``).

Response::

    {"graph_def": bytes,                 # the graph holding every case that built
     "nodes": [node, ...],               # import_check.describe(graph_def)
     "cases": {id: {"outputs": [tensor names], "values": [arrays],
                    "grads": [array or None per input] (when asked),
                    "error": "TypeError: ..." (when TF refused to build it;
                              the case's nodes are then left out of the graph)}}}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common
from import_check import describe


def _input_spec(spec: Any) -> tuple[np.ndarray, list | None]:
    if isinstance(spec, dict):
        return np.asarray(spec["value"]), spec.get("shape")
    arr = np.asarray(spec)
    return arr, list(arr.shape)


def _weights(shape: tuple, dtype) -> np.ndarray:
    """A fixed, non-uniform output gradient: 1, 2, 3, ... over the output."""
    n = int(np.prod(shape, dtype=np.int64))
    return (np.arange(1, n + 1, dtype=np.float64) % 7 + 1).reshape(shape).astype(dtype)


def _build(case: dict, graph: tf.Graph, sess_feeds: dict) -> dict:
    scope = case["id"]
    ns: dict = {"np": np, "boolean_mask": tf.boolean_mask, "tf": tf}
    feed = {}
    with tf.compat.v1.name_scope(scope):
        for name, spec in case["inputs"].items():
            arr, shape = _input_spec(spec)
            ph = tf.compat.v1.placeholder(_common.to_dtype(arr.dtype), shape=shape, name=name)
            ns[name] = ph
            feed[ph] = arr
        out = eval(case["expr"], ns)  # noqa: S307 (test-authored expressions)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        result: dict = {"outputs": [t.name for t in outs]}
        if case.get("grad"):
            xs = [ns[name] for name in case["inputs"] if ns[name].dtype.is_floating]
            ys = [t for t in outs if t.dtype.is_floating]
            shapes = []
            for t in ys:  # a dynamic shape: the one a run gives
                if t.shape.is_fully_defined():
                    shapes.append(tuple(t.shape.as_list()))
                else:
                    with tf.compat.v1.Session(graph=graph) as sess:
                        shapes.append(sess.run(t, feed).shape)
            with tf.compat.v1.name_scope("grad"):
                gys = [tf.constant(_weights(s, t.dtype.as_numpy_dtype)) for s, t in zip(shapes, ys, strict=True)]
                grads = tf.compat.v1.gradients(ys, xs, grad_ys=gys)
            result["grad_tensors"] = grads
    result["tensors"] = outs
    sess_feeds.update(feed)
    result["feed"] = feed
    return result


def handle(request: Any, out_dir: Path) -> dict:
    cases = (request or {}).get("cases", [])
    response_cases: dict = {}
    built: dict = {}
    graph = tf.Graph()
    for case in cases:
        # A case TF refuses is built in a throw-away graph, so that its
        # partial nodes stay out of the golden graph.
        probe = tf.Graph()
        try:
            with probe.as_default():
                _build(case, probe, {})
        except (TypeError, ValueError) as exc:
            response_cases[case["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        with graph.as_default():
            built[case["id"]] = _build(case, graph, {})
    graph_def = graph.as_graph_def()
    with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        for cid, b in built.items():
            entry = {"outputs": b["outputs"],
                     "values": [np.asarray(v) for v in sess.run(b["tensors"], b["feed"])]}
            if "grad_tensors" in b:
                entry["grads"] = [None if g is None else np.asarray(sess.run(g, b["feed"]))
                                  for g in b["grad_tensors"]]
            response_cases[cid] = entry
    return {"graph_def": graph_def.SerializeToString(deterministic=True),
            "nodes": describe(graph_def), "cases": response_cases}


if __name__ == "__main__":
    _common.main(handle)
