"""Where generated Julia kernels run, and who waits for whom.

A kernel created on Julia's thread (Session(julia_thread=True)) is
synchronous and calls Julia directly.  Anywhere else it is asynchronous: the
pool thread queues the call for Julia's thread and goes back to TF's pool,
and Julia's thread finishes the op.  Julia's thread polls its queue briefly
after work, then sleeps; a Python thread waiting for a run on Julia's thread
polls for its result the same way.  TFBRIDGE_JULIA_ASYNC=0 and TFBRIDGE_JULIA_POLL_US=0
turn those off; the same graphs must then give the same results.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, julia
from support.build import op_chain

POOL = bridge.SessionConfig(inline_small_graphs=0)  # TF's multi-threaded executor, whatever the graph size


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("scheduling")


def _write_op(root: Path, name: str, spec: str, julia_source: str) -> Path:
    folder = root / name
    folder.mkdir(exist_ok=True)
    (folder / "custom_op.txt").write_text(spec)
    (folder / f"{customop.spec.snake_case(name)}.jl").write_text(julia_source)
    return folder


@pytest.fixture(scope="module")
def step_dir(root) -> Path:
    return _write_op(root, "JlStep", "JlStep\ndouble x(n)\ndouble y(n) -> output\n",
                     "jl_step(y, x) = (y .= 2 .* x .+ 1; nothing)\n")


@pytest.fixture(scope="module")
def step(step_dir):
    return customop.load(step_dir)


def expected_chain(xv: np.ndarray, length: int) -> np.ndarray:
    for _ in range(length):
        xv = 2 * xv + 1
    return xv


def test_a_chain_of_julia_ops_crosses_to_julias_thread_once_per_run(step):
    """Inline executor in the caller's thread: the first op is handed over, and
    Julia's thread runs the rest of the chain itself, calling Julia directly."""
    g, x, y = op_chain(step.jl_step, 5)
    xv = np.arange(4.0)
    with bridge.Session(g) as sess:  # 6 operations: the caller's thread runs the graph
        sess.run(y, {x: xv})
        direct_before, handed_before = julia.call_counts()
        for _ in range(20):
            np.testing.assert_array_equal(sess.run(y, {x: xv}), expected_chain(xv, 5))
        direct_after, handed_after = julia.call_counts()
    assert handed_after - handed_before == 20
    assert direct_after - direct_before == 20 * 4


def test_julia_thread_session_calls_every_op_directly(step):
    g, x, y = op_chain(step.jl_step, 5)
    xv = np.arange(4.0)
    with bridge.Session(g, config=bridge.SessionConfig(julia_thread=True)) as sess:
        sess.run(y, {x: xv})
        direct_before, handed_before = julia.call_counts()
        for _ in range(20):
            np.testing.assert_array_equal(sess.run(y, {x: xv}), expected_chain(xv, 5))
        direct_after, handed_after = julia.call_counts()
    assert handed_after - handed_before == 20  # the run itself, handed to Julia's thread
    assert direct_after - direct_before == 20 * 5


def test_python_threads_waiting_on_julias_thread_get_their_own_results(step):
    """A Python thread waiting for a run (or a host call) on Julia's thread polls
    for its result before it sleeps.  Many short runs from several threads, some
    over while their caller polls and some after it sleeps, each get their own
    result, and each waiting task outlives Julia's thread's last touch of it."""
    g, x, y = op_chain(step.jl_step, 1)
    with bridge.Session(g, config=bridge.SessionConfig(julia_thread=True)) as sess:
        def worker(k: int) -> None:
            for i in range(300):
                xv = np.full(3, float(1000 * k + i))
                np.testing.assert_array_equal(sess.run(y, {x: xv}), 2 * xv + 1)
                if i % 50 == 0:
                    assert julia.eval(f"{k} + {i}") == k + i
                    time.sleep(0.001)  # let Julia's thread fall asleep now and then

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for future in [pool.submit(worker, k) for k in range(4)]:
                future.result(timeout=300)


CALLER_SLEEPS_SCRIPT = """
import json, resource, sys
import numpy as np
import bridge
from bridge import customop

step = customop.load(sys.argv[1])
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    y = step.jl_step(x)
xv = np.arange(30_000.0)  # about 10-30 us of Julia work: longer than the caller's way back into TF
with bridge.Session(g) as sess:  # two operations: the thread calling run executes the graph
    for _ in range(10):
        sess.run(y, {x: xv})
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    for _ in range(200):
        out = sess.run(y, {x: xv})
    slept = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
assert np.array_equal(out, 2 * xv + 1)
print(json.dumps({"slept": slept}))
"""


@pytest.mark.serial  # a count of sleeps with a 10 ms poll: polling needs a core, as Julia's thread does
def test_the_thread_running_a_small_graph_waits_for_its_julia_op_awake(step_dir):
    """A Session runs a small graph in the thread calling it: the Julia kernel
    hands its call over and Julia's thread finishes the step.  The calling
    thread used to go back into TensorFlow and sleep until then, and the
    wake-up (50-100 us on 2-core VMs) cost a Julia op on 10,000-60,000
    doubles 80-140 us more than native Mul.  It now polls for the end of the
    step for the poll time.  Counted, not timed: the calling thread's
    voluntary context switches over 200 runs, with a poll time long enough
    (10 ms) for a loaded machine (preemption while polling is involuntary,
    not counted).  Before the fix: 200 of 200 runs slept, at a load of 14 on
    2 cores; after it 0."""
    env = {**os.environ, "TFBRIDGE_JULIA_POLL_US": "10000"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CALLER_SLEEPS_SCRIPT), str(step_dir)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    slept = json.loads(proc.stdout.strip().splitlines()[-1])["slept"]
    assert slept <= 40, f"the calling thread slept in {slept} of 200 runs waiting for a short Julia op"

ONE_CORE_SCRIPT = """
import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before Julia's threads start: they inherit it
import numpy as np
import bridge
from bridge import customop

step = customop.load(sys.argv[1])
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    y = step.jl_step(x)
xv = np.arange(10.0)
with bridge.Session(g) as sess:  # a small graph: the calling thread runs it and polls for the Julia op
    for _ in range(20):
        sess.run(y, {x: xv})
    c0 = time.process_time()
    for _ in range(100):
        out = sess.run(y, {x: xv})
    cpu = time.process_time() - c0
assert np.array_equal(out, 2 * xv + 1)
print(json.dumps({"cpu_us_per_run": cpu / 100 * 1e6}))
"""


@pytest.mark.serial  # CPU time per run, with the process on one core
def test_polls_yield_the_core_to_the_thread_they_wait_for(step_dir):
    """With the process on one core, the calling thread polling for the Julia op's
    end and Julia's thread polling for work share it.  A plain spin kept the
    other thread off the core for the whole poll, so every run cost both polls
    (93 us over native with 50 us polls; 2.7 ms with 1,000 us); the polls now
    yield the core every few spins.  Counted in CPU time, which the machine's
    other work inflates far less than wall time: with 2,000 us polls a run
    spun about 4,000 us of CPU before, about 20-40 us now."""
    env = {**os.environ, "TFBRIDGE_JULIA_POLL_US": "2000"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(ONE_CORE_SCRIPT), str(step_dir)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cpu_us = json.loads(proc.stdout.strip().splitlines()[-1])["cpu_us_per_run"]
    assert cpu_us < 500, f"a run on one core took {cpu_us:.0f} us of CPU: the polls spun instead of yielding"


NAP_SCRIPT = """
import json, sys, threading, time
import numpy as np
import bridge
from bridge import customop

nap = customop.load(sys.argv[1])
g = bridge.Graph()
with g.as_default():
    seconds = bridge.placeholder(bridge.float64, [1], name="seconds")
    napped = nap.jl_nap(seconds)
    a = bridge.placeholder(bridge.float64, [None], name="a")
    native = bridge.ops.add(bridge.ops.mul(a, a), a)
# The first session of the process sizes TF's shared pool: 2 threads.
config = bridge.SessionConfig(inter_op_parallelism_threads=2, inline_small_graphs=0)
with bridge.Session(g, config=config) as sess:
    sess.run(native, {a: [1.0]})
    sess.run(napped, {seconds: [0.0]})
    failures = []   # a nap that fails must fail the script, not only print
    threading.excepthook = lambda args: failures.append(f"{args.exc_type.__name__}: {args.exc_value}")
    threads = [threading.Thread(target=sess.run, args=(napped, {seconds: [0.5]})) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # every nap is queued or running by now
    t0 = time.perf_counter()
    out = sess.run(native, {a: np.arange(3.0)})
    waited = time.perf_counter() - t0
    assert out.tolist() == [0.0, 2.0, 6.0], out
    for t in threads:
        t.join()
    assert not failures, failures
print(json.dumps({"waited": waited}))
"""


@pytest.mark.serial  # 0.2 s for three runs to take the pool, 0.25 s for the native one: measured alone
@pytest.mark.parametrize("kernels", ["async", "sync"])
def test_pool_threads_run_other_work_while_julia_is_busy(root, kernels):
    """ADCME's kernels hold a TF pool thread for as long as Julia works; these
    give it back.  Three 0.5 s Julia calls are queued from a pool of two
    threads; a native graph on the same pool runs at once, where synchronous
    kernels (TFBRIDGE_JULIA_ASYNC=0) make it wait for a nap to end.  (Julia
    does not hold Python's GIL while it naps, so this measuring Python
    thread runs whatever TF's threads do.)"""
    folder = _write_op(root, "JlNap", "JlNap\ndouble x(n)\ndouble y(n) -> output\n",
                       "jl_nap(y, x) = (Libc.systemsleep(x[1]); y .= x; nothing)\n")
    customop.build(folder)
    env = {**os.environ, "TFBRIDGE_JULIA_ASYNC": "0" if kernels == "sync" else "1"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NAP_SCRIPT), str(folder)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    waited = json.loads(proc.stdout.strip().splitlines()[-1])["waited"]
    if kernels == "async":
        assert waited < 0.25, f"a native op waited {waited:.2f} s for pool threads held by Julia calls"
    else:
        assert waited > 0.25, f"synchronous kernels should hold the pool (waited only {waited:.2f} s)"


def test_julias_thread_sleeps_when_idle(step):
    """The polls after each call and each run are bounded: an idle process uses no CPU."""
    g, x, y = op_chain(step.jl_step, 3)
    for config in (POOL, bridge.SessionConfig(julia_thread=True)):
        with bridge.Session(g, config=config) as sess:
            for _ in range(50):
                sess.run(y, {x: [1.0]})
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(1.0)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    assert cpu < 0.1 * wall, f"{cpu:.3f} s of CPU in {wall:.2f} s of idling"


SWITCHES_SCRIPT = """
import json, sys
import numpy as np
import bridge
from bridge import customop, julia

step = customop.load(sys.argv[1])
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    ys = [x]
    for _ in range(30):
        ys.append(step.jl_step(ys[-1]))
    # Independent, so the pool runs them in parallel (distinct inputs: TF would merge equal ops).
    branches = [step.jl_step(bridge.ops.mul(x, bridge.constant(float(k), dtype=bridge.float64))) for k in range(2, 6)]
xv = np.arange(5.0)
want = [xv]
for _ in range(30):
    want.append(2 * want[-1] + 1)
counts = {}
for name, config in [("pool", bridge.SessionConfig(inline_small_graphs=0)),
                     ("inline", bridge.SessionConfig()),
                     ("julia_thread", bridge.SessionConfig(julia_thread=True))]:
    with bridge.Session(g, config=config) as sess:
        before = julia.call_counts()
        for _ in range(10):
            outs = sess.run(ys[1:] + branches, {x: xv})
            for out, w in zip(outs, want[1:] + [2 * k * xv + 1 for k in range(2, 6)], strict=True):
                assert np.array_equal(out, w), (name, out, w)
        after = julia.call_counts()
    counts[name] = [a - b for a, b in zip(after, before, strict=True)]
print(json.dumps(counts))
"""


@pytest.mark.parametrize("switches", [{"TFBRIDGE_JULIA_ASYNC": "0"}, {"TFBRIDGE_JULIA_POLL_US": "0"},
                                      {"TFBRIDGE_JULIA_ASYNC": "0", "TFBRIDGE_JULIA_POLL_US": "0"}],
                         ids=["sync-kernels", "no-polling", "both"])
def test_switches_keep_results_exact(step, step_dir, switches):
    """Synchronous kernels (pool threads wait for Julia) and a Julia thread that
    sleeps at once give the same results in every executor mode."""
    env = {**os.environ, **switches}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SWITCHES_SCRIPT), str(step_dir)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    calls = 10 * 34
    assert counts["julia_thread"] == [calls, 10]  # all direct; the run handed over
    if switches.get("TFBRIDGE_JULIA_ASYNC") == "0":
        assert counts["pool"] == [0, calls]  # every call handed over by a waiting pool thread
    else:
        assert sum(counts["pool"]) == calls


NO_JULIA_SCRIPT = """
import sys
import numpy as np
import bridge
from bridge import errors

ops = bridge.load_op_library(sys.argv[1])  # no bridge.julia: the first kernel starts Julia, and cannot
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    y = ops.jl_step(x)
    z = bridge.ops.neg(x)
for config in (bridge.SessionConfig(inline_small_graphs=0), bridge.SessionConfig()):
    with bridge.Session(g, config=config) as sess:
        for _ in range(2):  # the failure is reported again, and the session stays usable
            try:
                sess.run(y, {x: [1.0]})
                raise SystemExit("the Julia op ran without Julia")
            except errors.InternalError as e:
                assert "JlStep: Julia function jl_step failed: Julia is not available" in str(e), e
                assert "/nonexistent" in str(e), e
            assert sess.run(z, {x: [1.0]}).tolist() == [-1.0]
print("no julia ok")
"""


@pytest.mark.parametrize("kernels", ["async", "sync"])
def test_a_julia_that_cannot_start_is_a_tf_error(step_dir, kernels):
    library = customop.build(step_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFBRIDGE_JULIA")}
    env.update(TFBRIDGE_JULIA_BINDIR="/nonexistent/bin", TFBRIDGE_JULIA_IMAGE="/nonexistent/sys.so",
               TFBRIDGE_JULIA_ASYNC="0" if kernels == "sync" else "1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NO_JULIA_SCRIPT), str(library)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "no julia ok" in proc.stdout, proc.stdout + proc.stderr[-3000:]


OPEN_SESSIONS_SCRIPT = """
import sys
import numpy as np
import bridge
from bridge import customop

step = customop.load(sys.argv[1])


def graph(op):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = op(x)
    return g, x, y


left_open = []
for op in (bridge.ops.neg, step.jl_step):
    g, x, y = graph(op)
    left_open.append((bridge.Session(g, config=bridge.SessionConfig(julia_thread=True)), x, y))
for sess, x, y in left_open:
    assert sess.run(y, {x: np.ones(2)}).tolist() in ([-1.0, -1.0], [3.0, 3.0])
print("ran", flush=True)
"""


def test_a_process_exiting_with_sessions_left_open_exits_cleanly(step_dir):
    """Sessions never closed are closed by the interpreter's last garbage
    collection, which also frees cffi-owned objects in no set order.  Closing
    once used this thread's shared TF_Status, freed earlier in that same pass:
    TF wrote into freed memory, and the process died of heap corruption (or
    hung, in Julia's crash handler)."""
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(OPEN_SESSIONS_SCRIPT), str(step_dir)],
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process hung at exit:\n{(exc.stderr or b'')[-3000:]!r}")
    assert proc.stdout.strip() == "ran" and proc.returncode == 0, \
        f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
