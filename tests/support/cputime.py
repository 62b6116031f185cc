"""CPU time per test, for keeping the suite within its budget (CONTRIBUTING.md, "The test suite's time").

Wall times (pytest's ``--durations``) say little on a loaded machine or
under parallel workers; CPU time says what a test costs wherever it runs.
With ``TFBRIDGE_TEST_CPU_LOG=<file>``, every test process (each xdist worker
too) appends one JSON line per test to the file: its node id, its wall time
and the CPU seconds it spent in set-up, call and tear-down, in the test
process and in the child processes it waited for (builds, Julia and
TensorFlow children, oracles).  A module-scoped fixture counts in the test
that first asks for it.  ``python tests/support/cputime.py <file>`` sums them
by module, most expensive first.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

VARIABLE = "TFBRIDGE_TEST_CPU_LOG"


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class CpuLog:
    """The pytest plugin: one line per test, appended to ``path``."""

    def __init__(self, path: Path):
        self.path = path

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        own0, children0 = _cpu()
        wall0 = time.monotonic()
        result = yield
        own1, children1 = _cpu()
        line = json.dumps({"test": item.nodeid, "wall": round(time.monotonic() - wall0, 3),
                           "cpu": round(own1 - own0, 3), "children": round(children1 - children0, 3),
                           "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})
        with open(self.path, "a") as f:  # one write per line: appends from workers do not interleave
            f.write(line + "\n")
        return result


def register(config) -> None:
    """Register the plugin where ``TFBRIDGE_TEST_CPU_LOG`` names a file."""
    path = os.environ.get(VARIABLE)
    if path:
        config.pluginmanager.register(CpuLog(Path(path).resolve()), "tfbridge-cpu-log")


def summary(path: Path, top: int = 40) -> str:
    """CPU seconds by module (own + children), most expensive first."""
    by_module: dict = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for line in path.read_text().splitlines():
        row = json.loads(line)
        entry = by_module[row["test"].split("::")[0]]
        entry[0] += row["cpu"]
        entry[1] += row["children"]
        entry[2] += row["wall"]
        entry[3] += 1
    rows = sorted(by_module.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    total = sum(v[0] + v[1] for v in by_module.values())
    out = [f"{'cpu s':>8} {'own':>8} {'children':>8} {'wall s':>8} {'tests':>6}  module"]
    for module, (own, children, wall, n) in rows[:top]:
        out.append(f"{own + children:8.1f} {own:8.1f} {children:8.1f} {wall:8.1f} {n:6d}  {module}")
    out.append(f"{total:8.1f} in all ({total / 60:.1f} min), {len(rows)} modules")
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
