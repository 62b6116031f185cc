"""Julia functions as TensorFlow ops, from a spec file.

An op lives in a folder holding ``custom_op.txt`` (the spec, see
:mod:`bridge.customop.spec`) and ``<op_in_snake_case>.jl`` (the Julia
functions)::

    bridge.customop.init("Twice", "ops/twice")   # scaffold: spec + working Julia example
    lib = bridge.customop.build("ops/twice")      # -> ops/twice/build/<key>/libTwice.so
    ops = bridge.customop.load("ops/twice")       # build, include the Julia file, load the library
    y = ops.twice(x)

The same from a shell: ``tfbridge customop init Twice ops/twice`` and
``tfbridge customop build ops/twice``.

Julia packages: an op folder may hold its own Julia environment
(``Project.toml``, ``Manifest.toml``), which ``load`` stacks on Julia's load
path (:mod:`bridge.customop.environment`);
``init("Erf", "ops/erf", packages=["SpecialFunctions"])`` scaffolds one.
"""
from __future__ import annotations

import types
import warnings
from pathlib import Path
from typing import Sequence, Union

from . import environment, fortran, loading
from .checks import DynamicOutputWarning, JuliaFunctionError, MissingBackwardWarning
from .build import SPEC_FILE, BuildError, build, cache_key, read
from .codegen import julia_file_name, julia_stub, scaffold_spec
from .model import Arg, Attr, Expr, OpSpec
from .environment import JuliaPackageError
from .spec import SpecError, parse, parse_file

__all__ = ["init", "build", "load", "declare", "parse", "parse_file", "cache_key", "julia_stub", "SpecError",
           "BuildError", "JuliaPackageError", "JuliaFunctionError", "MissingBackwardWarning", "DynamicOutputWarning",
           "OpSpec", "Arg", "Attr", "Expr", "SPEC_FILE"]

# The scaffold's Julia bodies, for its spec `double x(n)` -> `double y(n)`: y = 2x.
_EXAMPLE_FORWARD = ["y .= 2 .* x"]
_EXAMPLE_BACKWARD = ["grad_x .+= 2 .* grad_y"]


def init(name: str, directory: Union[str, Path], packages: Sequence[str] = (), fortran_op: bool = False) -> list[Path]:
    """Scaffold op ``name`` in ``directory``: custom_op.txt and a working Julia
    example (y = 2x and its gradient) to edit.  With ``packages`` (Julia
    package names), also a Project.toml listing them with their UUIDs, as
    Julia finds them (environments, registries, installed packages), and a
    Julia file that loads them with ``using``: JuliaPackageError if Julia knows
    no such package; a warning if it knows one it cannot load yet.
    Refuses to overwrite existing files; returns the paths written."""
    spec_text = (scaffold_spec(name, list(fortran.KINDS), list(fortran.ATTR_TYPES)) if fortran_op
                 else scaffold_spec(name))
    directory = Path(directory)
    spec = parse(spec_text, str(directory / SPEC_FILE))  # checks the name before writing anything
    if fortran_op:  # custom_op.txt and <op>.f90 with y = 2x (bridge/customop/fortran.py)
        if packages:
            raise ValueError("a Fortran op has no Julia packages: drop --with-package or --fortran")
        spec_text += "@language fortran             # subroutines in %s\n" % fortran.source_file_name(spec)
        return _write_new({directory / SPEC_FILE: spec_text,
                           directory / fortran.source_file_name(spec): fortran.stub(
                               spec, fortran.EXAMPLE_FORWARD, fortran.EXAMPLE_BACKWARD)}, directory)
    environment.check_package_names(packages)
    packages = list(dict.fromkeys(packages))
    files = {
        directory / SPEC_FILE: spec_text,
        directory / julia_file_name(spec): _with_imports(julia_stub(spec, _EXAMPLE_FORWARD, _EXAMPLE_BACKWARD),
                                                         packages),
    }
    if packages:
        files[directory / environment.PROJECT_FILE] = ""
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise FileExistsError(f"not overwriting {', '.join(existing)}: init scaffolds a new op; "
                              "pick another folder or remove the files")
    if packages:
        # Asks Julia (started here if need be) before anything is written.
        uuids = environment.package_uuids(packages, directory)
        files[directory / environment.PROJECT_FILE] = environment.project_text(uuids)
        absent = [p for p, (_, loadable) in uuids.items() if not loadable]
        if absent:
            them = "it" if len(absent) == 1 else "them"
            warnings.warn(f"Julia knows {', '.join(absent)} but cannot load {them} yet (no Manifest.toml on "
                          f"its load path resolves {them} to an installed copy): before loading the op, run "
                          f"julia --project={directory.resolve()} -e 'using Pkg; Pkg.instantiate()' where "
                          f"Julia's registry is reachable, or set {environment.EXTRA_DEPOT_VARIABLE} to a depot "
                          f"whose environment lists {them}", stacklevel=2)
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        with open(path, "x", encoding="utf-8") as f:  # "x": never clobber a file that appeared meanwhile
            f.write(text)
    return list(files)


def _write_new(files: dict[Path, str], directory: Path) -> list[Path]:
    """Write ``files`` into a new op folder, refusing to overwrite any."""
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise FileExistsError(f"not overwriting {', '.join(existing)}: init scaffolds a new op; "
                              "pick another folder or remove the files")
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    return list(files)


def _with_imports(julia_source: str, packages: Sequence[str]) -> str:
    """The scaffold's Julia file with ``using <packages>`` after its leading comment block."""
    if not packages:
        return julia_source
    lines = julia_source.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    using = f"using {', '.join(packages)}   # listed, with their UUIDs, in {environment.PROJECT_FILE}\n"
    return "".join(lines[:at]) + "\n" + using + "".join(lines[at:])


def load(directory: Union[str, Path], check_functions: bool = True) -> types.ModuleType:
    """Build the op if needed, include its Julia file, load lib<Op>.so and
    register its gradient; return the module of op functions (one per op,
    named in snake_case: ``ops.two_layer``, ``ops.two_layer_grad``).

    Everything that can refuse the op (its spec, its build, its Julia file's
    presence, its op names, its compiled entries, the Julia packages its file
    imports at top level) is checked before any of its Julia code runs: a
    refused load changes nothing, in particular not an op of the same name
    loaded before.  An op name (or gradient op name) that a library loaded in
    this process registered is refused before the build, naming both folders.  A folder holding a Project.toml adds its environment to
    Julia's load path first; a package Julia cannot load raises
    JuliaPackageError, naming it, the folder and how to add it.

    Mistakes in the Julia file raise JuliaFunctionError before the op's first
    run (:mod:`bridge.customop.checks`): an output rebound with ``=`` in the
    forward function (checked before a compile, and before the file runs); then, after including
    it, a forward or backward function that is missing, has no method taking
    the kernel's arguments, or is a function of Base or another module rather
    than the file's (``check_functions=False`` leaves these to the first run,
    for functions defined later).  A missing backward function only warns
    (MissingBackwardWarning): the op runs, its gradient op fails."""
    directory = Path(directory).resolve()
    # The spec is parsed once, here, and its language decided (every step
    # after asks it); names loaded ops took are refused before the build, and,
    # where the op must be compiled, the language's checks run first (a Julia
    # op's: outputs its file rebinds, a parse that runs none of its code).
    spec, language = read(directory)
    loading.check_not_loaded_from_elsewhere(spec, directory, language.cache_key)
    checked = language.before_compiling(spec, directory)
    library = build(directory, spec=spec)
    return language.load(spec, library, directory, check_functions, checked)


def declare(directory: Union[str, Path]) -> types.ModuleType:
    """Make the op known to this process without starting Julia: build it if
    needed, load lib<Op>.so (its registration runs no Julia; its kernels
    would start Julia only when one runs here) and register its gradient.
    Graphs using the op can then be built, differentiated and run on
    servers that loaded it (``tfbridge server --ops DIR``): a client of a
    cluster.  Returns the module of op functions, as :func:`load`."""
    directory = Path(directory).resolve()
    spec, language = read(directory)
    return language.declare(spec, build(directory, spec=spec), directory)
