"""Where the package's non-Python resources live.

In a wheel they sit inside the package (``bridge/_resources``); in a source
checkout or an editable install they are the top-level folders beside
``bridge/``.  Everything that needs a template, the C++ runtime or the Julia
module asks here, so there is one place that knows both layouts.  (The
per-user cache folder is ``bridge.platform.cache.root()``.)
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

#: A custom-op folder's spec, and the folder its builds go to:
#: ``<folder>/build/<key>/lib<Op>.so`` (bridge.customop builds there; the
#: SavedModel code finds an op library's folder from it without importing
#: the custom-op tools).
OP_SPEC_FILE = "custom_op.txt"
OP_BUILD_DIR = "build"

_PKG = Path(__file__).resolve().parents[1]  # bridge/


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


def installed_fortran_dir() -> Path:
    """Where `pip install .` puts the built tf_bridge Fortran module (hatch_build.py):
    ``libtf_bridge_fortran.so`` and ``include/``, or ``NOT_BUILT`` saying why not.
    Absent in a source checkout or an editable install."""
    return _PKG / "_resources" / "fortran"


def op_folder_of_library(library: Path) -> Optional[Path]:
    """The op folder a built custom-op library comes from, or None when
    ``library`` is not laid out as bridge.customop builds."""
    parents = list(Path(library).resolve().parents)
    if len(parents) > 2 and parents[1].name == OP_BUILD_DIR and (parents[2] / OP_SPEC_FILE).is_file():
        return parents[2]
    return None
