"""Test-suite set-up shared by every test module.

1. ``import tensorflow`` is blocked in the pytest process.  This process
   runs the bridge and Julia; importing stock TF next to Julia segfaults or
   hangs (both bundle LLVM: docs/getting-started/install.md).  Stock TF answers questions in a
   subprocess instead, through ``support.oracle.run_oracle``.  The block lets
   ``importlib.util.find_spec("tensorflow")`` keep working, since the bridge
   uses it to locate TF's shared libraries without importing the package.
2. ``tests/`` is put on sys.path so test modules can import the helpers of
   ``tests/support`` (``from support.build import op_folder``).
3. Fixtures: ``oracle`` (run_oracle), ``oracle_models`` (make_models'
   manifest, once per session), ``fixtures_dir`` (its output folder) and
   ``twice_folder`` (the scaffolded op Twice, built once per session).
4. On CI (``CI=true``) a skip is a failure, unless it says the feature
   cannot exist on this kind of machine (``support.ci.skip_unavailable``,
   the ``unavailable_if`` mark): see tests/support/ci.py.
5. Parallel runs (`make test`, CONTRIBUTING.md "The test suite's time"):
   pytest-xdist hands whole modules to its workers, longest first
   (support/schedule.py); ``TFBRIDGE_TEST_CPU_LOG=<file>`` logs each test's
   CPU time (support/cputime.py).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import Callable

import pytest

# The checkout's bridge, whichever one an installed .pth names (pytest's
# importlib mode puts no rootdir on sys.path), and the tests' helpers.
TESTS_DIR = Path(__file__).resolve().parent
for _path in (TESTS_DIR.parent, TESTS_DIR):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from support import cputime  # noqa: E402
from support.ci import is_unavailable, on_ci, skip_unavailable  # noqa: E402
from support.golden import GoldenUpdateRefused, update_requested  # noqa: E402
from support.oracle import run_oracle  # noqa: E402

# The oracle scripts import tensorflow: never collect them as tests.
collect_ignore = ["oracle", "support"]

_BLOCKED = ("tensorflow", "keras", "tf_keras")


class _TensorFlowImportBlocker(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds tensorflow as usual (so find_spec answers) but refuses to execute it."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in _BLOCKED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None:
            spec.loader = self  # keep origin/search locations, block execution
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError(
            f"'import {module.__name__}' is not allowed in the test process: it runs the "
            "bridge and Julia, and stock TensorFlow beside Julia crashes (LLVM clash). "
            "Ask stock TF through support.oracle.run_oracle(...) (a subprocess) instead.")


if not any(isinstance(f, _TensorFlowImportBlocker) for f in sys.meta_path):
    if any(m.split(".")[0] in _BLOCKED for m in sys.modules):
        raise RuntimeError("tensorflow was imported into the pytest process before conftest ran")
    sys.meta_path.insert(0, _TensorFlowImportBlocker())


@pytest.fixture(scope="session")
def oracle() -> Callable[..., dict]:
    """``oracle(script_name, request=None, timeout=600) -> dict`` (see tests/support/oracle.py)."""
    return run_oracle


@pytest.fixture(scope="session")
def oracle_models() -> dict:
    """make_models' manifest: {"tf_version", "out_dir", "models": {...}}."""
    return run_oracle("make_models")


@pytest.fixture(scope="session")
def twice_folder(tmp_path_factory) -> Path:
    """The op `customop init` scaffolds (Twice: y = 2x, with its gradient),
    built once per test process for the tests that load or run it (a test
    that changes its folder, or watches it build, makes its own:
    support.build.built_twice)."""
    from support.build import built_twice, toolchain_missing
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    return built_twice(tmp_path_factory, "twice")


@pytest.fixture(scope="session")
def fixtures_dir(oracle_models: dict) -> Path:
    """Folder holding mlp.pb, conv.pb, strings.pb and saved_model/."""
    return Path(oracle_models["out_dir"])


# --- skips on CI ------------------------------------------------------------------------------

def _skip_reason(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, line, message = longrepr
        return f"{path}:{line}: {message}"
    return str(longrepr)


def _fail_skip_on_ci(report, what: str) -> None:
    report.outcome = "failed"
    report.longrepr = (f"{what} was skipped on CI (CI=true), whose machine `make test` set up in full: "
                       f"{_skip_reason(report.longrepr)}\n"
                       "A skip stays a skip on CI only where the feature cannot exist on this kind of machine "
                       "(support.ci.skip_unavailable); anything else missing there is a broken set-up.")


def pytest_configure(config: pytest.Config) -> None:
    cputime.register(config)
    try:
        update_requested()   # golden files are never rewritten on CI (tests/support/golden.py)
    except GoldenUpdateRefused as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("unavailable_if"):
        if mark.args[0]:
            skip_unavailable(mark.kwargs["reason"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and on_ci()
            and not (call.excinfo is not None and is_unavailable(call.excinfo.value))):
        _fail_skip_on_ci(report, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and on_ci():   # a whole module skipped: the same rule, and no exception to it
        _fail_skip_on_ci(report, collector.nodeid)


# --- the gradient parity figure (tests/grad/test_parity.py) ------------------------------------

def gradient_parity_summary(properties: list[dict]) -> str | None:
    """One line from the ``gradient_parity`` properties of the parity tests: what was
    compared by value (the parity figure), and apart from it what was not."""
    if not properties:
        return None
    numeric = [p for p in properties if p["gradient_parity"].startswith("numeric")]
    count = {kind: sum(p["gradient_parity"] == kind for p in properties)
             for kind in ("structure", "raises", "no CPU kernel", "numeric, first order only",
                          "numeric, first order; TF raises for the second")}
    return (f"gradient parity: {len(numeric)} cases of {len({p['gradient_parity_op'] for p in numeric})} op types "
            f"compared by value with stock TF ({sum(p['gradient_parity'] == 'numeric' for p in numeric)} to the "
            f"second order; first order only: {count['numeric, first order only']} by choice, "
            f"{count['numeric, first order; TF raises for the second']} where TF raises for the second); "
            f"not counted as parity: {count['structure']} compared by structure only (no CPU kernel), "
            f"{count['raises']} where both refuse the gradient, {count['no CPU kernel']} dtypes skipped "
            "without a CPU kernel")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    properties = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            props = dict(getattr(report, "user_properties", ()))
            if "gradient_parity" in props and (report.when == "call" or report.skipped):
                properties.append(props)
    line = gradient_parity_summary(properties)
    if line:
        terminalreporter.write_sep("-", "gradient parity")
        terminalreporter.write_line(line)


# --- parallel runs (make test) -----------------------------------------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Whole modules per worker, longest first (support/schedule.py)."""
    from support.schedule import LONGEST_FIRST, LongestFirstScheduling

    missing = [name for name in LONGEST_FIRST if not (TESTS_DIR.parent / name).is_file()]
    if missing:
        raise pytest.UsageError(f"support/schedule.py's LONGEST_FIRST names no module: {missing}")
    return LongestFirstScheduling(config, log)
