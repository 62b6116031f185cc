"""Unbounded recursion in Julia code is a StackOverflowError in every mode
(issue 15): ``bridge.julia.eval`` raises ``RecursionError`` (a
``JuliaStackOverflowError``), an op fails with a TF error saying
``StackOverflowError``, and the process stays usable.

Julia 1.5 named an overflow on the stack of Julia's first thread
``ReadOnlyMemoryError()`` (it guessed that thread's stack from RLIMIT_STACK;
kernels_cpp/src/tfjl_julia/signals.cc).  With ``TFBRIDGE_JULIA_THREADS=1``
every call runs on that thread, so each mode is tested there and with all of
Julia's threads.  Each run is a child process with a time limit.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bridge import customop
from support.build import op_folder, toolchain_missing
from support import REPO

pytestmark = pytest.mark.skipif(bool(toolchain_missing()), reason=toolchain_missing() or "toolchain present")


TIMEOUT = 180

RECURSE_SPEC = """Recurse
double x(n)
double y(n) -> output
"""

RECURSE_JL = """
deep(n) = deep(n + 1) + 1
function recurse(y, x)
    x[1] > 0 && deep(1)
    y .= x
    return nothing
end
recurse_grad(grad_x, grad_y, y, x) = nothing
"""

# mode -> (how the child runs the op, extra environment)
MODES = {
    "caller_thread": ("session", {}),        # a small graph: run by the caller, the op posted to Julia
    "pool": ("pool", {}),                    # TF's pool threads post the op
    "synchronous": ("pool", {"TFBRIDGE_JULIA_ASYNC": "0"}),
    "julia_thread": ("julia_thread", {}),
    "eval": ("eval", {}),
}

CHILD = """
import sys
import bridge
from bridge import customop, errors, julia
run = sys.argv[1]
recurse = customop.load({folder!r}).recurse
if run == "eval":
    for _ in range(3):
        try:
            julia.eval("deep(1)")
            raise AssertionError("no error")
        except RecursionError as e:
            assert isinstance(e, julia.JuliaError) and type(e).__name__ == "JuliaStackOverflowError", repr(e)
            assert str(e).startswith("StackOverflowError"), str(e)[:2000]
    try:
        julia.call("deep", 1)
        raise AssertionError("no error")
    except RecursionError as e:
        assert "StackOverflowError" in str(e), str(e)[:2000]
else:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = recurse(x)
    config = {{"session": None, "pool": bridge.SessionConfig(inline_small_graphs=0),
              "julia_thread": bridge.SessionConfig(julia_thread=True)}}[run]
    sess = bridge.Session(g, config=config)
    for _ in range(3):
        try:
            sess.run(y, {{x: [1.0]}})
            raise AssertionError("no error")
        except errors.InternalError as e:
            assert "Recurse: Julia function recurse failed: StackOverflowError" in str(e), str(e)[:2000]
    assert list(sess.run(y, {{x: [0.0, 2.0]}})) == [0.0, 2.0]
assert julia.eval("sum(1:10)") == 55
print("usable", julia.eval("Threads.nthreads()"))
"""


@pytest.fixture(scope="module")
def recurse_folder(tmp_path_factory) -> Path:
    folder = op_folder(tmp_path_factory.mktemp("recurse"), "Recurse", RECURSE_SPEC, RECURSE_JL)
    customop.build(folder)
    return folder


@pytest.mark.parametrize("threads", ["1", "all"])
@pytest.mark.parametrize("mode", list(MODES))
def test_unbounded_recursion_is_a_stack_overflow_error(recurse_folder, mode, threads):
    run, extra = MODES[mode]
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    env.pop("TFBRIDGE_JULIA_THREADS", None)
    if threads == "1":
        env["TFBRIDGE_JULIA_THREADS"] = "1"
    code = textwrap.dedent(CHILD.format(folder=str(recurse_folder)))
    try:
        proc = subprocess.run([sys.executable, "-c", code, run], capture_output=True, text=True, timeout=TIMEOUT,
                              env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mode {mode}: hung for {TIMEOUT} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    assert proc.returncode == 0, f"mode {mode}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "ReadOnlyMemoryError" not in proc.stdout + proc.stderr
    expected = "usable 1" if threads == "1" else "usable"
    assert expected in proc.stdout, proc.stdout
