"""Python stays live while Julia computes: entries into Julia do not hold the
GIL, so other Python threads run; Julia code that calls into Python takes
the GIL itself, with TFBridge.with_gil."""
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
from bridge import julia
from support.build import busy_op, load_ops
from support import REPO


# The ticker's share of its ticks needs a core beside the busy Julia op: run alone (`make test`'s serial phase).
pytestmark = pytest.mark.serial

TICK = 0.05      # the ticker's period, in seconds
BUSY = 5.0       # how long the Julia op computes

# Computes for s seconds without yielding to anything (no I/O, no sleep): only
# the GIL could stop Python's other threads meanwhile.
BUSY_SPEC, BUSY_JL = busy_op("JlBusy")

# Calls Python's C API from Julia: sets builtins._tfbridge_probe to x[1].
PROBE_SPEC = "JlPythonProbe\ndouble x(n)\ndouble y(n) -> output\n"
PROBE_JL = """
function jl_python_probe(y, x)
    code = "import builtins; builtins._tfbridge_probe = $(x[1])"
    status = TFBridge.with_gil(() -> ccall(:PyRun_SimpleString, Cint, (Cstring,), code))
    status == 0 || error("PyRun_SimpleString failed")
    y .= x
    return nothing
end
"""


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    loaded = load_ops(tmp_path_factory, "live", {"JlBusy": (BUSY_SPEC, BUSY_JL),
                                                 "JlPythonProbe": (PROBE_SPEC, PROBE_JL)})
    return tuple(module for _, module in loaded)


class Ticker:
    """A Python thread counting its ticks, one each TICK seconds while it gets the GIL."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            next_tick += TICK
            time.sleep(max(0.0, next_tick - time.monotonic()))
            self.ticks += 1

    def __enter__(self) -> "Ticker":
        self._thread.start()
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.monotonic() - self.start
        self._stop.set()
        self._thread.join(5)

    @property
    def share(self) -> float:
        return self.ticks / (self.seconds / TICK)


MODES = {"caller's thread": None, "pool": bridge.SessionConfig(inline_small_graphs=0),
         "julia_thread": bridge.SessionConfig(julia_thread=True)}


@pytest.mark.parametrize("mode", list(MODES))
def test_python_threads_tick_while_a_julia_op_computes(ops, mode):
    busy, _ = ops
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        s = bridge.placeholder(bridge.float64, [], name="s")
        y = busy.jl_busy(x, s)
    with bridge.Session(g, config=MODES[mode]) as sess:
        sess.run(y, {x: np.ones(3), s: 0.01})  # compiled and warm
        with Ticker() as ticker:
            out = sess.run(y, {x: np.arange(3.0), s: BUSY})
    np.testing.assert_array_equal(out, np.arange(3.0))
    assert ticker.seconds >= BUSY
    assert ticker.share >= 0.9, f"{ticker.ticks} ticks in {ticker.seconds:.1f} s: Python froze"


def test_python_threads_tick_while_a_host_call_computes(ops):
    julia.eval("jl_busy([0.0], [1.0], fill(0.01))")
    with Ticker() as ticker:
        julia.eval(f"jl_busy([0.0], [1.0], fill({BUSY}))")
    assert ticker.share >= 0.9, f"{ticker.ticks} ticks in {ticker.seconds:.1f} s: Python froze"


@pytest.mark.parametrize("mode", list(MODES))
def test_julia_code_calls_python_with_with_gil(ops, mode):
    import builtins
    _, probe = ops
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = probe.jl_python_probe(x)
    for value in (3.0, 7.0):
        with bridge.Session(g, config=MODES[mode]) as sess:
            np.testing.assert_array_equal(sess.run(y, {x: [value, 1.0]}), [value, 1.0])
        assert builtins._tfbridge_probe == value


def test_with_gil_from_a_host_call_and_nested():
    import builtins
    julia.eval('TFBridge.with_gil(() -> TFBridge.with_gil(() -> ccall(:PyRun_SimpleString, Cint, (Cstring,), '
               '"import builtins; builtins._tfbridge_nested = 5")))')
    assert builtins._tfbridge_nested == 5
    assert julia.eval("TFBridge.with_gil(() -> 1 + 1)") == 2


def test_tfbridge_julia_gil_1_holds_the_gil_around_every_entry(tmp_path):
    """The old behaviour, for Julia code that calls Python without with_gil:
    a Python ticker then stops while Julia computes."""
    code = textwrap.dedent(f"""
        import threading, time
        from bridge import julia
        ticks = 0
        stop = threading.Event()
        def tick():
            global ticks
            while not stop.is_set():
                time.sleep({TICK}); ticks += 1
        julia.eval("busy(s) = (t0 = time(); while time() - t0 < s; end; 1)")
        julia.eval("busy(0.01)")
        t = threading.Thread(target=tick, daemon=True); t.start()
        start = time.monotonic()
        julia.eval("busy(2.0)")
        seconds = time.monotonic() - start
        stop.set(); t.join()
        # Without with_gil, Python's C API is safe only because the GIL is held:
        julia.eval('ccall(:PyRun_SimpleString, Cint, (Cstring,), "import builtins; builtins.x = 1")')
        print(ticks / (seconds / {TICK}))
        """)
    env = {**os.environ, "TFBRIDGE_JULIA_GIL": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.strip().splitlines()[-1]) < 0.3
