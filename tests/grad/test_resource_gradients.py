"""Gradients with respect to resource variables (issue #16), against stock TensorFlow.

A ``bridge.Variable`` in ``xs`` stands for its handle: every read of it
(``value()``, ``read_value()``, ``ResourceGather``, ``ResourceGatherNd``)
contributes.  Where TF's ``tf.gradients`` returns ``IndexedSlices`` (gathers
only), so does the bridge, and their densified values agree (the oracle,
``tests/oracle/variable_gradients.py``, densifies with ``tf.convert_to_tensor``
and reports which kind TF returned); elsewhere the gradient is a dense
tensor of the variable's shape.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import ops
from support.oracle import run_oracle

RNG = np.random.default_rng(20261125)
W0 = RNG.uniform(-1.0, 1.0, (4, 3))
X0 = RNG.uniform(-1.0, 1.0, (2, 4))


def _matmul(g, w):
    x = bridge.placeholder(bridge.float64, [2, 4], name="x")
    return {x: X0}, [ops.sum(ops.reshape(ops.tanh(ops.mat_mul(x, w.value())), [-1]), 0)]


def _two_reads(g, w):
    # value() and a later read_value(): both reads count.
    return {}, [ops.sum(ops.reshape(ops.mul(ops.sin(w.value()), w.read_value()), [-1]), 0)]


def _gather(g, w):
    rows = ops.resource_gather(w.handle, np.array([2, 0, 2], np.int32), dtype=bridge.float64)
    return {}, [ops.sum(ops.reshape(ops.square(rows), [-1]), 0)]


def _gather_and_value(g, w):
    rows = ops.resource_gather(w.handle, np.array([[1, 3], [3, 3]], np.int64), dtype=bridge.float64)
    return {}, [ops.sum(ops.reshape(rows, [-1]), 0), ops.sum(ops.reshape(ops.exp(w.value()), [-1]), 0)]


def _gather_nd_rows(g, w):
    picked = ops.resource_gather_nd(w.handle, np.array([[1], [1], [0]], np.int32), dtype=bridge.float64)
    return {}, [ops.sum(ops.reshape(ops.cos(picked), [-1]), 0)]


def _gather_nd_elements(g, w):
    picked = ops.resource_gather_nd(w.handle, np.array([[3, 2], [0, 1], [3, 2]], np.int32), dtype=bridge.float64)
    return {}, [ops.sum(ops.square(picked), 0)]


BUILDS = {"matmul": _matmul, "two_reads": _two_reads, "gather": _gather,
          "gather_and_value": _gather_and_value, "gather_nd_rows": _gather_nd_rows,
          "gather_nd_elements": _gather_nd_elements}


def _build(name):
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(W0, name="w")
        feed, ys = BUILDS[name](g, w)
        init = bridge.global_variables_initializer()
    return g, w, feed, ys, init


@pytest.fixture(scope="module")
def oracle_answers():
    cases = []
    for name in BUILDS:
        g, w, feed, ys, init = _build(name)
        cases.append({"graph_def": g.as_graph_def(), "init": [init.name], "xs": [w.handle.name],
                      "ys": [y.name for y in ys], "feed": {k.name: v for k, v in feed.items()}})
    results = run_oracle("variable_gradients", {"cases": cases})["results"]
    return dict(zip(BUILDS, results, strict=True))


@pytest.mark.parametrize("name", list(BUILDS))
def test_variable_gradient_matches_tensorflow(name, oracle_answers):
    want = oracle_answers[name]
    assert not isinstance(want, str), want
    g, w, feed, ys, init = _build(name)
    with g.as_default():
        dw, = bridge.gradients(ys, [w])
        dh, = bridge.gradients(ys, [w.handle])  # the handle itself: the same
    assert dw is not None and dw.dtype == bridge.float64
    assert dw.shape == bridge.Shape([4, 3])
    assert type(dw).__name__ == type(dh).__name__ == {"IndexedSlices": "IndexedSlices",
                                                      "Tensor": "Output"}[want["kinds"][0]]
    with bridge.Session(g) as s:
        s.run(init)
        got_w, got_h = s.run([dw, dh], feed)
    if isinstance(dw, bridge.IndexedSlices):
        assert isinstance(got_w, bridge.IndexedSlicesValue)
        np.testing.assert_array_equal(got_w.dense_shape, [4, 3])
        got_w, got_h = got_w.to_dense(), got_h.to_dense()
    np.testing.assert_allclose(got_w, want["grads"][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_h, want["grads"][0], rtol=1e-12, atol=1e-12)


def test_tensorflow_returns_indexed_slices_for_gathers(oracle_answers):
    # TF's kinds per read, which the bridge's follow (test above): a gather
    # mixed with a dense read is dense.
    assert oracle_answers["gather"]["kinds"] == ["IndexedSlices"]
    assert oracle_answers["gather_and_value"]["kinds"] == ["Tensor"]
    assert oracle_answers["gather_nd_rows"]["kinds"] == ["IndexedSlices"]
    assert oracle_answers["gather_nd_elements"]["kinds"] == ["Tensor"]
    assert oracle_answers["matmul"]["kinds"] == ["Tensor"]


def test_variable_gradient_second_order():
    # d/dw of sum(dy/dw * v) for y = sum(w * w * w): 6 w v.
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(W0, name="w")
        rows = ops.resource_gather(w.handle, np.arange(4, dtype=np.int32), dtype=bridge.float64)
        y = ops.sum(ops.reshape(ops.mul(ops.mul(rows, w.value()), w.read_value()), [-1]), 0)
        dw, = bridge.gradients(y, [w])
        v = RNG.uniform(-1.0, 1.0, (4, 3))
        d2, = bridge.gradients(ops.sum(ops.reshape(ops.mul(dw, v), [-1]), 0), [w])
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        got1, got2 = s.run([dw, d2])
    np.testing.assert_allclose(got1, 3 * W0 ** 2, rtol=1e-12)
    np.testing.assert_allclose(got2, 6 * W0 * v, rtol=1e-12)


def test_unconnected_variable_gets_zeros_of_its_shape():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(W0, name="w")
        x = bridge.placeholder(bridge.float64, [3], name="x")
        y = ops.sum(ops.square(x), 0)
        none, = bridge.gradients(y, [w])
        zeros, = bridge.gradients(y, [w], unconnected_gradients="zero")
        init = bridge.global_variables_initializer()
    assert none is None
    with bridge.Session(g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(zeros), np.zeros((4, 3)))


def test_jacobian_and_hessian_of_a_variable():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([0.5, -1.5, 2.0]), name="w")
        y = ops.square(ops.resource_gather(w.handle, np.array([2, 0], np.int32), dtype=bridge.float64))
        jac = bridge.jacobian(y, w)
        hess = bridge.hessian(ops.sum(ops.mul(ops.square(w.value()), w.read_value()), 0), w)
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        got_j, got_h = s.run([jac, hess])
    np.testing.assert_allclose(got_j, [[0.0, 0.0, 4.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(got_h, np.diag(6 * np.array([0.5, -1.5, 2.0])))


def test_a_read_without_gradient_is_an_error_naming_the_op():
    # Never a silent None: TF's ResourceGather gradient ignores batch_dims, the bridge refuses it.
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(W0, name="w")
        rows = ops.resource_gather(w.handle, np.array([[0], [2], [1], [0]], np.int32), dtype=bridge.float64,
                                   batch_dims=1, name="batched_gather")
        y = ops.sum(ops.reshape(rows, [-1]), 0)
        with pytest.raises(LookupError, match="batched_gather"):
            bridge.gradients(y, [w])
