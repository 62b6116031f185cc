"""Shared helpers for the benchmarks: timing, and running the stock-TensorFlow
anchor in a separate process (TensorFlow must never share a process with Julia)."""
from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
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


#: What report (and check_goal) print for a figure that misses its goal.
MISSED = "GOAL MISSED:"

_UNIT = r"(x|s|ms|us|µs|%)"
_GOAL = re.compile(rf"^\s*(<=|<|>=|>)\s*([0-9]*\.?[0-9]+)\s*{_UNIT}?\s*(?:$|[,;(])")
#: A printed figure with its goal: "  <label> <value>[unit]   (goal: <goal>)".
_FIGURE = re.compile(rf"^\s*(?P<label>\S.*?)\s+(?P<value>-?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(?P<unit>{_UNIT})?"
                     r"\s+\(goal: (?P<goal>[^)]*)\)")


def goal_met(value: float, goal: str, unit: str | None = "x") -> bool | None:
    """Whether ``value`` (in ``unit``) meets ``goal`` ("<= 1.2x", "< 1x", ">= 1.8x, with 2 cores
    free", "<= 0.5", "<= 50 ms"), or None where the goal is no comparison with a number
    ("about 1x", "report only") or is in another unit than the value."""
    match = _GOAL.match(goal)
    if match is None:
        return None
    want_unit = match[3] or "x"
    if want_unit != (unit or "x"):
        return None
    bound = float(match[2])
    return {"<=": value <= bound, "<": value < bound, ">=": value >= bound, ">": value > bound}[match[1]]


def check_goal(name: str, value: float, goal: str, unit: str | None = "x") -> bool | None:
    """goal_met, and a line saying so when the figure misses its goal."""
    met = goal_met(value, goal, unit)
    if met is False:
        print(f"  {MISSED} {name} = {value:.3f}{unit or ''}, goal {goal}", flush=True)
    return met


def missed_goals(output: str) -> list[str]:
    """The figures a bench's output printed with "(goal: ...)" that miss it (what
    `make bench-check` fails on, whether or not the bench printed them through report)."""
    misses = []
    for line in output.splitlines():
        figure = _FIGURE.match(line)
        if figure and goal_met(float(figure["value"]), figure["goal"], figure["unit"]) is False:
            misses.append(f"{figure['label']} = {figure['value']}{figure['unit'] or ''}, goal {figure['goal']}")
    return misses


def report(title: str, rows: list[tuple[str, float, str]], ratio_name: str, ratio: float, goal: str) -> None:
    """Print the bench's figures and its ratio, and check the ratio against ``goal`` (check_goal)."""
    print(title)
    for label, value, unit in rows:
        print(f"  {label:<48s} {value:12.2f} {unit}")
    print(f"  {ratio_name:<48s} {ratio:12.3f}x   (goal: {goal})")
    check_goal(ratio_name, ratio, goal)


def main(argv: list[str]) -> int:
    """``python bench/_common.py LOG...``: list the goals the benches' logs missed; exit 1 if any."""
    misses = [f"{Path(log).stem}: {miss}" for log in argv for miss in missed_goals(Path(log).read_text())]
    for miss in misses:
        print(f"{MISSED} {miss}")
    print(f"{len(misses)} goal(s) missed" if misses else "every figure with a goal meets it")
    return 1 if misses else 0


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
