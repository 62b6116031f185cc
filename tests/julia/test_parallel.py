"""Julia ops run in parallel: Julia starts with a thread per CPU
(TFBRIDGE_JULIA_THREADS), each serving calls, so independent Julia ops of a
graph, and Julia ops of other sessions, run at the same time."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, julia
from support.build import busy_op, op_folder, toolchain_missing
from support.threads import run_threads
from support import REPO


CPUS = os.cpu_count() or 1

# Speed-ups and latencies measured against the machine's cores: run alone (`make test`'s serial phase).
pytestmark = pytest.mark.serial

# Computes for s seconds (no allocation, no yield), then y = x.
WORK_SPEC, WORK_JL = busy_op("JlWork")

# A machine with one CPU cannot run two Julia ops at once: a skip even on CI (tests/support/ci.py).
needs_two_cpus = pytest.mark.unavailable_if(CPUS < 2, reason="parallel Julia ops need 2 CPUs (Julia caps its threads)")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    return customop.load(op_folder(tmp_path_factory.mktemp("parallel"), "JlWork", WORK_SPEC, WORK_JL))


def _graph(work, n):
    """n independent JlWork ops (distinct inputs, so TF does not merge them)."""
    g = bridge.Graph()
    with g.as_default():
        s = bridge.placeholder(bridge.float64, [], name="s")
        xs = [bridge.placeholder(bridge.float64, [None], name=f"x{k}") for k in range(n)]
        ys = [work.jl_work(x, s) for x in xs]
    return g, s, xs, ys


def _seconds(sess, s, xs, ys, seconds):
    feeds = {s: seconds, **{x: np.full(2, float(k)) for k, x in enumerate(xs)}}
    start = time.perf_counter()
    outs = sess.run(ys, feeds)
    elapsed = time.perf_counter() - start
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out, [float(k), float(k)])
    return elapsed


def test_julia_has_a_serving_thread_per_cpu():
    assert julia.eval("Threads.nthreads()") == min(CPUS, int(os.environ.get("TFBRIDGE_JULIA_THREADS", CPUS)))


@needs_two_cpus
@pytest.mark.parametrize("mode", ["pool", "caller's thread"])
def test_two_independent_julia_ops_run_at_the_same_time(work, mode):
    config = bridge.SessionConfig(inline_small_graphs=0) if mode == "pool" else None
    one, two = _graph(work, 1), _graph(work, 2)
    with bridge.Session(one[0], config=config) as s1, bridge.Session(two[0], config=config) as s2:
        _seconds(s1, *one[1:], 0.01), _seconds(s2, *two[1:], 0.01)  # compiled and warm
        t1 = min(_seconds(s1, *one[1:], 0.3) for _ in range(2))
        t2 = min(_seconds(s2, *two[1:], 0.3) for _ in range(2))
    assert t2 <= 1.3 * t1, f"two ops took {t2:.2f} s against {t1:.2f} s for one: not in parallel"


@needs_two_cpus
def test_a_short_op_is_not_held_up_by_a_long_one_in_another_session(work):
    long_graph, short_graph = _graph(work, 1), _graph(work, 1)
    with bridge.Session(long_graph[0]) as long_sess, bridge.Session(short_graph[0]) as short_sess:
        _seconds(short_sess, *short_graph[1:], 0.001)
        alone = min(_seconds(short_sess, *short_graph[1:], 0.001) for _ in range(20))
        started = threading.Event()
        done = threading.Event()

        def long_run():
            started.set()
            _seconds(long_sess, *long_graph[1:], 3.0)
            done.set()

        thread = threading.Thread(target=long_run, daemon=True)
        thread.start()
        started.wait()
        time.sleep(0.3)  # the long op is running now
        during = []
        while not done.is_set() and len(during) < 50:
            during.append(_seconds(short_sess, *short_graph[1:], 0.001))
        thread.join(30)
    assert during, "the long op ended before the short ones ran"
    assert max(during) - alone < 0.05, f"a 1 ms op took up to {max(during) * 1e3:.0f} ms during a 3 s op"


def test_many_sessions_and_threads_with_gc_get_exact_results(work):
    """4 Python threads x 2 sessions, each running graphs of independent and
    chained Julia ops while Julia collects garbage on every call."""
    g = bridge.Graph()
    with g.as_default():
        s = bridge.placeholder(bridge.float64, [], name="s")
        x = bridge.placeholder(bridge.float64, [None], name="x")
        branches = [work.jl_work(x * float(k + 1), s) for k in range(3)]
        chained = work.jl_work(work.jl_work(x + 1.0, s), s)
    configs = [None, bridge.SessionConfig(inline_small_graphs=0), bridge.SessionConfig(julia_thread=True)]

    def worker(t):
        sessions = [bridge.Session(g, config=configs[(t + k) % 3]) for k in range(2)]
        try:
            for i in range(40):
                xv = np.arange(4.0) + 100 * t + i
                sess = sessions[i % 2]
                outs = sess.run(branches + [chained], {x: xv, s: 0.0})
                for k in range(3):
                    np.testing.assert_array_equal(outs[k], xv * (k + 1), err_msg=f"thread {t}, run {i}")
                np.testing.assert_array_equal(outs[3], xv + 1, err_msg=f"thread {t}, run {i}")
                julia.eval("GC.gc()") if i % 10 == 0 else None
        finally:
            for sess in sessions:
                sess.close()

    run_threads(worker, 4, timeout=300)


def test_tfbridge_julia_threads_sets_the_number_of_threads():
    code = textwrap.dedent("""
        from bridge import julia
        print(julia.eval("Threads.nthreads()"))
        """)
    env = {**os.environ, "TFBRIDGE_JULIA_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "1"


def test_julia_code_in_ops_uses_julias_threads(tmp_path):
    """Threads.@spawn / fetch and Threads.@threads inside an op work: their
    tasks take turns with the serving tasks on Julia's threads."""
    spec = "JlThreaded\ndouble x(n)\ndouble y(n) -> output\n"
    source = """
    function jl_threaded(y, x)
        partial = [Threads.@spawn(sum(abs2, x[1:k])) for k in 1:length(x)]
        y .= fetch.(partial)
        # (Julia 1.5 runs @threads serially when called from a thread other than 1.)
        twice = similar(y)
        Threads.@threads for i in eachindex(twice)
            twice[i] = 2 * y[i]
        end
        y .= twice ./ 2
        return nothing
    end
    """
    ops = customop.load(op_folder(tmp_path, "JlThreaded", spec, textwrap.dedent(source)))
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = ops.jl_threaded(x)
    xv = np.arange(1.0, 6.0)
    for config in (None, bridge.SessionConfig(inline_small_graphs=0), bridge.SessionConfig(julia_thread=True)):
        with bridge.Session(g, config=config) as sess:
            np.testing.assert_array_equal(sess.run(y, {x: xv}), np.cumsum(xv ** 2))
