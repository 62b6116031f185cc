"""A run's fast path (bridge/framework/run_plan.py): a numpy array of exactly
a fed tensor's dtype and fully known static shape is copied into a TF_Tensor
without the general conversion, and small numeric fetches are copied out.
Everything else takes the general path: these tests hold that both give the
same values, the same errors naming the placeholder, read-only results, and
that closing a session during fast-path runs from threads stays safe."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import dtypes
from bridge.framework.run_plan import COPY_LIMIT, RunPlan
from support.threads import run_threads
from support import REPO


@pytest.fixture
def fixed():
    """Placeholders of fully known shapes (the fast path applies), their squares."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(dtypes.float64, [2, 3], name="x")
        n = bridge.placeholder(dtypes.int32, [3], name="n")
        s = bridge.placeholder(dtypes.float32, [], name="s")
        outs = [bridge.ops.square(x), bridge.ops.square(n), bridge.ops.square(s)]
    return g, (x, n, s), outs


def test_fast_and_general_feeds_give_the_same_values(fixed):
    g, (x, n, s), outs = fixed
    with bridge.Session(g) as sess:
        step = sess.make_callable(outs, [x, n, s])
        # All three fed tensors have a fast path.
        assert all(spec is not None for spec in RunPlan(sess, outs, [x, n, s]).feed_specs)
        base = np.arange(6.0).reshape(2, 3)
        feeds = [
            (base, np.array([1, 2, 3], np.int32), np.array(1.5, np.float32)),             # the fast path
            (base.astype(np.float32), [1, 2, 3], 1.5),                                       # converted
            (np.asfortranarray(base), np.array([1, 2, 3], np.int64), np.float32(1.5)),     # not C-contiguous
            (base.astype(">f8"), np.array([1, 2, 3], ">i4"), np.array(1.5, ">f4")),         # byte-swapped
            (bridge.Tensor(base), bridge.Tensor(np.array([1, 2, 3], np.int32)), bridge.Tensor(np.float32(1.5))),
            (np.repeat(base, 2, axis=1)[:, ::2], np.array([1, 2, 3], np.int32), np.float32(1.5)),  # strided
        ]
        for fx, fn, fs in feeds:
            got = step(fx, fn, fs)
            ran = sess.run(outs, {x: fx, n: fn, s: fs})
            np.testing.assert_array_equal(got[0], base ** 2)
            np.testing.assert_array_equal(got[1], [1, 4, 9])
            assert got[2] == np.float32(2.25) and got[2].dtype == np.float32 and got[2].shape == ()
            for a, b in zip(got, ran, strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)


def test_the_fed_array_is_copied_so_changing_it_later_changes_nothing(fixed):
    g, (x, _, _), outs = fixed
    with g.as_default():
        same = bridge.ops.identity(x)
    with bridge.Session(g) as sess:
        step = sess.make_callable([same, outs[0]], [x])
        value = np.ones((2, 3))
        first, squared = step(value)
        value[:] = 7.0
        np.testing.assert_array_equal(first, np.ones((2, 3)))
        np.testing.assert_array_equal(squared, np.ones((2, 3)))
        np.testing.assert_array_equal(step(value)[0], np.full((2, 3), 7.0))


@pytest.mark.parametrize("path", ["fast", "general"])
def test_refused_feeds_name_the_placeholder_on_either_path(fixed, path):
    g, (x, n, s), outs = fixed
    with bridge.Session(g) as sess:
        step = sess.make_callable(outs, [x, n, s]) if path == "fast" else (
            lambda fx, fn, fs: sess.run(outs, {x: fx, n: fn, s: fs}))
        ok_n, ok_s = np.array([1, 2, 3], np.int32), np.float32(1.0)
        with pytest.raises(ValueError, match=r"shape \(3, 2\) to placeholder 'x:0', which has shape \(2, 3\)"):
            step(np.zeros((3, 2)), ok_n, ok_s)
        with pytest.raises(ValueError, match=r"shape \(2,\) to placeholder 'n:0'"):
            step(np.zeros((2, 3)), np.array([1, 2], np.int32), ok_s)
        with pytest.raises(TypeError, match=r"placeholder 'n:0' \(int32\).*1.5"):
            step(np.zeros((2, 3)), np.array([1.5, 2.0, 3.0]), ok_s)
        with pytest.raises(ValueError, match=r"placeholder 's:0', which has shape \(\)"):
            step(np.zeros((2, 3)), ok_n, np.zeros(2, np.float32))
        # The session is usable after every refusal.
        np.testing.assert_array_equal(step(np.ones((2, 3)), ok_n, ok_s)[1], [1, 4, 9])


@pytest.mark.parametrize("size", [8, COPY_LIMIT // 8, COPY_LIMIT // 8 + 1, 100_000])
def test_fetches_are_read_only_small_or_large(size):
    """Up to COPY_LIMIT bytes a fetch is copied out (TF's tensor freed at once),
    beyond a view of TF's buffer: read-only either way, as Session.run says."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(dtypes.float64, [size], name="x")
        y = bridge.ops.neg(x)
    with bridge.Session(g) as sess:
        value = np.arange(float(size))
        for out in (sess.run(y, {x: value}), sess.make_callable(y, [x])(value)):
            np.testing.assert_array_equal(out, -value)
            assert not out.flags.writeable
            with pytest.raises(ValueError, match="read-only"):
                out[0] = 1.0
            if size * 8 <= COPY_LIMIT:  # over an immutable copy: it cannot be made writable either
                with pytest.raises(ValueError, match="WRITEABLE"):
                    out.flags.writeable = True


def test_fetched_handles_strings_and_empty_tensors_take_the_general_path():
    g = bridge.Graph()
    with g.as_default():
        v = bridge.Variable(np.ones(2), name="v")
        text = bridge.constant(np.array([b"ab", b"c"], dtype=object))
        empty = bridge.constant(np.zeros((0, 3)))
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        handle, strings, nothing = sess.make_callable([v.handle, text, empty])()
        assert isinstance(handle, bridge.Tensor) and handle.dtype == dtypes.resource
        assert strings.tolist() == [b"ab", b"c"]
        assert nothing.shape == (0, 3) and nothing.dtype == np.float64


def test_a_fast_path_callable_from_threads():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(dtypes.float64, [4, 3], name="x")
        sq = bridge.ops.square(x)
    with bridge.Session(g) as s:
        step = s.make_callable(sq, [x])

        def work(i):
            for k in range(300):
                value = np.full((4, 3), float(i * 1000 + k))
                np.testing.assert_array_equal(step(value), value ** 2)
        run_threads(work, 6)


def test_closing_during_fast_path_runs_from_eight_threads():
    """In a child (a crash fails this test only): eight threads loop on a
    make_callable function while the main thread closes the session; each
    stops with the session's CancelledError or RuntimeError, nothing crashes."""
    code = """
        import threading, time
        import numpy as np
        import bridge
        from bridge import errors
        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder(bridge.float64, [64], name="x")
            y = x
            for _ in range(30):
                y = bridge.ops.tanh(y)
        sess = bridge.Session(g)
        step = sess.make_callable(y, [x])
        outcomes, done = [], [0]
        def loop():
            while True:
                try:
                    assert step(np.ones(64)).shape == (64,)
                    done[0] += 1
                except errors.CancelledError as e:
                    assert "closed the session" in str(e), e
                    outcomes.append("cancelled")
                    return
                except RuntimeError as e:
                    assert "closed Session" in str(e), e
                    outcomes.append("closed")
                    return
        threads = [threading.Thread(target=loop) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        sess.close()
        for t in threads:
            t.join(60)
        assert len(outcomes) == 8 and done[0] > 0, (outcomes, done)
        print("ok")
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0 and "ok" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr[-3000:])


def test_a_session_keeps_the_plans_of_plain_runs_and_no_more_than_64():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(dtypes.float64, [3], name="x")
        ys = [x + float(i) for i in range(70)]
    value = np.array([1.0, 2.0, 3.0])
    with bridge.Session(g) as sess:
        assert sess._plan(ys[0], [x]) is sess._plan(ys[0], [x])            # kept
        assert sess._plan([ys[0], "x:0"], ["x:0"]) is sess._plan([ys[0], "x:0"], ["x:0"])
        assert sess._plan({"a": ys[0]}, [x]) is not sess._plan({"a": ys[0]}, [x])  # nested: not kept
        # A list and a tuple of the same fetches are different plans: each rebuilds its own type.
        as_list, as_tuple = sess.run([ys[1], ys[2]], {x: value}), sess.run((ys[1], ys[2]), {x: value})
        assert type(as_list) is list and type(as_tuple) is tuple
        np.testing.assert_array_equal(as_tuple[1], value + 2.0)
        for i, y in enumerate(ys):
            np.testing.assert_array_equal(sess.run(y, {x: value}), value + i)
        assert len(sess._plans) == 64
        np.testing.assert_array_equal(sess.run(ys[0], {x: value}), value)  # evicted, worked out again
