"""Compiler and linker settings for building a custom op, found without
importing TensorFlow (``import tensorflow`` costs seconds and must never happen
in a process that runs Julia).

TensorFlow: headers and ``libtensorflow_framework.so.2`` from the installed
wheel (:mod:`bridge._lib`), C++17, and the libstdc++ ABI the library was built
with (read from its symbols, as ``tf.sysconfig.get_compile_flags`` would
report).  Julia and the tfjl runtime: :mod:`bridge.julia_runtime`.
"""
from __future__ import annotations

import importlib.metadata
import mmap
import os
import shutil
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import _lib

# The pip wheels are built with this alignment; a mismatch corrupts Eigen
# tensors passed between TF and the op, so it is part of every compile.
_EIGEN_MAX_ALIGN_BYTES = 64
_TF_DISTRIBUTIONS = ("tensorflow-cpu", "tensorflow", "tensorflow-intel", "tf-nightly-cpu", "tf-nightly")


class ToolchainError(RuntimeError):
    """Something needed to compile a custom op is missing."""


@dataclass(frozen=True)
class TFBuild:
    version: str
    include_dir: Path
    framework_library: Path
    definitions: tuple[str, ...]  # preprocessor definitions, NAME=VALUE

    @property
    def fingerprint(self) -> str:
        """Changes whenever a different TensorFlow is installed."""
        st = self.framework_library.stat()
        return f"tf {self.version} {self.framework_library} {st.st_size} {st.st_mtime_ns}"


@dataclass(frozen=True)
class JuliaBuild:
    version: str
    include_dirs: tuple[Path, ...]  # tfjl/kernel.h and tfjl/runtime.h
    runtime_hash: str               # changes with the runtime's sources and the Julia it embeds


def _tf_version() -> str:
    for dist in _TF_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"  # a standalone libtensorflow: the fingerprint still pins the file


def _cxx11_abi(library: Path) -> int:
    """1 when the library's C++ symbols use libstdc++'s new ABI (std::__cxx11)."""
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return 1 if m.find(b"St7__cxx11") >= 0 else 0


@lru_cache(maxsize=None)
def tensorflow() -> TFBuild:
    """Where TensorFlow's headers and framework library are, and how to compile against them."""
    try:
        framework, _ = _lib.library_paths()
        include = _lib.include_dir()
    except _lib.LibraryNotFoundError as exc:
        raise ToolchainError(str(exc)) from exc
    definitions = (f"_GLIBCXX_USE_CXX11_ABI={_cxx11_abi(framework)}",
                   f"EIGEN_MAX_ALIGN_BYTES={_EIGEN_MAX_ALIGN_BYTES}")
    return TFBuild(_tf_version(), include, framework, definitions)


def _julia_runtime():
    try:
        from .. import julia_runtime
    except ImportError as exc:
        raise ToolchainError(f"bridge.julia_runtime is not available ({exc}): it locates Julia "
                             "and builds the tfjl runtime library that custom ops link") from exc
    return julia_runtime


@lru_cache(maxsize=None)
def julia() -> JuliaBuild:
    """Julia's version, the runtime's identity, and the include folders a kernel needs."""
    runtime = _julia_runtime()
    try:
        config = runtime.julia_config()
        include_dirs = tuple(Path(p) for p in runtime.include_dirs())
        runtime_id = runtime.runtime_hash(config)
    except Exception as exc:  # JuliaNotFoundError and friends: say what is missing
        raise ToolchainError(str(exc)) from exc
    return JuliaBuild(config.version, include_dirs, runtime_id)


def runtime_library() -> Path:
    """libtfjl_runtime.so, built by bridge.julia_runtime if it is not yet.

    ToolchainError when it is not built and the cache cannot be written."""
    runtime = _julia_runtime()
    try:
        return Path(runtime.runtime_library())
    except runtime.CacheNotWritableError as exc:
        raise ToolchainError(str(exc)) from exc


RUNTIME_FILES = ("libtfjl_runtime.so", "libtfjl_julia.so")  # julia_runtime's LIBRARY_NAME, JULIA_SIDE_NAME


def copy_runtime(runtime: Path, folder: Path) -> None:
    """Put the runtime's two libraries (``runtime`` and its neighbour) into a
    built op's folder, so the folder loads without the cache: the op's RPATH
    starts with $ORIGIN, and bridge.julia.init loads this copy where the cache
    has no runtime (bridge.julia_runtime.loadable_runtime_library).  A hard
    link where the file systems allow it, else a copy (about 200 kB)."""
    for name in RUNTIME_FILES:
        source, target = runtime.parent / name, folder / name
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


def offer_runtime_copy(folder: Path) -> None:
    """Tell bridge.julia_runtime that the built op folder ``folder`` carries
    the current runtime (its key includes the runtime's hash)."""
    if (folder / RUNTIME_FILES[0]).is_file():
        _julia_runtime().add_runtime_copy(folder, julia().runtime_hash)


def cmake() -> str:
    """The cmake executable: the one installed beside this Python (the PyPI cmake) first."""
    here = Path(sys.executable).parent / "cmake"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("cmake")
    if not found:
        raise ToolchainError("cmake was not found: install it with 'pip install cmake' "
                             "(a dependency of tf-julia-bridge)")
    return found
