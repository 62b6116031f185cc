"""Locating Julia and building the shared Julia runtime (libtfjl_runtime.so).

``julia_config()`` asks the ``julia`` executable (``TFBRIDGE_JULIA`` names
another one) where its pieces are; the answer is cached per executable, in
memory and on disk.  ``runtime_library()`` builds ``kernels_cpp/`` with CMake
into ``cache_dir()/runtime/<hash>/`` once per source tree and Julia version:
libtfjl_runtime.so, and beside it libtfjl_julia.so, which it loads.
Generated kernels compile with ``include_dirs()`` and link with
``link_args()``.  Where the cache cannot be written, Julia's answer stays in
memory and ``loadable_runtime_library()`` (what ``bridge.julia.init`` loads)
takes the runtime copy a built op carries (``bridge._paths.cache_dir``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import _paths

LIBRARY_NAME = "libtfjl_runtime.so"
# The runtime opens this one from its own folder when Julia starts.
JULIA_SIDE_NAME = "libtfjl_julia.so"

# Printed by `julia`: one value per line, in JuliaConfig field order (after executable).
_QUERY = r"""
using Libdl
libs = filter(p -> startswith(basename(p), "libjulia."), Libdl.dllist())
println(Sys.BINDIR)
println(unsafe_string(Base.JLOptions().image_file))
println(normpath(joinpath(Sys.BINDIR, Base.INCLUDEDIR, "julia")))
println(isempty(libs) ? "" : realpath(first(libs)))
println(VERSION)
flush(stdout)
# Debian's Julia 1.5 with a newer libunwind (bookworm's 1.6) segfaults on the
# first exception thrown in compiled code; find out here, not in a user's op.
println((x -> try error(x) catch; "exceptions-ok" end)("probe"))
"""


class JuliaNotFoundError(RuntimeError):
    """Julia (or a usable part of it) could not be found."""


class RuntimeBuildError(RuntimeError):
    """Building libtfjl_runtime.so failed; the message holds the compiler output."""


@dataclasses.dataclass(frozen=True)
class JuliaConfig:
    """Where a Julia installation keeps what the bridge needs."""
    executable: str   # absolute path of the julia executable
    bindir: str       # Sys.BINDIR
    image: str        # the system image (sys.so)
    include_dir: str  # folder holding julia.h
    libjulia: str     # the libjulia shared library the executable uses
    version: str      # e.g. "1.5.3"


def _executable() -> str:
    name = os.environ.get("TFBRIDGE_JULIA") or "julia"
    found = shutil.which(name)
    if found is None:
        source = "TFBRIDGE_JULIA" if os.environ.get("TFBRIDGE_JULIA") else "PATH"
        raise JuliaNotFoundError(
            f"Julia executable '{name}' not found (from {source}): install Julia >= 1.5 with its "
            "headers (Debian: 'make julia' in the repository) or set TFBRIDGE_JULIA to the executable")
    return os.path.realpath(found)


_config_lock = threading.Lock()
_configs: dict[str, JuliaConfig] = {}


def _config_cache_file(executable: str) -> Path:
    st = os.stat(executable)
    key = hashlib.sha256(f"{executable}\0{st.st_mtime_ns}\0{st.st_size}".encode()).hexdigest()[:16]
    return _paths.cache_dir() / "julia-config" / f"{key}.json"


def _query_julia(executable: str) -> JuliaConfig:
    try:
        proc = subprocess.run([executable, "--startup-file=no", "--history-file=no", "-e", _QUERY],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JuliaNotFoundError(f"running {executable} to locate Julia failed: {exc}") from exc
    lines = proc.stdout.splitlines()
    if len(lines) >= 5 and lines[5:6] != ["exceptions-ok"]:
        raise JuliaNotFoundError(
            f"Julia {lines[4]} at {executable} crashes when an exception is thrown inside a function "
            f"(exit {proc.returncode}); its libunwind is incompatible. On Debian 12 with Julia 1.5 "
            "from bullseye, install bullseye's libunwind too: "
            "apt-get install -t bullseye --allow-downgrades libunwind8=1.3.2-2")
    if proc.returncode != 0 or len(lines) < 5:
        raise JuliaNotFoundError(
            f"{executable} did not report its installation (exit {proc.returncode}): "
            f"{proc.stderr.strip() or proc.stdout.strip()}")
    bindir, image, include_dir, libjulia, version = lines[:5]
    config = JuliaConfig(executable, bindir, image, include_dir, libjulia, version)
    problems = []
    if not Path(image).is_file():
        problems.append(f"system image {image} is missing")
    if not (Path(include_dir) / "julia.h").is_file():
        problems.append(f"julia.h is not in {include_dir} (Debian: install libjulia-dev)")
    if not libjulia or not Path(libjulia).is_file():
        problems.append("the executable does not use a shared libjulia")
    if problems:
        raise JuliaNotFoundError(f"Julia {version} at {executable} cannot be embedded: " + "; ".join(problems))
    return config


def julia_config() -> JuliaConfig:
    """The configuration of the Julia the bridge uses (cached per executable)."""
    executable = _executable()
    with _config_lock:
        config = _configs.get(executable)
        if config is not None:
            return config
        cache_file = _config_cache_file(executable)
        try:
            config = JuliaConfig(**json.loads(cache_file.read_text()))
            if not (Path(config.image).is_file() and Path(config.libjulia).is_file()):
                config = None
        except (OSError, ValueError, TypeError):
            config = None
        if config is None:
            config = _query_julia(executable)
            tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
            try:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(dataclasses.asdict(config)))
                os.replace(tmp, cache_file)
            except OSError:  # an unwritable cache: the answer stays in memory for this process
                with contextlib.suppress(OSError):
                    tmp.unlink()
        _configs[executable] = config
        return config


def _source_files() -> list[Path]:
    """Everything the runtime's build reads from the package."""
    roots = [_paths.kernels_cpp_dir(), _paths.julia_dir()]
    files = []
    for root in roots:
        files += sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files


def runtime_hash(config: JuliaConfig | None = None) -> str:
    """Hash of the runtime's sources and the Julia it is built against."""
    config = config or julia_config()
    h = hashlib.sha256()
    for field in dataclasses.astuple(config):
        h.update(field.encode() + b"\0")
    kernels = _paths.kernels_cpp_dir()
    julia = _paths.julia_dir()
    for path in _source_files():
        base = kernels if kernels in path.parents else julia
        h.update(f"{base.name}/{path.relative_to(base)}".encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _run(cmd: list[str], step: str, log: list[str]) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.append(f"$ {' '.join(cmd)}\n{proc.stdout}")
    if proc.returncode != 0:
        raise RuntimeBuildError(f"building {LIBRARY_NAME} failed at {step} (exit {proc.returncode}):\n"
                                + "\n".join(log))


def _cmake() -> str:
    # The cmake wheel (a dependency) puts its launcher beside this Python.
    beside = Path(sys.executable).parent / "cmake"
    found = str(beside) if beside.exists() else shutil.which("cmake")
    if found is None:
        raise RuntimeBuildError("cmake not found: install the 'cmake' package (pip install cmake)")
    return found


def _build(config: JuliaConfig, final_dir: Path) -> None:
    parent = final_dir.parent
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=parent))
    try:
        build = work / "build"
        out = work / "out"
        out.mkdir()
        cmake = _cmake()
        log: list[str] = []
        _run([cmake, "-S", str(_paths.kernels_cpp_dir()), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
              f"-DJulia_INCLUDE_DIR={config.include_dir}", f"-DJulia_LIBRARY={config.libjulia}",
              f"-DTFJL_BRIDGE_JL={_paths.julia_dir() / 'TFBridge.jl'}"], "configure", log)
        _run([cmake, "--build", str(build), "--parallel", str(os.cpu_count() or 2)], "compile", log)
        for name in (LIBRARY_NAME, JULIA_SIDE_NAME):
            shutil.copy2(build / name, out / name)
        (out / "build.log").write_text("\n".join(log))
        # The rename publishes the finished library in one step.
        os.rename(out, final_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class CacheNotWritableError(RuntimeBuildError):
    """The runtime is not built and the cache folder cannot be written to build it."""


_build_lock = threading.Lock()
# Runtime hash -> the folder of a built op that carries a copy of that runtime
# (bridge.customop.build copies both libraries beside the op's library).
_copies: dict[str, Path] = {}


def add_runtime_copy(folder: str | os.PathLike, runtime_id: str) -> None:
    """Note that ``folder`` holds a copy of the runtime whose ``runtime_hash`` is
    ``runtime_id`` (both libraries), for ``loadable_runtime_library``."""
    folder = Path(folder)
    if all((folder / name).is_file() for name in (LIBRARY_NAME, JULIA_SIDE_NAME)):
        _copies.setdefault(runtime_id, folder)


def loadable_runtime_library() -> Path:
    """The runtime this process should load: the cache's; where the cache has
    none (read-only, or emptied since), the copy carried by an op built
    against the same runtime and returned by ``bridge.customop.build`` in this
    process; else the cache's, built now (``runtime_library``)."""
    runtime_id = runtime_hash(julia_config())
    cached = _paths.cache_dir() / "runtime" / runtime_id / LIBRARY_NAME
    if cached.is_file():
        return cached
    copy = _copies.get(runtime_id)
    if copy is not None and (copy / LIBRARY_NAME).is_file():
        return copy / LIBRARY_NAME
    return runtime_library()


def runtime_dir() -> Path:
    """The folder holding the built runtime (built if missing).

    Raises CacheNotWritableError, naming the cache folder and
    TFBRIDGE_CACHE_DIR, when it is missing and the cache cannot be written."""
    config = julia_config()
    cache = _paths.cache_dir()
    root = cache / "runtime"
    final_dir = root / runtime_hash(config)
    if (final_dir / LIBRARY_NAME).is_file():
        return final_dir
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock_file = open(root / f"{final_dir.name}.lock", "w")
    except OSError as exc:
        raise CacheNotWritableError(
            f"the Julia runtime ({LIBRARY_NAME}) for Julia {config.version} and these sources is not "
            f"built, and {_paths.unwritable_cache_hint(cache, exc)}") from exc
    with _build_lock, lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # another process may be building the same hash
        if not (final_dir / LIBRARY_NAME).is_file():
            print(f"tf-julia-bridge: building the Julia runtime ({LIBRARY_NAME}, Julia {config.version}) "
                  f"in {final_dir} ...", file=sys.stderr, flush=True)
            start = time.monotonic()
            _build(config, final_dir)
            print(f"tf-julia-bridge: runtime built in {time.monotonic() - start:.1f} s", file=sys.stderr,
                  flush=True)
    return final_dir


def runtime_library() -> Path:
    """Path of libtfjl_runtime.so for the current sources and Julia (built if missing)."""
    return runtime_dir() / LIBRARY_NAME


def include_dirs() -> list[Path]:
    """Include folders for code using tfjl/runtime.h or tfjl/kernel.h (TF's own headers not included).

    Kernels need no Julia header: only the runtime talks to Julia.
    """
    return [_paths.kernels_cpp_dir() / "include"]


def link_args() -> list[str]:
    """Linker arguments that link a kernel library against the runtime, with an rpath to it."""
    folder = runtime_dir()
    return [f"-L{folder}", f"-l:{LIBRARY_NAME}", f"-Wl,-rpath,{folder}"]
