"""Rules that keep the test suite from passing by accident (issue 35, section 3).

Each rule is checked over the files of tests/ (an AST walk, no import) or by
running pytest on a small test in a child process with the project's
configuration.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from support import REPO, TESTS
from support.ci import on_ci
from support.golden import update_requested
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


# ------------------------------------------------------------------ skips on CI

_SKIPS = '''
import pytest
from support.ci import skip_unavailable

def test_missing_tool():
    pytest.skip("gfortran is not installed")

@pytest.mark.skipif(True, reason="cannot compile custom ops: no cmake")
def test_missing_toolchain():
    pass

def test_no_such_kernel():
    skip_unavailable("Foo has no CPU kernel")

@pytest.mark.unavailable_if(True, reason="needs 2 CPUs")
def test_one_cpu():
    pass

@pytest.mark.unavailable_if(False, reason="needs 2 CPUs")
def test_two_cpus():
    pass
'''


def _outcomes(tmp_path: Path, ci: str | None) -> tuple[dict[str, str], subprocess.CompletedProcess]:
    """{test name: "passed" | "failed" | "skipped"} of _SKIPS run with CI=ci (unset: None)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(REPO)])
    proc = _run_pytest(tmp_path, _SKIPS, "-p", "conftest", "--junit-xml", str(tmp_path / "report.xml"), env=env)
    found = {}
    for case in ElementTree.parse(tmp_path / "report.xml").iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found[case.get("name")] = {"failure": "failed", "error": "failed", "skipped": "skipped"}.get(
            kinds[0] if kinds else "", "passed")
    return found, proc


def test_on_ci_a_skip_fails_unless_the_feature_cannot_exist_there(tmp_path):
    found, proc = _outcomes(tmp_path, "true")
    assert found == {"test_missing_tool": "failed", "test_missing_toolchain": "failed",
                     "test_no_such_kernel": "skipped", "test_one_cpu": "skipped",
                     "test_two_cpus": "passed"}, proc.stdout + proc.stderr
    assert ("test_it.py::test_missing_tool was skipped on CI (CI=true), whose machine `make test` set up in "
            "full: " in proc.stdout), proc.stdout
    assert "Skipped: gfortran is not installed" in proc.stdout, proc.stdout


def test_off_ci_every_skip_is_a_skip(tmp_path):
    found, proc = _outcomes(tmp_path, None)
    assert found == {"test_missing_tool": "skipped", "test_missing_toolchain": "skipped",
                     "test_no_such_kernel": "skipped", "test_one_cpu": "skipped",
                     "test_two_cpus": "passed"}, proc.stdout + proc.stderr


def test_on_ci_a_module_skipped_whole_fails(tmp_path):
    env = dict(os.environ, CI="true", PYTHONPATH=os.pathsep.join([str(TESTS), str(REPO)]))
    proc = _run_pytest(tmp_path, "import pytest\npytest.skip('no Julia', allow_module_level=True)\n\n"
                                 "def test_it():\n    pass\n", "-p", "conftest", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr   # 2: an error during collection
    assert "test_it.py was skipped on CI (CI=true)" in proc.stdout, proc.stdout


def test_ci_values():
    assert [on_ci({"CI": v}) for v in ("true", "True", "1", "yes", " true\n")] == [True] * 5
    assert [on_ci(e) for e in ({}, {"CI": ""}, {"CI": "false"}, {"CI": "0"})] == [False] * 4


def test_the_makefiles_pkg_fallback_installs_every_package_the_package_tests_load():
    """Without a depot, `make julia-packages` installs with Pkg.add what
    tests/julia/test_packages.py loads (ForwardDiff, and the packages of its
    op environments), so that those tests run there rather than skip."""
    makefile = (REPO / "Makefile").read_text()
    line = next(line for line in makefile.splitlines() if line.startswith("JULIA_TEST_PACKAGES :="))
    installed = set(re.findall(r'"(\w+)"', line))
    recipe = makefile[makefile.index("\njulia-packages:"):]
    recipe = recipe[:recipe.index("\n\n")]
    assert "Pkg.add([$(JULIA_TEST_PACKAGES)])" in recipe and "[$(JULIA_TEST_PACKAGES)]))" in recipe, recipe
    tree = ast.parse((TESTS / "julia" / "test_packages.py").read_text())
    uuids = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["UUIDS"])
    assert installed == {"ForwardDiff"} | set(ast.literal_eval(uuids)), installed


# ------------------------------------------------------------------ what the AST shows

def test_every_zip_in_tests_is_strict():
    """zip() stops at its shortest argument: results missing from one side would pass unseen."""
    loose = [f"{path.relative_to(REPO)}:{node.lineno}" for path, tree in _trees().items() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "zip"
             and not any(k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is True
                         for k in node.keywords)]
    assert loose == [], f"zip(..., strict=True) wanted at {loose}"


def test_no_dict_literal_in_tests_repeats_a_key():
    """A repeated key keeps its last value: the case written first silently never runs."""
    repeated = []
    for path, tree in _trees().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = [ast.unparse(k) for k in node.keys if isinstance(k, ast.Constant)]
                repeated += [f"{path.relative_to(REPO)}:{node.lineno}: key {k} repeated"
                             for k in sorted({k for k in keys if keys.count(k) > 1})]
    assert repeated == [], repeated


# ------------------------------------------------------------------ golden files

def test_golden_files_cannot_be_rewritten_on_ci(tmp_path):
    env = dict(os.environ, CI="true", TFBRIDGE_UPDATE_GOLDEN="1", PYTHONPATH=os.pathsep.join([str(TESTS), str(REPO)]))
    proc = _run_pytest(tmp_path, "def test_it():\n    pass\n", "-p", "conftest", env=env)
    assert proc.returncode == 4, proc.stdout + proc.stderr   # 4: a usage error, before any test ran
    assert ("ERROR: TFBRIDGE_UPDATE_GOLDEN=1 on CI (CI=true): golden files are never rewritten there, or every "
            "golden test would pass whatever the generators write. Rewrite them on your machine, review the diff "
            "and commit it.\n") in proc.stderr, proc.stderr
    assert update_requested(dict(TFBRIDGE_UPDATE_GOLDEN="1")) is True
    assert update_requested(dict(TFBRIDGE_UPDATE_GOLDEN="0", CI="true")) is False


def test_only_support_golden_reads_tfbridge_update_golden():
    needle = '"TFBRIDGE_' + 'UPDATE_GOLDEN"'   # in two pieces, so that this file does not hold it
    readers = sorted(str(path.relative_to(REPO)) for path in _python_files() if needle in path.read_text())
    assert readers == ["tests/support/golden.py"], readers


# ------------------------------------------------------------------ benchmarks' goals

_FAKE_BENCH = '''
import sys
sys.path.insert(0, {bench!r})
from _common import report
report("Fake", [("cold build", float(sys.argv[1]), "s   (goal: <= 15 s)")], "fake / anchor", float(sys.argv[2]),
       "<= 2x")
print(f"  {{'own line':<48s}} {{float(sys.argv[3]):12.3f}}x   (goal: >= 1.8x, with 2 cores free)")
print(f"  {{'no goal to check':<48s}} {{9.0:12.3f}}x   (goal: about 1x)")
'''


@pytest.mark.parametrize("figures, missed", [
    (("12", "1.5", "1.9"), []),
    (("16", "2.5", "1.2"), ["cold build = 16.00s, goal <= 15 s", "fake / anchor = 2.500x, goal <= 2x",
                            "own line = 1.200x, goal >= 1.8x, with 2 cores free"]),
], ids=["met", "missed"])
def test_make_bench_check_fails_when_a_figure_misses_its_goal(tmp_path, figures, missed):
    bench = tmp_path / "bench_fake.py"
    bench.write_text(_FAKE_BENCH.format(bench=str(REPO / "bench")))
    wrapper = tmp_path / "run.sh"   # the bench's figures come from the command line
    wrapper.write_text(f"#!/bin/sh\ncase \"$1\" in *bench_fake.py) exec {sys.executable} \"$1\" {' '.join(figures)};;\n"
                       f"*) exec {sys.executable} \"$@\";; esac\n")
    wrapper.chmod(0o755)
    proc = subprocess.run(["make", "-s", "bench-goals", f"BENCHES={bench}", f"PY={wrapper}",
                           f"BENCH_LOGS={tmp_path / 'logs'}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    summary = [line for line in proc.stdout.splitlines() if line.startswith("GOAL MISSED: bench_fake: ")]
    assert summary == [f"GOAL MISSED: bench_fake: {m}" for m in missed], proc.stdout + proc.stderr
    assert (proc.returncode == 0) == (not missed), proc.stdout + proc.stderr


def test_an_empty_parametrization_fails(tmp_path):
    proc = _run_pytest(tmp_path, "import pytest\n\n@pytest.mark.parametrize('case', [])\n"
                                 "def test_it(case):\n    pass\n")
    assert proc.returncode == 2, proc.stdout + proc.stderr   # a collection error, not a skip
    assert "Empty parameter set in 'test_it' at line 3" in proc.stdout, proc.stdout
