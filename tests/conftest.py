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
   manifest, once per session) and ``fixtures_dir`` (its output folder).
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
def fixtures_dir(oracle_models: dict) -> Path:
    """Folder holding mlp.pb, conv.pb, strings.pb and saved_model/."""
    return Path(oracle_models["out_dir"])
