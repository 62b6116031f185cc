"""What `pip install .` decides and builds besides copying files (hatchling's custom hooks).

- :class:`TensorFlowDependency` (metadata hook): which TensorFlow wheel the
  package depends on.  ``TFBRIDGE_TENSORFLOW`` (``tensorflow-cpu``,
  ``tensorflow`` or ``none``) chooses; unset, the package depends on
  ``tensorflow`` when the environment pip installs into has that wheel (the
  GPU build) and not ``tensorflow-cpu``, else on ``tensorflow-cpu``.  pip builds
  in an isolated environment, but it runs the backend with the target
  environment's interpreter, so ``sysconfig``'s site-packages are the target's.
  hatchling writes the result into an sdist's PKG-INFO, and a wheel built from
  that sdist keeps it.
- :class:`FortranLibrary` (build hook): builds the ``tf_bridge`` Fortran module
  (kernels_cpp/fortran) with cmake into the wheel, as
  ``bridge/_resources/fortran/{libtf_bridge_fortran.so,include/*.mod}``, with
  its CMake package config (``lib/cmake/tf_bridge/``) and pkg-config file
  (``lib/pkgconfig/tf_bridge.pc``), which find the library from their own
  folder.  The
  library finds TensorFlow at run time from its own folder
  (``TF_RELATIVE``: site-packages/bridge/_resources/fortran ->
  site-packages/tensorflow), no TensorFlow being needed to build it.  Without
  gfortran or cmake, or with ``TFBRIDGE_BUILD_FORTRAN=0``, the wheel carries
  ``NOT_BUILT`` saying why instead, and ``tfbridge fortran --flags`` builds
  the module into the cache.  Editable installs skip it (a checkout uses the cache).
"""
from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

#: Where the built module goes in the wheel (bridge/platform/paths.py: installed_fortran_dir).
FORTRAN_DEST = "bridge/_resources/fortran"
#: TensorFlow's library folder seen from FORTRAN_DEST (bridge/fortran: INSTALLED_TF_RELATIVE).
TF_RELATIVE = "../../../tensorflow"
TENSORFLOW_CHOICES = ("tensorflow-cpu", "tensorflow", "none")
TENSORFLOW_VERSION = ">=2.15"
BUILD_TIMEOUT = 900


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions() -> set[str]:
    """Normalized names of the distributions in the target environment's site-packages (and user site)."""
    folders = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    try:
        folders.add(site.getusersitepackages())
    except AttributeError:  # some embedded interpreters' site has no user site
        pass
    names = set()
    for folder in folders:
        for info in Path(folder).glob("*.dist-info") if Path(folder).is_dir() else ():
            names.add(_normalized(info.name[: -len(".dist-info")].split("-")[0]))
    return names


def tensorflow_requirement(choice: str | None, installed: set[str]) -> str | None:
    """The TensorFlow requirement for TFBRIDGE_TENSORFLOW=choice in an environment holding installed."""
    if choice:
        name = choice.strip().lower()
        if name not in TENSORFLOW_CHOICES:
            raise ValueError(f"TFBRIDGE_TENSORFLOW={choice!r}: expected one of {', '.join(TENSORFLOW_CHOICES)}")
    elif "tensorflow" in installed and "tensorflow-cpu" not in installed:
        name = "tensorflow"
    else:
        name = "tensorflow-cpu"
    return None if name == "none" else name + TENSORFLOW_VERSION


class TensorFlowDependency(MetadataHookInterface):
    """[project].dependencies: the config's base-dependencies plus the chosen TensorFlow wheel."""
    PLUGIN_NAME = "custom"

    def update(self, metadata: dict) -> None:
        dependencies = list(self.config.get("base-dependencies", []))
        requirement = tensorflow_requirement(os.environ.get("TFBRIDGE_TENSORFLOW"), installed_distributions())
        if requirement:
            dependencies.append(requirement)
        metadata["dependencies"] = dependencies


def _why_not_build() -> str | None:
    if os.environ.get("TFBRIDGE_BUILD_FORTRAN", "1") == "0":
        return "TFBRIDGE_BUILD_FORTRAN=0 was set when the package was built"
    fc = os.environ.get("FC") or "gfortran"
    if shutil.which(fc) is None:
        return f"no Fortran compiler '{fc}' was on PATH when the package was built (apt-get install -y gfortran)"
    if shutil.which(os.environ.get("CMAKE", "cmake")) is None:
        return "cmake was not on PATH when the package was built"
    return None


class FortranLibrary(BuildHookInterface):
    """Builds libtf_bridge_fortran.so and its .mod files into the wheel (module docstring)."""
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        self._work = Path(tempfile.mkdtemp(prefix="tfbridge-fortran-"))
        why = _why_not_build()
        if why is not None:
            self.app.display_warning(f"tf_bridge Fortran module not built: {why}")
            (self._work / "NOT_BUILT").write_text(why + "\n")
            build_data["force_include"][str(self._work / "NOT_BUILT")] = f"{FORTRAN_DEST}/NOT_BUILT"
            return
        tree = self._work / "cmake"
        self._run([shutil.which(os.environ.get("CMAKE", "cmake")), "-S", str(Path(self.root) / "kernels_cpp" / "fortran"),
                   "-B", str(tree), f"-DCMAKE_Fortran_COMPILER={shutil.which(os.environ.get('FC') or 'gfortran')}",
                   f"-DTF_LIBRARY_RELATIVE={TF_RELATIVE}", f"-DTF_BRIDGE_VERSION={self.metadata.version}"],
                  "cmake configure")
        self._run([shutil.which(os.environ.get("CMAKE", "cmake")), "--build", str(tree),
                   "--parallel", str(os.cpu_count() or 1)], "cmake build")
        build_data["force_include"][str(tree / "libtf_bridge_fortran.so")] = f"{FORTRAN_DEST}/libtf_bridge_fortran.so"
        build_data["force_include"][str(tree / "include")] = f"{FORTRAN_DEST}/include"
        build_data["force_include"][str(tree / "lib")] = f"{FORTRAN_DEST}/lib"
        # A native library, but no Python extension: any Python 3 on this platform.
        build_data["pure_python"] = False
        build_data["tag"] = "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())

    def _run(self, command: list, step: str) -> None:
        log = self._work / "build.log"
        with open(log, "a") as out:
            try:
                done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"tf_bridge Fortran module: {step} took over {BUILD_TIMEOUT} s (log: {log})")
        if done.returncode != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-25:])
            raise RuntimeError(f"tf_bridge Fortran module: {step} failed (log: {log}; TFBRIDGE_BUILD_FORTRAN=0 "
                               f"installs without it, and `tfbridge fortran --flags` builds it later):\n{tail}")

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
