"""Compiling and running Fortran programs that use the tf_bridge module (tests/fortran/).

Programs exchange arrays with the test through raw files: the test writes an
array's bytes (``write_array``), the program reads them into a Fortran array
with ``access="stream"``, and writes its results the same way.  A C-order
numpy array of shape (a, b) has the bytes of a Fortran array of shape (b, a):
exactly tf_bridge's default (reversed dimensions, no copy).  Programs run as
subprocesses with a time limit, TF's logging silenced.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from bridge import fortran
from . import REPO

COMPILE_TIMEOUT = 300
RUN_TIMEOUT = 120


def require_gfortran() -> None:
    if shutil.which(os.environ.get("FC") or "gfortran") is None:
        pytest.fail("gfortran is not installed: `make setup` installs it (apt-get install -y gfortran)")


def compile_program(source: str, folder: Path, name: str = "prog", checked: bool = False,
                    optimize: str = "-O2") -> Path:
    """Compile one Fortran program against tf_bridge (built first if needed); the executable.
    ``checked``: the program and the module with every gfortran run-time check (-fcheck=all);
    ``optimize``: the program's optimisation flag otherwise (-O0 compiles a long program fastest)."""
    require_gfortran()
    flags = fortran.flags(quiet=True, checked=checked).split()
    src = folder / f"{name}.f90"
    src.write_text(source)
    exe = folder / name
    options = ["-fcheck=all", "-g", "-fbacktrace"] if checked else [optimize]
    done = subprocess.run([fortran.fortran_compiler(), *options, "-o", str(exe), str(src), *flags],
                          capture_output=True, text=True, timeout=COMPILE_TIMEOUT, cwd=folder)
    assert done.returncode == 0, f"gfortran failed on {src}:\n{done.stderr}"
    return exe


def run_program(exe: Path, *args: str, timeout: float = RUN_TIMEOUT, env: dict | None = None) -> str:
    """Run it in its folder; its stdout (the test fails on a non-zero exit, naming stderr's tail)."""
    environ = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=exe.parent, env=environ)
    assert done.returncode == 0, f"{exe.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def write_array(path: Path, array: np.ndarray, order: str = "C") -> None:
    path.write_bytes(np.ascontiguousarray(array).tobytes(order=order))


def read_array(path: Path, dtype, shape, order: str = "C") -> np.ndarray:
    return np.frombuffer(path.read_bytes(), dtype=dtype).reshape(shape, order=order)


def generator() -> ModuleType:
    """kernels_cpp/fortran/generate.py (what writes the module's generated sources), imported."""
    name = "tf_bridge_fortran_generate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "kernels_cpp" / "fortran" / "generate.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module     # (its dataclasses look their module up there)
        spec.loader.exec_module(module)
    return sys.modules[name]
