"""Regressions of issue 12 ("no crash and no silent corruption"): each ran a
user's steps that crashed the process or silently changed data.  What could
crash runs in a subprocess with a time limit, so a crash fails its test and
not the suite.  (Read-only inputs: tests/customop/test_readonly.py; the read-only
cache: tests/platform/test_cache_readonly.py; dynamic outputs and the output pool's
allocation failure: their own tests; fuzzing: tests/customop/test_fuzz.py.)
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, errors
from support.build import op_folder
from support import REPO


def run_child(code: str, timeout: float = 300) -> str:
    """Runs ``code`` in a fresh interpreter; fails on a crash, a hang or an exception."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung for {timeout} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    assert proc.returncode == 0, (f"the child died with exit {proc.returncode}"
                                  f"{' (signal %d)' % -proc.returncode if proc.returncode < 0 else ''}\n"
                                  f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout


# ---------------------------------------------------------------- 1. bad string feeds

def test_a_refused_string_feed_leaves_the_heap_intact():
    """["a", None, "b"] raised TypeError after allocating TF_TString slots it never
    initialised; TF_DeleteTensor then freed garbage (5 crashes in 5 runs)."""
    out = run_child("""
        import bridge
        g = bridge.Graph()
        with g.as_default():
            s = bridge.placeholder(bridge.string, [None], name="s")
            n = bridge.ops.string_length(s)
        sess = bridge.Session(g)
        refused = 0
        for _ in range(300):
            assert list(sess.run(n, {s: ["x" * 100] * 8})) == [100] * 8
            for bad in (["a", None, "b"], ["a", 3], [b"a", 1.5, "c"], ["ok", ["nested"]]):
                try:
                    sess.run(n, {s: bad})
                except TypeError as e:
                    assert "string element" in str(e) and "placeholder 's:0'" in str(e), e
                    refused += 1
        print("refused", refused)
    """)
    assert "refused 1200" in out


# ---------------------------------------------------------------- 2. close() during runs

CLOSE_DURING_RUNS = """
    import threading, time
    import numpy as np
    import bridge
    from bridge import errors
    {setup}
    sess = bridge.Session(g)
    outcomes, done = [], 0
    def loop():
        global done
        while True:
            try:
                sess.run(y, {{x: np.ones(64)}})
                done += 1
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
    assert len(outcomes) == 8 and done > 0, (outcomes, done)
    try:
        sess.run(y, {{x: np.ones(64)}})
        raise AssertionError("a run after close() succeeded")
    except RuntimeError as e:
        assert "closed Session" in str(e)
    sess.close()  # idempotent
    print("ok", sorted(set(outcomes)))
"""


@pytest.mark.parametrize("attempt", range(3))
def test_close_while_eight_threads_run_a_native_graph(attempt):
    setup = """
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = x
        for _ in range(30):
            y = bridge.ops.tanh(y)
    """
    assert "ok" in run_child(CLOSE_DURING_RUNS.format(setup=textwrap.indent(textwrap.dedent(setup), "    ")))


@pytest.mark.parametrize("attempt", range(2))
def test_close_while_eight_threads_run_a_julia_op(twice_folder, attempt):
    setup = f"""
    from bridge import customop
    twice = customop.load({str(twice_folder)!r}).twice
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = x
        for _ in range(10):
            y = twice(y)
    """
    assert "ok" in run_child(CLOSE_DURING_RUNS.format(setup=textwrap.indent(textwrap.dedent(setup), "    ")))


# ---------------------------------------------------------------- 3. a refused load changes nothing

def test_a_refused_load_leaves_the_loaded_op_alone(tmp_path):
    """A second folder with the same op name, whose Julia computes 100x, was
    refused only after including its .jl, which redefined the first op's function."""
    out = run_child(f"""
        import numpy as np
        import bridge
        from bridge import customop
        from pathlib import Path
        first, second = Path({str(tmp_path / 'first')!r}), Path({str(tmp_path / 'second')!r})
        customop.init("TwiceAgain", first)
        customop.init("TwiceAgain", second)
        (second / "twice_again.jl").write_text(
            "twice_again(y, x) = (y .= 100 .* x; nothing)\\n"
            "twice_again_grad(gx, gy, y, x) = (gx .+= 100 .* gy; nothing)\\n")
        op = customop.load(first).twice_again
        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder(bridge.float64, [None], name="x")
            y = op(x)
        sess = bridge.Session(g)
        assert list(sess.run(y, {{x: [1.0, 2.0]}})) == [2.0, 4.0]
        try:
            customop.load(second)
            raise AssertionError("the second load was not refused")
        except customop.SpecError as e:
            # refused before building, naming the folder that took the name
            assert "already registered an op named TwiceAgain" in str(e) and str(first) in str(e), e
        assert list(sess.run(y, {{x: [1.0, 2.0]}})) == [2.0, 4.0], "the refused load changed the op"
        print("unchanged")
    """)
    assert "unchanged" in out


# ---------------------------------------------------------------- 5. lossy feeds

@pytest.fixture(scope="module")
def feeds():
    g = bridge.Graph()
    with g.as_default():
        p = {name: bridge.placeholder(getattr(bridge, name), [None], name=f"p_{name}")
             for name in ("float32", "float64", "int32", "int64", "uint8", "bool", "complex64")}
        y = {name: bridge.ops.identity(t) for name, t in p.items()}
    with bridge.Session(g) as sess:
        yield sess, p, y


@pytest.mark.parametrize("dtype, value, source, offending, reason", [
    ("float32", np.array([1.0, 1 + 2j]), "complex128", "(1+2j)", "imaginary part"),
    ("float64", [0j, 0j], "complex128", "0j", "imaginary part"),
    ("int32", [1.0, 1.7], "float64", "1.7", "must be integers"),
    ("int32", 1.7, "float64", "1.7", "must be integers"),
    ("int32", [2 ** 40], "int64", str(2 ** 40), "holds integers in"),
    ("int64", [2 ** 63], "uint64", str(2 ** 63), "holds integers in"),
    ("uint8", [3, -1], "int64", "-1", "holds integers in [0, 255]"),
    ("bool", [0, 2], "int64", "2", "holds integers in [0, 1]"),
    ("int64", [1.0, float("nan")], "float64", "nan", "must be integers"),
    ("int64", [float("inf")], "float64", "inf", "must be integers"),
    ("float32", [1.0, 1e300], "float64", "1e+300", "overflow float32"),
])
def test_lossy_feeds_are_refused_naming_placeholder_dtypes_and_value(feeds, dtype, value, source, offending, reason):
    sess, p, y = feeds
    with pytest.raises(TypeError) as info:
        sess.run(y[dtype], {p[dtype]: value})
    message = str(info.value)
    assert f"placeholder 'p_{dtype}:0'" in message, message
    assert f"{source} values" in message and f"({dtype})" in message, message
    assert f"first offending value is {offending}" in message and reason in message, message


@pytest.mark.parametrize("dtype, value, expected", [
    ("float32", np.array([0.1, 2.5]), np.array([0.1, 2.5], np.float32)),   # precision loss is fine
    ("float64", [1, 2, 3], [1.0, 2.0, 3.0]),
    ("float32", 2 ** 40, [float(2 ** 40)]),
    ("int32", [1.0, -3.0], [1, -3]),                                           # integral floats
    ("int64", [True, False], [1, 0]),
    ("uint8", np.array([0, 255], np.int64), [0, 255]),
    ("bool", [1, 0], [True, False]),
    ("complex64", [1.5, 2 + 1j], [1.5, 2 + 1j]),
    ("float64", [float("nan"), float("inf")], [float("nan"), float("inf")]),  # not finite already
])
def test_the_casts_users_rely_on_still_work(feeds, dtype, value, expected):
    sess, p, y = feeds
    got = sess.run(y[dtype], {p[dtype]: value if np.ndim(value) else [value]})
    np.testing.assert_array_equal(got, np.asarray(expected, dtype=got.dtype))


def test_strings_into_a_numeric_placeholder_are_refused(feeds):
    sess, p, y = feeds
    with pytest.raises(TypeError, match=r"placeholder 'p_float64:0'.*holds float64"):
        sess.run(y["float64"], {p["float64"]: ["1.5"]})


def test_ragged_lists_are_a_value_error_naming_the_placeholder(feeds):
    sess, p, y = feeds
    with pytest.raises(ValueError, match=r"placeholder 'p_float64:0'"):
        sess.run(y["float64"], {p["float64"]: [[1.0], [1.0, 2.0]]})


# ---------------------------------------------------------------- sizes past int64

def test_a_size_expression_that_overflows_int64_is_an_error_not_a_wrapped_size(tmp_path):
    """`y(k*k)` with k = 2**32 wrapped to 0 in int64 (an output of the wrong
    size); the generated kernels now detect the overflow."""
    op = customop.load(op_folder(tmp_path, "SquareSize", "SquareSize\ndouble x(n)\n@attr int64 k = 2\ndouble y(k*k) -> output\n",
                                 "square_size(y, x, k) = (y .= sum(x); nothing)\n")).square_size
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        ok = op(x, k=3)
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"SquareSize: output 'y' dimension 0 is k\*k, which overflows 64 bits "
                                 r"\(k = 4294967296\)"):
            op(x, k=2 ** 32)
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(ok, {x: [1.0, 2.0]}), np.full(9, 3.0))


def test_a_feed_that_does_not_fit_the_static_shape_is_a_value_error():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2, None], name="x")
        y = bridge.ops.identity(x)
    with bridge.Session(g) as sess:
        assert sess.run(y, {x: np.ones((2, 5))}).shape == (2, 5)
        for bad, shape in ((np.ones((5, 5)), r"\(5, 5\)"), (1.0, r"\(\)"), (np.ones((2, 3, 1)), r"\(2, 3, 1\)")):
            with pytest.raises(ValueError, match=rf"shape {shape} to placeholder 'x:0', which has shape \(2, \?\)"):
                sess.run(y, {x: bad})
