"""What Session.run and make_callable accept as fetches and feed keys (issue #25).

TF1's rules (checked by hand against stock TF 2.21's tf.compat.v1.Session):
every graph element TF's ``as_graph_element`` accepts is a fetch (Outputs,
Operations, "op:0" and "op" names, objects with ``_as_graph_element()`` such
as resource Variables, whose fetch is their value ``<name>/Read/ReadVariableOp:0``),
SparseTensors fetch as a SparseTensorValue, and lists, tuples, namedtuples and
dicts nest them.  Only an Operation comes back as None; anything else is a
TypeError naming it and where it sits.  A feed keyed by a Variable feeds that
same read; a tensor both fed and fetched comes back with its fed value.
"""
from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.framework.builders import SparseTensorValue

Pair = collections.namedtuple("Pair", "first second")


@pytest.fixture
def setup():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        v = bridge.Variable(np.array([1.0, 2.0]), name="v")
        y = ops.mul(x, v.value(), name="y")
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    yield g, sess, x, v, y, init
    sess.close()


def test_a_variable_fetches_its_value_wherever_it_sits(setup) -> None:
    g, sess, x, v, y, init = setup
    want = np.array([1.0, 2.0])
    np.testing.assert_array_equal(sess.run(v), want)
    got = sess.run([v, (v,), {"a": v, "b": [v, init]}, Pair(v, "v/Read/ReadVariableOp:0")])
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1][0], want)
    assert isinstance(got[1], tuple)
    np.testing.assert_array_equal(got[2]["a"], want)
    np.testing.assert_array_equal(got[2]["b"][0], want)
    assert got[2]["b"][1] is None  # an Operation: the only fetch that is None
    assert isinstance(got[3], Pair)
    np.testing.assert_array_equal(got[3].first, want)
    np.testing.assert_array_equal(got[3].second, want)
    run = sess.make_callable({"v": v, "y": y}, [x])
    out = run(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(out["v"], want)
    np.testing.assert_array_equal(out["y"], [3.0, 8.0])


def test_every_kind_of_graph_element_comes_back_as_a_value(setup) -> None:
    g, sess, x, v, y, init = setup
    feed = {x: np.array([3.0, 4.0])}
    y_value, v_value, x_value = np.array([3.0, 8.0]), np.array([1.0, 2.0]), np.array([3.0, 4.0])
    elements = {"Output": (y, y_value), "Variable": (v, v_value), "tensor name": ("y:0", y_value),
                "Variable's handle": (v.handle, None), "value()": (v.value(), v_value),
                "fed placeholder": (x, x_value), "fed placeholder by name": ("x:0", x_value)}

    def check(value, want, where: str) -> None:
        if want is None:   # a resource handle: a scalar resource tensor, no numpy value
            assert isinstance(value, bridge.Tensor), where
            assert (value.dtype, value.shape) == (bridge.resource, ()), where
        else:
            assert isinstance(value, np.ndarray), where
            np.testing.assert_array_equal(value, want, err_msg=where, strict=True)

    for what, (el, want) in elements.items():
        got = sess.run(el, feed)
        check(got, want, what)
        check(sess.run([el], feed)[0], want, f"{what} in a list")
        got = sess.run((el,), feed)
        assert isinstance(got, tuple) and len(got) == 1, what
        check(got[0], want, f"{what} in a tuple")
        got = sess.run({"k": el}, feed)
        assert list(got) == ["k"], what
        check(got["k"], want, f"{what} in a dict")
        got = sess.run(Pair(el, el), feed)
        assert isinstance(got, Pair), what
        check(got.first, want, f"{what} in a namedtuple")
        check(got.second, want, f"{what} in a namedtuple, twice")
    for what, el in {"Operation": init, "operation name": "init", "Variable initializer": v.initializer}.items():
        assert sess.run(el) is None, what
        assert sess.run([el, y], feed)[0] is None, what


def test_mapping_types_are_kept(setup) -> None:
    g, sess, x, v, y, init = setup
    ordered = sess.run(collections.OrderedDict([("b", v), ("a", "y")]), {x: [1.0, 1.0]})
    assert type(ordered) is collections.OrderedDict and list(ordered) == ["b", "a"]
    dd = collections.defaultdict(list)
    dd["v"] = v
    got = sess.run(dd)
    assert type(got) is collections.defaultdict and got.default_factory is list
    np.testing.assert_array_equal(got["v"], [1.0, 2.0])


@pytest.mark.parametrize("fetches, where", [
    (None, "fetches"),
    (3.5, "fetches"),
    ([object()], "fetches[0]"),
    ({"a": [1, "y:0"]}, "fetches['a'][0]"),
    ({"y:0"}, "fetches"),
    (Pair("y:0", None), "fetches[1]"),
    ([[], [np.zeros(2)]], "fetches[1][0]"),
])
def test_anything_else_is_a_type_error_saying_where(setup, fetches, where) -> None:
    g, sess, x, v, y, init = setup
    with pytest.raises(TypeError, match=r"cannot fetch .*\(" + re.escape(where) + r"\)"):
        sess.run(fetches, {x: [1.0, 1.0]})
    with pytest.raises(TypeError, match="cannot fetch"):
        sess.make_callable(fetches, [x])


def test_elements_of_another_graph_are_refused(setup) -> None:
    g, sess, x, v, y, init = setup
    other = bridge.Graph()
    with other.as_default():
        w = bridge.Variable(1.0, name="w")
    with pytest.raises(ValueError, match="another graph"):
        sess.run(w)
    with pytest.raises(ValueError, match="another graph"):
        sess.run(y, {w: 2.0})


def test_a_feed_keyed_by_a_variable_feeds_its_value(setup) -> None:
    """TF feeds ``v._as_graph_element()``, the read made with the variable: what
    ``v.value()`` (and so y here) reads."""
    g, sess, x, v, y, init = setup
    got_v, got_y = sess.run([v, y], {v: [5.0, 6.0], x: [1.0, 2.0]})
    np.testing.assert_array_equal(got_v, [5.0, 6.0])
    np.testing.assert_array_equal(got_y, [5.0, 12.0])
    run = sess.make_callable(y, [v, x])
    np.testing.assert_array_equal(run([2.0, 2.0], [1.0, 3.0]), [2.0, 6.0])
    np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])  # the variable itself is untouched
    with pytest.raises(TypeError, match="operation"):
        sess.run(y, {init: 1.0})
    with pytest.raises(TypeError):
        sess.run(y, {3: 1.0})


def test_a_fed_and_fetched_tensor_gives_its_fed_value(setup) -> None:
    g, sess, x, v, y, init = setup
    got_x, got_y = sess.run([x, y], {x: [1, 2]})
    np.testing.assert_array_equal(got_x, [1.0, 2.0])
    assert got_x.dtype == np.float64
    np.testing.assert_array_equal(got_y, [1.0, 4.0])
    np.testing.assert_array_equal(sess.run("x:0", {x: [3.0, 4.0]}), [3.0, 4.0])  # nothing left to run
    run = sess.make_callable([x, y, v], [x, v])
    got = run([1.0, 1.0], [7.0, 8.0])
    np.testing.assert_array_equal(got[0], [1.0, 1.0])
    np.testing.assert_array_equal(got[1], [7.0, 8.0])
    np.testing.assert_array_equal(got[2], [7.0, 8.0])
    assert sess.run([]) == [] and sess.run({}) == {}


def test_sparse_tensors_fetch_and_feed_as_sparse_tensor_values() -> None:
    g = bridge.Graph()
    with g.as_default():
        fixed = bridge.SparseTensor([[0, 1]], np.array([3.0]), [2, 2])
        fed = bridge.SparseTensor(bridge.placeholder("int64", [None, 2]), bridge.placeholder("float32", [None]),
                                  bridge.placeholder("int64", [2]))
        dense = fed.to_dense()
    with bridge.Session(g) as sess:
        got = sess.run(fixed)
        assert isinstance(got, SparseTensorValue)
        np.testing.assert_array_equal(got.indices, [[0, 1]])
        np.testing.assert_array_equal(got.values, [3.0])
        np.testing.assert_array_equal(got.dense_shape, [2, 2])
        value = SparseTensorValue([[1, 0]], [5.0], [2, 3])
        got, d = sess.run([fed, dense], {fed: value})
        np.testing.assert_array_equal(got.values, np.array([5.0], np.float32))
        np.testing.assert_array_equal(d, [[0, 0, 0], [5, 0, 0]])
        with pytest.raises(TypeError, match="triple"):
            sess.run(dense, {fed: np.zeros(3)})


def test_control_dependencies_on_a_variable_wait_for_its_value(setup) -> None:
    g, sess, x, v, y, init = setup
    with g.as_default(), bridge.control_dependencies([v]):
        z = ops.identity(x)
    assert v.value().op in z.op.control_inputs


def test_train_loop_and_scipy_optimizer_take_variables_as_fetches_and_feed_keys() -> None:
    from bridge.train import ScipyOptimizer, train_loop

    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([3.0, -1.0]), name="w")
        c = bridge.Variable(np.array([1.0, 1.0]), name="c", trainable=False)
        scale = bridge.Variable(np.float64(0.5), name="scale", trainable=False)
        loss = ops.sum(ops.square(w.value() - c.value()), [0])
        step = bridge.train.GradientDescentOptimizer(0.25).minimize(loss, var_list=[w])
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        assert train_loop(sess, step, 2, loss=scale, progress=False) == [0.5, 0.5]  # a Variable as the loss
    with bridge.Session(g) as sess:
        sess.run(init)
        opt = ScipyOptimizer(loss, var_list=[w])
        result = opt.minimize(sess, feed_dict={c: np.array([2.0, -2.0])})  # feeds c's value
        np.testing.assert_allclose(result.x, [2.0, -2.0], atol=1e-6)


def test_a_signature_returning_its_input_runs(tmp_path) -> None:
    """An output that is also an input (fed and fetched) used to fail in TF's C API."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [2], name="x")
        v = bridge.Variable(np.array([1.0, 2.0]), name="v")
        y = x * v.value()
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        bridge.saved_model.save(sess, str(tmp_path / "m"), {"serving_default": ({"x": x}, {"y": y, "x": x})})
    with bridge.load_saved_model(str(tmp_path / "m"), tags=["serve"]) as model:
        got = model.signatures["serving_default"](x=np.array([3.0, 4.0]))
    np.testing.assert_array_equal(got["x"], [3.0, 4.0])
    np.testing.assert_array_equal(got["y"], [3.0, 8.0])


def test_colocation_with_a_variable_is_with_its_handle(setup) -> None:
    g, sess, x, v, y, init = setup
    with g.as_default(), bridge.colocate_with(v):
        z = ops.identity(x)
    assert z.op.get_attr("_class") == [b"loc:@v"]
