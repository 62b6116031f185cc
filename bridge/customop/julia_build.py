"""A Julia op's build: its cache key and the steps that turn the spec into
lib<Op>.so (generated C++ and Julia entries, the tfjl runtime it links, the
precompiled header, cmake).  :mod:`bridge.customop.build` runs them for the
Julia language (:mod:`bridge.customop.language`), in a folder it publishes
whole; a Fortran op's twins are in :mod:`bridge.customop.fortran`.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from bridge.julia import buildtools, runtime as julia_runtime
from bridge.platform import cache
from bridge.platform.paths import OP_SPEC_FILE
from . import codegen, forwarddiff, pch, toolchain
from .errors import BuildError
from .model import OpSpec

KEY_LENGTH = 16


def library_name(spec: OpSpec) -> str:
    return f"lib{spec.name}.so"


def cache_key(spec: OpSpec) -> str:
    """Hash of what lib<Op>.so depends on: spec, templates, generator, runtime, TF, Julia."""
    key = cache.Key(spec.source)
    for path in codegen.template_files():
        key.add_file(path, "template " + path.name)
    key.add_modules(codegen.__name__)  # the generator and every bridge module it reads
    if spec.gradient:  # @gradient forwarddiff: <Op>_gradient.jl's generator too
        key.add_modules(forwarddiff.__name__)
    tf = toolchain.tensorflow()
    julia = toolchain.julia()
    key.add(tf.fingerprint, *tf.definitions, f"julia {julia.version}", f"runtime {julia.runtime_hash}")
    return key.hexdigest(KEY_LENGTH)


def offer_runtime_copy(folder: Path) -> None:
    """Let a process whose cache has no runtime load the copy the built op
    folder carries (its key includes the runtime's hash)."""
    if not (folder / julia_runtime.LIBRARY_NAME).is_file():  # a build made without one
        return
    julia_runtime.add_runtime_copy(folder, toolchain.julia().runtime_hash)


def build_in(spec: OpSpec, work: Path, report: Callable[[str], None]) -> None:
    """Generate the sources into ``work`` and compile lib<Op>.so there."""
    op = spec.name
    report(f"building {op}: generating {op}.cc")
    (work / f"{op}.cc").write_text(codegen.kernel_source(spec))
    (work / "CMakeLists.txt").write_text(codegen.cmake_lists(spec))
    (work / OP_SPEC_FILE).write_text(spec.source)
    (work / "gradtest.py").write_text(codegen.gradtest_script(spec))
    entries = codegen.entries_source(spec)
    if entries is not None:
        (work / codegen.entries_file_name(spec)).write_text(entries)
    gradient = forwarddiff.gradient_source(spec)
    if gradient is not None:  # @gradient forwarddiff: the functions of <Op>Grad and <Op>GradGrad
        (work / forwarddiff.gradient_file_name(spec)).write_text(gradient)

    try:
        tf = toolchain.tensorflow()
        julia = toolchain.julia()
        report(f"building {op}: checking the Julia runtime library...")
        runtime = toolchain.runtime_library()
        cmake = toolchain.cmake()
        cxx = buildtools.cxx_compiler()
    except (toolchain.ToolchainError, buildtools.ToolNotFoundError) as exc:
        raise BuildError(f"cannot build {op}: {exc}") from exc
    except julia_runtime.RuntimeBuildError as exc:  # the runtime's own build failing
        raise BuildError(f"cannot build {op}: the tfjl runtime library failed to build: {exc}") from exc

    objects = work / "cmake"
    log = work / "build.log"
    configure = [
        cmake, "-S", str(work), "-B", str(objects),
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={work}",
        f"-DTF_INCLUDE_DIR={tf.include_dir}",
        f"-DTF_FRAMEWORK_LIBRARY={tf.framework_library}",
        f"-DTF_DEFINITIONS={';'.join(tf.definitions)}",
        f"-DTFJL_INCLUDE_DIRS={';'.join(str(p) for p in julia.include_dirs)}",
        f"-DTFJL_RUNTIME_LIBRARY={runtime}",
        f"-DCMAKE_CXX_COMPILER={cxx}",  # the compiler the precompiled header was made with
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",  # kept beside the library: how the kernel was compiled
    ]
    header = pch.header(tf, list(julia.include_dirs), cmake, cxx, report)
    if header is not None:
        configure.append(f"-DTFJL_PCH={header}")
    report(f"building {op}: configuring...")
    buildtools.run(configure, log, what=op, step="configuring", error=BuildError)
    report(f"building {op}: compiling...")
    buildtools.run([cmake, "--build", str(objects), "--parallel", str(os.cpu_count() or 1)], log,
                   what=op, step="compiling", error=BuildError)
    if not (work / library_name(spec)).is_file():
        raise BuildError(f"building {op}: cmake succeeded but made no {library_name(spec)}; "
                         f"see {log}")
    julia_runtime.copy_runtime(runtime, work)  # the op's folder loads without the cache's runtime
    if (objects / "compile_commands.json").is_file():
        shutil.copy(objects / "compile_commands.json", work / "compile_commands.json")
    shutil.rmtree(objects, ignore_errors=True)  # object files: the .so is all that is used
