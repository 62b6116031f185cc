"""bridge.julia.buildtools: finding cmake, the compiler and Julia, and the one runner of build steps."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.julia import buildtools


class StepFailed(RuntimeError):
    pass


# ------------------------------------------------------------------ run

def test_run_logs_the_command_and_its_output(tmp_path):
    log = tmp_path / "build.log"
    buildtools.run([sys.executable, "-c", "print('hello')"], log, what="X", step="saying hello",
                   error=StepFailed)
    buildtools.run([sys.executable, "-c", "print('again')"], log, what="X", step="again", error=StepFailed)
    text = log.read_text()
    assert text.startswith(f"$ {sys.executable} -c print('hello')\nhello\n")
    assert text.endswith("again\n")


def test_a_failing_step_raises_the_callers_error_naming_step_and_exit(tmp_path):
    log = tmp_path / "build.log"
    script = "import sys; print('/x/Op.cc:3:1: error: nope'); print('noise'); sys.exit(3)"
    with pytest.raises(StepFailed) as info:
        buildtools.run([sys.executable, "-c", script], log, what="libOp.so", step="compiling",
                       error=StepFailed)
    assert str(info.value).splitlines() == [
        "building libOp.so failed while compiling (exit 3):",
        "  /x/Op.cc:3:1: error: nope",
        "  noise",
        f"full log: {log}",
    ]
    assert "error: nope" in log.read_text()


def test_a_step_that_cannot_start_raises_the_callers_error(tmp_path):
    with pytest.raises(StepFailed, match=r"building X failed while configuring: cannot run /no/such/tool"):
        buildtools.run(["/no/such/tool"], tmp_path / "build.log", what="X", step="configuring",
                       error=StepFailed)


# ------------------------------------------------------------------ finding tools

def test_cmake_is_found_and_runs():
    found = buildtools.cmake()
    proc = subprocess.run([found, "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("cmake version"), proc.stdout + proc.stderr


def test_cmake_prefers_the_wheels_launcher_then_path(tmp_path, monkeypatch):
    launcher = tmp_path / "bin" / "cmake"
    launcher.parent.mkdir()
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    assert buildtools.cmake() == str(launcher)
    launcher.unlink()
    on_path = tmp_path / "path"
    on_path.mkdir()
    (on_path / "cmake").write_text("#!/bin/sh\n")
    (on_path / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    assert buildtools.cmake() == str(on_path / "cmake")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(buildtools.ToolNotFoundError,
                       match="cmake was not found: install it with 'pip install cmake'"):
        buildtools.cmake()


def test_the_compiler_follows_cxx(monkeypatch, tmp_path):
    if shutil.which("c++") or shutil.which("g++") or shutil.which("clang++"):
        monkeypatch.delenv("CXX", raising=False)
        assert Path(buildtools.cxx_compiler()).is_file()
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(buildtools.ToolNotFoundError, match="looked for no-such-compiler"):
        buildtools.cxx_compiler()


# ------------------------------------------------------------------ Julia

@pytest.fixture
def fresh_configs(monkeypatch):
    monkeypatch.setattr(buildtools, "_configs", {})


def test_a_missing_julia_is_named(monkeypatch, fresh_configs):
    monkeypatch.setenv("TFBRIDGE_JULIA", "/no/such/julia")
    with pytest.raises(buildtools.JuliaNotFoundError,
                       match=r"'/no/such/julia' not found \(from TFBRIDGE_JULIA\)"):
        buildtools.julia_config()


julia_needed = pytest.mark.skipif(shutil.which("julia") is None, reason="julia is not installed")


@julia_needed
def test_julia_config_is_cached_on_disk(tmp_path, monkeypatch, fresh_configs):
    monkeypatch.setenv("TFBRIDGE_CACHE_DIR", str(tmp_path))
    config = buildtools.julia_config()
    assert Path(config.include_dir, "julia.h").is_file()
    entry, = (tmp_path / "julia-config").glob("*.json")
    assert json.loads(entry.read_text())["version"] == config.version
    # A second process (here: an emptied memory) reads the entry and runs no julia.
    monkeypatch.setattr(buildtools, "_configs", {})
    monkeypatch.setattr(buildtools, "_query_julia", lambda executable: pytest.fail("julia was run again"))
    assert buildtools.julia_config() == config


@julia_needed
def test_julia_config_with_an_unwritable_cache_stays_in_memory(tmp_path, monkeypatch, fresh_configs):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("TFBRIDGE_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    config = buildtools.julia_config()
    assert buildtools.julia_config() is config


# ------------------------------------------------------------------ the runtime's build uses both

@julia_needed
def test_a_failed_runtime_build_is_kept_and_named(tmp_path, monkeypatch):
    from bridge.platform import paths
    from bridge.julia import runtime as julia_runtime

    sources = tmp_path / "kernels_cpp"
    sources.mkdir()
    (sources / "CMakeLists.txt").write_text(
        'cmake_minimum_required(VERSION 3.18)\nmessage(FATAL_ERROR "boom")\n')
    monkeypatch.setattr(paths, "kernels_cpp_dir", lambda: sources)
    monkeypatch.setenv("TFBRIDGE_CACHE_DIR", str(tmp_path / "cache"))
    entry = tmp_path / "cache" / "runtime" / julia_runtime.runtime_hash()
    with pytest.raises(julia_runtime.RuntimeBuildError) as info:
        julia_runtime.runtime_dir()
    message = str(info.value)
    assert message.startswith("building libtfjl_runtime.so failed while configuring (exit 1):\n"), message
    assert "boom" in message
    failed = entry.with_name(f"{entry.name}.failed")
    assert message.endswith(f"full log: {failed / 'build.log'}")
    assert "boom" in (failed / "build.log").read_text()
    assert sorted(p.name for p in entry.parent.iterdir()) == [f".{entry.name}.lock", failed.name]


@julia_needed
def test_the_runtime_key_covers_what_its_build_reads(tmp_path, monkeypatch):
    """Editing a README or an installer script must not rebuild the runtime
    (and with it every op); editing anything the build reads must."""
    from bridge.platform import paths
    from bridge.julia import runtime as julia_runtime

    sources, julia_sources = tmp_path / "kernels_cpp", tmp_path / "julia"
    shutil.copytree(paths.kernels_cpp_dir(), sources)
    shutil.copytree(paths.julia_dir(), julia_sources)
    monkeypatch.setattr(paths, "kernels_cpp_dir", lambda: sources)
    monkeypatch.setattr(paths, "julia_dir", lambda: julia_sources)
    before = julia_runtime.runtime_hash()
    for doc in list(sources.rglob("*.md")) + [julia_sources / "install-julia.sh"]:
        doc.write_text(doc.read_text() + "\nA new paragraph.\n")
    assert julia_runtime.runtime_hash() == before
    for read_by_the_build in (sources / "include" / "tfjl" / "runtime.h", julia_sources / "TFBridge.jl",
                              julia_sources / "TFBridge" / "errors.jl", julia_sources / "contract.jl"):
        read_by_the_build.write_text(read_by_the_build.read_text() + "\n# a change\n")
        assert julia_runtime.runtime_hash() != before
        before = julia_runtime.runtime_hash()
    # The Julia files are found by following TFBridge.jl's include lines,
    # recursively: a file joins the key when a file of the key includes it.
    part = julia_sources / "TFBridge" / "extra" / "part.jl"
    part.parent.mkdir()
    part.write_text("# not included yet\n")
    assert julia_runtime.runtime_hash() == before
    errors_jl = julia_sources / "TFBridge" / "errors.jl"
    errors_jl.write_text(errors_jl.read_text() + 'include("extra/part.jl")\n')
    before = julia_runtime.runtime_hash()
    assert part in julia_runtime.julia_sources()
    part.write_text("# included by errors.jl\n")
    assert julia_runtime.runtime_hash() != before
