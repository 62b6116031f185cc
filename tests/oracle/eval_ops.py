"""Oracle: evaluate single ops with stock TensorFlow (graph mode, raw ops by OpDef names).

Request: a list of cases (or ``{"cases": [...]}``), each::

    {"op": "ConcatV2",                      # OpDef name
     "inputs": [[a, b], np.int32(0)],       # OpDef input order; list inputs as lists
     "attrs": {"T": np.float32},           # optional; inferred attrs are checked
     "mode": "placeholder"}                 # optional; or "const"

Response: ``{"results": [...], "tf_version": str}`` with one entry per case:
the op's outputs as a flat list of numpy arrays (list outputs flattened in
order), or a string "ErrorType: message" when TF rejects the case at build
or run time.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

import _common


def eval_case(case: dict) -> list | str:
    """Outputs of one op as numpy arrays, or TF's error as a string."""
    graph = tf.Graph()
    try:
        built = _common.build_op(case, graph)
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            values = sess.run(list(built.op.outputs), feed_dict=built.feed)
    except Exception as exc:  # TF reports rejects as many error types
        return _common.error_string(exc)
    return [_common.to_numpy(v) for v in values]


def handle(request: Any, out_dir: Path) -> dict:
    cases = request["cases"] if isinstance(request, dict) else (request or [])
    return {"results": [eval_case(c) for c in cases]}


if __name__ == "__main__":
    _common.main(handle)
