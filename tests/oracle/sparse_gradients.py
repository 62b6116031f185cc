"""Oracle: IndexedSlices gradients (gathers, embedding lookups) with stock TensorFlow.

tests/grad/test_sparse_gradients.py asks two things:

- ``cases``: the bridge builds a graph and sends its GraphDef; this script
  imports it unchanged, runs the initializer ops and differentiates with
  ``tf.gradients`` (graph mode, TF Python's registry) against ``xs``
  (variable handles or other tensors).  Each gradient comes back with its
  kind and, for IndexedSlices, its three parts as TF computes them.
- ``graphs``: TF1 constructs built by TF itself (``embedding_lookup`` of a
  resource variable, ``tf.gather`` of one and of a tensor), described node by
  node, for the bridge's builders to match.

Request::

    {"cases": [{"graph_def": bytes, "init": [op names], "xs": [tensor names],
                "ys": [tensor names], "feed": {name: array}}, ...],
     "graphs": [{"id": str, "kind": "embedding_lookup" | "gather_variable" | "gather_tensor",
                 "table": array, "ids": int array}, ...],
     "bridge_graphs": {id: GraphDef bytes}}      # the bridge's, described the same way

Response::

    {"results": [{"kinds": ["IndexedSlices" | "Tensor" | None],
                  "dense": [array | None],                  # tf.convert_to_tensor
                  "parts": [(values, indices, dense_shape) | None]} | "Error: ...", ...],
     "graphs": {id: [node, ...] (import_check.describe) | "Error: ..."},
     "bridge_graphs": {id: [node, ...] | "Error: ..."}}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common
from import_check import describe, import_graph_def

v1 = tf.compat.v1


def eval_case(case: dict) -> dict | str:
    try:
        graph = _common.import_graph(case["graph_def"])
        with graph.as_default():
            get = graph.get_tensor_by_name
            xs = [get(n) for n in case["xs"]]
            ys = [get(n) for n in case["ys"]]
            grads = tf.gradients(ys, xs)
            kinds = [None if g is None else "IndexedSlices" if isinstance(g, tf.IndexedSlices) else "Tensor"
                     for g in grads]
            dense = [None if g is None else tf.convert_to_tensor(g) for g in grads]
            parts = [(g.values, g.indices, g.dense_shape) if isinstance(g, tf.IndexedSlices) else None
                     for g in grads]
            inits = [graph.get_operation_by_name(n) for n in case.get("init", [])]
        feed = {graph.get_tensor_by_name(k): v for k, v in case.get("feed", {}).items()}
        with v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            if inits:
                sess.run(inits, feed_dict=feed)
            got_dense, got_parts = sess.run(([g for g in dense if g is not None],
                                             [p for p in parts if p is not None]), feed_dict=feed)
        it_dense, it_parts = iter(got_dense), iter(got_parts)
        return {"kinds": kinds,
                "dense": [None if g is None else _common.to_numpy(next(it_dense)) for g in dense],
                "parts": [None if p is None else tuple(_common.to_numpy(a) for a in next(it_parts))
                          for p in parts]}
    except Exception as exc:
        return _common.error_string(exc)


def build_graph(spec: dict) -> list | str:
    try:
        graph = tf.Graph()
        with graph.as_default():
            ids = tf.constant(np.asarray(spec["ids"]), name="ids")
            if spec["kind"] == "gather_tensor":
                table = v1.placeholder(tf.as_dtype(np.asarray(spec["table"]).dtype),
                                       np.shape(spec["table"]), name="table")
                out = v1.gather(table, ids)
            else:
                table = v1.Variable(np.asarray(spec["table"]), name="table", use_resource=True)
                if spec["kind"] == "embedding_lookup":
                    out = v1.nn.embedding_lookup(table, ids)
                else:
                    out = v1.gather(table, ids)
            tf.identity(out, name="result")
        return describe(graph.as_graph_def())
    except Exception as exc:
        return _common.error_string(exc)


def handle(request: Any, out_dir: Path) -> dict:
    request = request or {}
    return {"results": [eval_case(c) for c in request.get("cases", [])],
            "graphs": {g["id"]: build_graph(g) for g in request.get("graphs", [])},
            "bridge_graphs": {k: import_graph_def(bytes(v), "") for k, v in request.get("bridge_graphs", {}).items()}}


if __name__ == "__main__":
    _common.main(handle)
