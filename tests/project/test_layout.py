"""Files stay small enough to read: no source file over MAX_LINES lines (Python,
C++, Julia, Fortran and the jinja2 templates; generated files aside while they
are what their generator writes), and the Julia module's parts are all reached
by its include lines (which the runtime's build follows to embed it, and its
cache key to hash it)."""
from __future__ import annotations

import re
from pathlib import Path

from bridge.julia import contract
from bridge.julia import runtime as julia_runtime
from support import REPO
from support.fortran import generator


MAX_LINES = 700
# Where the limit holds, and for which files there.
SOURCES = {"bridge": (".py", ".h"), "julia": (".jl",), "kernels_cpp": (".h", ".cc", ".f90", ".inc", ".j2", ".py"),
           "templates": (".j2",)}


def _sources() -> list[Path]:
    return sorted(p for folder, suffixes in SOURCES.items() for p in (REPO / folder).rglob("*")
                  if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts)


def _generated() -> set[Path]:
    """The generated files (make contract; the Fortran module's generate.py), excepted only
    while they are what their generator writes."""
    files = {**contract.generated_files(REPO), **generator().outputs()}
    for path, text in files.items():
        assert path.read_text() == text, f"{path} is not what its generator writes: it gets no exception"
    return set(files)


def test_no_source_file_is_over_the_limit():
    generated = _generated()
    sources = _sources()
    assert len(sources) > 50 and {REPO / "julia" / "TFBridge.jl", REPO / "kernels_cpp" / "include" / "tfjl" /
                                  "kernel.h", REPO / "bridge" / "customop" / "spec.py",
                                  REPO / "kernels_cpp" / "fortran" / "tf_bridge_objects.f90",
                                  REPO / "kernels_cpp" / "fortran" / "templates" / "tf_bridge_c.f90.j2",
                                  REPO / "templates" / "kernel.cc.j2"} <= set(sources)
    assert REPO / "kernels_cpp" / "fortran" / "tf_bridge_alloc.f90" in generated
    long = {str(p.relative_to(REPO)): n for p in sources if p not in generated
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, (f"over {MAX_LINES} lines: {long}; split the file by concern (CONTRIBUTING.md, "
                      "'Rules the tests hold')")


def test_every_part_of_tfbridge_is_included():
    """Every .jl file under julia/TFBridge/ is reached from julia/TFBridge.jl
    by include("<path>") lines, the one form the embedded copy follows."""
    bridge_jl = REPO / "julia" / "TFBridge.jl"
    reached = julia_runtime.julia_sources(bridge_jl)
    assert reached[0] == bridge_jl and REPO / "julia" / "contract.jl" in reached
    parts = sorted((REPO / "julia" / "TFBridge").rglob("*.jl"))
    assert len(parts) >= 8
    assert [p for p in parts if p not in reached] == []
    for path in reached:
        for line in path.read_text().splitlines():
            if re.match(r"\s*include\(", line):
                assert julia_runtime.INCLUDE_LINE.match(line), \
                    f"{path}: {line!r} is not include(\"<path>\"), which kernels_cpp/CMakeLists.txt inlines"
