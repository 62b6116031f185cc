"""Build a custom op: custom_op.txt -> generated C++ -> cmake -> lib<Op>.so.

Builds are cached in ``<dir>/build/<key>/`` where the key hashes everything
the library depends on: the spec text, the templates and the code generator,
the tfjl runtime's sources, and the TensorFlow and Julia versions.  A cached
build is returned without running cmake.  A build runs in a temporary folder
renamed into place only on success, so a folder named by a key is always
complete; a failed build is kept in ``<dir>/build/<key>.failed/`` for
inspection.  Builds of one key are serialised with a lock file, so two
processes asking at once compile once.

A build folder also carries a copy of the tfjl runtime the library links
(found first through its ``$ORIGIN`` RPATH), so a built op loads where the
per-user cache is read-only or has lost its runtime (``bridge._paths.cache_dir``);
a cached build writes nothing, so the op folder may be read-only too.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Union

from . import codegen, toolchain
from .model import OpSpec
from .spec import parse_file

SPEC_FILE = "custom_op.txt"
_KEY_LENGTH = 16
_MAX_ERROR_LINES = 40


class BuildError(RuntimeError):
    """The op could not be built; the message shows the compiler's errors,
    pointing at the generated source, and where the full log is."""


Progress = Callable[[str], None]


def _stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _hash_file(h, path: Path, label: str) -> None:
    h.update(f"\0{label}\0".encode())
    h.update(path.read_bytes())


def cache_key(spec: OpSpec) -> str:
    """Hash of what lib<Op>.so depends on: spec, templates, generator, runtime, TF, Julia."""
    h = hashlib.sha256()
    h.update(spec.source.encode())
    for path in codegen.template_files():
        _hash_file(h, path, "template " + path.name)
    here = Path(__file__).resolve().parent
    for name in ("codegen.py", "spec.py", "model.py"):
        _hash_file(h, here / name, "generator " + name)
    tf = toolchain.tensorflow()
    julia = toolchain.julia()
    h.update(f"\0{tf.fingerprint}\0{tf.definitions}".encode())
    h.update(f"\0julia {julia.version}\0runtime {julia.runtime_hash}".encode())
    return h.hexdigest()[:_KEY_LENGTH]


def library_name(spec: OpSpec) -> str:
    return f"lib{spec.name}.so"


def build(directory: Union[str, Path], progress: Optional[Progress] = None) -> Path:
    """Build (or find cached) the op of ``<directory>/custom_op.txt``; return lib<Op>.so.

    Progress lines go to stderr unless ``progress`` is given.  Raises SpecError
    for a bad spec (nothing is written then) and BuildError when cmake or the
    compiler fails.
    """
    directory = Path(directory).resolve()
    spec = parse_file(directory / SPEC_FILE)
    report = progress or _stderr_progress
    try:
        key = cache_key(spec)
    except toolchain.ToolchainError as exc:
        raise BuildError(f"cannot build {spec.name}: {exc}") from exc
    root = directory / "build"
    final = root / key
    library = final / library_name(spec)
    if library.is_file():
        toolchain.offer_runtime_copy(final)  # loads without the cache's runtime (cache_dir)
        return library

    try:
        root.mkdir(parents=True, exist_ok=True)
        ignore = root / ".gitignore"
        if not ignore.exists():  # build output never belongs in the op's repository
            ignore.write_text("# Written by tf-julia-bridge: everything here is generated.\n*\n")
        lock = open(root / f".{key}.lock", "w")
    except OSError as exc:
        raise BuildError(f"cannot build {spec.name}: its build folder {root} cannot be written "
                         f"({exc.strerror or exc}): make {directory} writable, or copy the op "
                         "folder somewhere writable and load it from there") from exc
    # One build per key at a time: a second process waits, then finds the library.
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not library.is_file():
            _build_locked(spec, root, key, report)
    toolchain.offer_runtime_copy(final)
    return library


def _build_locked(spec: OpSpec, root: Path, key: str, report: Progress) -> None:
    """Build in a temporary folder and publish it as ``root/key`` by renaming."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    work.chmod(0o755)  # mkdtemp's 0700 would stay on the published folder
    failed = root / f"{key}.failed"
    try:
        _build_in(spec, work, report)
    except BuildError as exc:
        shutil.rmtree(failed, ignore_errors=True)
        os.rename(work, failed)
        raise BuildError(str(exc).replace(str(work), str(failed))) from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    os.rename(work, root / key)
    shutil.rmtree(failed, ignore_errors=True)
    library = root / key / library_name(spec)
    report(f"building {spec.name}: done in {time.monotonic() - started:.1f} s -> {library}")
    prune(root, keep=key)


KEEP_BUILDS = 3                  # complete builds kept per op folder, newest first
STALE_SECONDS = 24 * 3600        # a temporary build folder this old was left by a killed build


def prune(root: Path, keep: str) -> None:
    """Remove what earlier builds left in ``root``: complete builds beyond the
    newest KEEP_BUILDS (``keep`` always stays), other keys' failed builds, and
    temporary folders of killed builds.  A process that loaded a library
    removed here keeps its mapping (Linux unlinks, it does not unmap)."""
    entries = [p for p in root.iterdir() if p.is_dir()]
    complete = sorted((p for p in entries if len(p.name) == 16 and all(c in "0123456789abcdef" for c in p.name)),
                      key=lambda p: p.stat().st_mtime, reverse=True)
    superseded = [p for p in complete[KEEP_BUILDS:] if p.name != keep]
    now = time.time()
    leftovers = [p for p in entries if (p.name.endswith(".failed") and p.name != f"{keep}.failed")
                 or (p.name.startswith(".") and now - p.stat().st_mtime > STALE_SECONDS)]
    for path in superseded + leftovers:
        shutil.rmtree(path, ignore_errors=True)
    for path in superseded:
        (root / f".{path.name}.lock").unlink(missing_ok=True)


def _build_in(spec: OpSpec, work: Path, report: Progress) -> None:
    """Generate the sources into ``work`` and compile lib<Op>.so there."""
    op = spec.name
    report(f"building {op}: generating {op}.cc")
    (work / f"{op}.cc").write_text(codegen.kernel_source(spec))
    (work / "CMakeLists.txt").write_text(codegen.cmake_lists(spec))
    (work / SPEC_FILE).write_text(spec.source)
    (work / "gradtest.py").write_text(codegen.gradtest_script(spec, str(Path(spec.path).parent)))
    entries = codegen.entries_source(spec)
    if entries is not None:
        (work / codegen.entries_file_name(spec)).write_text(entries)

    try:
        tf = toolchain.tensorflow()
        julia = toolchain.julia()
        report(f"building {op}: checking the Julia runtime library...")
        runtime = toolchain.runtime_library()
        cmake = toolchain.cmake()
    except toolchain.ToolchainError as exc:
        raise BuildError(f"cannot build {op}: {exc}") from exc
    except Exception as exc:  # the runtime's own build failing
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
    ]
    report(f"building {op}: configuring...")
    _run(configure, log, op, "configuring")
    report(f"building {op}: compiling...")
    _run([cmake, "--build", str(objects), "--parallel", str(os.cpu_count() or 1)], log, op,
         "compiling")
    if not (work / library_name(spec)).is_file():
        raise BuildError(f"building {op}: cmake succeeded but made no {library_name(spec)}; "
                         f"see {log}")
    toolchain.copy_runtime(runtime, work)  # the op's folder loads without the cache (cache_dir)
    shutil.rmtree(objects, ignore_errors=True)  # object files: the .so is all that is used


def _run(command: list[str], log: Path, op: str, stage: str) -> None:
    env = dict(os.environ, LC_ALL="C")  # English diagnostics, so errors can be picked out
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env)
        out.write(proc.stdout)
    if proc.returncode != 0:
        raise BuildError(f"building {op} failed while {stage}:\n"
                         f"{error_excerpt(proc.stdout)}\n"
                         f"full log: {log}")


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
