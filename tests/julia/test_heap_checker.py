"""Julia under glibc's heap checker (issue 30): ``LD_PRELOAD=libc_malloc_debug.so.0
MALLOC_CHECK_=3`` makes every ``free`` check its pointer, and the bridge's
way into Julia must pass: start Julia, run a Julia op with a static and a
dynamic output and its gradient in every scheduling mode (TF's pool threads
posting calls, a graph run by the caller's thread, ``TFBRIDGE_JULIA_ASYNC=0``,
``julia_thread`` sessions), interrupt runs, close the sessions, idle, exit 0.

It used to abort with ``free(): invalid pointer`` within seconds of
``bridge.julia.init()``: Julia's first thread made a Timer (``sleep(0)``)
every 10 ms between serves, and a Timer's handle comes from
``ccall(:malloc)``, which under the checker is libc's own malloc, while
libjulia frees it with the checker's ``free`` (docs/internals/kernels-cpp.md,
"glibc's heap checker"; tests/data/heap_checker/embed_julia.c shows it
without the bridge).  The child runs with a time limit, so a hang fails too.
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


EMBED_C = REPO / "tests" / "data" / "heap_checker" / "embed_julia.c"

# glibc >= 2.34 moved the checker out of libc into this library.
MALLOC_DEBUG = next((p for p in ("/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
                                 "/usr/lib/aarch64-linux-gnu/libc_malloc_debug.so.0",
                                 "/lib64/libc_malloc_debug.so.0") if os.path.exists(p)), None)

pytestmark = [
    pytest.mark.skipif(bool(toolchain_missing()), reason=toolchain_missing() or "toolchain present"),
    pytest.mark.skipif(MALLOC_DEBUG is None, reason="no libc_malloc_debug.so.0 (glibc < 2.34?)"),
]

# Julia's start, the op's load and 4 modes on a shared 2-core machine, every
# allocation checked (the watchdog's 10 s, should glibc abort).
TIMEOUT = 240


def checker_env(**extra) -> dict:
    """The environment of a child under glibc's heap checker (as tests/customop/test_fuzz.py's)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3", PYTHONFAULTHANDLER="1",
               MALLOC_CHECK_="3", MALLOC_PERTURB_="165", **extra)
    env["LD_PRELOAD"] = " ".join(filter(None, [os.environ.get("LD_PRELOAD"), MALLOC_DEBUG]))
    return env


SPEC = """HeapMix
double x(n)
double s()
double y(n) -> output
double p(?) -> output
"""

# y = 2x (static), p = [x; x].^2 (dynamic, 2n long); computes for s seconds
# first, checking for interrupts.
JL = """
function heap_mix(y, p, x, s)
    t0 = time()
    while time() - t0 < s[]
        TFBridge.checkinterrupt()
    end
    y .= 2 .* x
    p[] = vcat(x, x) .^ 2
    return nothing
end

function heap_mix_grad(grad_x, grad_s, grad_y, grad_p, y, p, x, s)
    n = length(x)
    grad_x .= 2 .* grad_y .+ 2 .* x .* (grad_p[1:n] .+ grad_p[n+1:end])
    return nothing
end
"""

CHILD = """
import os, sys, threading, time
import numpy as np
import bridge
from bridge import customop, julia
from bridge.framework.errors import CancelledError, DeadlineExceededError

julia.init()
print("julia started", flush=True)
ops = customop.load(sys.argv[1])
MODES = {
    "posted": dict(inline_small_graphs=0),  # asynchronous kernels, posted from TF's pool threads
    "caller": {},                           # the small graph runs in the caller's thread
    "synchronous": dict(inline_small_graphs=0),  # with TFBRIDGE_JULIA_ASYNC=0
    "julia_thread": dict(julia_thread=True),
}
rng = np.random.default_rng(30)
for mode, config in MODES.items():
    if mode == "synchronous":  # read as the kernels are made
        os.environ["TFBRIDGE_JULIA_ASYNC"] = "0"
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        s = bridge.placeholder(bridge.float64, [], name="s")
        y, p = ops.heap_mix(x, s)
        loss = bridge.ops.add(bridge.ops.sum(y, [0]), bridge.ops.sum(p, [0]))
        (dx,) = bridge.gradients(loss, [x])
    sess = bridge.Session(g, config=bridge.SessionConfig(**config))
    # n = 0 is left out: an empty x and y share an address, and Julia's
    # broadcast refuses y .= 2 .* x (not the heap checker's concern).
    for n in [1, 3, 17, 1000, 5, 64]:
        xv = rng.standard_normal(n)
        got_y, got_p, got_dx = sess.run([y, p, dx], {x: xv, s: 0.0})
        np.testing.assert_array_equal(got_y, 2 * xv)
        np.testing.assert_array_equal(got_p, np.concatenate([xv, xv]) ** 2)
        np.testing.assert_allclose(got_dx, 2 + 4 * xv, rtol=1e-12)
    try:  # a deadline abandons the run, and the Julia code stops at its check
        sess.run(y, {x: [1.0], s: 30.0}, timeout=0.3)
        raise AssertionError("no DeadlineExceededError")
    except DeadlineExceededError:
        pass
    if mode == "posted":  # bridge.julia.interrupt() from another thread
        timer = threading.Timer(0.3, julia.interrupt)
        timer.start()
        try:
            sess.run(y, {x: [1.0], s: 30.0})
            raise AssertionError("no CancelledError")
        except CancelledError:
            pass
        timer.join()
    assert list(sess.run(y, {x: [1.0, 2.0], s: 0.0})) == [2.0, 4.0]
    sess.close()
    os.environ.pop("TFBRIDGE_JULIA_ASYNC", None)
    print("ok", mode, flush=True)
assert julia.eval("sum(1:10)") == 55
time.sleep(1.0)  # idle: Julia's threads wait between serves
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def heap_mix_folder(tmp_path_factory) -> Path:
    folder = op_folder(tmp_path_factory.mktemp("heapmix"), "HeapMix", SPEC, JL)
    customop.build(folder)
    return folder


def test_julia_ops_gradients_and_interrupts_run_under_the_heap_checker(heap_mix_folder):
    code = textwrap.dedent(CHILD)
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(heap_mix_folder)], capture_output=True,
                              text=True, errors="backslashreplace", timeout=TIMEOUT, env=checker_env(),
                              cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung for {TIMEOUT} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    report = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, report
    assert proc.stdout.split() == ["julia", "started", "ok", "posted", "ok", "caller", "ok", "synchronous",
                                   "ok", "julia_thread", "done"], report
    assert "invalid pointer" not in proc.stderr and "free():" not in proc.stderr, report


def test_idle_julia_survives_the_heap_checker():
    """The issue's reproducer, with the idle time that made it abort every time."""
    code = "import time, bridge.julia as J; J.init(); time.sleep(3); print(J.eval('1 + 1'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          env=checker_env(), cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip() == "2", f"exit {proc.returncode}\n{proc.stderr[-4000:]}"


def test_julia_and_c_get_different_mallocs_under_the_heap_checker(tmp_path):
    """Why the serving loop avoids Timers (the cause, without the bridge):
    the checker's malloc is a non-default symbol version, which only linked
    calls reach; dlsym, hence Julia's ccall(:malloc), finds libc's own.  Memory
    from one freed by the other aborts (embed_julia.c's "timers" mode)."""
    from bridge.julia.buildtools import julia_config

    julia = julia_config()
    exe = tmp_path / "embed_julia"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(EMBED_C), f"-I{julia.include_dir}",
                    f'-DJULIA_BINDIR="{julia.bindir}"', f'-DJULIA_IMAGE="{julia.image}"', julia.libjulia,
                    "-lpthread", "-ldl"], check=True, capture_output=True)
    plain = subprocess.run([str(exe), "timers"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "2000 sleep(0) done" in plain.stdout, plain.stderr[-2000:]
    checked = subprocess.run([str(exe), "addresses"], capture_output=True, text=True, timeout=120,
                             env=checker_env())
    assert checked.returncode == 0, checked.stderr[-2000:]
    lines = dict(line.rsplit(":", 1) for line in checked.stdout.splitlines())
    assert "libc_malloc_debug" in lines["malloc called by C code (PLT)"], checked.stdout
    assert "libc.so.6" in lines["Julia's ccall(:malloc) / cglobal"], checked.stdout
