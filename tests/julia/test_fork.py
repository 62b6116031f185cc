"""Julia in a forked child (issue 15): a child of a process that runs Julia
has none of Julia's threads, so every entry into Julia fails at once, naming
fork and multiprocessing's "spawn", instead of waiting for those threads
forever; work without Julia keeps running in the child, and the parent is
unaffected.  Each scenario runs in a child process with a time limit (and
waits for its own fork with one).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.build import toolchain_missing
from support import REPO

pytestmark = pytest.mark.skipif(bool(toolchain_missing()), reason=toolchain_missing() or "toolchain present")


TIMEOUT = 180

# Shared by the scripts below: a Twice op, chains of it and of a native op,
# and fork_and_run(fn), which runs fn in a forked child and returns what it
# printed, failing if the child does not finish within 30 s.
PRELUDE = """
import os, select, signal, sys, time
import numpy as np
import bridge
from bridge import customop, errors, julia

twice = customop.load({folder!r}).twice

def chain(op, n):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = x
        for _ in range(n):
            y = op(y)
    return g, x, y

def fork_and_run(fn):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            text = fn()
        except BaseException as e:
            text = "child raised " + type(e).__name__ + ": " + str(e)
        os.write(write_end, text.encode())
        os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 30)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the forked child hung")
    text = b""
    while chunk := os.read(read_end, 65536):
        text += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, (status, text)
    return text.decode()

def expect_fork_error(fn, kind):
    def attempt():
        start = time.monotonic()
        try:
            fn()
        except kind as e:
            message = str(e)
            assert "forked" in message and '"spawn"' in message, message
            assert time.monotonic() - start < 5, "slow to fail"
            return "refused " + type(e).__name__
        return "not refused"
    return attempt
"""


def run_script(body: str, folder: Path, env: dict | None = None) -> str:
    code = textwrap.dedent(PRELUDE.format(folder=str(folder))) + textwrap.dedent(body)
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                              env=full_env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung for {TIMEOUT} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc.stdout


def test_every_way_into_julia_fails_fast_in_a_forked_child(twice_folder):
    out = run_script("""
        g, x, y = chain(twice, 3)
        ng, nx, ny = chain(bridge.ops.neg, 3)
        sess = bridge.Session(g)                                   # small: run by the caller, ops posted
        inline = bridge.Session(g, config=bridge.SessionConfig(julia_thread=True))
        native = bridge.Session(ng)
        assert list(sess.run(y, {x: [1.0]})) == [8.0] and list(inline.run(y, {x: [1.0]})) == [8.0]
        assert julia.eval("1 + 1") == 2

        print(fork_and_run(expect_fork_error(lambda: julia.eval("1 + 1"), julia.JuliaError)))
        print(fork_and_run(expect_fork_error(lambda: julia.call("sum", np.ones(3)), RuntimeError)))
        print(fork_and_run(expect_fork_error(lambda: sess.run(y, {x: [1.0]}), errors.FailedPreconditionError)))
        print(fork_and_run(expect_fork_error(lambda: inline.run(y, {x: [1.0]}), RuntimeError)))
        new_inline = lambda: bridge.Session(g, config=bridge.SessionConfig(julia_thread=True)).run(y, {x: [1.0]})
        print(fork_and_run(expect_fork_error(new_inline, RuntimeError)))
        # TF's pool threads post the op: a pool of the child's own (the global
        # pool, made by the parent's first session, did not survive the fork).
        pool = bridge.SessionConfig(use_per_session_threads=True, inline_small_graphs=0)
        print(fork_and_run(expect_fork_error(lambda: bridge.Session(g, config=pool).run(y, {x: [1.0]}),
                                             errors.FailedPreconditionError)))
        # Work without Julia goes on in the child.
        print(fork_and_run(lambda: "native " + str(native.run(ny, {nx: [1.0]}).tolist())
                                   + str(bridge.Session(ng, config=pool).run(ny, {nx: [2.0]}).tolist())))
        # The parent is unaffected.
        assert list(sess.run(y, {x: [1.0]})) == [8.0] and list(inline.run(y, {x: [1.0]})) == [8.0]
        print("parent", julia.eval("2 + 2"), julia.is_initialized())
    """, twice_folder)
    lines = out.split("\n")
    assert lines[:6] == ["refused JuliaError", "refused JuliaError", "refused FailedPreconditionError",
                         "refused JuliaError", "refused JuliaError", "refused FailedPreconditionError"], out
    assert lines[6] == "native [-1.0][-2.0]", out
    assert lines[7] == "parent 4 True", out


def test_a_synchronous_kernel_fails_fast_in_a_forked_child(twice_folder):
    """TFBRIDGE_JULIA_ASYNC=0: a pool thread hands its call over and waits."""
    out = run_script("""
        g, x, y = chain(twice, 3)
        assert julia.eval("1 + 1") == 2
        pool = bridge.SessionConfig(use_per_session_threads=True, inline_small_graphs=0)
        caller = lambda: bridge.Session(g).run(y, {x: [1.0]})
        print(fork_and_run(expect_fork_error(caller, errors.FailedPreconditionError)))
        print(fork_and_run(expect_fork_error(lambda: bridge.Session(g, config=pool).run(y, {x: [1.0]}),
                                             errors.FailedPreconditionError)))
        print("parent", bridge.Session(g, config=pool).run(y, {x: [1.0]}).tolist())
    """, twice_folder, env={"TFBRIDGE_JULIA_ASYNC": "0"})
    assert out.split("\n")[:3] == ["refused FailedPreconditionError", "refused FailedPreconditionError",
                                   "parent [8.0]"], out


def test_multiprocessing_fork_says_use_spawn_and_spawn_works(twice_folder, tmp_path):
    script = tmp_path / "pool_child.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing, sys
        from bridge import julia

        def julia_sum(n):
            return julia.eval(f"sum(1:{n})")

        if __name__ == "__main__":
            assert julia_sum(4) == 10
            with multiprocessing.get_context("fork").Pool(1) as pool:
                try:
                    pool.apply(julia_sum, (10,))
                    print("fork: not refused")
                except RuntimeError as e:
                    assert '"spawn"' in str(e) and "forked" in str(e), str(e)
                    print("fork: refused")
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                print("spawn:", pool.apply(julia_sum, (10,)))
            print("parent:", julia_sum(3))
    """))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT,
                              env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung for {TIMEOUT} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split("\n")[:3] == ["fork: refused", "spawn: 55", "parent: 6"], proc.stdout


def test_a_child_forked_before_julia_starts_runs_julia(twice_folder):
    """Only children of a process that started Julia are refused."""
    code = textwrap.dedent("""
        import os
        import bridge
        from bridge import julia
        pid = os.fork()
        if pid == 0:
            print("child", julia.eval("1 + 1"), flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("parent", julia.eval("2 + 2"), os.waitstatus_to_exitcode(status))
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split("\n")[:2] == ["child 2", "parent 4 0"], proc.stdout
