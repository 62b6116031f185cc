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

import os
import re
import types
import warnings
from pathlib import Path
from typing import Optional, Sequence, Union

from . import checks, environment, forwarddiff, fortran
from .checks import DynamicOutputWarning, JuliaFunctionError, MissingBackwardWarning
from .build import SPEC_FILE, BuildError, build, build_spec, cache_key
from .codegen import entries, entries_file_name, julia_file_name, julia_stub, scaffold_spec
from .model import Arg, Attr, Expr, OpSpec
from .environment import JuliaPackageError
from .spec import SpecError, op_types, parse, parse_file

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
    import bridge
    from bridge import julia

    directory = Path(directory).resolve()
    # The spec is parsed once, here; names loaded ops took are refused before
    # the build, and outputs the Julia file rebinds (a parse: none of its code
    # runs) before a compile, or where the op is cached, after finding it (Julia
    # may need the runtime copy its build folder carries).
    assignments_checked = []

    def before_compiling(spec: OpSpec) -> None:
        _start_julia_for(directory)
        _check_output_assignments(spec, directory)
        assignments_checked.append(True)
    spec, library = build_spec(directory, check=lambda spec: _check_not_loaded_from_elsewhere(spec, directory),
                               before_compiling=before_compiling)
    if fortran.is_fortran(spec):  # no Julia: the kernels call the Fortran directly
        return _load_library(spec, library, directory)
    # Julia starts after the build, which registered the runtime copy a built
    # op carries (a read-only cache may hold no runtime), and before anything
    # of the load runs Julia.
    _start_julia_for(directory)
    source = directory / julia_file_name(spec)
    if not source.is_file():
        raise FileNotFoundError(f"{source} not found: op {spec.name} expects its Julia functions "
                                f"{spec.forward} and {spec.backward} there")
    if not assignments_checked:
        _check_output_assignments(spec, directory)
    _check_names_are_free(spec, library)
    compiled = _entries_to_register(spec, library.parent / entries_file_name(spec))
    # Julia first: bridge.julia loads TensorFlow before libjulia (their LLVMs clash otherwise).
    # The op's own environment (a Project.toml in its folder) joins Julia's
    # load path, and the packages its file imports are looked up, before any
    # of its code runs: a missing one refuses the load.
    environment.use(spec.name, directory, source)
    if spec.gradient:  # @gradient forwarddiff: ForwardDiff must load (bridge/customop/forwarddiff.py)
        forwarddiff.require(spec, directory)
    try:
        julia.include(source)
    except julia.JuliaError as exc:
        # A `using` the look-up could not see (inside an `if`, a function, another file).
        explained = environment.explain_load_error(spec.name, directory, source, exc)
        if explained is not None:
            raise explained from exc
        raise
    if check_functions:
        checks.check_functions(spec, source)
    if spec.gradient:
        forwarddiff.define(spec, library.parent / forwarddiff.gradient_file_name(spec))
        if check_functions:
            forwarddiff.check(spec)
    module = bridge.load_op_library(library)
    _describe(spec, directory)
    if f"{spec.name}Grad" in module.OP_TYPES.values():
        _register_gradient(spec.name, module)
    if compiled is not None:
        _register_entries(*compiled)
    return module


def _describe(spec: OpSpec, directory: Path) -> None:
    """What TensorBoard's graph shows on the op's nodes (``op_library.describe_op``):
    its spec, language, folder, source file and function."""
    from bridge.ops.op_library import describe_op

    language = "fortran" if fortran.is_fortran(spec) else "julia"
    source = directory / (fortran.source_file_name(spec) if language == "fortran" else julia_file_name(spec))
    common = {"_tfbridge_language": language, "_tfbridge_folder": str(directory), "_tfbridge_file": str(source),
              "_tfbridge_spec": spec.source or (directory / SPEC_FILE).read_text(encoding="utf-8")}
    describe_op(spec.name, {**common, "_tfbridge_function": spec.forward})
    describe_op(f"{spec.name}Grad", {**common, "_tfbridge_function": spec.backward})


def _start_julia_for(directory: Path) -> None:
    """Start Julia, unless it has started, from a system image built for this
    op where one is current (bridge.julia.opimage, docs/internals/julia-start.md):
    before anything of the load runs Julia (its checks do), after the build
    found the op's library.  A Fortran op, or a spec that does not parse
    (build_spec reports it), starts nothing."""
    from bridge import julia

    if julia.is_initialized():
        return
    try:
        spec = fortran.resolve_language(parse_file(directory / SPEC_FILE), directory)
    except Exception:
        return
    if not fortran.is_fortran(spec):
        julia.init(ops=[directory])


def declare(directory: Union[str, Path]) -> types.ModuleType:
    """Make the op known to this process without starting Julia: build it if
    needed, load lib<Op>.so (its registration runs no Julia; its kernels
    would start Julia only when one runs here) and register its gradient.
    Graphs using the op can then be built, differentiated and run on
    servers that loaded it (``tfbridge server --ops DIR``): a client of a
    cluster.  Returns the module of op functions, as :func:`load`."""
    import bridge

    directory = Path(directory).resolve()
    spec, library = build_spec(directory)
    return _load_library(spec, library, directory)


def _load_library(spec: OpSpec, library: Path, directory: Path) -> types.ModuleType:
    """Load a built op's library (no Julia code) and register its gradient."""
    import bridge

    _check_names_are_free(spec, library)
    module = bridge.load_op_library(library)
    _describe(spec, directory)
    if f"{spec.name}Grad" in module.OP_TYPES.values():
        _register_gradient(spec.name, module)
    return module


def _entries_to_register(spec: OpSpec, source: Path) -> Optional[tuple[Path, list[str]]]:
    """The op's compiled entries file (generated beside the library), checked
    against the spec before any Julia code runs, and the ops it has entries
    for (``entries(spec)``, in order); None where the op keeps the generic
    path (string tensors, outputs sized by Julia, TFBRIDGE_JULIA_ENTRIES=0 or TFBRIDGE_JULIA_CHECK=1)."""
    if not source.is_file() or os.environ.get("TFBRIDGE_JULIA_ENTRIES") == "0":
        return None
    if os.environ.get("TFBRIDGE_JULIA_CHECK") == "1":
        return None  # the output check runs in the kernel's Finish, which only the generic path calls
    ops = [entry.op for entry in entries(spec)]
    text = source.read_text(encoding="utf-8")
    defined = re.findall(r"^function tfbridge_entry_(\w+)\(", text, re.MULTILINE)
    pointers = re.findall(r"@cfunction\(tfbridge_entry_(\w+),", text)
    if defined != ops or pointers != ops:
        raise RuntimeError(f"{source} gave {len(pointers)} entry pointers for {len(ops)} ops {ops} "
                           f"(it defines entries for {defined}): rebuild the op (delete its build folder)")
    return source, ops


def _register_entries(source: Path, ops: list[str]) -> None:
    """Include the op's compiled entries and point its kernels at them, so
    they call the Julia functions without jl_call and dispatch
    (docs/internals/kernels-cpp.md, "Compiled entries")."""
    from bridge import julia

    pointers = [int(p) for p in julia.call("include", str(source))]
    if len(pointers) != len(ops):
        raise RuntimeError(f"{source} gave {len(pointers)} entry pointers for {len(ops)} ops {ops}: "
                           "rebuild the op (delete its build folder)")
    for op, pointer in zip(ops, pointers):
        julia.register_entry(op, pointer)


def _check_output_assignments(spec: OpSpec, directory: Path) -> None:
    """Refuse an output the forward function rebinds with `=` (checks.py)."""
    source = directory / julia_file_name(spec)
    if source.is_file():  # a missing file is refused after the build, as before
        checks.check_output_assignments(spec, source)


def _check_not_loaded_from_elsewhere(spec: OpSpec, directory: Path) -> None:
    """Refuse, before anything is built, an op name or gradient op name that a
    library loaded in this process registered: TensorFlow keeps an op type's
    first registration, so the build (30-70 s) could only end in
    _check_names_are_free's refusal.  Names the folder that took it (or the
    library, when it is no op folder's build); the same folder's library
    for the same spec is this op, loaded again."""
    from bridge.ops import op_library
    from bridge.platform.paths import op_folder_of_library

    taken = {op_type: Path(path) for path, types_ in op_library.loaded_libraries().items() for op_type in types_}
    for op_type in op_types(spec):
        library = taken.get(op_type)
        if library is None:
            continue
        folder = op_folder_of_library(library)
        what = "its name" if op_type == spec.name else f"the name of its gradient op, {op_type},"
        if folder == directory:
            if library.parent.name == _cache_key_or_none(spec):
                continue  # this op, loaded again: load returns its module
            raise SpecError(spec.path, spec.line,
                            f"op {spec.name} of {directory} cannot be loaded again in this process: an earlier "
                            f"build of the same folder, {library}, registered {op_type} ({what} is taken), and "
                            "TensorFlow keeps an op's first registration; load the changed op in a new process")
        source = f"op folder {folder}" if folder is not None else f"library {library}"
        raise SpecError(spec.path, spec.line,
                        f"the op name {spec.name} of {directory} cannot be used in this process: the {source} "
                        f"(loaded from {library}) already registered an op named {op_type} ({what} is taken), "
                        "and TensorFlow keeps an op's first registration; rename one of the two ops, or load "
                        "them in separate processes")


def _cache_key_or_none(spec: OpSpec) -> Optional[str]:
    try:
        return cache_key(spec)
    except Exception:  # no toolchain: build() says what is missing
        return None


def _check_names_are_free(spec: OpSpec, library: Path) -> None:
    """TensorFlow ignores a library's registration of an op name it already
    knows, which would leave the op silently missing: refuse such a name up
    front.  build() refused names built into TensorFlow before compiling
    anything; what is left are ops of other libraries loaded in this process
    (another op folder with the same op name, or an earlier build of this one)."""
    from bridge.ops import op_library

    if op_library.is_loaded(library):
        return
    for op_type in op_types(spec):
        if op_library.is_registered(op_type):
            raise SpecError(spec.path, spec.line,
                            f"the op name {spec.name} cannot be used: TensorFlow already has an op named "
                            f"{op_type} (built in, or from another loaded library); rename the op")


def _register_gradient(op_type: str, module: types.ModuleType) -> None:
    """Differentiate the op with <Op>Grad, when bridge has symbolic gradients,
    and <Op>Grad with <Op>GradGrad where the library has one (@gradient
    forwarddiff).

    <Op>Grad takes the gradients of the float outputs, then every output, then
    every input, and the op's attributes; it returns one gradient per float
    input (bridge.grad.register_custom_op_gradient follows the same order)."""
    from bridge.grad import register_custom_op_gradient, register_custom_op_second_gradient
    register_custom_op_gradient(op_type)
    if f"{op_type}GradGrad" in module.OP_TYPES.values():
        register_custom_op_second_gradient(op_type)
