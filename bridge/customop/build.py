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

What differs between a Julia op and a Fortran op (the key, the generated
sources, the compile, what a found build offers) is the op's language's
(:mod:`bridge.customop.language`), decided once as :func:`read` parses the spec.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, Optional, Union

from bridge.platform import cache
from bridge.platform.paths import OP_BUILD_DIR, OP_SPEC_FILE
from . import language as languages
from .errors import BuildError
from .julia_build import KEY_LENGTH as _KEY_LENGTH, library_name
from .language import Language
from .model import OpSpec
from .spec import SpecError, op_types
from .toolchain import ToolchainError

__all__ = ["SPEC_FILE", "BuildError", "build", "read", "cache_key", "library_name",
           "check_not_built_in", "prune", "KEEP_BUILDS"]

SPEC_FILE = OP_SPEC_FILE

Progress = Callable[[str], None]


def _stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_key(spec: OpSpec) -> str:
    """Hash of what lib<Op>.so depends on, as its language sees it (Julia: spec,
    templates, generator, runtime, TF, Julia; Fortran: its sources and gfortran)."""
    return languages.of(spec).cache_key(spec)


def build(directory: Union[str, Path], progress: Optional[Progress] = None, *,
          spec: Optional[OpSpec] = None) -> Path:
    """Build (or find cached) the op of ``<directory>/custom_op.txt``; return lib<Op>.so.

    Progress lines go to stderr unless ``progress`` is given.  Raises SpecError
    for a bad spec, or an op name TensorFlow has built in (nothing is written
    then), and BuildError when cmake or the compiler fails.  ``spec``: what
    :func:`read` gave for ``directory`` (``customop.load`` read it already).
    """
    directory = Path(directory).resolve()
    if spec is None:
        spec, _ = read(directory)
    return _build_parsed(directory, spec, progress)


def read(directory: Path) -> tuple[OpSpec, Language]:
    """The op folder's spec, parsed once, its language decided and its
    language's checks passed (SpecError otherwise): what :func:`build` and
    ``customop.load`` go on with."""
    spec, language = languages.read(directory)
    language.check(spec)
    return spec, language


def _build_parsed(directory: Path, spec: OpSpec, progress: Optional[Progress]) -> Path:
    """:func:`build` of ``spec``, which :func:`read` gave for ``directory``
    (its language decided: ``language.of(spec)`` is the one it read)."""
    language = languages.of(spec)
    report = progress or _stderr_progress
    try:
        key = language.cache_key(spec)
    except ToolchainError as exc:
        raise BuildError(f"cannot build {spec.name}: {exc}") from exc
    root = directory / OP_BUILD_DIR
    final = root / key
    library = final / library_name(spec)
    if library.is_file():
        language.found(final)
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
            language.announce(spec)
            started = time.monotonic()
            with cache.staged_dir(final, failed=root / f"{key}.failed", failure=BuildError) as work:
                _build_in(spec, work, report)
            report(f"building {spec.name}: done in {time.monotonic() - started:.1f} s -> {library}")
            prune(root, keep=key)
    language.found(final)
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


KEEP_BUILDS = 3                  # complete builds kept per op folder, newest first


def prune(root: Path, keep: str) -> None:
    """Remove what earlier builds left in ``root``: complete builds beyond the
    newest KEEP_BUILDS (``keep`` always stays), other keys' failed builds, and
    temporary folders of killed builds (``bridge.platform.cache.prune``)."""
    cache.prune(root, keep, KEEP_BUILDS, is_entry=lambda p: len(p.name) == _KEY_LENGTH
                and all(c in "0123456789abcdef" for c in p.name))


def _build_in(spec: OpSpec, work: Path, report: Progress) -> None:
    """Generate the sources into ``work`` and compile lib<Op>.so there: the
    spec's language's steps (``julia_build.build_in``, ``fortran.build_in``)."""
    languages.of(spec).build_in(spec, work, report)
