"""Compiler and linker settings for building a custom op, found without
importing TensorFlow (``import tensorflow`` costs seconds and must never happen
in a process that runs Julia).

TensorFlow: headers and ``libtensorflow_framework.so.2`` from the installed
wheel (:mod:`bridge.framework._lib`), C++17, and the libstdc++ ABI the library was built
with (read from its symbols, as ``tf.sysconfig.get_compile_flags`` would
report).  Julia and the tfjl runtime come from :mod:`bridge.julia.runtime`,
cmake from :mod:`bridge.julia.buildtools`; whatever is missing is reported here as
ToolchainError, the one error an op build turns into "cannot build <op>".
"""
from __future__ import annotations

import importlib.metadata
import mmap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bridge.framework import _lib
from bridge.julia import buildtools, runtime as julia_runtime

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


@lru_cache(maxsize=None)
def julia() -> JuliaBuild:
    """Julia's version, the runtime's identity, and the include folders a kernel needs."""
    try:
        config = buildtools.julia_config()
        include_dirs = tuple(Path(p) for p in julia_runtime.include_dirs())
        runtime_id = julia_runtime.runtime_hash(config)
    except Exception as exc:  # JuliaNotFoundError and friends: say what is missing
        raise ToolchainError(str(exc)) from exc
    return JuliaBuild(config.version, include_dirs, runtime_id)


def runtime_library() -> Path:
    """libtfjl_runtime.so, built by bridge.julia.runtime if it is not yet.

    ToolchainError when it is not built and the cache cannot be written."""
    try:
        return julia_runtime.runtime_library()
    except julia_runtime.CacheNotWritableError as exc:
        raise ToolchainError(str(exc)) from exc


def cmake() -> str:
    """The cmake executable (bridge.julia.buildtools.cmake)."""
    try:
        return buildtools.cmake()
    except buildtools.ToolNotFoundError as exc:
        raise ToolchainError(str(exc)) from exc
