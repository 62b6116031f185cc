"""Every method of LinearAlgebra's mutating functions refuses to write an op's
read-only input (issue 36 item 6).

`mul!(x, Symmetric(A), b)`, `lmul!(qr(A).Q, x)` and other LinearAlgebra calls
wrote through a read-only input (BLAS's symv!, LAPACK's gemqrt!), changing a
Const for good; the guards covered only the paths someone had listed.  This
test lists nothing: tests/customop/readonly_methods.jl takes every method of
LinearAlgebra's and BLAS's exported functions ending in `!` from
`methods(...)`, finds arguments each runs with, and calls it again with each
array argument over read-only memory (TFBridge.ReadOnlyArray, as inputs
arrive): that memory must stay unchanged, a write must be refused, a read must
not be.  A method it finds no arguments for fails the test unless
NOT_APPLICABLE there says why, so a new Julia or LinearAlgebra version cannot
bring an unguarded method silently.  Base's exported functions ending in
`!` are checked from `methods(...)` too: the few methods that take an input by
its storage (the pointer) rather than as an AbstractArray (`setindex!`, which
refuses) are listed with a call each (BASE_STORAGE there).

It runs in a `julia` child process with TFBridge.jl included (no TensorFlow:
the guards are Julia's), with a time limit, since a write through a pointer
may crash.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from bridge.julia import buildtools
from support import REPO

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
include(ARGS[1])
include(ARGS[2])
r = ReadOnlyMethods.sweep(TFBridge)
println("COUNTS ", r.methods, " ", r.covered, " ", r.not_applicable, " ", r.positions)
unlisted, stale, problems = ReadOnlyMethods.base_check(TFBridge)
for (kind, items) in (("UNCOVERED", r.uncovered), ("HOLE", r.holes), ("READ", r.refused_reads), ("STALE", r.stale),
                      ("BASE_UNLISTED", unlisted), ("BASE_STALE", stale), ("BASE_PROBLEM", problems))
    foreach(x -> println(kind, " ", replace(x, "\n" => " ")), items)
end
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    script = tmp_path_factory.mktemp("readonly_methods") / "sweep.jl"
    script.write_text(SCRIPT)
    start = time.monotonic()
    done = subprocess.run([buildtools.julia_config().executable, "--startup-file=no", "--history-file=no", str(script),
                           str(REPO / "julia" / "TFBridge.jl"), os.path.join(HERE, "readonly_methods.jl")],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    (counts,) = [line.split()[1:] for line in lines if line.startswith("COUNTS ")]
    found = {kind: [line[len(kind) + 1:] for line in lines if line.startswith(kind + " ")]
             for kind in ("UNCOVERED", "HOLE", "READ", "STALE", "BASE_UNLISTED", "BASE_STALE", "BASE_PROBLEM")}
    methods, covered, not_applicable, positions = map(int, counts)
    print(f"swept {methods} methods in {time.monotonic() - start:.0f} s: {covered} covered "
          f"({positions} read-only calls), {not_applicable} not applicable")
    return {"methods": methods, "covered": covered, "not_applicable": not_applicable, "positions": positions,
            **found}


def test_no_method_writes_a_read_only_array(sweep):
    assert sweep["HOLE"] == []


def test_no_method_refuses_to_read_a_read_only_array(sweep):
    assert sweep["READ"] == []


def test_every_method_is_covered_or_says_why_not(sweep):
    assert sweep["UNCOVERED"] == []
    assert sweep["STALE"] == []
    # The sweep is real: most methods ran, and it reaches the issue's functions' many methods.
    assert sweep["methods"] >= 600 and sweep["covered"] >= 0.8 * sweep["methods"], sweep


def test_no_method_of_bases_mutating_functions_writes_an_input_by_its_storage(sweep):
    """Base's exported functions ending in `!` (from `methods(...)` too):
    a method that takes a read-only input as an AbstractArray writes it
    through `setindex!`, which refuses; the few that take it by its storage
    (DenseArray, StridedArray: the pointer) are listed in BASE_STORAGE of
    readonly_methods.jl with a call each, which must run and leave the
    memory unchanged.  A new one fails here until it is looked at."""
    assert sweep["BASE_UNLISTED"] == []
    assert sweep["BASE_STALE"] == []
    assert sweep["BASE_PROBLEM"] == []
