"""A crash in Julia code ends the process (issue 15): a non-zero status and
Julia's message, in every way Julia code runs, never a hang.

Julia's own handlers print ``signal (N): ...`` and a backtrace; after heap
corruption glibc aborts inside ``free`` holding malloc's lock, printing the
backtrace then waits for that lock forever, and the runtime's watchdog ends
the process instead (kernels_cpp/src/tfjl_julia/signals.cc).  Each crash runs
in a child process with a time limit, so a hang fails its test.  The signals
Julia survives (GC safepoints, stack overflow, ReadOnlyMemoryError,
DivideError) must leave the watchdog alone.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bridge import customop
from support.build import op_folder, toolchain_missing
from support import REPO

pytestmark = pytest.mark.skipif(bool(toolchain_missing()), reason=toolchain_missing() or "toolchain present")


# The watchdog's 10 s (signals.h, kFatalHandlerSeconds), Julia's start and
# the op's load, on a shared 2-core machine.
TIMEOUT = 120

CRASH_SPEC = """Crash
double x(n)
@attr string how = "none"
double y(n) -> output
"""

CRASH_JL = """
# An @inbounds write one element past a malloc'ed buffer overwrites the size
# of the next heap chunk; free() finds it and glibc aborts inside free,
# holding the arena's lock.
function corrupt_heap()
    p = Libc.malloc(120_000)
    a = unsafe_wrap(Array, Ptr{UInt}(p), 15_000)
    n = ccall(:malloc_usable_size, Csize_t, (Ptr{Cvoid},), p) ÷ sizeof(UInt)
    @inbounds a[n + 1] = typemax(UInt) >> 4
    Libc.free(p)
end

# A null pointer only known at run time (a constant one LLVM turns into a trap).
const NULL_ADDRESS = Ref{UInt}(0)

const CRASHES = Dict("heap" => corrupt_heap,
                     "null" => () -> unsafe_load(Ptr{Int}(NULL_ADDRESS[])),
                     "abort" => () -> ccall(:abort, Cvoid, ()))

function crash(y, x, how)
    how == "none" || CRASHES[how]()
    y .= x
    return nothing
end
crash_grad(grad_x, grad_y, y, x, how) = nothing
"""

# mode -> (how the child runs the op, extra environment)
MODES = {
    # Posted from TF's pool threads (inline_small_graphs=0 keeps the graph off the caller's thread).
    "default": ("session", {}),
    "synchronous": ("session", {"TFBRIDGE_JULIA_ASYNC": "0"}),
    "julia_thread": ("julia_thread", {}),
    "eval": ("eval", {}),
}

CHILD = """
import sys
import bridge
from bridge import customop, julia
how, run = sys.argv[1], sys.argv[2]
crash = customop.load({folder!r}).crash
if run == "eval":
    julia.eval("1 + 1")
    print("go", flush=True)
    julia.eval(f'crash(zeros(1), zeros(1), "{{how}}")')
else:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = crash(x, how=how)
        ok = crash(x)
    config = bridge.SessionConfig(julia_thread=True) if run == "julia_thread" else \\
        bridge.SessionConfig(inline_small_graphs=0)
    sess = bridge.Session(g, config=config)
    assert list(sess.run(ok, {{x: [1.0]}})) == [1.0]
    print("go", flush=True)
    sess.run(y, {{x: [1.0]}})
print("survived", flush=True)
"""

# how -> (the signal that ends the process, what Julia's handler prints)
CRASHES = {
    "heap": (signal.SIGABRT, "signal (6): Aborted"),
    "null": (signal.SIGSEGV, "signal (11): Segmentation fault"),
    "abort": (signal.SIGABRT, "signal (6): Aborted"),
}


@pytest.fixture(scope="module")
def crash_folder(tmp_path_factory) -> Path:
    folder = op_folder(tmp_path_factory.mktemp("crash"), "Crash", CRASH_SPEC, CRASH_JL)
    customop.build(folder)
    return folder


def run_crash(folder: Path, how: str, mode: str) -> tuple[subprocess.CompletedProcess, float]:
    run, extra = MODES[mode]
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    code = textwrap.dedent(CHILD.format(folder=str(folder)))
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", code, how, run], capture_output=True, text=True,
                              timeout=TIMEOUT, env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{how} in mode {mode}: the process hung for {TIMEOUT} s\n"
                    f"stdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    return proc, time.monotonic() - start


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("how", list(CRASHES))
def test_a_crash_in_julia_code_ends_the_process_with_julias_message(crash_folder, how, mode):
    proc, seconds = run_crash(crash_folder, how, mode)
    sig, julia_says = CRASHES[how]
    report = f"{how} in mode {mode}: exit {proc.returncode} after {seconds:.1f} s\nstdout:\n{proc.stdout}\n" \
             f"stderr:\n{proc.stderr[-4000:]}"
    assert "go" in proc.stdout and "survived" not in proc.stdout, report
    assert proc.returncode == -sig, report
    assert julia_says in proc.stderr, report
    if how == "heap":
        assert "free(): invalid next size" in proc.stderr, report  # glibc's own finding
        # Julia's handler either finished or was stuck and the watchdog said so.
        stuck = "tf-julia-bridge: fatal signal 6 (SIGABRT)" in proc.stderr
        assert stuck or "Allocations:" in proc.stderr, report


def test_signals_julia_survives_leave_the_watchdog_alone(crash_folder):
    """GC safepoint faults (GC-heavy code on every Julia thread) never start
    the watchdog's clock; a stack overflow, a write to read-only memory and
    SIGFPE start it and stop it again, and the process lives on."""
    code = textwrap.dedent("""
        from bridge import julia
        counts = julia.eval('''
            handler_counts() = [unsafe_load(cglobal((:tfjl_fatal_handlers_started, "libtfjl_julia.so"), UInt64)),
                                unsafe_load(cglobal((:tfjl_fatal_handlers_returned, "libtfjl_julia.so"), UInt64))]
            tasks = [Threads.@spawn begin
                         s = 0.0; t0 = time()
                         while time() - t0 < 3; s += sum(rand(1000)); end
                         s
                     end for _ in 1:Threads.nthreads()]
            sum(fetch.(tasks)) > 0
            Int[handler_counts(); Base.gc_num().pause; Threads.nthreads()]
        ''')
        started, returned, collections, threads = counts.tolist()
        assert threads >= 2 and collections > 50, counts
        assert started == returned == 0, counts
        julia.eval("deep(n) = deep(n + 1) + 1")
        for code in ["deep(1)", "unsafe_store!(Ptr{UInt8}(cglobal(:malloc)), 0x00)",
                     "ccall(:raise, Cint, (Cint,), 8)"]:
            try:
                julia.eval(code)
                raise AssertionError(code + " did not throw")
            except julia.JuliaError as e:
                print(str(e).splitlines()[0])
        print(julia.eval("Int.(handler_counts())").tolist())
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.split("\n")
    assert lines[:3] == ["StackOverflowError:", "ReadOnlyMemoryError()", "DivideError: integer division error"], \
        proc.stdout
    assert lines[3] == "[3, 3]", proc.stdout
