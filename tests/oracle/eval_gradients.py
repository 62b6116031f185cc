"""Oracle: gradients of single ops with stock TensorFlow (graph mode, tf.gradients).

Request: a list of cases (or ``{"cases": [...]}``), each an eval_ops case
plus::

    "wrt": [0, 1],          # indices into "inputs" to differentiate against
    "grad_ys": [...]        # optional: one entry per op output (flat), an
                            # array (the upstream gradient) or None (output
                            # left out of the objective)

Without grad_ys the objective is the sum of every element of every
floating/complex output (tf.gradients with ones as grad_ys).

Response: ``{"results": [...], "outputs": [...], "tf_version": str}``, one
entry per case.  results[i] is a list aligned with "wrt": a numpy array, a
list of arrays for a list input (e.g. AddN's inputs), or None where TF says
the input does not reach the objective; or an "ErrorType: message" string.
Sparse (IndexedSlices) gradients are densified.  outputs[i] is the op's
forward outputs, as eval_ops returns them (None when the case failed).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common


def _is_differentiable(t: tf.Tensor) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


def eval_case(case: dict) -> tuple[list | str, list | None]:
    """(gradients aligned with case["wrt"], forward outputs), or (error, None)."""
    graph = tf.Graph()
    try:
        built = _common.build_op(case, graph)
        outputs = list(built.op.outputs)
        with graph.as_default():
            grad_ys = case.get("grad_ys")
            if grad_ys is None:
                ys = [t for t in outputs if _is_differentiable(t)]
                gys = None
            else:
                if len(grad_ys) != len(outputs):
                    raise ValueError(f"grad_ys has {len(grad_ys)} entries, op has "
                                     f"{len(outputs)} outputs")
                pairs = [(t, g) for t, g in zip(outputs, grad_ys, strict=True) if g is not None]
                ys = [t for t, _ in pairs]
                gys = [tf.constant(np.asarray(g), dtype=t.dtype) for t, g in pairs]
            if not ys:
                raise ValueError(f"{case['op']} has no floating output to differentiate")

            wrt = list(case["wrt"])
            # Flatten list inputs for tf.gradients, then regroup per wrt entry.
            xs, spans = [], []
            for i in wrt:
                x = built.inputs[i]
                group = list(x) if isinstance(x, list) else [x]
                spans.append((len(xs), len(group), isinstance(x, list)))
                xs.extend(group)
            grads = tf.gradients(ys, xs, grad_ys=gys)
            # IndexedSlices (e.g. Gather's params) -> dense, as a C API client sees it.
            grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]

        fetch = [g for g in grads if g is not None]
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            fwd, got = sess.run((outputs, fetch), feed_dict=built.feed)
    except Exception as exc:
        return _common.error_string(exc), None

    values = iter(got)
    flat = [None if g is None else _common.to_numpy(next(values)) for g in grads]
    result = []
    for start, count, is_list in spans:
        chunk = flat[start:start + count]
        result.append(chunk if is_list else chunk[0])
    return result, [_common.to_numpy(v) for v in fwd]


def handle(request: Any, out_dir: Path) -> dict:
    cases = request["cases"] if isinstance(request, dict) else (request or [])
    pairs = [eval_case(c) for c in cases]
    return {"results": [r for r, _ in pairs], "outputs": [o for _, o in pairs]}


if __name__ == "__main__":
    _common.main(handle)
