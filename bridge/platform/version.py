"""The package's version, in one place: the wheel's (pyproject.toml's
[tool.hatch.version] reads it), ``bridge.__version__``, and the one the
Fortran module's CMake package config and tf_bridge.pc report
(``bridge.fortran``)."""
from __future__ import annotations

VERSION = "0.1.0"
