"""Gradients through while loops stock TF wrote whose bodies read Variables: Keras RNNs.

tests/oracle/rnn_gradients.py writes SavedModels with ``tf.saved_model.save``
and Keras 3's ``model.export`` (SimpleRNN, GRU, LSTM, and a tf.Module whose
``tf.while_loop`` body reads a ``tf.Variable``), and differentiates them with
TF2's ``GradientTape``.  The loop carries each variable's handle unchanged
from step to step; the bridge loads each model and differentiates its
signature: the input's first and second order, and each variable's first
order and mixed second order (the gradient of ``<d y / d x, v>``, as a
gradient penalty needs it), all in one run per model.
"""
from __future__ import annotations

import numpy as np
import pytest

from support.oracle import run_oracle

NAMES = ["loop_reads_variable"] + [f"{kind}_{how}_float64" for kind in ("simple_rnn", "gru", "lstm")
                                   for how in ("export", "save")] + ["lstm_export_float32"]


@pytest.fixture(scope="module")
def answers() -> dict:
    return run_oracle("rnn_gradients")["models"]


def _handles(y) -> list:
    """The variable handles the signature's call reads (its resource inputs)."""
    return [t for t in y.op.inputs if t.dtype.name == "resource"]


def _bridge_values(want: dict) -> tuple:
    """(first, second, {variable index: (value, first, second)}) from the bridge."""
    import bridge
    from bridge import ops

    with bridge.load_saved_model(want["path"]) as model:
        sig = model.signatures[want["signature"]]
        x, y = sig.inputs[want["input"]], sig.outputs[want["output"]]
        handles = _handles(y)
        with model.graph.as_default():
            first = bridge.gradients(y, x, grad_ys=bridge.constant(want["gy"]))[0]
            z = ops.sum(ops.reshape(ops.mul(first, bridge.constant(want["v"])), [-1]), [0])
            second = bridge.gradients(z, x)[0]
            var_first = bridge.gradients(y, handles, grad_ys=bridge.constant(want["gy"]))
            var_second = bridge.gradients(z, handles)
            reads = [ops.read_variable_op(h, dtype=h.op.get_attr("dtype")) for h in handles]
        got = model.session.run([first, second, var_first, var_second, reads], {x: want["x"]})
    return got[0], got[1], list(zip(got[4], got[2], got[3], strict=True))


def _tolerance(want: dict) -> dict:
    if want["x"].dtype == np.float64:
        return dict(rtol=1e-9, atol=1e-12)
    return dict(rtol=2e-5, atol=2e-6)  # float32: TF's kernels and the bridge's may sum in other orders


@pytest.mark.parametrize("name", NAMES)
def test_matches_tensorflow(answers: dict, name: str) -> None:
    want = answers[name]
    first, second, variables = _bridge_values(want)
    tol = _tolerance(want)
    np.testing.assert_allclose(first, want["first"], **tol, err_msg=f"{name}: d/dx")
    np.testing.assert_allclose(second, want["second"], **tol, err_msg=f"{name}: second order in x")
    assert len(variables) == len(want["variables"]), [w["name"] for w in want["variables"]]
    for w in want["variables"]:
        # Each variable's values are drawn at random: its value finds its handle.
        (match,) = [v for v in variables if v[0].shape == w["value"].shape and np.array_equal(v[0], w["value"])]
        np.testing.assert_allclose(match[1], w["first"], **tol, err_msg=f"{name}: d/d{w['name']}")
        np.testing.assert_allclose(match[2], w["second"], **tol, err_msg=f"{name}: mixed second order, {w['name']}")


def test_the_models_hold_what_this_file_is_about(answers: dict) -> None:
    """Each signature calls a function holding a While whose body reads variables
    (ReadVariableOp), as TF wrote it; the Keras ones read their sequence from a TensorList."""
    for name in NAMES:
        types = set(answers[name]["op_types"])
        assert {"StatefulPartitionedCall", "While", "ReadVariableOp"} <= types, (name, sorted(types))
        if name != "loop_reads_variable":
            assert {"TensorListFromTensor", "TensorListGetItem"} <= types, (name, sorted(types))


def test_a_handle_as_a_bridge_loop_variable_is_refused_by_name() -> None:
    """A handle passed as a loop variable of bridge.while_loop cannot be kept for the gradient
    (no TensorList pops resources): the gradient says so when it is built, naming the op and
    the loop variable, rather than failing in a kernel at run time."""
    import bridge
    from bridge import ops

    graph = bridge.Graph()
    with graph.as_default():
        v = bridge.Variable(np.array([1.5, 2.0]), name="v")
        x = bridge.placeholder("float64", [2], name="x")

        def body(i, h, a):
            value = ops.read_variable_op(h, dtype="float64")
            value.set_shape([2])
            return i + 1, h, a * value
        out = bridge.while_loop(lambda i, h, a: i < 3, body, [bridge.constant(0), v.handle, x])
        with pytest.raises(TypeError) as err:
            bridge.gradients(out[2], [x])
    assert str(err.value) == (
        "operation 'while/While' (While): loop variable 1 ('v:0') is a resource handle; its gradient "
        "would need each step's handle, which a TensorList cannot keep: use the variable inside the body "
        "instead (the body then captures its handle)")
