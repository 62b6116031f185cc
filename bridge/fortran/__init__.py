"""The ``tf_bridge`` Fortran module: where its library and module files are, built on first use.

The Fortran sources are in ``kernels_cpp/fortran`` (docs/guides/fortran.md).
``pip install .`` builds them into the package (hatch_build.py,
``bridge/_resources/fortran``), and :func:`build` prefers that copy when it
finds the TensorFlow this Python finds.  Otherwise (a source checkout, an
editable install, a wheel built without gfortran, TensorFlow elsewhere)
:func:`build` runs cmake on them against the TensorFlow C API that
:mod:`bridge.framework._lib` finds (the tensorflow-cpu wheel), into the
cache (``<cache>/fortran/<key>/``: ``libtf_bridge_fortran.so`` and
``include/tf_bridge.mod`` with the modules it uses), keyed by the sources,
the TensorFlow libraries and the Fortran compiler.  The library is not linked
against TensorFlow: it opens it RTLD_LOCAL at run time (Julia ops need that,
as in bridge.framework._lib), from the folder found here.  :func:`flags` gives what
a user's Makefile needs; ``tfbridge fortran --flags`` prints it.  Every build
(installed or cached) also holds a CMake package config
(``lib/cmake/tf_bridge/tf_bridge-config.cmake``: ``find_package(tf_bridge)``,
target ``tf_bridge::tf_bridge``) and ``lib/pkgconfig/tf_bridge.pc``, both
finding the library from their own folder: ``tfbridge fortran --cmake-dir``,
``--prefix`` and ``--pkg-config-path`` name them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bridge.framework._lib import library_paths
from bridge.platform import cache
from bridge.platform.paths import installed_fortran_dir, kernels_cpp_dir
from bridge.platform.version import VERSION

LIBRARY = "libtf_bridge_fortran.so"
MODULE = "tf_bridge.mod"
#: Where a build's CMake package config and pkg-config file are, from its folder (CMakeLists.txt writes them).
CMAKE_CONFIG = "lib/cmake/tf_bridge/tf_bridge-config.cmake"
PKG_CONFIG = "lib/pkgconfig/tf_bridge.pc"
#: A cmake step that takes longer has hung (the build takes about a minute on 2 cores).
BUILD_TIMEOUT = 900
#: TensorFlow's library folder seen from the installed library's folder (hatch_build.py: TF_RELATIVE):
#: site-packages/bridge/_resources/fortran -> site-packages/tensorflow.
INSTALLED_TF_RELATIVE = "../../../tensorflow"


class FortranBuildError(RuntimeError):
    """The Fortran library could not be built: the message names the step and its log."""


@dataclass(frozen=True)
class Build:
    """A built tf_bridge: its library, the folder of its .mod files and the TensorFlow
    library folder it opens at run time (TFBRIDGE_LIBTENSORFLOW overrides it then too)."""
    library: Path
    include_dir: Path
    tensorflow_dir: Path

    def compile_flags(self) -> str:
        return f"-I{self.include_dir}"

    def link_flags(self) -> str:
        lib_dir = self.library.parent
        return f"-L{lib_dir} -ltf_bridge_fortran -Wl,-rpath,{lib_dir}"

    @property
    def prefix(self) -> Path:
        """The build's folder: what CMAKE_PREFIX_PATH names for ``find_package(tf_bridge)``."""
        return self.library.parent

    @property
    def cmake_dir(self) -> Path:
        """The folder of tf_bridge-config.cmake: what ``-Dtf_bridge_DIR=`` names."""
        return (self.prefix / CMAKE_CONFIG).parent

    @property
    def pkg_config_dir(self) -> Path:
        """The folder of tf_bridge.pc: what PKG_CONFIG_PATH names."""
        return (self.prefix / PKG_CONFIG).parent


def source_dir() -> Path:
    """kernels_cpp/fortran: the Fortran sources and their CMakeLists.txt."""
    return kernels_cpp_dir() / "fortran"


def fortran_compiler() -> str:
    """$FC, else gfortran; FortranBuildError naming how to install it when absent."""
    name = os.environ.get("FC") or "gfortran"
    found = shutil.which(name)
    if found is None:
        raise FortranBuildError(f"no Fortran compiler '{name}' on PATH: install gfortran "
                                "(apt-get install -y gfortran; `make setup` does) or set FC")
    return found


def _compiler_version(compiler: str) -> str:
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.splitlines()[0] if done.stdout else compiler


def _key(compiler: str, framework: Path, c_api: Path, checked: bool) -> str:
    key = cache.Key("tf_bridge_fortran", _compiler_version(compiler), str(framework), str(c_api),
                    "checked" if checked else "release")
    for path in sorted(source_dir().iterdir()):
        if path.suffix in (".f90", ".inc", ".in", ".txt"):
            key.add_file(path, path.name)
    return key.hexdigest()


def _run(command: list[str], log: Path, step: str) -> None:
    with open(log, "a") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        try:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise FortranBuildError(f"tf_bridge Fortran build: {step} took over {BUILD_TIMEOUT} s (log: {log})")
    if done.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-25:])
        raise FortranBuildError(f"tf_bridge Fortran build: {step} failed (log: {log}):\n{tail}")


def installed() -> tuple[Optional[Build], str]:
    """The copy `pip install .` built into the package, or None and why it cannot serve.

    It opens TensorFlow from TFBRIDGE_LIBTENSORFLOW, else from INSTALLED_TF_RELATIVE
    beside itself: it serves when that is the TensorFlow this Python finds."""
    folder = installed_fortran_dir()
    library = folder / LIBRARY
    if not all((folder / f).is_file() for f in (LIBRARY, f"include/{MODULE}", CMAKE_CONFIG, PKG_CONFIG)):
        not_built = folder / "NOT_BUILT"
        if not_built.is_file():
            return None, f"the installed package has no tf_bridge library: {not_built.read_text().strip()}"
        return None, "no tf_bridge library is installed with the package (a source checkout or an editable install)"
    _, c_api = library_paths()
    beside = (folder / INSTALLED_TF_RELATIVE).resolve()
    if os.environ.get("TFBRIDGE_LIBTENSORFLOW") or beside == c_api.parent.resolve():
        return Build(library, folder / "include", c_api.parent), ""
    return None, (f"the installed tf_bridge ({library}) opens TensorFlow from {beside}, but this Python's "
                  f"TensorFlow is in {c_api.parent} (TFBRIDGE_LIBTENSORFLOW would make it use that)")


def build(*, quiet: bool = False, checked: bool = False) -> Build:
    """The installed library when it serves (:func:`installed`), else the cache's, building it
    first when the cache has none for these sources (saying why on stderr unless quiet).

    ``checked``: a build with every gfortran run-time check (``-fcheck=all -g
    -fbacktrace``), always the cache's: a program's out-of-bounds index or
    non-conforming arrays stop it with the line, in its code or the module's."""
    made, why_not = (None, "a checked build was asked for") if checked else installed()
    if made is not None:
        return made
    framework, c_api = library_paths()
    try:
        compiler = fortran_compiler()
    except FortranBuildError as exc:
        raise FortranBuildError(f"{why_not}, and it cannot be built: {exc}") from None
    entry = cache.root() / "fortran" / _key(compiler, framework, c_api, checked)
    made = Build(entry / LIBRARY, entry / "include", c_api.parent)
    if made.library.exists():
        return made
    with cache.EntryLock(entry):
        if made.library.exists():
            return made
        if not quiet:
            print(f"tfbridge: {why_not}; building the tf_bridge Fortran module into {entry} "
                  "(about a minute, once)", file=sys.stderr, flush=True)
        with cache.staged_dir(entry, failed=entry.with_name(entry.name + ".failed"),
                              failure=FortranBuildError) as work:
            log = work / "build.log"
            tree = work / "cmake"
            _run([_cmake(), "-S", str(source_dir()), "-B", str(tree), f"-DCMAKE_Fortran_COMPILER={compiler}",
                  f"-DTF_CC_LIBRARY={c_api}", f"-DTF_FRAMEWORK_LIBRARY={framework}",
                  f"-DTF_BRIDGE_CHECKED={'ON' if checked else 'OFF'}", f"-DTF_BRIDGE_VERSION={VERSION}"],
                 log, "cmake configure")
            _run([_cmake(), "--build", str(tree)], log, "cmake build")
            shutil.copy2(tree / LIBRARY, work / LIBRARY)
            shutil.copytree(tree / "include", work / "include")
            shutil.copytree(tree / "lib", work / "lib")
            shutil.rmtree(tree, ignore_errors=True)
    return made


def _cmake() -> str:
    found = shutil.which(os.environ.get("CMAKE", "cmake"))
    if found is None:
        raise FortranBuildError("cmake is not on PATH: install cmake (pip install cmake, or apt-get install cmake)")
    return found


def flags(*, quiet: bool = False, checked: bool = False) -> str:
    """The compile and link flags of a program that uses tf_bridge (building it first if needed)."""
    made = build(quiet=quiet, checked=checked)
    return f"{made.compile_flags()} {made.link_flags()}"


#: What ``tfbridge fortran`` prints, by option.
QUERIES = ("flags", "compile", "link", "cmake-dir", "prefix", "pkg-config-path")


def main_flags(kind: Optional[str] = None, checked: bool = False) -> str:
    """What ``tfbridge fortran`` prints (``kind``, one of QUERIES; default "flags"): both flag
    sets, only the "compile" or "link" ones, or the folder of the CMake package config, the
    prefix CMAKE_PREFIX_PATH names, or the folder of tf_bridge.pc."""
    kind = kind or "flags"
    if kind not in QUERIES:
        raise ValueError(f"tfbridge fortran: unknown query {kind!r}; expected one of {', '.join(QUERIES)}")
    made = build(checked=checked)
    return {"flags": lambda: f"{made.compile_flags()} {made.link_flags()}", "compile": made.compile_flags,
            "link": made.link_flags, "cmake-dir": lambda: str(made.cmake_dir), "prefix": lambda: str(made.prefix),
            "pkg-config-path": lambda: str(made.pkg_config_dir)}[kind]()
