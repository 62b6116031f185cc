"""Building the shared Julia runtime (libtfjl_runtime.so).

``runtime_library()`` builds ``kernels_cpp/`` with CMake, against the Julia
that ``bridge.julia.buildtools.julia_config()`` reports, into the cache entry
``bridge.platform.cache.root()/runtime/<runtime_hash>/`` once per source tree and
Julia: libtfjl_runtime.so, and beside it libtfjl_julia.so, which it loads.
Generated kernels compile with ``include_dirs()`` and link with
``link_args()``.  Where the cache cannot be written,
``loadable_runtime_library()`` (what ``bridge.julia.init`` loads) takes the
runtime copy a built op carries (``copy_runtime``).
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
import time
from pathlib import Path

from bridge.platform import cache, paths
from . import buildtools
from .buildtools import JuliaConfig, julia_config

LIBRARY_NAME = "libtfjl_runtime.so"
# The runtime opens this one from its own folder when Julia starts.
JULIA_SIDE_NAME = "libtfjl_julia.so"
RUNTIME_FILES = (LIBRARY_NAME, JULIA_SIDE_NAME)


class RuntimeBuildError(RuntimeError):
    """Building libtfjl_runtime.so failed; the message holds the compiler's errors."""


class CacheNotWritableError(RuntimeBuildError):
    """The runtime is not built and the cache folder cannot be written to build it."""


# The Julia module the runtime loads (and builds into libtfjl_julia.so).
BRIDGE_JL = "TFBridge.jl"
# How TFBridge.jl and its parts include a file: a line include("<path>"), the
# path relative to the including file.  kernels_cpp/CMakeLists.txt replaces
# each such line by the file (the same pattern), so these files, and not the
# installer scripts beside them, are what the runtime's build reads from julia/.
INCLUDE_LINE = re.compile(r'^[ \t]*include\("([^"\n]+)"\)', re.MULTILINE)


def julia_sources(bridge_jl: Path | None = None) -> list[Path]:
    """``bridge_jl`` (julia/TFBridge.jl) and every file it includes,
    recursively, in the order Julia reads them (each file once)."""
    found: dict[Path, None] = {}

    def visit(path: Path, including: tuple[Path, ...]) -> None:
        if path in including:
            raise RuntimeBuildError(f"{path} includes itself (through {', '.join(map(str, including))})")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            by = f" (included by {including[-1]})" if including else ""
            raise RuntimeBuildError(f"cannot read {path}{by}: {exc.strerror or exc}") from exc
        found[path] = None
        for match in INCLUDE_LINE.finditer(text):
            visit(Path(os.path.normpath(path.parent / match[1])), including + (path,))

    visit(Path(os.path.normpath(bridge_jl or paths.julia_dir() / BRIDGE_JL)), ())
    return list(found)


def _source_files() -> list[Path]:
    """Everything the runtime's build reads from the package: kernels_cpp/
    but its docs (editing a README must not rebuild the runtime and every
    op), and julia_sources()."""
    kernels = paths.kernels_cpp_dir()
    files = sorted(p for p in kernels.rglob("*")
                   if p.is_file() and p.suffix != ".md" and "__pycache__" not in p.parts)
    return files + julia_sources()


def runtime_hash(config: JuliaConfig | None = None) -> str:
    """The runtime's cache key: the Julia it is built against and its sources."""
    key = cache.Key(*dataclasses.astuple(config or julia_config()))
    kernels = paths.kernels_cpp_dir()
    julia = paths.julia_dir()
    for path in _source_files():
        base = kernels if kernels in path.parents else julia
        key.add_file(path, f"{base.name}/{os.path.relpath(path, base)}")
    return key.hexdigest()


def _build(config: JuliaConfig, work: Path) -> None:
    """Configure and compile the runtime in ``work``, leaving its libraries and build.log there."""
    try:
        cmake = buildtools.cmake()
    except buildtools.ToolNotFoundError as exc:
        raise RuntimeBuildError(str(exc)) from exc
    objects = work / "cmake"
    log = work / "build.log"

    def run(command: list[str], step: str) -> None:
        buildtools.run(command, log, what=LIBRARY_NAME, step=step, error=RuntimeBuildError)

    run([cmake, "-S", str(paths.kernels_cpp_dir()), "-B", str(objects), "-DCMAKE_BUILD_TYPE=Release",
         f"-DJulia_INCLUDE_DIR={config.include_dir}", f"-DJulia_LIBRARY={config.libjulia}",
         f"-DTFJL_BRIDGE_JL={paths.julia_dir() / BRIDGE_JL}"], "configuring")
    run([cmake, "--build", str(objects), "--parallel", str(os.cpu_count() or 2)], "compiling")
    for name in RUNTIME_FILES:
        shutil.copy2(objects / name, work / name)
    shutil.rmtree(objects, ignore_errors=True)  # object files: the libraries are all that is used


def runtime_dir() -> Path:
    """The folder holding the built runtime (built if missing; a failed build
    is kept beside it as ``<hash>.failed``).

    Raises CacheNotWritableError, naming the cache folder and
    TFBRIDGE_CACHE_DIR, when it is missing and the cache cannot be written."""
    config = julia_config()
    entry = cache.root() / "runtime" / runtime_hash(config)
    if (entry / LIBRARY_NAME).is_file():
        return entry
    try:
        lock = cache.EntryLock(entry)
    except OSError as exc:
        raise CacheNotWritableError(
            f"the Julia runtime ({LIBRARY_NAME}) for Julia {config.version} and these sources is not "
            f"built, and {cache.unwritable_hint(cache.root(), exc)}") from exc
    with lock:
        if not (entry / LIBRARY_NAME).is_file():
            print(f"tf-julia-bridge: building the Julia runtime ({LIBRARY_NAME}, Julia {config.version}) "
                  f"in {entry} ...", file=sys.stderr, flush=True)
            start = time.monotonic()
            with cache.staged_dir(entry, failed=entry.with_name(f"{entry.name}.failed"),
                                  failure=RuntimeBuildError) as work:
                _build(config, work)
            print(f"tf-julia-bridge: runtime built in {time.monotonic() - start:.1f} s", file=sys.stderr,
                  flush=True)
    return entry


def runtime_library() -> Path:
    """Path of libtfjl_runtime.so for the current sources and Julia (built if missing)."""
    return runtime_dir() / LIBRARY_NAME


# --- the copies built ops carry, for a cache without the runtime ------------------

# Runtime hash -> the folder of a built op that carries a copy of that runtime.
_copies: dict[str, Path] = {}


def copy_runtime(runtime: Path, folder: Path) -> None:
    """Put the runtime's two libraries (``runtime`` and its neighbour) into a
    built op's folder, so the folder loads without the cache: the op's RPATH
    starts with $ORIGIN, and ``loadable_runtime_library`` returns this copy
    where the cache has no runtime.  A hard link where the file systems
    allow it, else a copy (about 200 kB)."""
    for name in RUNTIME_FILES:
        source, target = runtime.parent / name, folder / name
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


def add_runtime_copy(folder: str | os.PathLike, runtime_id: str) -> None:
    """Note that ``folder`` holds a copy of the runtime whose ``runtime_hash`` is
    ``runtime_id`` (both libraries), for ``loadable_runtime_library``."""
    folder = Path(folder)
    if all((folder / name).is_file() for name in RUNTIME_FILES):
        _copies.setdefault(runtime_id, folder)


def loadable_runtime_library() -> Path:
    """The runtime this process should load: the cache's; where the cache has
    none (read-only, or emptied since), the copy carried by an op built
    against the same runtime and returned by ``bridge.customop.build`` in this
    process; else the cache's, built now (``runtime_library``)."""
    runtime_id = runtime_hash(julia_config())
    cached = cache.root() / "runtime" / runtime_id / LIBRARY_NAME
    if cached.is_file():
        return cached
    copy = _copies.get(runtime_id)
    if copy is not None and (copy / LIBRARY_NAME).is_file():
        return copy / LIBRARY_NAME
    return runtime_library()


# --- compiling and linking against the runtime ------------------------------------

def include_dirs() -> list[Path]:
    """Include folders for code using tfjl/runtime.h or tfjl/kernel.h (TF's own headers not included).

    Kernels need no Julia header: only the runtime talks to Julia.
    """
    return [paths.kernels_cpp_dir() / "include"]


def link_args() -> list[str]:
    """Linker arguments that link a kernel library against the runtime, with an rpath to it."""
    folder = runtime_dir()
    return [f"-L{folder}", f"-l:{LIBRARY_NAME}", f"-Wl,-rpath,{folder}"]
