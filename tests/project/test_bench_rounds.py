"""The benchmarks' method (issue 35 item 4; CONTRIBUTING.md, "Benchmarks"):
alternating rounds, figures that are medians and keep their spread, ratios
of paired rounds, and a goal counted as met on the median, which
`make bench-check` reads back from the printed line.  bench/_common.py is
loaded from its file (it imports no bridge module at its top)."""
from __future__ import annotations

import ast
import importlib.util
import itertools

import pytest

from support import REPO

BENCH = REPO / "bench"


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("bench_common_under_test", BENCH / "_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_figure_is_the_median_of_its_rounds_with_its_spread(common):
    fig = common.Figure([5.0, 1.0, 4.0, 2.0, 3.0])
    assert float(fig) == 3.0
    assert (fig.lo, fig.hi, fig.iqr) == (1.0, 5.0, (2.0, 4.0))
    assert fig.describe(1, " us") == "[1.0-5.0 us, IQR 2.0-4.0 us, 5 rounds]"
    assert fig.map(lambda v: v * 2).samples == (10.0, 2.0, 8.0, 4.0, 6.0)


def test_a_ratio_is_the_median_of_the_paired_rounds_ratios(common):
    # A slow stretch that hit both modes in round 2 cancels in its pair's ratio;
    # the ratio of the medians (3.0 / 2.0 = 1.5) would not be the figure.
    a = common.Figure([2.0, 10.0, 3.0])
    b = common.Figure([1.0, 5.0, 2.0])
    r = common.ratio(a, b)
    assert r.samples == (2.0, 2.0, 1.5)
    assert float(r) == 2.0
    assert common.difference(a, b).samples == (1.0, 5.0, 1.0)


def test_alternating_rounds_alternate_the_modes(common):
    order: list[str] = []
    times = common.alternating_rounds({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                                      calls=2, rounds=3, warmup=False)
    assert order == ["a", "a", "b", "b"] * 3
    assert [len(f.samples) for f in times.values()] == [3, 3]
    assert [len(f.cpu.samples) for f in times.values()] == [3, 3]


@pytest.mark.parametrize("rounds, missed", [
    # The median meets the goal though the spread straddles it: met.
    ([1.0, 1.5, 1.9, 2.6, 3.0], []),
    # The median misses it though the best round meets it: missed.
    ([1.0, 2.1, 2.2, 2.4, 3.0], ["fake / anchor = 2.200x, goal <= 2x"]),
], ids=["median-meets", "median-misses"])
def test_a_goal_counts_on_the_median(common, capsys, rounds, missed):
    common.report("Fake", [("ours", common.Figure(rounds), "us")], "fake / anchor", common.Figure(rounds), "<= 2x")
    out = capsys.readouterr().out
    assert common.missed_goals(out) == missed
    assert [line for line in out.splitlines() if common.MISSED in line] == (
        [f"  {common.MISSED} fake / anchor = 2.200x, goal <= 2x"] if missed else [])


def test_a_difference_in_microseconds_is_checked_in_its_unit(common, capsys):
    common.ratio_line("30,000 doubles: Julia - native", common.Figure([9.0, 12.0, 13.0]), "   (goal: <= 10 us)",
                      digits=1, unit=" us")
    common.ratio_line("100 doubles: Julia - native", common.Figure([3.0, 4.0, 5.0]), "   (goal: <= 10 us)",
                      digits=1, unit=" us")
    common.ratio_line("a fallback mode", common.Figure([30.0, 40.0]), "   (no goal: without the image)",
                      digits=1, unit=" us")
    assert common.missed_goals(capsys.readouterr().out) == ["30,000 doubles: Julia - native = 12.0us, goal <= 10 us"]


def _bench_files():
    return sorted(BENCH.glob("bench_*.py"))


@pytest.mark.parametrize("path", _bench_files(), ids=lambda p: p.stem)
def test_every_bench_times_in_rounds_and_prints_a_goal(path):
    """Every bench takes its figures from bench/_common.py's rounds (alternating_rounds,
    timed_rounds, an AnchorProcess, or Figures of its own alternating rounds) and prints
    at least one figure beside its goal, the line `make bench-check` checks."""
    tree = ast.parse(path.read_text(), str(path))
    imported = set(itertools.chain.from_iterable(
        (alias.name for alias in node.names) for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "_common"))
    assert imported & {"alternating_rounds", "timed_rounds", "AnchorProcess", "Figure"}, (
        f"{path.name} imports none of _common's rounds: {sorted(imported)}")
    assert "interleaved_per_call_us" not in imported, f"{path.name}: the best round is not the figure"
    source = path.read_text()
    assert "goal:" in source or "report(" in source, f"{path.name} prints no goal"
