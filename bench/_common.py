"""Shared helpers for the benchmarks: timing in alternating rounds, figures
that keep their rounds (median and spread), stock TensorFlow's anchor in a
separate process (TensorFlow must never share a process with Julia), and the
report every bench prints.

The method (CONTRIBUTING.md, "Benchmarks"): each bench times its modes in
rounds that alternate between them (mode A, mode B, ..., then A again), so a
burst of noise from the machine's other tenants lands on one round of every
mode rather than on all the rounds of one; each figure is the median of its
rounds, printed with its spread (min-max and the interquartile range), and a
ratio is the median of the per-round ratios of the paired rounds.  A goal
counts as met on the median.
"""
from __future__ import annotations

import inspect
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Union

# Rounds of alternating modes per bench (their median is the figure); BENCH_ROUNDS overrides.
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))


class Figure(float):
    """A figure measured in rounds: its value, as a float, is the median of
    the rounds; ``samples`` keeps them for the spread.  Arithmetic on it gives
    plain floats (of the median); :meth:`map` and :func:`ratio` keep the rounds."""

    samples: tuple[float, ...]
    cpu: "Figure | None"

    def __new__(cls, samples: Iterable[float], cpu: "Figure | None" = None) -> "Figure":
        values = tuple(float(v) for v in samples)
        if not values:
            raise ValueError("a Figure needs at least one round")
        self = super().__new__(cls, statistics.median(values))
        self.samples = values
        self.cpu = cpu
        return self

    @property
    def lo(self) -> float:
        return min(self.samples)

    @property
    def hi(self) -> float:
        return max(self.samples)

    @property
    def iqr(self) -> tuple[float, float]:
        """The interquartile range (first and third quartiles; both the median for one round)."""
        if len(self.samples) < 2:
            return float(self), float(self)
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]

    def map(self, f: Callable[[float], float]) -> "Figure":
        """The same rounds through ``f`` (a change of unit, a per-op share)."""
        return Figure([f(v) for v in self.samples], self.cpu.map(f) if self.cpu is not None else None)

    def spread(self, digits: int = 2) -> str:
        """``min-max`` of the rounds."""
        return f"{self.lo:.{digits}f}-{self.hi:.{digits}f}"

    def describe(self, digits: int = 2, unit: str = "") -> str:
        """``[min-max, IQR q1-q3, n rounds]``."""
        q1, q3 = self.iqr
        return (f"[{self.lo:.{digits}f}-{self.hi:.{digits}f}{unit}, IQR {q1:.{digits}f}-{q3:.{digits}f}{unit}, "
                f"{len(self.samples)} rounds]")


Number = Union[float, int, Figure]


def ratio(a: Number, b: Number) -> Figure:
    """a / b round by round when both are Figures of as many rounds (paired:
    alternating rounds are timed side by side), else against the other's median."""
    if isinstance(a, Figure) and isinstance(b, Figure) and len(a.samples) == len(b.samples):
        return Figure([x / y for x, y in zip(a.samples, b.samples, strict=True)])
    if isinstance(a, Figure):
        return a.map(lambda x: x / float(b))
    if isinstance(b, Figure):
        return b.map(lambda y: float(a) / y)
    return Figure([float(a) / float(b)])


def difference(a: Number, b: Number) -> Figure:
    """a - b, round by round where both are paired Figures (as ratio())."""
    if isinstance(a, Figure) and isinstance(b, Figure) and len(a.samples) == len(b.samples):
        return Figure([x - y for x, y in zip(a.samples, b.samples, strict=True)])
    if isinstance(a, Figure):
        return a.map(lambda x: x - float(b))
    if isinstance(b, Figure):
        return b.map(lambda y: float(a) - y)
    return Figure([float(a) - float(b)])


class Remote:
    """A mode timed in another process (an :class:`AnchorProcess`'s), one
    round per request, so that it alternates with this process's modes."""

    def __init__(self, anchor: "AnchorProcess", name: str, calls: int):
        self.anchor, self.name, self.calls = anchor, name, calls

    def round(self) -> tuple[float, float]:
        """One round: (wall, CPU) microseconds per call."""
        answer = self.anchor.ask({"name": self.name, "calls": self.calls})
        return answer["us"], answer["cpu_us"]


def time_round(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """One round of ``calls`` calls: (wall, process CPU) microseconds per call."""
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        fn()
    t1, c1 = time.perf_counter(), time.process_time()
    return (t1 - t0) / calls * 1e6, (c1 - c0) / calls * 1e6


def alternating_rounds(fns: Mapping[str, Union[Callable[[], object], Remote]], calls: int,
                       rounds: int | None = None, warmup: bool = True) -> dict[str, Figure]:
    """Microseconds per call of each mode (a function, or a :class:`Remote`
    mode), timed in ``rounds`` alternating rounds of ``calls`` calls each.
    Each Figure's ``cpu`` holds the process CPU time per call (all threads:
    Julia's and TF's too), for the rounds where the wall time is noisy."""
    rounds = ROUNDS if rounds is None else rounds
    if warmup:
        for fn in fns.values():
            fn.round() if isinstance(fn, Remote) else fn()
    walls: dict[str, list[float]] = {name: [] for name in fns}
    cpus: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            wall, cpu = fn.round() if isinstance(fn, Remote) else time_round(fn, calls)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {name: Figure(walls[name], Figure(cpus[name])) for name in fns}


def interleaved_per_call_us(fns: dict[str, Callable[[], object]], calls: int, rounds: int | None = None
                            ) -> dict[str, Figure]:
    """alternating_rounds (kept under its old name): the median of the rounds,
    no longer the best round."""
    return alternating_rounds(fns, calls, rounds)


def per_call_us(fn: Callable[[], object], calls: int, repeats: int = 5) -> float:
    """The median of ``repeats`` rounds' mean time of one call, in microseconds
    (one mode alone: prefer alternating_rounds where there are several)."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return sorted(times)[len(times) // 2] * 1e6


def timed_rounds(modes: Mapping[str, Callable[[], float]], rounds: int | None = None,
                 warmup: bool = True) -> dict[str, Figure]:
    """For modes that time themselves (a fresh process reporting its start,
    a build): each mode() returns one round's figure; rounds alternate."""
    rounds = ROUNDS if rounds is None else rounds
    if warmup:
        for mode in modes.values():
            mode()
    got: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, mode in modes.items():
            got[name].append(mode())
    return {name: Figure(values) for name, values in got.items()}


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
                          timeout=timeout, env=_ANCHOR_ENV)
    if proc.returncode:
        raise RuntimeError(f"anchor failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


_ANCHOR_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}

# The same timer for the anchor's subprocess, from this function's own source.
ANCHOR_TIMER = "import time\nfrom typing import Callable\n" + inspect.getsource(per_call_us)

# What an AnchorProcess's child runs after its set-up code: times one round
# of the named function per request (a JSON line on stdin), answers on stdout.
_ANCHOR_LOOP = """
import json as _json, sys as _sys, time as _time
print(_json.dumps({"ready": True, "info": globals().get("ANCHOR_INFO")}), flush=True)
for _line in _sys.stdin:
    _req = _json.loads(_line)
    if _req.get("quit"):
        break
    _fn, _calls = ANCHOR_FNS[_req["name"]], _req["calls"]
    _c0, _t0 = _time.process_time(), _time.perf_counter()
    for _ in range(_calls):
        _fn()
    _t1, _c1 = _time.perf_counter(), _time.process_time()
    print(_json.dumps({"us": (_t1 - _t0) / _calls * 1e6, "cpu_us": (_c1 - _c0) / _calls * 1e6}), flush=True)
"""


class AnchorProcess:
    """Stock TensorFlow (or anything that must not share this process) in a
    child process that stays up, so that its modes alternate round by round
    with this process's (:func:`alternating_rounds`).  ``setup`` is Python
    code defining ``ANCHOR_FNS = {name: function}`` (and optionally
    ``ANCHOR_INFO``, any JSON value, read back as :attr:`info`)::

        with AnchorProcess(code) as anchor:
            times = alternating_rounds({"ours": f, "TF": anchor.mode("run", 100)}, 100)
    """

    def __init__(self, setup: str, timeout: float = 600):
        self.timeout = timeout
        self.proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(setup) + _ANCHOR_LOOP],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=_ANCHOR_ENV)
        self.info = self._answer()["info"]

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=self.timeout)
            raise RuntimeError(f"the anchor process failed:\n{self.proc.stderr.read()[-3000:]}")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def mode(self, name: str, calls: int) -> Remote:
        """The child's ``ANCHOR_FNS[name]`` as a mode of alternating_rounds."""
        return Remote(self, name, calls)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "AnchorProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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


def load_average() -> str:
    """The machine's load (1, 5, 15 minutes) and core count, for the report:
    figures measured on a shared machine say how shared it was."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f}, {five:.1f}, {fifteen:.1f} on {os.cpu_count()} cores"


def _value(value: float, digits: int) -> str:
    return f"{value:12.{digits}f}"


def report(title: str, rows: list[tuple[str, float, str]], ratio_name: str, ratio: float, goal: str,
           *, unit: str = "x") -> None:
    """Print a bench's figures and its headline ratio against its goal.

    A row's value or the ratio may be a :class:`Figure` (the median of
    alternating rounds): its spread follows on the same row, or on the next
    line for the ratio, whose line keeps the form ``name value x (goal: ...)``
    (what `make bench-check` reads: missed_goals), checked here on the median
    (check_goal).  ``unit``: the headline's, when it is not a ratio (" us" for
    a difference)."""
    print(f"{title}   ({load_average()})")
    for label, value, row_unit in rows:
        spread = f"   {value.describe()}" if isinstance(value, Figure) and len(value.samples) > 1 else ""
        print(f"  {label:<48s} {_value(value, 2)} {row_unit}{spread}")
    print(f"  {ratio_name:<48s} {ratio:12.3f}{unit}   (goal: {goal})")
    if isinstance(ratio, Figure) and len(ratio.samples) > 1:
        print(f"  {'':<48s} {'':12s}    median of paired rounds {ratio.describe(3, unit.strip())}")
    check_goal(ratio_name, ratio, goal, unit.strip() or "x")


def ratio_line(label: str, value: float, note: str = "", digits: int = 3, unit: str = "x") -> None:
    """One more ratio (or figure) under a report, with its spread when it is a Figure."""
    spread = f"   {value.describe(digits, unit)}" if isinstance(value, Figure) and len(value.samples) > 1 else ""
    print(f"  {label:<48s} {value:12.{digits}f}{unit}{note}{spread}")


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
