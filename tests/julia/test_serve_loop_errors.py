"""A Julia exception outside the user function's `try` fails only that call.

The runtime wraps an op's arguments for Julia (kernels_cpp/src/tfjl_julia/
invoke.cc) before `TFBridge.protect` or a compiled entry's `try` is
entered, and formats a failure after it; a Julia exception there (Julia
running out of memory while it copies a string input, a user type whose
`parent` throws while the failure is formatted) used to unwind past the
runtime into the Julia thread's serving loop: that thread stopped serving,
and the call it was making never finished (its `Session.run` waited
forever).  Now such a call fails with a TF error naming the op and the
exception (ResourceExhausted for OutOfMemoryError, Internal otherwise) and
the thread goes on serving.

Each case runs in a child process with a time limit: before the fix it hung.
After each failure the child checks that every Julia thread still serves
(one rendezvous op per thread, run at once: each waits until all have
started, which needs every thread) and that the session still computes.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.build import op_folder, toolchain_missing
from support import REPO

ROOT = REPO
pytestmark = pytest.mark.skipif(bool(toolchain_missing()), reason=toolchain_missing() or "toolchain present")

# A string input is copied into a Julia String while the runtime wraps the
# arguments, before the function's `try`: the allocation that fails under a
# tight address-space limit.
WRAP_SPEC = """
WrapFail
string s()
double x(n)
double y(n) -> output
"""

WRAP_JL = """
wrap_fail(y, s, x) = (y .= x .+ (sizeof(s) > 100 ? 1.0 : 0.0); nothing)
wrap_fail_grad(grad_x, grad_y, y, s, x) = (grad_x .= 3 .* grad_y; nothing)
"""

# Numeric only: the compiled entry.  x[1] == -1 (-2 in the gradient) throws
# a MethodError about an array type whose `parent` throws: formatting that
# failure (which looks for a read-only input among the arguments) threw out
# of the entry's `catch`.
PARENT_SPEC = """
ParentFail
double x(n)
double y(n) -> output
"""

PARENT_JL = """
struct NoParent <: AbstractArray{Float64,1} end
Base.size(::NoParent) = (1,)
Base.getindex(::NoParent, i::Int) = 0.0
Base.parent(::NoParent) = error("NoParent has no parent")
module ParentHelpers
bump!(v::Vector{Float64}) = v
end
function parent_fail(y, x)
    x[1] == -1 && ParentHelpers.bump!(NoParent())
    x[1] == -3 && throw(OutOfMemoryError())
    y .= 2 .* x
    return nothing
end
parent_fail_grad(grad_x, grad_y, y, x) = (x[1] == -2 && ParentHelpers.bump!(NoParent()); grad_x .= 2 .* grad_y; nothing)
"""

RENDEZVOUS_SPEC = """
Rendezvous
double x(n)
int64 t(n) -> output
@attr int64 need = 1
"""

# Each call waits (up to 20 s) until `need` calls have arrived: `need` of
# them run together only if `need` Julia threads serve.
RENDEZVOUS_JL = """
const ARRIVED = Threads.Atomic{Int}(0)
function rendezvous(t, x, need)
    Threads.atomic_add!(ARRIVED, 1)
    t0 = time()
    while ARRIVED[] < need && time() - t0 < 20
        Libc.systemsleep(0.001)
    end
    t .= ARRIVED[] >= need ? Threads.threadid() : -Threads.threadid()
    return nothing
end
"""

CHILD = r"""
import os, resource, sys, time
import numpy as np
import bridge
from bridge import customop, errors

wrap = customop.load(sys.argv[1])
parent = customop.load(sys.argv[2])
meet = customop.load(sys.argv[3])
nthreads = bridge.julia.eval("Threads.nthreads()")
assert nthreads >= 2, nthreads
print("threads", nthreads, flush=True)

POOL = bridge.SessionConfig(inline_small_graphs=0)
MODES = {"pool": POOL, "caller": bridge.SessionConfig(), "julia_thread": bridge.SessionConfig(julia_thread=True)}

def every_thread_serves(label):
    # One rendezvous per Julia thread, run at once from TF's pool: each waits
    # for all of them, so all finish quickly only if every thread serves.
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(np.zeros(1))
        ts = [meet.rendezvous(x, need=nthreads) for _ in range(nthreads)]
    bridge.julia.eval("Main.ARRIVED[] = 0")
    t0 = time.monotonic()
    with bridge.Session(g, config=POOL) as sess:
        got = sess.run(ts, timeout=60)
    took = time.monotonic() - t0
    tids = sorted(int(t[0]) for t in got)
    assert tids == list(range(1, nthreads + 1)), (label, tids)
    assert took < 15, (label, took)
    print("serving", label, tids, round(took, 2), flush=True)

def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")

def with_address_limit(extra, fn):
    # Room for `extra` more bytes of address space, then Julia runs out.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + extra, hard))
    try:
        return fn()
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

every_thread_serves("start")

S = 256 << 20
big = np.array(b"x" * S, dtype=object)
small = np.array(b"abc", dtype=object)
xv = np.array([1.0, 2.0])

def expect(exc_type, fn, *needles):
    try:
        fn()
    except exc_type as e:
        text = getattr(e, "message", None) or str(e)
        for n in needles:
            assert n in text, (n, text[:2000])
        return text
    raise AssertionError(f"no {exc_type.__name__}")

for mode, config in MODES.items():
    g = bridge.Graph()
    with g.as_default():
        s = bridge.placeholder(bridge.string, [], name="s")
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = wrap.wrap_fail(s, x)
        dx, = bridge.gradients(bridge.ops.sum(y, 0), x)
    with bridge.Session(g, config=config) as sess:
        assert np.array_equal(sess.run(y, {s: small, x: xv}, timeout=60), xv)
        # The address space holds TF's copy of the string and the kernel's, not
        # Julia's.  The gradient op alone: y fed, so WrapFail does not run.
        for label, fetch, feed, op in (("forward", y, {s: big, x: xv}, "WrapFail: Julia function wrap_fail "),
                                       ("gradient", dx, {s: big, x: xv, y: xv}, "WrapFailGrad: Julia function wrap_fail_grad ")):
            text = with_address_limit(2 * S + S // 2,
                lambda: expect(errors.ResourceExhaustedError, lambda: sess.run(fetch, feed, timeout=60),
                               op, "OutOfMemoryError", "input 's'"))
            print("oom", mode, label, text.splitlines()[0][:300], flush=True)
            every_thread_serves(f"{mode} {label}")
        assert np.array_equal(sess.run(y, {s: small, x: xv}, timeout=60), xv)
        assert np.array_equal(sess.run(dx, {s: small, x: xv}, timeout=60), [3.0, 3.0])

for mode, config in MODES.items():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = parent.parent_fail(x)
        dx, = bridge.gradients(bridge.ops.sum(y, 0), x)
    with bridge.Session(g, config=config) as sess:
        for label, fetch, bad, op in (("forward", y, -1.0, "ParentFail: Julia function parent_fail "),
                                      ("gradient", dx, -2.0, "ParentFailGrad: Julia function parent_fail_grad ")):
            entered = bridge.julia.entry_calls()
            text = expect(errors.InternalError, lambda: sess.run(fetch, {x: np.array([bad, 1.0])}, timeout=60),
                          op, "bump!", "NoParent")
            assert bridge.julia.entry_calls() > entered, "the call did not take the compiled entry"

            print("internal", mode, label, text.splitlines()[0][:300], flush=True)
            every_thread_serves(f"{mode} parent {label}")
        assert np.array_equal(sess.run(y, {x: xv}, timeout=60), 2 * xv)
        assert np.array_equal(sess.run(dx, {x: xv}, timeout=60), [2.0, 2.0])

# Julia's OutOfMemoryError inside the function is ResourceExhausted too.
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    y = parent.parent_fail(x)
with bridge.Session(g) as sess:
    expect(errors.ResourceExhaustedError, lambda: sess.run(y, {x: np.array([-3.0, 1.0])}, timeout=60),
           "ParentFail: Julia function parent_fail failed: OutOfMemoryError()")
    assert np.array_equal(sess.run(y, {x: xv}, timeout=60), 2 * xv)

# bridge.julia.call copies a string argument the same way (room for its
# UTF-8 bytes and the runtime's copy).
bridge.julia.eval("strlen(s) = sizeof(s)")
text_arg = "x" * S
text = with_address_limit(2 * S + S // 2,
    lambda: expect(bridge.julia.JuliaError, lambda: bridge.julia.call("strlen", text_arg), "OutOfMemoryError"))
print("host", text.splitlines()[0][:300], flush=True)
every_thread_serves("host call")
assert bridge.julia.call("strlen", "abcd") == 4
print("ok")
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    parent = tmp_path_factory.mktemp("serveloop")
    return [op_folder(parent, "WrapFail", WRAP_SPEC, WRAP_JL),
            op_folder(parent, "ParentFail", PARENT_SPEC, PARENT_JL),
            op_folder(parent, "Rendezvous", RENDEZVOUS_SPEC, RENDEZVOUS_JL)]


def test_julia_exceptions_outside_the_functions_try_fail_only_that_call(folders):
    """Julia running out of memory while the runtime wraps a string input
    (generic path: forward and gradient op, posted from TF's pool, from the
    caller's thread and on a julia_thread session; bridge.julia.call), and a
    failure whose formatting throws (compiled entries, forward and gradient):
    each call fails with ResourceExhausted / Internal naming the op and the
    exception, every Julia thread still serves afterwards, and the sessions
    compute again.  Before the fix the first such call never returned.  An
    OutOfMemoryError thrown by the function itself is ResourceExhausted too."""
    env = {**__import__("os").environ, "TFBRIDGE_JULIA_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), *map(str, folders)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    assert proc.stdout.strip().endswith("ok"), proc.stdout[-3000:]
