"""An op's language, decided once: one object per language carrying what
differs between a Julia op and a Fortran op.

:func:`read` parses an op folder's ``custom_op.txt`` (once) and decides its
language (``@language``, else the folder's files:
:func:`bridge.customop.fortran.resolve_language`); everything after asks the
:class:`Language` it returns, never the spec's language again:

=====================  ============================================  ==========================================
step                   Julia (:data:`JULIA`)                         Fortran (:data:`FORTRAN`)
=====================  ============================================  ==========================================
``check``              outputs' size expressions                     what Fortran cannot take (``check_spec``)
``stub``               the Julia functions (``codegen.julia_stub``)  the subroutines (``fortran.stub``)
``cache_key``          ``julia_build.cache_key``                     ``fortran.cache_key`` (sources, gfortran)
``announce``           the note on ``?`` outputs                     nothing (the size subroutine sizes them)
``build_in``           ``julia_build.build_in``                      ``fortran.build_in``
``found``              offers the build's runtime copy               nothing (no Julia runtime)
``before_compiling``   starts Julia, checks the file's outputs       nothing
``load``               the Julia file included and checked, entries  the library alone
=====================  ============================================  ==========================================

``tfbridge customop stub`` (:mod:`bridge.cli`), :mod:`bridge.customop.build`
and ``customop.load`` call these; a third language is a third class here
and a name in ``spec.LANGUAGES``.
"""
from __future__ import annotations

import types
from pathlib import Path
from typing import Callable

from bridge.julia import runtime as julia_runtime
from bridge.platform.paths import OP_BUILD_DIR, OP_SPEC_FILE
from . import checks, codegen, fortran, julia_build, loading, toolchain
from .errors import BuildError
from .model import OpSpec
from .spec import parse_file

Progress = Callable[[str], None]


class Language:
    """The steps of an op's life that depend on its language (the module's table)."""

    #: The name TensorBoard shows on the op's nodes (``_tfbridge_language``) and ``@language`` takes.
    name = ""

    def source_file_name(self, spec: OpSpec) -> str:
        """The file beside custom_op.txt holding the op's functions."""
        raise NotImplementedError

    def check(self, spec: OpSpec) -> None:
        """Refuse, as a SpecError naming the line, what this language cannot build."""

    def stub(self, spec: OpSpec) -> str:
        """The skeleton of the op's functions (``tfbridge customop stub``)."""
        raise NotImplementedError

    def cache_key(self, spec: OpSpec) -> str:
        """Hash of everything the op's library depends on; ToolchainError when a tool is missing."""
        raise NotImplementedError

    def library(self, spec: OpSpec, directory: Path) -> Path:
        """Where the op's build for this key puts lib<Op>.so."""
        return directory / OP_BUILD_DIR / self.cache_key(spec) / julia_build.library_name(spec)

    def is_cached(self, spec: OpSpec, directory: Path) -> bool:
        try:
            return self.library(spec, directory).is_file()
        except toolchain.ToolchainError:
            return False

    def announce(self, spec: OpSpec) -> None:
        """What a build says before it compiles (warnings)."""

    def build_in(self, spec: OpSpec, work: Path, report: Progress) -> None:
        """Generate the sources into ``work`` and compile lib<Op>.so there (BuildError on failure)."""
        raise NotImplementedError

    def found(self, folder: Path) -> None:
        """A complete build folder was found or made: what loading from it needs."""

    def before_compiling(self, spec: OpSpec, directory: Path) -> bool:
        """``customop.load``'s checks that run, where the op must be compiled, before
        the compile; True when they ran (``load`` then need not run them again)."""
        return False

    def load(self, spec: OpSpec, library: Path, directory: Path, check_functions: bool,
             checked_before: bool) -> types.ModuleType:
        """Load the built op into this process (``customop.load``); its module of op functions."""
        raise NotImplementedError

    def declare(self, spec: OpSpec, library: Path, directory: Path) -> types.ModuleType:
        """Load the op's library alone, running none of its code (``customop.declare``)."""
        return loading.load_library(spec, library, directory, self.name,
                                    directory / self.source_file_name(spec))

    def __repr__(self) -> str:
        return f"<language {self.name}>"


class Julia(Language):
    """Julia functions, called by the tfjl runtime (docs/guides/julia-ops.md)."""
    name = "julia"

    def source_file_name(self, spec: OpSpec) -> str:
        return codegen.julia_file_name(spec)

    def check(self, spec: OpSpec) -> None:
        checks.check_output_expressions(spec)

    def stub(self, spec: OpSpec) -> str:
        return codegen.julia_stub(spec)

    def cache_key(self, spec: OpSpec) -> str:
        return julia_build.cache_key(spec)

    def announce(self, spec: OpSpec) -> None:
        checks.announce_unsized_outputs(spec)

    def build_in(self, spec: OpSpec, work: Path, report: Progress) -> None:
        julia_build.build_in(spec, work, report)

    def found(self, folder: Path) -> None:
        julia_build.offer_runtime_copy(folder)

    def before_compiling(self, spec: OpSpec, directory: Path) -> bool:
        # Julia starts (and the Julia file is checked) only where the runtime it
        # needs, which the build first asks for, is there.
        if self.is_cached(spec, directory):
            return False
        try:
            toolchain.runtime_library()
        except (toolchain.ToolchainError, julia_runtime.RuntimeBuildError):
            return False  # the build says what is missing
        loading.start_julia_for(directory)
        loading.check_output_assignments(spec, directory / self.source_file_name(spec))
        return True

    def load(self, spec: OpSpec, library: Path, directory: Path, check_functions: bool,
             checked_before: bool) -> types.ModuleType:
        return loading.load_julia(spec, library, directory, directory / self.source_file_name(spec),
                                  check_functions, checked_before)


class Fortran(Language):
    """Fortran subroutines the kernels call directly (docs/guides/fortran-ops.md)."""
    name = "fortran"

    def source_file_name(self, spec: OpSpec) -> str:
        return fortran.source_file_name(spec)

    def check(self, spec: OpSpec) -> None:
        fortran.check_spec(spec)

    def stub(self, spec: OpSpec) -> str:
        fortran.check_spec(spec)
        return fortran.stub(spec)

    def cache_key(self, spec: OpSpec) -> str:
        return fortran.cache_key(spec)

    def build_in(self, spec: OpSpec, work: Path, report: Progress) -> None:
        fortran.build_in(spec, work, report, BuildError)

    def load(self, spec: OpSpec, library: Path, directory: Path, check_functions: bool,
             checked_before: bool) -> types.ModuleType:
        return self.declare(spec, library, directory)  # no Julia: the kernels call the Fortran directly


JULIA = Julia()
FORTRAN = Fortran()
#: Each ``@language`` name's object; a spec that names none is Julia's unless its folder says Fortran.
LANGUAGES: dict[str, Language] = {JULIA.name: JULIA, FORTRAN.name: FORTRAN}


def of(spec: OpSpec) -> Language:
    """The language of a spec whose language is decided (``read``, or ``@language``)."""
    return LANGUAGES[spec.language or JULIA.name]


def read(directory: Path) -> tuple[OpSpec, Language]:
    """Parse ``directory``'s custom_op.txt (the one parse of a build or load) and
    decide its language; SpecError for a spec that does not parse."""
    spec = fortran.resolve_language(parse_file(directory / OP_SPEC_FILE), directory)
    return spec, of(spec)
