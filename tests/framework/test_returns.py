"""Public functions fed every kind of graph element return a value or raise,
never a silent None or a value in the wrong place (issue #25, item 3).

Session.run and make_callable: tests/framework/test_fetches.py; stop_gradients:
tests/grad/test_stop_gradients.py.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.grad import gradients, hessian, hessians, jacobian


@pytest.fixture
def g():
    graph = bridge.Graph()
    with graph.as_default():
        yield graph


def _run(graph, fetches, feed=None):
    with bridge.Session(graph) as s:
        s.run(bridge.global_variables_initializer(graph))
        return s.run(fetches, feed or {})


XV = np.array([0.5, -1.5])


# --- gradients, jacobian, hessian ----------------------------------------------------------------

def test_gradients_take_variables_wherever_tensors_go(g) -> None:
    x = bridge.placeholder("float64", [2], name="x")
    v = bridge.Variable(np.array([1.0, 2.0]), name="v")
    scale = bridge.Variable(np.array([2.0, 3.0]), name="scale")
    y = x * v.value()
    gx, gv = gradients(y, [x, v], grad_ys=scale)  # grad_ys a Variable: its value
    assert gx is not None and gv is not None
    (gvv,) = gradients(v, v)  # ys a Variable: its value
    got = _run(g, [gx, gv, gvv], {x: XV})
    np.testing.assert_allclose(got[0], [2.0, 6.0])
    np.testing.assert_allclose(got[1], [2.0 * XV[0], 3.0 * XV[1]])
    np.testing.assert_allclose(got[2], [1.0, 1.0])


@pytest.mark.parametrize("bad", ["x:0", None, 3.0, "op"])
def test_gradients_refuse_what_is_not_a_tensor(g, bad) -> None:
    x = bridge.placeholder("float64", [2], name="x")
    y = ops.sum(ops.sin(x), [0])
    with pytest.raises(TypeError):
        gradients(y, [x, bad] if bad != "op" else [y.op])
    with pytest.raises(TypeError):
        gradients(y, x, stop_gradients=[bad] if bad != "op" else [y.op])
    with pytest.raises(TypeError):
        jacobian(y, bad if bad != "op" else y.op)


def test_jacobian_and_hessians_of_variables(g) -> None:
    v = bridge.Variable(np.array([1.0, 2.0]), name="v")
    cube = ops.sum(v.value() ** 3.0, [0])
    j = jacobian(v.value() * v.value(), v)
    h = hessian(cube, v)
    (hs,) = hessians(cube, [v])
    got = _run(g, [j, h, hs])
    np.testing.assert_allclose(got[0], np.diag([2.0, 4.0]))
    np.testing.assert_allclose(got[1], np.diag([6.0, 12.0]))
    np.testing.assert_allclose(got[2], np.diag([6.0, 12.0]))


# --- functions, cond, while_loop -----------------------------------------------------------------

def test_a_function_returns_what_its_python_returned_or_refuses_it(g) -> None:
    x = bridge.placeholder("float64", [2], name="x")
    v = bridge.Variable(np.array([1.0, 2.0]), name="v")
    Pair = collections.namedtuple("Pair", "a b")
    out = bridge.function(lambda a: {"z": a * 2.0, "v": v, "n": None, "p": Pair(a, 1.5)})(x)
    assert out["n"] is None
    got = _run(g, {"z": out["z"], "v": out["v"], "p": out["p"]}, {x: XV})
    np.testing.assert_allclose(got["z"], 2 * XV)
    np.testing.assert_allclose(got["v"], [1.0, 2.0])
    assert isinstance(got["p"], Pair)
    np.testing.assert_allclose(got["p"].a, XV)
    for bad in (lambda a: object(), lambda a: (a, bridge.SparseTensor([[0]], a[:1], [2])),
                lambda a: [a, bridge.get_default_graph().create_op("NoOp", [])]):
        with pytest.raises(TypeError, match=r"returned .*\(leaf"):
            bridge.function(bad)(x)
        with pytest.raises(TypeError, match=r"returned .*\(leaf"):
            bridge.cond(ops.less(x[0], 0.0), lambda: bad(x), lambda: bad(x))


@pytest.mark.parametrize("then, other", [
    (lambda x: {"a": x * 2.0}, lambda x: {"b": x * 3.0}),  # the keys differ: values would swap names
    (lambda x: x * 2.0, lambda x: [x * 3.0]),
    (lambda x: (x, [x, x]), lambda x: (x, x, x)),
    (lambda x: (x * 2.0, None), lambda x: (None, x * 3.0)),
])
def test_cond_refuses_branches_of_different_structures(g, then, other) -> None:
    x = bridge.placeholder("float64", [2], name="x")
    p = bridge.placeholder("bool", [], name="p")
    with pytest.raises(ValueError, match="different structures"):
        bridge.cond(p, lambda: then(x), lambda: other(x))


def test_cond_results_sit_where_the_branches_put_them(g) -> None:
    x = bridge.placeholder("float64", [2], name="x")
    p = bridge.placeholder("bool", [], name="p")
    v = bridge.Variable(np.array([1.0, 2.0]), name="v")
    r = bridge.cond(p, lambda: {"a": x * 2.0, "b": v}, lambda: {"b": x * 3.0, "a": v})
    for pv, a, b in ((True, 2 * XV, [1.0, 2.0]), (False, [1.0, 2.0], 3 * XV)):
        got = _run(g, r, {x: XV, p: pv})
        np.testing.assert_allclose(got["a"], a)
        np.testing.assert_allclose(got["b"], b)
    # list and tuple nest alike (the true branch's kind is kept)
    assert isinstance(bridge.cond(p, lambda: [x], lambda: (x * 2.0,)), list)


def _small(*a):
    return ops.less(ops.sum(bridge.framework.functions.flatten(a)[0], [0]), 10.0)


def test_while_loop_refuses_a_body_of_another_structure(g) -> None:
    x = bridge.placeholder("float64", [2], name="x")
    with pytest.raises(ValueError, match="structure of loop_vars"):
        bridge.while_loop(_small, lambda d: {"b": d["a"] * 2.0, "c": d["b"]}, {"a": x, "b": x})
    with pytest.raises(ValueError, match="structure of loop_vars"):
        bridge.while_loop(_small, lambda a, b: (a * 2.0, b[0], b[1]), [x, [x, x]])
    # one loop variable may come back alone or in a 1-list, as in TF
    r1 = bridge.while_loop(_small, lambda a: [a * 2.0], x)
    r2 = bridge.while_loop(_small, lambda a: a * 2.0, [x])
    r3 = bridge.while_loop(_small, lambda d: {"b": d["b"], "a": d["a"] * 2.0}, {"a": x, "b": x})
    got = _run(g, [r1, r2, r3], {x: [1.0, 2.0]})
    np.testing.assert_allclose(got[0], [4.0, 8.0])
    np.testing.assert_allclose(got[1][0], [4.0, 8.0])
    np.testing.assert_allclose(got[2]["a"], [4.0, 8.0])
    np.testing.assert_allclose(got[2]["b"], [1.0, 2.0])


def test_while_loop_takes_variables_as_loop_vars(g) -> None:
    v = bridge.Variable(np.array([1.0, 2.0]), name="v")
    r = bridge.while_loop(_small, lambda a: a * 2.0, v)
    np.testing.assert_allclose(_run(g, r), [4.0, 8.0])


# --- optimizers ----------------------------------------------------------------------------------

def test_compute_gradients_pairs_and_minimize_refusals(g) -> None:
    v = bridge.Variable(np.array([1.0, 2.0]), name="v")
    w = bridge.Variable(np.array([1.0]), name="w")
    loss = ops.sum(ops.square(v.value()), [0])
    opt = bridge.train.GradientDescentOptimizer(0.1)
    pairs = opt.compute_gradients(loss, var_list=[v, w])
    assert [var for _, var in pairs] == [v, w]
    assert pairs[0][0] is not None and pairs[1][0] is None  # w is unconnected: None, as in TF
    with pytest.raises(ValueError, match="No gradients"):
        opt.minimize(loss, var_list=[w])
    with pytest.raises(TypeError):
        opt.compute_gradients(loss, var_list=["v"])
    with pytest.raises(TypeError):
        opt.compute_gradients(loss.op)
