"""Build a custom op: custom_op.txt -> generated C++ -> cmake -> lib<Op>.so.

Builds are cached in ``<dir>/build/<key>/`` where the key hashes everything
the library depends on: the spec text, the templates and the code generator,
the tfjl runtime's sources, and the TensorFlow and Julia versions.  A cached
build is returned without running cmake.  A build runs in a temporary folder
renamed into place only on success, so a folder named by a key is always
complete; a failed build is kept in ``<dir>/build/<key>.failed/`` for
inspection.  Builds of one key are serialised with a lock file, so two
processes asking at once compile once (all of this is :mod:`bridge.platform.cache`).

A build folder also carries a copy of the tfjl runtime the library links
(found first through its ``$ORIGIN`` RPATH), so a built op loads where the
per-user cache is read-only or has lost its runtime (``bridge.platform.cache``);
a cached build writes nothing, so the op folder may be read-only too.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Union

from bridge.julia import buildtools, runtime as julia_runtime
from bridge.platform import cache
from bridge.platform.paths import OP_BUILD_DIR, OP_SPEC_FILE
from . import checks, codegen, forwarddiff, fortran, pch, toolchain
from .model import OpSpec
from .spec import SpecError, op_types, parse_file

SPEC_FILE = OP_SPEC_FILE
_KEY_LENGTH = 16


class BuildError(RuntimeError):
    """The op could not be built; the message shows the compiler's errors,
    pointing at the generated source, and where the full log is."""


Progress = Callable[[str], None]


def _stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_key(spec: OpSpec) -> str:
    """Hash of what lib<Op>.so depends on: spec, templates, generator, runtime, TF, Julia."""
    if fortran.is_fortran(spec):  # a Fortran op: its sources, gfortran, no Julia
        return fortran.cache_key(spec)
    key = cache.Key(spec.source)
    for path in codegen.template_files():
        key.add_file(path, "template " + path.name)
    key.add_modules(codegen.__name__)  # the generator and every bridge module it reads
    if spec.gradient:  # @gradient forwarddiff: <Op>_gradient.jl's generator too
        key.add_modules(forwarddiff.__name__)
    tf = toolchain.tensorflow()
    julia = toolchain.julia()
    key.add(tf.fingerprint, *tf.definitions, f"julia {julia.version}", f"runtime {julia.runtime_hash}")
    return key.hexdigest(_KEY_LENGTH)


def library_name(spec: OpSpec) -> str:
    return f"lib{spec.name}.so"


def build(directory: Union[str, Path], progress: Optional[Progress] = None) -> Path:
    """Build (or find cached) the op of ``<directory>/custom_op.txt``; return lib<Op>.so.

    Progress lines go to stderr unless ``progress`` is given.  Raises SpecError
    for a bad spec, or an op name TensorFlow has built in (nothing is written
    then), and BuildError when cmake or the compiler fails.
    """
    return build_spec(directory, progress)[1]


def build_spec(directory: Union[str, Path], progress: Optional[Progress] = None,
               check: Optional[Callable[[OpSpec], None]] = None,
               before_compiling: Optional[Callable[[OpSpec], None]] = None) -> tuple[OpSpec, Path]:
    """:func:`build`, also returning the spec it parsed (``customop.load``
    goes on with it rather than reading and parsing the file again).
    ``check(spec)``, when given, runs before anything is built or looked up
    in the build cache: ``customop.load`` refuses op names taken in this
    process there, rather than after a build of a minute.
    ``before_compiling(spec)`` runs only where a Julia op's library is not
    cached, before it is compiled (``customop.load`` checks the Julia file
    there)."""
    directory = Path(directory).resolve()
    spec = fortran.resolve_language(parse_file(directory / SPEC_FILE), directory)
    if fortran.is_fortran(spec):
        fortran.check_spec(spec)
    else:
        checks.check_output_expressions(spec)
    if check is not None:
        check(spec)
    if before_compiling is not None and not fortran.is_fortran(spec) and not _is_cached(directory, spec):
        try:
            toolchain.runtime_library()  # what Julia needs, and the build first asks for
        except (toolchain.ToolchainError, julia_runtime.RuntimeBuildError):
            pass  # the build says what is missing
        else:
            before_compiling(spec)
    return spec, _build_parsed(directory, spec, progress)


def _is_cached(directory: Path, spec: OpSpec) -> bool:
    try:
        return (directory / OP_BUILD_DIR / cache_key(spec) / library_name(spec)).is_file()
    except toolchain.ToolchainError:
        return False


def _build_parsed(directory: Path, spec: OpSpec, progress: Optional[Progress]) -> Path:
    """:func:`build` of ``spec``, parsed from ``directory``'s spec file."""
    report = progress or _stderr_progress
    try:
        key = cache_key(spec)
    except toolchain.ToolchainError as exc:
        raise BuildError(f"cannot build {spec.name}: {exc}") from exc
    root = directory / OP_BUILD_DIR
    final = root / key
    library = final / library_name(spec)
    if library.is_file():
        _offer_runtime_copy(final)
        return library
    # Only a build needs the check: a cached library passed it, with this
    # TensorFlow (the key covers it), and loading TensorFlow's registry costs
    # a cached build more than the rest of it.
    check_not_built_in(spec)

    try:
        root.mkdir(parents=True, exist_ok=True)
        ignore = root / ".gitignore"
        if not ignore.exists():  # build output never belongs in the op's repository
            ignore.write_text("# Written by tf-julia-bridge: everything here is generated.\n*\n")
        lock = cache.EntryLock(final)
    except OSError as exc:
        raise BuildError(f"cannot build {spec.name}: its build folder {root} cannot be written "
                         f"({exc.strerror or exc}): make {directory} writable, or copy the op "
                         "folder somewhere writable and load it from there") from exc
    with lock:
        if not library.is_file():
            if not fortran.is_fortran(spec):  # a Fortran op's '?' outputs are its size subroutine's to size
                checks.announce_unsized_outputs(spec)
            started = time.monotonic()
            with cache.staged_dir(final, failed=root / f"{key}.failed", failure=BuildError) as work:
                _build_in(spec, work, report)
            report(f"building {spec.name}: done in {time.monotonic() - started:.1f} s -> {library}")
            prune(root, keep=key)
    _offer_runtime_copy(final)
    return library


def check_not_built_in(spec: OpSpec) -> None:
    """Refuse a spec whose op, or gradient op, has the name of an op built
    into TensorFlow (Square, SparseToDense, TanhGrad): TensorFlow would ignore
    the library's registration and keep its own op under that name.  Ops that
    libraries loaded in this process registered are not built in (the op's
    own earlier build among them): customop.load refuses a clash with those."""
    from bridge.ops import op_library

    loaded = op_library.library_op_names()
    for op_type in op_types(spec):
        if op_type not in loaded and op_library.is_registered(op_type):
            what = "its name" if op_type == spec.name else f"the name of its gradient op, {op_type},"
            raise SpecError(spec.path, spec.line,
                            f"op name {spec.name} cannot be used: TensorFlow already has an op named {op_type} "
                            f"(built in), which would stay in place of this library's ({what} is taken); "
                            "rename the op")


def _offer_runtime_copy(folder: Path) -> None:
    """Let a process whose cache has no runtime load the copy the built op
    folder carries (its key includes the runtime's hash)."""
    if not (folder / julia_runtime.LIBRARY_NAME).is_file():  # a Fortran op links no Julia runtime
        return
    julia_runtime.add_runtime_copy(folder, toolchain.julia().runtime_hash)


KEEP_BUILDS = 3                  # complete builds kept per op folder, newest first


def prune(root: Path, keep: str) -> None:
    """Remove what earlier builds left in ``root``: complete builds beyond the
    newest KEEP_BUILDS (``keep`` always stays), other keys' failed builds, and
    temporary folders of killed builds (``bridge.platform.cache.prune``)."""
    cache.prune(root, keep, KEEP_BUILDS, is_entry=lambda p: len(p.name) == _KEY_LENGTH
                and all(c in "0123456789abcdef" for c in p.name))


def _build_in(spec: OpSpec, work: Path, report: Progress) -> None:
    """Generate the sources into ``work`` and compile lib<Op>.so there."""
    if fortran.is_fortran(spec):
        return fortran.build_in(spec, work, report, BuildError)
    op = spec.name
    report(f"building {op}: generating {op}.cc")
    (work / f"{op}.cc").write_text(codegen.kernel_source(spec))
    (work / "CMakeLists.txt").write_text(codegen.cmake_lists(spec))
    (work / SPEC_FILE).write_text(spec.source)
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
