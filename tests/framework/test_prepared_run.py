"""PreparedRun (bridge/framework/prepared_run.py): a run repeated from one
thread, its fed TF_Tensors refilled in place.  These tests hold that it gives
exactly what Session.run gives, that a fed tensor TensorFlow keeps past a run
(a queue) is never overwritten, that the refill really happens in place
otherwise, and its refusals and errors."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import dtypes, ops
from bridge.framework._lib import ffi


@pytest.fixture
def graph():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(dtypes.float64, [2, 3], name="x")
        s = bridge.placeholder(dtypes.float32, [3], name="s")
        k = bridge.placeholder(dtypes.float64, [], name="k")
        y = ops.reshape(ops.square(x) * k, [-1]) + ops.cast(ops.tile(s, [2]), DstT=dtypes.float64)
    return g, x, s, k, y


def test_it_gives_what_session_run_gives(graph):
    g, x, s, k, y = graph
    rng = np.random.default_rng(7)
    with bridge.Session(g) as sess:
        run = sess._prepare(y, [x, s, k])
        run.feed(2, 1.5)  # fed once, converted as Session.run converts it
        for _ in range(5):
            xv, sv = rng.normal(size=(2, 3)), rng.normal(size=3)
            run.write(0, xv)
            run.write(1, sv)  # float64 into a float32 tensor: cast as astype casts
            got = run.run()
            want = sess.run(y, {x: xv, s: sv.astype(np.float32), k: 1.5})
            assert got.dtype == np.float64 and got.shape == (6,) and got.flags.writeable
            np.testing.assert_array_equal(got, want)
        # A view or a transposed array is copied in as well, by its values.
        xt = np.arange(6.0).reshape(3, 2).T
        run.write(0, xt)
        np.testing.assert_array_equal(run.run(), sess.run(y, {x: xt, s: sv.astype(np.float32), k: 1.5}))
        run.close()


def test_the_fed_tensor_is_refilled_in_place_when_only_it_holds_the_buffer(graph):
    g, x, s, k, y = graph
    with bridge.Session(g) as sess:
        run = sess._prepare(y, [x, s, k])
        run.feed(1, np.zeros(3, np.float32))
        run.feed(2, 2.0)
        run.write(0, np.ones((2, 3)))
        first = run._slots[0][0]
        run.run()
        run.write(0, np.full((2, 3), 3.0))
        assert run._slots[0][0] == first  # the same TF_Tensor: no allocation per run
        np.testing.assert_array_equal(run.run(), np.full(6, 18.0))
        run.close()


def test_a_fed_tensor_tensorflow_keeps_is_never_overwritten():
    """A value enqueued stays in the queue after the run: the next value goes
    into a new TF_Tensor, and the queue gives back both, unchanged."""
    g = bridge.Graph()
    with g.as_default():
        v = bridge.placeholder(dtypes.float64, [4], name="v")
        q = ops.fifo_queue_v2(component_types=[dtypes.float64], shapes=[[4]], capacity=10)
        enqueue = ops.queue_enqueue_v2(q, [v])
        dequeue = ops.queue_dequeue_v2(q, component_types=[dtypes.float64])
    with bridge.Session(g) as sess:
        run = sess._prepare(None, [v], [enqueue])
        values = [np.arange(4.0) + 10 * i for i in range(3)]
        tensors = []
        for value in values:
            run.write(0, value)
            tensors.append(int(ffi.cast("uintptr_t", run._slots[0][1])))  # the buffer, alive while queued
            assert run.run() is None
        for value in values:
            np.testing.assert_array_equal(sess.run(dequeue)[0], value)
        assert len(set(tensors)) == 3  # each kept buffer was left to TensorFlow
        run.close()


def test_no_run_until_every_fed_tensor_has_a_value_and_shapes_must_fit(graph):
    g, x, s, k, y = graph
    with bridge.Session(g) as sess:
        run = sess._prepare(y, [x, s, k])
        run.write(0, np.ones((2, 3)))
        with pytest.raises(ValueError, match="no value fed to 's:0', 'k:0'"):
            run.run()
        with pytest.raises(ValueError, match=r"a value of shape \(3, 2\) for tensor 'x:0', which has shape \(2, 3\)"):
            run.write(0, np.ones((3, 2)))
        with pytest.raises(ValueError, match="placeholder 's:0'"):
            run.feed(1, np.ones(4))  # the conversion's own error, as Session.run gives it
        run.close()


def test_a_failing_run_raises_and_the_next_one_works():
    g = bridge.Graph()
    with g.as_default():
        v = bridge.placeholder(dtypes.float64, [3], name="v")
        checked = ops.check_numerics(v * 2.0, message="v is not finite")
    with bridge.Session(g) as sess:
        run = sess._prepare(checked, [v])
        run.write(0, np.array([1.0, np.nan, 2.0]))
        with pytest.raises(bridge.errors.InvalidArgumentError, match="v is not finite"):
            run.run()
        run.write(0, np.array([1.0, 2.0, 3.0]))
        np.testing.assert_array_equal(run.run(), [2.0, 4.0, 6.0])
        run.close()


def test_a_fetch_of_unknown_shape_comes_out_whole():
    g = bridge.Graph()
    with g.as_default():
        v = bridge.placeholder(dtypes.float32, [None], name="v")
        w = bridge.placeholder(dtypes.float32, [2], name="w")
        out = ops.concat_v2([ops.square(v), w], 0)
    with bridge.Session(g) as sess:
        run = sess._prepare(out, [v, w])
        assert not run.writable(0) and run.writable(1)
        run.feed(0, np.array([1.0, 2.0, 3.0], np.float32))
        run.write(1, np.array([7.0, 8.0], np.float32))
        np.testing.assert_array_equal(run.run(), np.array([1, 4, 9, 7, 8], np.float32))
        with pytest.raises(ValueError, match="cannot be written each run"):
            run.write(0, np.array([1.0], np.float32))
        run.close()


def test_detached_it_serves_another_session_of_its_graph_only(graph):
    g, x, s, k, y = graph
    sess1, sess2 = bridge.Session(g), bridge.Session(g)
    run = sess1._prepare(y, [x, s, k])
    run.feed(1, np.ones(3, np.float32))
    run.feed(2, 1.0)
    run.write(0, np.ones((2, 3)))
    run.run()
    run.detach()
    with pytest.raises(ValueError, match="detached"):
        run.run()
    assert sess2._prepare(y, [x, s, k], reuse=run) is run  # attached; the values fed once are gone
    with pytest.raises(ValueError, match="no value fed to 's:0', 'k:0'"):
        run.run()
    run.feed(1, np.zeros(3, np.float32))
    run.feed(2, 2.0)
    np.testing.assert_array_equal(run.run(), np.full(6, 2.0))  # x's tensor kept its last value
    run.detach()
    other = bridge.Graph()
    with other.as_default():
        ox = bridge.placeholder(dtypes.float64, [2, 3], name="x")
    with bridge.Session(other) as sess3:
        assert sess3._prepare(y, [x, s, k], reuse=run) is None  # tensors of another graph
        mine = sess3._prepare(None, [ox], reuse=run)
        assert mine is not run and mine.graph is other and run.session is None
        mine.close()
    sess1.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        sess1._prepare(y, [x, s, k], reuse=run)
    assert run.session is None
    sess2.close()
    run.close()
