"""Julia's system image with TFBridge built in, so Julia starts in a fraction
of a second (docs/internals/julia-start.md).

Including julia/TFBridge.jl at every start costs about a second; an image
built once with the module in it (Julia's own ``--output-o`` on top of the
installation's image, then linked into a shared library: ``build_image``,
``make julia-image``, ``tfbridge julia build-image``) starts as fast as stock
Julia, and the packages' precompiled files stay valid (the image keeps the
installation's Base and standard library).

The image is a cache entry, ``cache.root()/julia-image/<key>/sys.so``, keyed
by ``image_key``: Julia's version, its own image (path, size, time), this
machine's CPU (the image's code is compiled for it), and julia/TFBridge.jl,
the files it includes and the build script.  ``current_image`` (what
``bridge.julia.init`` asks, with no build) returns it only when it exists for
the current key; otherwise Julia starts from its own image and includes
TFBridge.jl, as without it.  Nothing builds it lazily: a build takes minutes.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from bridge.platform import cache, paths
from . import buildtools
from . import runtime as julia_runtime
from .buildtools import JuliaConfig, julia_config

IMAGE_NAME = "sys.so"
#: The build script, beside TFBridge.jl (julia/build_image.jl).
BUILD_SCRIPT = "build_image.jl"
#: ``TFBRIDGE_JULIA_SYSIMAGE=0`` makes ``current_image`` find nothing: Julia then
#: starts from its own image and includes TFBridge.jl.
DISABLE_VARIABLE = "TFBRIDGE_JULIA_SYSIMAGE"
#: Images of other keys kept besides the newest (each about 150 MB).
KEEP_OLD = 1


class ImageBuildError(RuntimeError):
    """Building the system image failed; the message says at which step and where the log is."""


def _cpu_identity() -> str:
    """What decides the machine code Julia's ``native`` target emits: the CPU
    model and its feature flags (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags", "Features", "CPU part"))]
        wanted = {line.split(":")[0].strip(): line for line in reversed(lines)}
        if wanted:
            return "".join(sorted(wanted.values()))
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def image_sources() -> list[Path]:
    """The Julia files an image is built from: TFBridge.jl with every file it
    includes, and the build script."""
    return julia_runtime.julia_sources() + [paths.julia_dir() / BUILD_SCRIPT]


def image_key(config: Optional[JuliaConfig] = None) -> str:
    """The image's cache key; any change to what it is built from names another entry."""
    config = config or julia_config()
    st = os.stat(config.image)
    key = cache.Key(config.version, config.executable, config.image, str(st.st_size), str(st.st_mtime_ns),
                    _cpu_identity())
    julia = paths.julia_dir()
    for path in image_sources():
        key.add_file(path, os.path.relpath(path, julia))
    return key.hexdigest()


def image_dir() -> Path:
    """The folder holding every built image, one subfolder per key."""
    return cache.root() / "julia-image"


def image_path(config: Optional[JuliaConfig] = None) -> Path:
    """Where the image for the current sources and Julia is (or would be)."""
    return image_dir() / image_key(config) / IMAGE_NAME


def disabled() -> bool:
    """Whether ``TFBRIDGE_JULIA_SYSIMAGE=0`` (or ``no``, ``false``, ``off``) turns the image off."""
    return os.environ.get(DISABLE_VARIABLE, "").strip().lower() in ("0", "no", "false", "off")


def current_image(config: Optional[JuliaConfig] = None) -> Optional[Path]:
    """The built image for the current sources and Julia, or None (not built,
    built for other sources, or turned off).  Never builds; reads only, so a
    read-only cache holding the image serves it."""
    if disabled():
        return None
    try:
        path = image_path(config)
    except (OSError, julia_runtime.RuntimeBuildError):
        return None  # a source file unreadable: TFBridge.jl's include reports it
    return path if path.is_file() else None


def _link(config: JuliaConfig, obj: Path, out: Path, log: Path) -> None:
    """Link Julia's object file into a shared library, as Julia's own build links sys.so."""
    compiler = os.environ.get("CC") or "cc"
    libdir = str(Path(config.libjulia).parent)
    buildtools.run([compiler, "-shared", "-o", str(out), "-Wl,--whole-archive", str(obj),
                    "-Wl,--no-whole-archive", f"-L{libdir}", f"-l:{Path(config.libjulia).name}"],
                   log, what=IMAGE_NAME, step="linking", error=ImageBuildError)


def _build(config: JuliaConfig, work: Path) -> None:
    log = work / "build.log"
    obj = work / "sys.o"
    buildtools.run([config.executable, "--startup-file=no", "--history-file=no", f"--output-o={obj}",
                    f"--sysimage={config.image}", str(paths.julia_dir() / BUILD_SCRIPT),
                    str(paths.julia_dir() / julia_runtime.BRIDGE_JL)],
                   log, what=IMAGE_NAME, step="compiling TFBridge into the image", error=ImageBuildError)
    _link(config, obj, work / IMAGE_NAME, log)
    obj.unlink()  # as big as the image, and read by nothing


def build_image(progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
                ) -> Path:
    """Build the image for the current sources and Julia unless it exists;
    its path.  Says what it does and how long it took through ``progress``,
    once.  The entry appears whole (built in a hidden folder, then renamed),
    so a killed build leaves no image behind.  Raises ImageBuildError (a
    failed build is kept as ``<key>.failed`` with its log) or, where the cache
    cannot be written, ``runtime.CacheNotWritableError``."""
    config = julia_config()
    key = image_key(config)
    entry = image_dir() / key
    if (entry / IMAGE_NAME).is_file():
        progress(f"tf-julia-bridge: Julia's system image with TFBridge is up to date: {entry / IMAGE_NAME}")
        return entry / IMAGE_NAME
    try:
        lock = cache.EntryLock(entry)
    except OSError as exc:
        raise julia_runtime.CacheNotWritableError(
            f"Julia's system image with TFBridge (Julia {config.version}) is not built, and "
            f"{cache.unwritable_hint(cache.root(), exc)}") from exc
    with lock:
        if not (entry / IMAGE_NAME).is_file():
            progress(f"tf-julia-bridge: building Julia's system image with TFBridge (Julia {config.version}, "
                     f"on {config.image}) in {entry}: a few minutes (3 on 2 cores, more on a busy machine) ...")
            start = time.monotonic()
            with cache.staged_dir(entry, failed=entry.with_name(f"{entry.name}.failed"),
                                  failure=ImageBuildError) as work:
                _build(config, work)
            size = (entry / IMAGE_NAME).stat().st_size / 1e6
            progress(f"tf-julia-bridge: system image built in {time.monotonic() - start:.0f} s "
                     f"({size:.0f} MB): {entry / IMAGE_NAME}")
        cache.prune(image_dir(), keep=key, newest=1 + KEEP_OLD, is_entry=lambda p: (p / IMAGE_NAME).is_file())
    return entry / IMAGE_NAME

