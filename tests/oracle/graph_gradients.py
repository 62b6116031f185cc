"""Oracle: first- and second-order gradients of a bridge-built graph with stock TensorFlow.

The bridge builds a forward graph and sends its GraphDef; this script
imports it unchanged and differentiates it with ``tf.gradients`` (graph mode,
TF Python's gradient registry), so both sides differentiate the very same
nodes.  Request::

    {"cases": [{
        "graph_def": bytes,           # serialized GraphDef (forward part only)
        "xs": ["x0:0", ...],          # tensors to differentiate against
        "ys": ["y:0", ...],           # the objective's tensors
        "grad_ys": ["gy0:0", ...],    # tensors in the graph holding the upstream gradients
        "vs": ["v0:0", ...] | None,   # second order: d/dxs of sum_i sum(dy/dx_i * v_i)
        "fetch_dtype": {"x0:0": "float64"},  # casts applied before fetching (per x)
        "feed": {"x0_value:0": array, ...},
        "stop_gradients": ["h:0", ...],  # optional: tf.gradients' stop_gradients (both orders)
    }, ...]}

The second-order objective is built exactly as the bridge side builds it
(``tests/support/grad_cases/__init__.py``): per x with a gradient, ``Sum(Reshape(g *
v, [-1]), 0)``, then ``AddN`` over them.

With ``"structural": True`` (a graph without CPU kernels) nothing runs: the
answer is ``{"has_gradient": [bool per x], "types": [op types tf.gradients
added]}``.

Response: ``{"results": [...]}``, one per case: ``{"first": [...],
"second": [...] | None | "ErrorType: message"}`` with one numpy array or None
per x (IndexedSlices densified, values cast to the x's fetch dtype), or an
"ErrorType: message" string when the first order failed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common

# TF's TensorArray gradients work on imported graphs only with v1 control flow
# (under v2 they assert that no handle was captured); the functional If/While
# ops the bridge builds differentiate the same either way.
tf.compat.v1.disable_control_flow_v2()


def _dense(g):
    return None if g is None else tf.convert_to_tensor(g)


def _fetchable(grads, xs, fetch_dtype):
    out = []
    for g, x in zip(grads, xs, strict=True):
        if g is None:
            out.append(None)
        else:
            want = fetch_dtype.get(x.name)
            out.append(tf.cast(g, want) if want and g.dtype != tf.as_dtype(want) else g)
    return out


def eval_case(case: dict) -> dict | str:
    try:
        graph = _common.import_graph(case["graph_def"])
        with graph.as_default():
            get = graph.get_tensor_by_name
            xs = [get(n) for n in case["xs"]]
            ys = [get(n) for n in case["ys"]]
            gys = [get(n) for n in case["grad_ys"]]
            fetch_dtype = case.get("fetch_dtype", {})
            stops = [get(n) for n in case.get("stop_gradients", ())]
            before = {op.name for op in graph.get_operations()}
            # A graph without CPU kernels may hold device ops whose gradients want devices
            # (NCCL): there, gradients go on their forward ops' devices, as multi-device TF has it.
            first = [_dense(g) for g in tf.compat.v1.gradients(
                ys, xs, grad_ys=gys, colocate_gradients_with_ops=bool(case.get("structural")),
                stop_gradients=stops)]
            if case.get("structural"):  # no CPU kernel: what the gradient is made of
                return {"has_gradient": [g is not None for g in first],
                        "types": sorted({op.type for op in graph.get_operations() if op.name not in before})}
            second = None
            second_error = None
            if case.get("vs"):
                vs = [get(n) for n in case["vs"]]
                parts = [tf.reduce_sum(tf.reshape(g * v, [-1]), 0)
                         for g, v in zip(first, vs, strict=True) if g is not None]
                if parts:
                    try:
                        z = tf.add_n(parts) if len(parts) > 1 else parts[0]
                        # Ones as the seed, as bridge.gradients uses (TF asks for it when z is complex).
                        second = [_dense(g) for g in tf.gradients(z, xs, grad_ys=tf.ones_like(z),
                                                                  stop_gradients=stops)]
                    except Exception as exc:  # TF has no second order here: say so
                        second_error = _common.error_string(exc)
            first_f = _fetchable(first, xs, fetch_dtype)
            second_f = _fetchable(second, xs, fetch_dtype) if second is not None else None
        feed = {graph.get_tensor_by_name(k): v for k, v in case["feed"].items()}
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            want = [g for g in first_f if g is not None]
            got_first = sess.run(want, feed_dict=feed)
            got_second = None
            if second_f is not None:
                try:
                    got_second = sess.run([g for g in second_f if g is not None], feed_dict=feed)
                except Exception as exc:
                    second_error = _common.error_string(exc)
                    second_f = None
    except Exception as exc:
        return _common.error_string(exc)

    def regroup(grads, values):
        it = iter(values)
        return [None if g is None else _common.to_numpy(next(it)) for g in grads]

    return {"first": regroup(first_f, got_first),
            "second": second_error if second_error else
            (None if second_f is None else regroup(second_f, got_second))}


def handle(request: Any, out_dir: Path) -> dict:
    cases = request["cases"] if isinstance(request, dict) else (request or [])
    return {"results": [eval_case(c) for c in cases]}


if __name__ == "__main__":
    _common.main(handle)
