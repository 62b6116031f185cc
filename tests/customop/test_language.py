"""An op's language is decided once (issue 41, "Layout"): ``language.read``
parses the spec and picks one object per language, and ``tfbridge customop
stub``, the build and ``customop.load`` ask that object, never the spec's
language again.  Before, ``fortran.is_fortran(spec)`` branched in cli.py,
customop/__init__.py and five times in build.py, and one ``load`` parsed the
spec twice (the build's parse, then ``_start_julia_for``'s)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from bridge import cli, customop
from bridge.customop import fortran, language, loading, spec as spec_module, toolchain
from bridge.customop.spec import parse
from support import REPO

SPEC = "LanguageProbe\ndouble x(n)\ndouble y(n) -> output\n"


def _folder(parent: Path, spec_text: str, *files: str) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    (parent / "custom_op.txt").write_text(spec_text)
    for name in files:
        (parent / name).write_text("")
    return parent


def test_read_decides_the_language_from_the_spec_or_the_folder(tmp_path):
    julia_op = _folder(tmp_path / "j", SPEC, "language_probe.jl")
    fortran_by_file = _folder(tmp_path / "f", SPEC, "language_probe.f90")
    fortran_by_word = _folder(tmp_path / "w", SPEC + "@language fortran\n", "language_probe.jl")
    both = _folder(tmp_path / "b", SPEC, "language_probe.jl", "language_probe.f90")
    assert [language.read(d)[1] for d in (julia_op, fortran_by_file, fortran_by_word, both)] == [
        language.JULIA, language.FORTRAN, language.FORTRAN, language.JULIA]
    assert language.of(parse(SPEC + "@language fortran\n")) is language.FORTRAN
    assert language.of(parse(SPEC)) is language.JULIA
    assert language.FORTRAN.source_file_name(parse(SPEC)) == "language_probe.f90"
    assert language.JULIA.source_file_name(parse(SPEC)) == "language_probe.jl"


class _Recorder(language.Language):
    """A third language, to show that the command, the build and the load go
    through the spec's language object and nowhere else: each step records
    its name; its build writes an empty file where the library goes, its
    load returns a module of its own (nothing reaches TensorFlow or Julia)."""
    name = "recorder"

    def __init__(self):
        self.calls: list[str] = []
        self.module = types.ModuleType("recorded_ops")

    def source_file_name(self, spec):
        return "language_probe.rec"

    def check(self, spec):
        self.calls.append("check")

    def stub(self, spec):
        self.calls.append("stub")
        return f"stub of {spec.name}\n"

    def cache_key(self, spec):
        self.calls.append("cache_key")
        return "0123456789abcdef"

    def announce(self, spec):
        self.calls.append("announce")

    def build_in(self, spec, work, report):
        self.calls.append("build_in")
        (work / f"lib{spec.name}.so").write_bytes(b"")

    def found(self, folder):
        self.calls.append("found")

    def before_compiling(self, spec, directory):
        self.calls.append("before_compiling")
        return True

    def load(self, spec, library, directory, check_functions, checked_before):
        self.calls.append(f"load {library.relative_to(directory)} {check_functions} {checked_before}")
        return self.module


def test_the_command_the_build_and_the_load_ask_the_specs_language(tmp_path, monkeypatch, capsys):
    recorder = _Recorder()
    monkeypatch.setattr(spec_module, "LANGUAGES", spec_module.LANGUAGES + ("recorder",))
    monkeypatch.setitem(language.LANGUAGES, "recorder", recorder)
    # A Fortran file beside it: the folder's files never override @language.
    folder = _folder(tmp_path / "op", SPEC + "@language recorder\n", "language_probe.f90")

    assert cli.main(["customop", "stub", str(folder)]) == 0
    assert capsys.readouterr().out == "stub of LanguageProbe\n"
    assert recorder.calls == ["stub"]

    recorder.calls.clear()
    progress: list[str] = []
    library = customop.build(folder, progress=progress.append)
    assert library == folder.resolve() / "build" / "0123456789abcdef" / "libLanguageProbe.so"
    assert recorder.calls == ["check", "cache_key", "announce", "build_in", "found"]
    assert customop.cache_key(language.read(folder)[0]) == "0123456789abcdef"

    recorder.calls.clear()
    assert customop.load(folder, check_functions=False) is recorder.module
    # Built now: the build finds it.
    assert recorder.calls == ["check", "before_compiling", "cache_key", "found",
                              "load build/0123456789abcdef/libLanguageProbe.so False True"]


def test_a_key_is_none_only_when_a_tool_is_missing(tmp_path, monkeypatch):
    """Whether a loaded library is this op's own build compares cache keys:
    a missing tool leaves that to the build (which says what is missing),
    anything else is raised as the build would raise it.  The old broad
    ``except Exception`` also turned an unreadable op folder into None."""
    gone = parse(SPEC + "@language fortran\n", str(tmp_path / "gone" / "custom_op.txt"))
    with pytest.raises(FileNotFoundError):
        loading.cache_key_or_none(gone, language.FORTRAN.cache_key)

    here = _folder(tmp_path / "here", SPEC + "@language fortran\n", "language_probe.f90")
    spec = language.read(here)[0]
    fortran.gfortran_version.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    try:
        with pytest.raises(toolchain.ToolchainError):
            language.FORTRAN.cache_key(spec)
        assert loading.cache_key_or_none(spec, language.FORTRAN.cache_key) is None
    finally:
        fortran.gfortran_version.cache_clear()  # found again with the real PATH


# In a fresh process, where Julia has not started: the old load parsed the
# spec again to decide whether to start Julia.
_COUNT_PARSES = textwrap.dedent("""
    import json, sys
    from bridge.customop import spec
    parsed = []
    real = spec.parse
    def counting(text, path="custom_op.txt"):
        parsed.append(str(path))
        return real(text, path)
    spec.parse = counting  # parse_file calls it: every read of a spec file passes here
    from bridge import customop, julia
    module = customop.load(sys.argv[1])
    print(json.dumps({"parsed": parsed, "ops": sorted(module.OP_TYPES.values()),
                      "julia": julia.is_initialized()}))
""")


def test_one_load_parses_the_spec_once(twice_folder):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _COUNT_PARSES, str(twice_folder)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {
        "parsed": [str(twice_folder.resolve() / "custom_op.txt")], "ops": ["Twice", "TwiceGrad"], "julia": True}
