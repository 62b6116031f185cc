"""Rules that keep the test suite from passing by accident (issue 35, section 3).

Each rule is checked over the files of tests/ (an AST walk, no import) or by
running pytest on a small test in a child process with the project's
configuration.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import REPO, TESTS
from support.threads import run_threads, run_threads_for


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in _python_files()}


def _run_pytest(tmp_path: Path, source: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """pytest with the project's configuration (pyproject.toml) on one test file."""
    (tmp_path / "test_it.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                           str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path / "test_it.py"),
                           *args], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)


# ------------------------------------------------------------------ threads

def test_a_thread_that_dies_fails_the_test(tmp_path):
    proc = _run_pytest(tmp_path, "import threading\n\n"
                                 "def test_it():\n"
                                 "    t = threading.Thread(target=lambda: 1 / 0)\n"
                                 "    t.start()\n"
                                 "    t.join()\n")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout.splitlines()[-1], proc.stdout
    assert "ZeroDivisionError: division by zero" in proc.stdout, proc.stdout


def test_run_threads_reraises_what_a_thread_raised():
    def target(k: int) -> None:
        if k == 2:
            raise ValueError("thread 2 failed")

    with pytest.raises(ValueError, match=r"^thread 2 failed$"):
        run_threads(target, 4)


def test_run_threads_for_reraises_a_failed_check_and_stops_every_thread():
    calls = [0] * 4

    def step(k: int, rng) -> None:
        calls[k] += 1
        time.sleep(0.001)
        assert not (k == 2 and calls[k] == 5), f"thread {k}'s check failed at call {calls[k]}"

    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"^thread 2's check failed at call 5"):
        run_threads_for(step, 4, seconds=60)
    assert time.monotonic() - start < 30, "the other threads went on after the failure"
    assert calls[2] == 5
