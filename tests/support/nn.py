"""Shared by tests/nn/test_nn_ops.py, tests/nn/test_losses.py, tests/nn/test_layers.py and tests/nn/test_initializers.py:
run a bridge function the way tests/oracle/nn_layers.py runs TF's, and compare.

Both sides feed the same arrays through placeholders, take the objective
``sum(sin(y))`` over the float outputs and differentiate it
(``bridge.gradients`` here, ``tf.gradients`` there).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import bridge
from bridge import ops
from support.oracle import run_oracle


def objective(outputs: list) -> bridge.Output:
    """sum(sin(y)) over the float outputs (the oracle's _objective)."""
    terms = [ops.sum(ops.sin(y), np.arange(len(y.shape), dtype=np.int32)) for y in outputs if y.dtype.is_floating]
    total = terms[0]
    for t in terms[1:]:
        total = ops.add_v2(total, t if t.dtype == total.dtype else ops.cast(t, DstT=total.dtype))
    return total


def flat(result: Any) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def placeholder(arr: np.ndarray, name: str, none_dims=()) -> bridge.Output:
    shape = [None if i in none_dims else d for i, d in enumerate(arr.shape)]
    return bridge.placeholder(bridge.as_dtype(arr.dtype), shape, name=name)


def oracle_answers(cases: dict) -> dict:
    """Stock TF's answers (tests/oracle/nn_layers.py) for function cases, by case name."""
    got = run_oracle("nn_layers", {"functions": list(cases.values())})["functions"]
    return dict(zip(cases, got, strict=True))


def run_function(fn: Callable, case: dict) -> dict:
    """Build ``fn(**placeholders, **kwargs)`` in a new graph; its values and gradients."""
    g = bridge.Graph()
    with g.as_default():
        feed, tensors = {}, {}
        for arg, arr in case.get("tensors", {}).items():
            arr = np.asarray(arr)
            ph = placeholder(arr, arg, case.get("none_dims", {}).get(arg, ()))
            feed[ph], tensors[arg] = arr, ph
        outputs = flat(fn(**tensors, **case.get("kwargs", {})))
        wrt = case.get("wrt", [])
        grads = bridge.gradients(objective(outputs), [tensors[a] for a in wrt]) if wrt else []
        # A Session cannot fetch what it feeds (nn.dropout with rate 0 returns its input).
        fetches = [ops.identity(o) if o in feed else o for o in outputs]
    with bridge.Session(g) as s:
        values = s.run(fetches, feed)
        wanted = [x for x in grads if x is not None]
        gvals = s.run(wanted, feed) if wanted else []
    it = iter(gvals)
    return {"values": [np.asarray(v) for v in values], "outputs": outputs,
            "grads": {a: (None if x is None else np.asarray(next(it))) for a, x in zip(wrt, grads, strict=True)}}


def assert_close(got: Any, want: Any, what: str, rtol: float | None = None) -> None:
    """Equal to ``rtol`` relative to the largest |want| (1e-12 for float64, 1e-6 below)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != TF's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != TF's {want.dtype}"
    if rtol is None:
        rtol = 1e-12 if want.dtype == np.float64 else 1e-6
    if want.dtype.kind in "fc":
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-30), err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def compare(got: dict, want: Any, what: str, rtol: float | None = None) -> None:
    """Values and gradients of run_function (or a layer run) against the oracle's answer."""
    assert not isinstance(want, str), f"{what}: TF failed: {want}"
    assert len(got["values"]) == len(want["values"]), what
    for i, (a, b) in enumerate(zip(got["values"], want["values"], strict=True)):
        assert_close(a, b, f"{what}: output {i}", rtol)
    assert set(got["grads"]) == set(want["grads"]), what
    for k, b in want["grads"].items():
        a = got["grads"][k]
        assert (a is None) == (b is None), f"{what}: gradient for {k}: bridge {a is None and 'None'} TF {b is None and 'None'}"
        if b is not None:
            assert_close(a, b, f"{what}: gradient for {k}", rtol)


ACTIVATIONS = {None: None, "relu": bridge.nn.relu, "tanh": bridge.nn.tanh, "sigmoid": bridge.nn.sigmoid,
               "elu": bridge.nn.elu}


def build_layer(case: dict, x: bridge.Output, training: Any) -> bridge.Output:
    """bridge.layers.<layer>(x, ...) as the oracle's _build_layer calls TF's, with
    constant initializers holding the case's weights."""
    from bridge import initializers, layers
    kind, kw, weights = case["layer"], dict(case.get("kwargs", {})), case.get("weights", {})
    inits = {f"{k}_initializer": initializers.constant(v) for k, v in weights.items()}
    act = ACTIVATIONS[case.get("activation")]
    if kind in ("dense", "conv2d"):
        return getattr(layers, kind)(x, activation=act, **inits, **kw)
    if kind in ("dropout", "batch_normalization"):
        return getattr(layers, kind)(x, training=training, **inits, **kw)
    return getattr(layers, kind)(x, **kw)


def run_layer(case: dict) -> dict:
    """The oracle's _run_layer with bridge.layers: outputs, gradients of sum(sin(y))
    against x and the trainable variables, variable names, and the variables'
    values after running the update ops once."""
    g = bridge.Graph()
    with g.as_default():
        x_arr = np.asarray(case["x"])
        x = placeholder(x_arr, "x")
        feed = {x: x_arr}
        training = case.get("training")
        if isinstance(training, str):
            ph = bridge.placeholder(bridge.bool, [], name="training")
            feed[ph] = training == "feed_true"
            training = ph
        elif training is None:
            training = False
        y = build_layer(case, x, training)
        variables = bridge.global_variables()
        trainable = bridge.trainable_variables()
        grads = bridge.gradients(objective([y]), [x] + trainable)
        updates = bridge.layers.update_ops()
        reads = {v.op.name.rsplit("/", 1)[-1]: v.read_value() for v in variables}
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        values = s.run([y], feed)
        gvals = s.run([v for v in grads if v is not None], feed)
        if updates:
            s.run(updates, feed)
        after = s.run(reads) if reads else {}
    it = iter(gvals)
    named = dict(zip(["x"] + [v.op.name.rsplit("/", 1)[-1] for v in trainable], grads, strict=True))
    return {"values": [np.asarray(v) for v in values],
            "grads": {k: (None if v is None else np.asarray(next(it))) for k, v in named.items()},
            "variables": [v.op.name for v in variables], "trainable": [v.op.name for v in trainable],
            "update_ops": len(updates), "after_update": after if updates else {}}
