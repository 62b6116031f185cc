"""Shared helpers for the benchmarks: timing, and running the stock-TensorFlow
anchor in a separate process (TensorFlow must never share a process with Julia)."""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
import time
from typing import Callable


def per_call_us(fn: Callable[[], object], calls: int, repeats: int = 5) -> float:
    """Best-of-``repeats`` mean time of one call, in microseconds."""
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def interleaved_per_call_us(fns: dict[str, Callable[[], object]], calls: int, rounds: int = 15) -> dict[str, float]:
    """Best mean time of one call of each function, in microseconds, measured
    in alternating rounds: a burst of noise from other tenants of the machine
    then lands on one round of every function rather than on all the rounds
    of one of them, and the best round of each is compared."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / calls)
    return {name: t * 1e6 for name, t in best.items()}


def checked_runner(graph, x, y, value, config, sessions: list, check: Callable[[object], None]):
    """Opens a session on ``graph`` (added to ``sessions``, for the caller to
    close once every mode is timed), checks one run's result with ``check``,
    and returns a function that runs it again."""
    import bridge

    sess = bridge.Session(graph, config=config)
    sessions.append(sess)
    check(sess.run(y, {x: value}))
    return lambda: sess.run(y, {x: value})


def vector_runner(make, value, config, sessions: list, check: Callable[[object], None]):
    """checked_runner for ``y = make(x)`` on a float64 placeholder the size of ``value``."""
    import bridge

    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, list(value.shape), name="x")
        y = make(x)
    return checked_runner(g, x, y, value, config, sessions, check)


def run_anchor(code: str, timeout: float = 600) -> dict:
    """Run ``code`` in a fresh interpreter; it must print one JSON object last."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
    if proc.returncode:
        raise RuntimeError(f"anchor failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# The same timer for the anchor's subprocess, from this function's own source.
ANCHOR_TIMER = "import time\nfrom typing import Callable\n" + inspect.getsource(per_call_us)


def report(title: str, rows: list[tuple[str, float, str]], ratio_name: str, ratio: float, goal: str) -> None:
    print(title)
    for label, value, unit in rows:
        print(f"  {label:<48s} {value:12.2f} {unit}")
    print(f"  {ratio_name:<48s} {ratio:12.3f}x   (goal: {goal})")


REPO = __import__("pathlib").Path(__file__).resolve().parent.parent
# The tests' helpers for building custom ops (tests/support/build.py) serve the benchmarks too.
if str(REPO / "tests") not in sys.path:
    sys.path.append(str(REPO / "tests"))


def julia_op(name: str, spec: str, julia_source: str):
    """Build (or reuse) a Julia custom op for a benchmark under build/bench/,
    and return its generated op module."""
    import bridge
    from support.build import op_folder

    return bridge.customop.load(op_folder(REPO / "build" / "bench", name, spec, julia_source))
