"""Building less and faster (issue 27, item 3): the precompiled header of
TensorFlow's and the runtime's headers (bridge/customop/pch.py) that every
kernel compiles with, and `tfbridge customop build A B C` building folders in
parallel, one line per op.  bench/bench_customop_build.py times the header's
gain."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bridge import customop
from bridge.customop import pch, toolchain
from bridge.julia import buildtools
from bridge.platform import paths
from support.build import op_folder, toolchain_missing
from support import REPO

ROOT = REPO
MISSING = toolchain_missing()
needs_toolchain = pytest.mark.skipif(bool(MISSING), reason=f"cannot compile custom ops: {MISSING}")

_INCLUDE = re.compile(r'^#include [<"]([^>"]+)[>"]', re.MULTILINE)


def test_every_include_of_the_kernel_template_is_in_the_precompiled_header():
    kernel = set(_INCLUDE.findall((paths.templates_dir() / "kernel.cc.j2").read_text()))
    header = set(_INCLUDE.findall((paths.templates_dir() / "tfjl_pch.h.j2").read_text()))
    assert kernel and kernel <= header, sorted(kernel - header)


def test_the_header_is_keyed_by_the_compiler():
    if MISSING:
        pytest.skip(MISSING)
    tf, julia = toolchain.tensorflow(), toolchain.julia()
    cxx = buildtools.cxx_compiler()
    dirs = list(julia.include_dirs)
    assert pch.key(tf, dirs, cxx) == pch.key(tf, dirs, cxx)
    assert pch.key(tf, dirs, cxx) != pch.key(tf, dirs, sys.executable)  # another "compiler"
    assert pch.key(tf, dirs, cxx) != pch.key(tf, dirs + [Path("/elsewhere")], cxx)


def _compile_command(library: Path) -> list[str]:
    (entry,) = json.loads((library.parent / "compile_commands.json").read_text())
    return shlex.split(entry["command"])


@needs_toolchain
def test_a_kernel_compiles_with_the_precompiled_header_and_gcc_uses_it(tmp_path):
    folder = op_folder(tmp_path, "PchTwice", "PchTwice\ndouble x(n)\ndouble y(n) -> output\n",
                       "pch_twice(y, x) = (y .= 2 .* x; nothing)\n")
    library = customop.build(folder, progress=lambda message: None)
    command = _compile_command(library)
    header = Path(command[command.index("-include") + 1])
    assert header.name == "tfjl_pch.h" and (header.parent / "tfjl_pch.h.gch").is_file()
    assert "-Winvalid-pch" in command
    # The same compile again with -H: gcc marks a precompiled header it uses with '!'.
    out, source = command.index("-o"), command.index("-c")
    command[out + 1] = str(tmp_path / "again.o")
    command[source + 1] = str(library.parent / Path(command[source + 1]).name)  # the build folder, renamed
    proc = subprocess.run(command + ["-H"], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"! {header}.gch" in proc.stderr.splitlines()[0], proc.stderr[:2000]
    assert "not used because" not in proc.stderr


@needs_toolchain
def test_without_the_precompiled_header_a_kernel_includes_the_headers_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("TFBRIDGE_PCH", "0")
    assert pch.header(toolchain.tensorflow(), list(toolchain.julia().include_dirs), toolchain.cmake(),
                      buildtools.cxx_compiler(), report=print) is None
    folder = op_folder(tmp_path, "PchOff", "PchOff\ndouble x(n)\ndouble y(n) -> output\n",
                       "pch_off(y, x) = (y .= x; nothing)\n")
    command = _compile_command(customop.build(folder, progress=lambda message: None))
    assert "-include" not in command and "-Winvalid-pch" not in command


@needs_toolchain
def test_customop_build_builds_several_folders_in_parallel_one_line_per_op(tmp_path):
    folders = []
    for name in ("ParA", "ParB"):
        snake = name[:3].lower() + "_" + name[3:].lower()
        folders.append(op_folder(tmp_path, name, f"{name}\ndouble x(n)\ndouble y(n) -> output\n",
                                 f"{snake}(y, x) = (y .= x; nothing)\n"))
    bad = op_folder(tmp_path, "ParBad", "ParBad\ndouble x(n)\ndouble x(n) -> output\n", "")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "customop", "build", *map(str, folders), str(bad)],
                          capture_output=True, text=True, timeout=1800, env=env, cwd=ROOT)
    wall = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr[-3000:]  # ParBad's spec is refused; the others build
    lines = proc.stdout.splitlines()
    assert sorted(line.split(":")[0] for line in lines) == sorted(map(str, folders)), proc.stdout
    seconds = []
    for folder in folders:
        (line,) = [line for line in lines if line.startswith(f"{folder}:")]
        m = re.fullmatch(rf"{re.escape(str(folder))}: built in ([0-9.]+) s -> (.*)", line)
        assert m and Path(m[2]).is_file(), line
        seconds.append(float(m[1]))
    assert f"{bad}: failed after" in proc.stderr and "duplicate name 'x'" in proc.stderr
    # Built at once: the two builds overlapped, so together they took longer than the whole command.
    assert sum(seconds) > wall, (seconds, wall)
    # Again: both cached, one line each.
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "customop", "build", *map(str, folders)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(line.split(" in ")[0] for line in proc.stdout.splitlines()) == sorted(
        f"{folder}: cached" for folder in folders)
