"""Wheels of the checkout and fresh venvs to install them into, without downloads
(tests/project/test_packaging*.py).

A fresh venv gets no pip of its own (this venv's pip installs into it with
``--python``) and sees this venv's site-packages through a ``.pth`` line, for
the dependencies (numpy, cffi, hatchling...): ``--no-deps --no-index`` keeps
pip offline.  ``tensorflow_beside=True`` also links the tensorflow package
folder into its own site-packages, the layout ``pip install tensorflow-cpu``
gives.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from bridge.framework._lib import library_paths
from . import REPO


PIP_TIMEOUT = 300
#: Variables of this test run that would make a venv's Python or program use other files.
_LEAKS = ("PYTHONPATH", "TFBRIDGE_LIBTENSORFLOW", "PYTHONHOME")


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _LEAKS}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def build_wheel(folder: Path, **env: str) -> Path:
    """`pip wheel` of the checkout (this venv's hatchling, no isolation) with env set; the wheel."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", str(REPO), "-w", str(folder)], capture_output=True, text=True,
                          timeout=PIP_TIMEOUT, env=clean_env(**env))
    assert done.returncode == 0, done.stderr[-3000:]
    wheel, = folder.glob("tf_julia_bridge-*.whl")
    return wheel


def wheel_metadata(wheel: Path) -> list[str]:
    """The wheel's METADATA lines."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return z.read(name).decode().splitlines()


def tensorflow_requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines naming a TensorFlow distribution."""
    return [line.split(":", 1)[1].strip() for line in wheel_metadata(wheel)
            if line.startswith("Requires-Dist:") and line.split(":", 1)[1].strip().startswith("tensorflow")]


class Venv:
    """A fresh venv (see the module docstring)."""

    def __init__(self, root: Path, *, tensorflow_beside: bool):
        self.root = root
        done = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        self.python = root / "bin" / "python"
        self.site_packages = Path(subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, timeout=60, check=True).stdout.strip())
        (self.site_packages / "seed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        if tensorflow_beside:
            (self.site_packages / "tensorflow").symlink_to(library_paths()[1].parent, target_is_directory=True)

    def pip_install(self, what: Path, **env: str) -> None:
        """pip install what (a wheel or the checkout) into this venv, offline, without dependencies."""
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(self.python), "install", "--no-deps",
                               "--no-build-isolation", "--no-index", "--no-cache-dir", "-q", str(what)],
                              capture_output=True, text=True, timeout=PIP_TIMEOUT, env=clean_env(**env))
        assert done.returncode == 0, done.stderr[-3000:]

    def run(self, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
        """One of the venv's commands (bin/NAME), with this test run's leaks removed from the environment."""
        return subprocess.run([str(self.root / "bin" / args[0]), *args[1:]], capture_output=True, text=True,
                              timeout=timeout, env=clean_env(**env), cwd=self.root)
