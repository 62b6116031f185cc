"""Where the package's non-Python resources live.

In a wheel they sit inside the package (``bridge/_resources``); in a source
checkout or an editable install they are the top-level folders beside
``bridge/``.  Everything that needs a template, the C++ runtime or the Julia
module asks here, so there is one place that knows both layouts.
"""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _resource_dir(name: str) -> Path:
    installed = _PKG / "_resources" / name
    if installed.is_dir():
        return installed
    source = _PKG.parent / name
    if source.is_dir():
        return source
    raise FileNotFoundError(
        f"bridge resource folder '{name}' is missing: looked in {installed} and {source}")


def templates_dir() -> Path:
    return _resource_dir("templates")


def kernels_cpp_dir() -> Path:
    return _resource_dir("kernels_cpp")


def julia_dir() -> Path:
    return _resource_dir("julia")


def cache_dir() -> Path:
    """Per-user cache: ``TFBRIDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or
    ``~/.cache``, plus ``tf-julia-bridge``.  Created when possible; the path is
    returned even when it cannot be (see below).

    It holds what the bridge can always make again: the parsed C API
    declarations (``ffi/``), the generated op modules (``ops/``), Julia's
    answer to where its pieces are (``julia-config/``) and the built Julia
    runtime (``runtime/<hash>/``, libtfjl_runtime.so and libtfjl_julia.so).

    The cache may be read-only or impossible to create (a shared install, a
    read-only home): every writer falls back then.  Declarations, op modules
    and Julia's configuration are made in memory for the process, and the
    runtime is taken from a built op's folder, which carries a copy of the
    runtime it links (``bridge.customop.build``), so ops that are already
    built still load and run.  Only what needs the runtime built (the first
    op built for a new Julia or new runtime sources) fails, with an error
    naming this folder and ``TFBRIDGE_CACHE_DIR``: point it at a writable
    folder.
    """
    root = os.environ.get("TFBRIDGE_CACHE_DIR")
    if root:
        path = Path(root)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "tf-julia-bridge"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # unwritable: readers find nothing, writers fall back (above)
    return path


def unwritable_cache_hint(path: Path, exc: BaseException) -> str:
    """The end of an error about a cache folder that could not be written."""
    where = ("TFBRIDGE_CACHE_DIR" if os.environ.get("TFBRIDGE_CACHE_DIR")
             else "the default (TFBRIDGE_CACHE_DIR is not set)")
    reason = getattr(exc, "strerror", None) or str(exc)
    return (f"the cache folder {path} (from {where}) cannot be written ({reason}): "
            "set TFBRIDGE_CACHE_DIR to a writable folder, or make this one writable")
