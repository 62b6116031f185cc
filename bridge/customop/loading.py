"""Loading a built op into this process: the steps ``customop.load`` and
``customop.declare`` take after the build, for the language objects of
:mod:`bridge.customop.language` to call.

A Julia op (:func:`load_julia`): Julia started (from the op's own system image
where one is current), the Julia file's presence and the op's names checked,
its compiled entries checked against the spec, its environment stacked and
its file included, its functions checked, then the library loaded, its
gradient and entries registered.  A Fortran op, or a declared one
(:func:`load_library`): the names checked, the library loaded, its gradient
registered.  Everything that can refuse the op is checked before any of its
Julia code runs.
"""
from __future__ import annotations

import os
import re
import types
from pathlib import Path
from typing import Callable, Optional

from bridge.platform.paths import OP_SPEC_FILE
from . import checks, environment, forwarddiff
from .codegen import entries, entries_file_name
from .errors import SpecError
from .model import OpSpec
from .spec import op_types
from .toolchain import ToolchainError


def start_julia_for(directory: Path) -> None:
    """Start Julia, unless it has started, from a system image built for this
    op where one is current (bridge.julia.opimage, docs/internals/julia-start.md):
    before anything of the load runs Julia (its checks do), after the build
    found the op's library."""
    from bridge import julia

    if not julia.is_initialized():
        julia.init(ops=[directory])


def check_output_assignments(spec: OpSpec, source: Path) -> None:
    """Refuse an output the forward function rebinds with `=` (checks.py)."""
    if source.is_file():  # a missing file is refused after the build, as before
        checks.check_output_assignments(spec, source)


def load_julia(spec: OpSpec, library: Path, directory: Path, source: Path, check_functions: bool,
               assignments_checked: bool) -> types.ModuleType:
    """Load a built Julia op whose Julia functions are in ``source``
    (``customop.load`` says what is checked, and when)."""
    from bridge import julia
    from bridge.ops.op_library import load_op_library

    # Julia starts after the build, which registered the runtime copy a built
    # op carries (a read-only cache may hold no runtime), and before anything
    # of the load runs Julia.
    start_julia_for(directory)
    if not source.is_file():
        raise FileNotFoundError(f"{source} not found: op {spec.name} expects its Julia functions "
                                f"{spec.forward} and {spec.backward} there")
    if not assignments_checked:
        check_output_assignments(spec, source)
    check_names_are_free(spec, library)
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
    module = load_op_library(library)
    _describe(spec, directory, "julia", source)
    if f"{spec.name}Grad" in module.OP_TYPES.values():
        _register_gradient(spec.name, module)
    if compiled is not None:
        _register_entries(*compiled)
    return module


def load_library(spec: OpSpec, library: Path, directory: Path, language: str, source: Path) -> types.ModuleType:
    """Load a built op's library (no Julia code) and register its gradient."""
    from bridge.ops.op_library import load_op_library

    check_names_are_free(spec, library)
    module = load_op_library(library)
    _describe(spec, directory, language, source)
    if f"{spec.name}Grad" in module.OP_TYPES.values():
        _register_gradient(spec.name, module)
    return module


def _describe(spec: OpSpec, directory: Path, language: str, source: Path) -> None:
    """What TensorBoard's graph shows on the op's nodes (``op_library.describe_op``):
    its spec, language, folder, source file and function."""
    from bridge.ops.op_library import describe_op

    common = {"_tfbridge_language": language, "_tfbridge_folder": str(directory), "_tfbridge_file": str(source),
              "_tfbridge_spec": spec.source or (directory / OP_SPEC_FILE).read_text(encoding="utf-8")}
    describe_op(spec.name, {**common, "_tfbridge_function": spec.forward})
    describe_op(f"{spec.name}Grad", {**common, "_tfbridge_function": spec.backward})


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


def check_not_loaded_from_elsewhere(spec: OpSpec, directory: Path, cache_key: Callable[[OpSpec], str]) -> None:
    """Refuse, before anything is built, an op name or gradient op name that a
    library loaded in this process registered: TensorFlow keeps an op type's
    first registration, so the build (30-70 s) could only end in
    check_names_are_free's refusal.  Names the folder that took it (or the
    library, when it is no op folder's build); the same folder's library
    for the same spec (the same ``cache_key``, the op's language's) is this
    op, loaded again."""
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
            if library.parent.name == cache_key_or_none(spec, cache_key):
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


def cache_key_or_none(spec: OpSpec, cache_key: Callable[[OpSpec], str]) -> Optional[str]:
    """``cache_key(spec)``, or None where a tool it asks is missing (the build then says
    what is missing, as a BuildError); any other error is raised, as the build would."""
    try:
        return cache_key(spec)
    except ToolchainError:
        return None


def check_names_are_free(spec: OpSpec, library: Path) -> None:
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
