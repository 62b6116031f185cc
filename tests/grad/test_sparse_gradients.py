"""IndexedSlices gradients (issue #28 item 1) against stock TensorFlow.

Gathers' gradients are ``bridge.IndexedSlices`` where TF's ``tf.gradients``
returns ``tf.IndexedSlices``, dense where TF's are dense.  Each graph is
built by the bridge and differentiated by both (the oracle,
tests/oracle/sparse_gradients.py, imports the same GraphDef): the kinds
agree, the densified values agree, and where both are IndexedSlices so do
their values, indices and dense_shape, part for part.  The bridge's
``embedding_lookup`` and ``gather`` build TF's graphs node for node.
Training with them is in tests/train/test_optimizers.py (``emb_*`` cases).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import bridge
from bridge import ops

RNG = np.random.default_rng(20261128)
T0 = RNG.uniform(-1.0, 1.0, (6, 3))
IDS = np.array([4, 0, 4, 2], np.int32)
IDS2 = np.array([[1, 4], [4, 5]], np.int32)


def _sum(t):
    return ops.sum(ops.reshape(t, [-1]), 0)


def _table(g, dtype=np.float64):
    return bridge.Variable(T0.astype(dtype), name="table")


def _placeholder(g):
    return bridge.placeholder(bridge.float64, [6, 3], name="p")


# Each build returns (xs, ys, feed); xs hold Variables (their handles) or tensors.
def _gather_v2(g):
    p = _placeholder(g)
    return [p], [_sum(ops.square(ops.gather_v2(p, IDS, 0)))], {p: T0}


def _gather_v2_axis1(g):
    p = _placeholder(g)
    return [p], [_sum(ops.square(ops.gather_v2(p, np.array([2, 0, 2], np.int32), 1)))], {p: T0}


def _gather_v1(g):
    p = _placeholder(g)
    return [p], [_sum(ops.sin(ops.gather(p, IDS2)))], {p: T0}


def _embedding_lookup(g):
    w = _table(g)
    return [w], [_sum(ops.tanh(bridge.nn.embedding_lookup(w, IDS)))], {}


def _two_lookups(g):
    w = _table(g)
    a = bridge.nn.embedding_lookup(w, IDS)
    b = bridge.gather(w, IDS2)
    return [w], [_sum(ops.square(a)) + _sum(ops.exp(b))], {}


def _int32_and_int64_ids(g):
    w = _table(g)
    a = bridge.gather(w, IDS)
    b = bridge.gather(w, np.array([5, 4], np.int64))
    return [w], [_sum(ops.square(a)) + _sum(ops.cos(b))], {}


def _lookup_and_value(g):
    w = _table(g)
    return [w], [_sum(ops.square(bridge.nn.embedding_lookup(w, IDS))) + _sum(ops.exp(w.value()))], {}


def _read_then_gather(g):
    # ReadVariableOp -> Identity -> GatherV2: both pass IndexedSlices on to the handle.
    w = _table(g)
    return [w], [_sum(ops.square(bridge.gather(ops.identity(w.value()), IDS)))], {}


def _cast_then_gather(g):
    w = _table(g, np.float32)
    wide = ops.cast(w.value(), DstT=bridge.float64)
    return [w], [_sum(ops.square(ops.gather_v2(wide, IDS, 0)))], {}


def _gather_of_gather(g):
    p = _placeholder(g)
    inner = ops.gather_v2(p, IDS, 0)
    return [p], [_sum(ops.square(ops.gather_v2(inner, np.array([3, 1, 3], np.int32), 0)))], {p: T0}


def _dense_op_before_gather(g):
    # Tanh's (C++) gradient needs a tensor: the IndexedSlices is densified on the way.
    p = _placeholder(g)
    return [p], [_sum(ops.square(ops.gather_v2(ops.tanh(p), IDS, 0)))], {p: T0}


def _gather_nd_rows(g):
    p = _placeholder(g)
    return [p], [_sum(ops.square(ops.gather_nd(p, np.array([[1], [4], [1]], np.int32))))], {p: T0}


def _gather_nd_elements(g):
    p = _placeholder(g)
    return [p], [_sum(ops.square(ops.gather_nd(p, np.array([[1, 2], [4, 0]], np.int32))))], {p: T0}


def _sparse_segment_sum(g):
    p = _placeholder(g)
    out = ops.sparse_segment_sum(p, np.array([0, 5, 0, 3], np.int32), np.array([0, 0, 1, 1], np.int32),
                                 sparse_gradient=True)
    return [p], [_sum(ops.square(out))], {p: T0}


def _two_ys_two_xs(g):
    w = _table(g)
    p = _placeholder(g)
    y1 = _sum(ops.square(bridge.gather(w, IDS)))
    y2 = _sum(ops.mul(ops.gather_v2(p, IDS, 0), bridge.gather(w, np.array([0, 1, 2, 3], np.int32))))
    return [w, p], [y1, y2], {p: T0}


BUILDS = {f.__name__[1:]: f for f in (
    _gather_v2, _gather_v2_axis1, _gather_v1, _embedding_lookup, _two_lookups, _int32_and_int64_ids,
    _lookup_and_value, _read_then_gather, _cast_then_gather, _gather_of_gather, _dense_op_before_gather,
    _gather_nd_rows, _gather_nd_elements, _sparse_segment_sum, _two_ys_two_xs)}

#: What TF returns, pinned (the oracle's answer is checked against it too).
KINDS = {
    "gather_v2": ["IndexedSlices"], "gather_v2_axis1": ["Tensor"], "gather_v1": ["IndexedSlices"],
    "embedding_lookup": ["IndexedSlices"], "two_lookups": ["IndexedSlices"],
    "int32_and_int64_ids": ["IndexedSlices"], "lookup_and_value": ["Tensor"],
    "read_then_gather": ["IndexedSlices"], "cast_then_gather": ["IndexedSlices"],
    "gather_of_gather": ["IndexedSlices"], "dense_op_before_gather": ["Tensor"],
    "gather_nd_rows": ["IndexedSlices"], "gather_nd_elements": ["Tensor"],
    "sparse_segment_sum": ["IndexedSlices"], "two_ys_two_xs": ["IndexedSlices", "IndexedSlices"],
}


def _build(name):
    g = bridge.Graph()
    with g.as_default():
        xs, ys, feed = BUILDS[name](g)
        init = bridge.global_variables_initializer()
    return g, xs, ys, feed, init


def _x_name(x):
    return x.handle.name if isinstance(x, bridge.Variable) else x.name


GRAPHS = [
    {"id": "embedding_lookup", "kind": "embedding_lookup", "table": T0, "ids": IDS},
    {"id": "gather_variable", "kind": "gather_variable", "table": T0, "ids": IDS2},
    {"id": "gather_tensor", "kind": "gather_tensor", "table": T0, "ids": IDS},
]


def _bridge_graph(spec):
    g = bridge.Graph()
    with g.as_default():
        ids = bridge.constant(np.asarray(spec["ids"]), name="ids")
        if spec["kind"] == "gather_tensor":
            table = bridge.placeholder(bridge.float64, T0.shape, name="table")
            out = bridge.gather(table, ids)
        else:
            table = bridge.Variable(np.asarray(spec["table"]), name="table")
            out = bridge.nn.embedding_lookup(table, ids) if spec["kind"] == "embedding_lookup" \
                else bridge.gather(table, ids)
        ops.identity(out, name="result")
    return g


@pytest.fixture(scope="module")
def answers(oracle):
    cases = []
    for name in BUILDS:
        g, xs, ys, feed, init = _build(name)
        cases.append({"graph_def": g.as_graph_def(), "init": [init.name], "xs": [_x_name(x) for x in xs],
                      "ys": [y.name for y in ys], "feed": {k.name: v for k, v in feed.items()}})
    response = oracle("sparse_gradients", {
        "cases": cases, "graphs": GRAPHS,
        "bridge_graphs": {s["id"]: _bridge_graph(s).as_graph_def() for s in GRAPHS}})
    response["results"] = dict(zip(BUILDS, response["results"], strict=True))
    return response


@pytest.mark.parametrize("name", list(BUILDS))
def test_gradient_matches_tensorflow(name, answers):
    want = answers["results"][name]
    assert not isinstance(want, str), want
    assert want["kinds"] == KINDS[name]
    g, xs, ys, feed, init = _build(name)
    with g.as_default():
        grads = bridge.gradients(ys, xs)
    kinds = ["IndexedSlices" if isinstance(d, bridge.IndexedSlices) else "Tensor" for d in grads]
    assert kinds == want["kinds"]
    with bridge.Session(g) as s:
        s.run(init)
        got = s.run(grads, feed)
    for k, (d, value) in enumerate(zip(grads, got, strict=True)):
        if isinstance(d, bridge.IndexedSlices):
            assert isinstance(value, bridge.IndexedSlicesValue)
            w_values, w_indices, w_shape = want["parts"][k]
            # TF's parts, in TF's order: the same rows, concatenated the same way.
            assert value.indices.dtype == w_indices.dtype and value.dense_shape.dtype == w_shape.dtype
            np.testing.assert_array_equal(value.indices, w_indices)
            np.testing.assert_array_equal(value.dense_shape, w_shape)
            assert value.values.dtype == w_values.dtype
            np.testing.assert_allclose(value.values, w_values, rtol=1e-12, atol=1e-12)
            value = value.to_dense()
        np.testing.assert_allclose(value, want["dense"][k], rtol=1e-12, atol=1e-12, err_msg=f"{name}[{k}]")


def test_densified_in_the_graph(answers):
    # bridge.convert_to_tensor builds TF's densification (UnsortedSegmentSum): the same dense value.
    g, xs, ys, feed, init = _build("two_lookups")
    with g.as_default():
        d, = bridge.gradients(ys, xs)
        dense = bridge.convert_to_tensor(d)
        # an op input densifies it too, as TF's convert_to_tensor does
        doubled = ops.mul(d, np.float64(2.0))
    assert isinstance(dense, bridge.Output) and dense.op.type == "UnsortedSegmentSum"
    with bridge.Session(g) as s:
        s.run(init)
        got, got2 = s.run([dense, doubled])
    np.testing.assert_allclose(got, answers["results"]["two_lookups"]["dense"][0], rtol=1e-12)
    np.testing.assert_allclose(got2, 2 * got, rtol=1e-15)


def _nodes(nodes):
    """name -> (op, inputs, attrs), the table variable's own nodes left out (TF's
    v1 Variable adds an IsInitialized check the bridge's does not)."""
    return {n["name"]: (n["op"], n["inputs"], {k: v.tolist() if isinstance(v, np.ndarray) else v
                                               for k, v in n["attrs"].items()})
            for n in nodes if not n["name"].startswith("table")}


@pytest.mark.parametrize("spec", GRAPHS, ids=[s["id"] for s in GRAPHS])
def test_builders_build_tensorflows_graph(spec, answers):
    want, got = answers["graphs"][spec["id"]], answers["bridge_graphs"][spec["id"]]
    assert not isinstance(want, str), want
    assert not isinstance(got, str), got
    want, got = _nodes(want), _nodes(got)
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], name


def test_variable_sparse_read_is_one_resource_gather():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(T0, name="w")
        rows = w.sparse_read([3, 1])
        named = w.sparse_read(np.array([0], np.int64), name="pick")
    assert rows.op.type == named.op.type == "ResourceGather"
    assert (rows.op.name, named.op.name) == ("Gather", "pick")
    with bridge.Session(g) as s:
        s.run(w.initializer)
        np.testing.assert_array_equal(s.run(rows), T0[[3, 1]])


def test_aggregation_follows_tensorflow():
    """All IndexedSlices: concatenated (no dense tensor); mixed: one AddN of dense tensors."""
    g = bridge.Graph()
    with g.as_default():
        w = _table(g)
        sparse_only, = bridge.gradients(_sum(bridge.gather(w, IDS)) + _sum(bridge.gather(w, IDS2)), [w])
        mixed, = bridge.gradients(_sum(bridge.gather(w, IDS)) + _sum(w.value()), [w])
    assert isinstance(sparse_only, bridge.IndexedSlices)
    assert sparse_only.values.op.type == sparse_only.indices.op.type == "ConcatV2"
    assert isinstance(mixed, bridge.Output) and mixed.op.type == "AddN"
    assert "UnsortedSegmentSum" in {i.op.type for i in mixed.op.inputs}


def test_large_densification_warns_as_tensorflow():
    # TF warns when it densifies IndexedSlices of >= 100,000,000 elements (a known shape);
    # a gather's own gradient densifies its incoming gradient without the warning.
    g = bridge.Graph()
    with g.as_default():
        big = bridge.placeholder(bridge.float32, [100000, 1000], name="big")
        small = bridge.placeholder(bridge.float32, [1000, 1000], name="small")
        y_big = _sum(ops.gather_v2(ops.tanh(big), IDS, 0))
        y_small = _sum(ops.gather_v2(ops.tanh(small), IDS, 0))
        y_chain = _sum(ops.gather_v2(ops.gather_v2(big, IDS, 0), IDS[:2], 0))
        with pytest.warns(UserWarning, match="Converting sparse IndexedSlices to a dense Tensor with "
                                             "100000000 elements"):
            bridge.gradients(y_big, [big])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            bridge.gradients(y_small, [small])
            chain, = bridge.gradients(y_chain, [big])
    assert isinstance(chain, bridge.IndexedSlices)


def test_indexed_slices_basics():
    g = bridge.Graph()
    with g.as_default():
        w = _table(g)
        d, = bridge.gradients(_sum(bridge.gather(w, IDS)), [w])
        neg = -d
        no_shape = bridge.IndexedSlices(d.values, d.indices)
    assert d.dtype == bridge.float64 and d.shape == bridge.Shape([6, 3]) and d.graph is g
    assert isinstance(neg, bridge.IndexedSlices) and neg.values.op.type == "Neg"
    assert "IndexedSlices" in repr(d)
    with pytest.raises(ValueError, match="without dense_shape"):
        bridge.convert_to_tensor(no_shape)
    with pytest.raises(TypeError):
        bridge.IndexedSlices(np.ones(3), d.indices)
    with bridge.Session(g) as s:
        s.run(w.initializer)
        value, shapeless = s.run([d, no_shape])
    assert shapeless.dense_shape is None
    expect = np.zeros_like(T0)
    np.add.at(expect, IDS, 1.0)
    np.testing.assert_array_equal(value.to_dense(), expect)


def test_jacobian_and_hessian_densify():
    g = bridge.Graph()
    with g.as_default():
        p = _placeholder(g)
        y = _sum(ops.pow(ops.gather_v2(p, IDS, 0), np.float64(3.0)))
        h = bridge.hessian(y, p)
        j = bridge.jacobian(ops.gather_v2(p, IDS, 0), p)
    with bridge.Session(g) as s:
        hv, jv = s.run([h, j], {p: T0})
    counts = np.bincount(IDS, minlength=6).astype(np.float64)
    expect = np.zeros((6, 3, 6, 3))
    for r in range(6):
        for c in range(3):
            expect[r, c, r, c] = 6 * T0[r, c] * counts[r]
    np.testing.assert_allclose(hv, expect, rtol=1e-12)
    assert jv.shape == (4, 3, 6, 3)
    np.testing.assert_array_equal(jv[0, 1, 4, 1], 1.0)
