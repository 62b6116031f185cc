"""Oracle: gradients with respect to resource variables of a bridge-built graph, with stock TensorFlow.

The bridge builds a graph holding variables (``bridge.Variable``: a
VarHandleOp, its initializer, reads) and sends its GraphDef; this script
imports it unchanged, runs the initializer ops, and differentiates with
``tf.gradients`` against the variables' handles (graph mode, TF Python's
gradient registry).  Request::

    {"cases": [{
        "graph_def": bytes,          # serialized GraphDef
        "init": ["init", ...],       # ops to run first (the variables' initializers)
        "xs": ["w:0", ...],          # handles (or other tensors) to differentiate against
        "ys": ["y:0", ...],
        "feed": {"x:0": array, ...},
    }, ...]}

Response: ``{"results": [...]}``, one per case: ``{"grads": [array | None],
"kinds": ["IndexedSlices" | "Tensor" | None]}`` (IndexedSlices densified by
``tf.convert_to_tensor``; ``kinds`` says what ``tf.gradients`` returned), or
an "ErrorType: message" string.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

import _common


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
            inits = [graph.get_operation_by_name(n) for n in case.get("init", [])]
        feed = {graph.get_tensor_by_name(k): v for k, v in case.get("feed", {}).items()}
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            if inits:
                sess.run(inits, feed_dict=feed)
            got = iter(sess.run([g for g in dense if g is not None], feed_dict=feed))
            values = [None if g is None else _common.to_numpy(next(got)) for g in dense]
    except Exception as exc:
        return _common.error_string(exc)
    return {"grads": values, "kinds": kinds}


def handle(request: Any, out_dir: Path) -> dict:
    cases = request["cases"] if isinstance(request, dict) else (request or [])
    return {"results": [eval_case(c) for c in cases]}


if __name__ == "__main__":
    _common.main(handle)
