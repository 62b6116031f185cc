"""Finding and running the tools builds need: cmake, a C++ compiler, and
Julia's own account of its installation (:func:`julia_config`).

Every build step runs through :func:`run`, which appends the command and its
output to the build's log and, when the step fails, raises the caller's error
naming the step, the exit status and the compiler's error lines
(:func:`error_excerpt`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Sequence

from bridge.platform import cache


class ToolNotFoundError(RuntimeError):
    """A tool a build needs is not installed."""


class JuliaNotFoundError(ToolNotFoundError):
    """Julia (or a usable part of it) could not be found."""


def cmake() -> str:
    """The cmake executable: the launcher the cmake wheel (a dependency) puts
    beside this Python first, else the one on PATH."""
    beside = Path(sys.executable).parent / "cmake"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("cmake")
    if not found:
        raise ToolNotFoundError("cmake was not found: install it with 'pip install cmake' "
                                "(a dependency of tf-julia-bridge)")
    return found


def cxx_compiler() -> str:
    """The C++ compiler: ``$CXX``, else the first of c++, g++ and clang++ on PATH."""
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["c++", "g++", "clang++"]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise ToolNotFoundError(f"no C++ compiler was found (looked for {', '.join(names)}): "
                            "install one (Debian: apt-get install g++) or set CXX")


# --- running a build step ---------------------------------------------------------

def run(command: Sequence[str], log: Path, *, what: str, step: str,
        error: Callable[[str], BaseException]) -> None:
    """Run one step of building ``what``, appending the command line and its
    output to ``log``.  When it cannot start or exits non-zero, raise
    ``error(message)``: "building <what> failed while <step> (exit N):", the
    error lines of its output, and where the full log is."""
    env = dict(os.environ, LC_ALL="C")  # English diagnostics, so error_excerpt can pick them out
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        try:
            proc = subprocess.run(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env)
        except OSError as exc:
            raise error(f"building {what} failed while {step}: cannot run {command[0]}: {exc}") from exc
        out.write(proc.stdout)
    if proc.returncode != 0:
        raise error(f"building {what} failed while {step} (exit {proc.returncode}):\n"
                    f"{error_excerpt(proc.stdout)}\n"
                    f"full log: {log}")


_MAX_ERROR_LINES = 40
_DIAGNOSTIC = re.compile(r"^\S[^:]*:\d+:(?:\d+:)? (?:fatal error|error|warning|note): ")
_ERROR = re.compile(r"^\S[^:]*:\d+:(?:\d+:)? (?:fatal error|error): ")
_LINKER = re.compile(r"undefined reference|^/usr/bin/ld|collect2|cannot find -l|^CMake Error")
_NOISE = re.compile(r"^(?:make|gmake)\[\d+\]|^\[\s*\d+%\]|^ninja: |^In file included from|"
                    r"^\s+from |^compilation terminated|^Call Stack|^-- ")


def error_excerpt(output: str) -> str:
    """The compiler's (or linker's, or cmake's) error lines with their source
    context; the last lines of the output when none can be picked out."""
    lines = output.splitlines()
    picked: list[str] = []
    i = 0
    while i < len(lines) and len(picked) < _MAX_ERROR_LINES:
        line = lines[i]
        if _ERROR.match(line):
            picked.append(line)
            i += 1
            # The quoted source line, the caret, and the notes that explain the error.
            while i < len(lines) and not _ERROR.match(lines[i]) and not _NOISE.match(lines[i]):
                if not _DIAGNOSTIC.match(lines[i]) or " note: " in lines[i]:
                    picked.append(lines[i])
                i += 1
            continue
        if _LINKER.search(line):
            picked.append(line)
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and not _NOISE.match(lines[i]):
                picked.append(lines[i])
                i += 1
            continue
        i += 1
    if not picked:
        picked = [l for l in lines if l.strip()][-_MAX_ERROR_LINES:]
    return "\n".join("  " + l for l in picked[:_MAX_ERROR_LINES])


# --- Julia ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class JuliaConfig:
    """Where a Julia installation keeps what the bridge needs."""
    executable: str   # absolute path of the julia executable
    bindir: str       # Sys.BINDIR
    image: str        # the system image (sys.so)
    include_dir: str  # folder holding julia.h
    libjulia: str     # the libjulia shared library the executable uses
    version: str      # e.g. "1.5.3"


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


def _julia_executable() -> str:
    name = os.environ.get("TFBRIDGE_JULIA") or "julia"
    found = shutil.which(name)
    if found is None:
        source = "TFBRIDGE_JULIA" if os.environ.get("TFBRIDGE_JULIA") else "PATH"
        raise JuliaNotFoundError(
            f"Julia executable '{name}' not found (from {source}): install Julia >= 1.5 with its "
            "headers (Debian: 'make julia' in the repository) or set TFBRIDGE_JULIA to the executable")
    return os.path.realpath(found)


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


def _config_file(executable: str) -> Path:
    """The cache entry of ``executable``'s answer: a reinstalled Julia is another entry."""
    st = os.stat(executable)
    key = cache.Key(executable, str(st.st_mtime_ns), str(st.st_size)).hexdigest()
    return cache.root() / "julia-config" / f"{key}.json"


def _read_config(path: Path) -> JuliaConfig | None:
    try:
        config = JuliaConfig(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    # Julia's files may have gone since (a partial uninstall): ask again then.
    return config if Path(config.image).is_file() and Path(config.libjulia).is_file() else None


_config_lock = threading.Lock()
_configs: dict[str, JuliaConfig] = {}


def julia_config() -> JuliaConfig:
    """Where the Julia the bridge uses (``julia`` on PATH, or ``TFBRIDGE_JULIA``)
    keeps its pieces, asked of the executable once and cached per executable,
    in memory and on disk.  Raises JuliaNotFoundError naming what is missing."""
    executable = _julia_executable()
    with _config_lock:
        config = _configs.get(executable)
        if config is None:
            path = _config_file(executable)
            config = _read_config(path)
            if config is None:
                config = _query_julia(executable)
                cache.publish_file(path, json.dumps(dataclasses.asdict(config)))  # False: stays in memory
            _configs[executable] = config
        return config
