"""Oracle: stock TensorFlow's tf.compat.v1.train optimizers, schedules and clipping.

tests/train/test_optimizers.py builds the same model with the bridge's
``bridge.train`` and compares.  The model is a small MLP on resource
variables, built from raw ops (MatMul, AddV2, Tanh, Sub, Square, Mean) in a
tf.compat.v1 graph, trained for ``steps`` steps.  Request (plain data)::

    {"data": {"x": array, "y": array, "w1": ..., "b1": ..., "w2": ..., "b2": ...},
     "steps": 100,
     "cases": [{"name": str,
                "optimizer": "Adam" | "GradientDescent" | "Momentum" | "RMSProp" | "Adagrad",
                "kwargs": {...},                 # the constructor's keyword arguments
                "learning_rate": float | {"exponential_decay": {...}} | {"piecewise_constant": {...}},
                "global_step": bool,             # get_or_create_global_step, passed to minimize
                "clip": None | {"global_norm": c} | {"norm": c},   # compute -> clip -> apply
                "scope": None | str,             # name scope around the optimizer
                "dtype": "float64" | "float32",
                "embedding": None | {            # the embedding model (below), else the MLP
                    "table": array, "ids": int array, "ids2": int array | None,
                    "dense_read": bool}}, ...],
     "clip_values": {"tensors": [array | None, ...], "clip_norm": float, "axes_case": (array, axes, c)},
     "errors": [name, ...]}

The embedding model puts a table variable ``emb`` first and feeds the MLP
``x + embedding_lookup(emb, ids)`` (``* tf.gather(emb, ids2)``, a second
sparse read, when given; ``+ 0.01 * mean(emb ** 2)`` on the loss, a dense
read, with ``dense_read``): TF's gradient for ``emb`` is then IndexedSlices
(concatenated over the two reads), or dense when mixed with the dense read,
and its optimizers take their sparse or dense update paths.

Response: ``{"results": {name: {...}}, "clip": {...}, "errors": {name: "Type: message"}}``:
per case the loss before each step (and the learning rate, for schedules),
the global step at the end, the names of tf.compat.v1.global_variables() in
creation order, the slot names, the optimizer's variables, the train op's
name and type, and every variable's final value by name; for the embedding
model also ``grad_kinds``, what ``compute_gradients`` returns per variable
("IndexedSlices" or "Tensor").
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common

raw = tf.raw_ops
v1 = tf.compat.v1


def make_optimizer(case: dict, lr: Any):
    kwargs = dict(case.get("kwargs", {}))
    cls = getattr(v1.train, case["optimizer"] + "Optimizer")
    return cls(lr, **kwargs)


def learning_rate(spec: Any, global_step):
    if not isinstance(spec, dict):
        return spec
    (kind, args), = spec.items()
    if kind == "exponential_decay":
        return v1.train.exponential_decay(args["learning_rate"], global_step, args["decay_steps"],
                                          args["decay_rate"], staircase=args.get("staircase", False))
    if kind == "piecewise_constant":
        return v1.train.piecewise_constant(global_step, args["boundaries"], args["values"])
    raise ValueError(f"unknown schedule {kind!r}")


def build_model(data: dict, dtype: str):
    cast = {k: np.asarray(v, dtype) for k, v in data.items()}
    variables = [v1.Variable(cast[n], name=n, use_resource=True) for n in ("w1", "b1", "w2", "b2")]
    w1, b1, w2, b2 = variables
    x, y = tf.constant(cast["x"]), tf.constant(cast["y"])
    h = raw.Tanh(x=raw.AddV2(x=raw.MatMul(a=x, b=w1.value()), y=b1.value()))
    pred = raw.AddV2(x=raw.MatMul(a=h, b=w2.value()), y=b2.value())
    loss = raw.Mean(input=raw.Square(x=raw.Sub(x=pred, y=y)), axis=[0, 1])
    return variables, loss


def build_embedding_model(data: dict, dtype: str, spec: dict):
    cast = {k: np.asarray(v, dtype) for k, v in data.items()}
    emb = v1.Variable(np.asarray(spec["table"], dtype), name="emb", use_resource=True)
    variables = [v1.Variable(cast[n], name=n, use_resource=True) for n in ("w1", "b1", "w2", "b2")]
    w1, b1, w2, b2 = variables
    x, y = tf.constant(cast["x"]), tf.constant(cast["y"])
    feat = v1.nn.embedding_lookup(emb, tf.constant(np.asarray(spec["ids"])))
    if spec.get("ids2") is not None:
        # A product, not a sum: Grappler would rewrite x + (a + b) into an AddN
        # (another rounding) in TF's session, not in the bridge's.
        feat = raw.Mul(x=feat, y=v1.gather(emb, tf.constant(np.asarray(spec["ids2"]))))
    h = raw.Tanh(x=raw.AddV2(x=raw.MatMul(a=raw.AddV2(x=x, y=feat), b=w1.value()), y=b1.value()))
    pred = raw.AddV2(x=raw.MatMul(a=h, b=w2.value()), y=b2.value())
    loss = raw.Mean(input=raw.Square(x=raw.Sub(x=pred, y=y)), axis=[0, 1])
    if spec.get("dense_read"):
        penalty = raw.Mean(input=raw.Square(x=emb.value()), axis=[0, 1])
        loss = raw.AddV2(x=loss, y=raw.Mul(x=tf.constant(np.asarray(0.01, dtype)), y=penalty))
    return [emb] + variables, loss


def run_case(case: dict, data: dict, steps: int) -> dict:
    graph = tf.Graph()
    with graph.as_default():
        if case.get("embedding") is not None:
            variables, loss = build_embedding_model(data, case.get("dtype", "float64"), case["embedding"])
        else:
            variables, loss = build_model(data, case.get("dtype", "float64"))
        step = v1.train.get_or_create_global_step() if case.get("global_step") else None
        lr = learning_rate(case["learning_rate"], step)
        with tf.name_scope(case["scope"]) if case.get("scope") else _null():
            opt = make_optimizer(case, lr)
            clip = case.get("clip")
            if clip is None:
                train = opt.minimize(loss, global_step=step)
            else:
                grads_and_vars = opt.compute_gradients(loss)
                grads = [g for g, _ in grads_and_vars]
                if "global_norm" in clip:
                    grads, _ = tf.clip_by_global_norm(grads, clip["global_norm"])
                else:
                    grads = [tf.clip_by_norm(g, clip["norm"]) for g in grads]
                train = opt.apply_gradients(zip(grads, [v for _, v in grads_and_vars], strict=True), global_step=step)
        all_vars = v1.global_variables()
        finals = {v.op.name: v.read_value() for v in all_vars}
        init = v1.global_variables_initializer()
        kinds = None
        if case.get("embedding") is not None:  # after the train op: its names are as without
            kinds = ["IndexedSlices" if isinstance(g, tf.IndexedSlices) else "Tensor"
                     for g, _ in make_optimizer(case, 0.1).compute_gradients(loss)]
    fetch_lr = isinstance(lr, tf.Tensor)
    losses, rates = [], []
    with v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        sess.run(init)
        for _ in range(steps):
            out = sess.run([loss, lr if fetch_lr else loss, train])
            losses.append(out[0])
            rates.append(out[1])
        final = sess.run(finals)
        global_step = int(sess.run(step)) if step is not None else None
    return {"losses": np.array(losses), "rates": np.array(rates) if fetch_lr else None,
            "global_step": global_step, "variables": [v.op.name for v in all_vars],
            "slot_names": opt.get_slot_names(),
            "optimizer_variables": [v.op.name for v in _in(graph, opt.variables)],
            "train_op": (train.name, train.type), "final": final, "grad_kinds": kinds}


def _in(graph, fn):
    with graph.as_default():
        return fn()


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def clip_values(spec: dict) -> dict:
    """TF's clip_by_norm / global_norm / clip_by_global_norm of constant tensors."""
    graph = tf.Graph()
    with graph.as_default():
        ts = [None if t is None else tf.constant(t) for t in spec["tensors"]]
        c = spec["clip_norm"]
        by_norm = [tf.clip_by_norm(t, c) for t in ts if t is not None]
        gnorm = tf.linalg.global_norm(ts)
        clipped, norm = tf.clip_by_global_norm(ts, c)
        big_clipped, _ = tf.clip_by_global_norm(ts, 1e6)  # clip_norm above the norm: unchanged values
        t, axes, ac = spec["axes_case"]
        by_axes = tf.clip_by_norm(tf.constant(t), ac, axes=axes)
        zero = tf.clip_by_norm(tf.zeros([3], t.dtype), 1.0)
        with v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            out = sess.run({"by_norm": by_norm, "global_norm": gnorm, "norm": norm,
                            "clipped": [x for x in clipped if x is not None],
                            "big": [x for x in big_clipped if x is not None],
                            "by_axes": by_axes, "zero": zero})
    out["none_positions"] = [i for i, x in enumerate(clipped) if x is None]
    return out


def error_case(name: str, data: dict) -> str:
    graph = tf.Graph()
    try:
        with graph.as_default():
            variables, loss = build_model(data, "float64")
            w1 = variables[0]
            if name == "no_variables":
                v1.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[])
            elif name == "no_gradients":
                unused = v1.Variable(np.ones(3), name="unused", use_resource=True)
                v1.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[unused])
            elif name == "apply_no_gradients":
                v1.train.AdamOptimizer().apply_gradients([(None, w1)])
            elif name == "apply_empty":
                v1.train.AdamOptimizer().apply_gradients([])
            elif name == "int_loss":
                v1.train.AdamOptimizer().minimize(tf.constant(3, tf.int32))
            elif name == "gate_gradients":
                v1.train.AdamOptimizer().compute_gradients(loss, gate_gradients=7)
            elif name == "adagrad_initial_accumulator":
                v1.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
            elif name == "piecewise_boundary_dtype":
                v1.train.piecewise_constant(v1.train.get_or_create_global_step(), [1.5], [0.1, 0.2])
            elif name == "piecewise_lengths":
                v1.train.piecewise_constant(v1.train.get_or_create_global_step(), [10, 20], [0.1, 0.2])
            elif name == "piecewise_value_dtypes":
                v1.train.piecewise_constant(v1.train.get_or_create_global_step(), [10], [0.1, 2])
            elif name == "global_step_twice":
                v1.train.create_global_step()
                v1.train.create_global_step()
            else:
                raise KeyError(f"unknown error case {name!r}")
    except Exception as exc:  # the point: TF's exception and message
        return _common.error_string(exc)
    return "no error"


def handle(request: Any, out_dir: Path) -> dict:
    if request is None:  # run by hand: a tiny demo
        rng = np.random.default_rng(0)
        request = {"data": {"x": rng.standard_normal((4, 8)), "y": rng.standard_normal((4, 1)),
                            "w1": rng.standard_normal((8, 16)), "b1": np.zeros(16),
                            "w2": rng.standard_normal((16, 1)), "b2": np.zeros(1)},
                   "steps": 3, "cases": [{"name": "adam", "optimizer": "Adam",
                                          "learning_rate": 0.01}]}
    data, steps = request["data"], request["steps"]
    results = {}
    for case in request.get("cases", []):
        try:
            results[case["name"]] = run_case(case, data, steps)
        except Exception as exc:
            results[case["name"]] = _common.error_string(exc)
    response = {"results": results,
                "errors": {name: error_case(name, data) for name in request.get("errors", [])}}
    if request.get("clip_values") is not None:
        response["clip"] = clip_values(request["clip_values"])
    return response


if __name__ == "__main__":
    _common.main(handle)
