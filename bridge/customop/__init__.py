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
"""
from __future__ import annotations

import os
import re
import types
from pathlib import Path
from typing import Optional, Union

from .build import SPEC_FILE, BuildError, build, cache_key
from .codegen import entries, entries_file_name, julia_file_name, julia_stub, scaffold_spec
from .model import Arg, Attr, Expr, OpSpec
from .spec import SpecError, parse, parse_file

__all__ = ["init", "build", "load", "parse", "parse_file", "cache_key", "julia_stub", "SpecError",
           "BuildError", "OpSpec", "Arg", "Attr", "Expr", "SPEC_FILE"]

# The scaffold's Julia bodies, for its spec `double x(n)` -> `double y(n)`: y = 2x.
_EXAMPLE_FORWARD = ["y .= 2 .* x"]
_EXAMPLE_BACKWARD = ["grad_x .+= 2 .* grad_y"]


def init(name: str, directory: Union[str, Path]) -> list[Path]:
    """Scaffold op ``name`` in ``directory``: custom_op.txt and a working Julia
    example (y = 2x and its gradient) to edit.  Refuses to overwrite existing
    files; returns the paths written."""
    spec_text = scaffold_spec(name)
    directory = Path(directory)
    spec = parse(spec_text, str(directory / SPEC_FILE))  # checks the name before writing anything
    files = {
        directory / SPEC_FILE: spec_text,
        directory / julia_file_name(spec): julia_stub(spec, _EXAMPLE_FORWARD, _EXAMPLE_BACKWARD),
    }
    existing = [str(p) for p in files if p.exists()]
    if existing:
        raise FileExistsError(f"not overwriting {', '.join(existing)}: init scaffolds a new op; "
                              "pick another folder or remove the files")
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        with open(path, "x", encoding="utf-8") as f:  # "x": never clobber a file that appeared meanwhile
            f.write(text)
    return list(files)


def load(directory: Union[str, Path]) -> types.ModuleType:
    """Build the op if needed, include its Julia file, load lib<Op>.so and
    register its gradient; return the module of op functions (one per op,
    named in snake_case: ``ops.two_layer``, ``ops.two_layer_grad``).

    Everything that can refuse the op (its spec, its build, its Julia file's
    presence, its op names, its compiled entries) is checked before any Julia
    code runs: a refused load changes nothing, in particular not an op of the
    same name loaded before."""
    import bridge
    from .. import julia

    directory = Path(directory).resolve()
    library = build(directory)
    spec = parse_file(directory / SPEC_FILE)
    source = directory / julia_file_name(spec)
    if not source.is_file():
        raise FileNotFoundError(f"{source} not found: op {spec.name} expects its Julia functions "
                                f"{spec.forward} and {spec.backward} there")
    _check_names_are_free(spec, library)
    entries_source = _entries_to_register(spec, library.parent / entries_file_name(spec))
    # Julia first: bridge.julia loads TensorFlow before libjulia (their LLVMs clash otherwise).
    julia.include(source)
    module = bridge.load_op_library(library)
    if f"{spec.name}Grad" in module.OP_TYPES.values():
        _register_gradient(spec.name)
    if entries_source is not None:
        _register_entries(spec, entries_source)
    return module


def _entries_to_register(spec: OpSpec, source: Path) -> Optional[Path]:
    """The op's compiled entries file (generated beside the library), checked
    against the spec before any Julia code runs; None where the op keeps the
    generic path (string tensors, outputs sized by Julia, or
    TFBRIDGE_JULIA_ENTRIES=0)."""
    if not source.is_file() or os.environ.get("TFBRIDGE_JULIA_ENTRIES") == "0":
        return None
    ops = [entry.op for entry in entries(spec)]
    text = source.read_text(encoding="utf-8")
    defined = re.findall(r"^function tfbridge_entry_(\w+)\(", text, re.MULTILINE)
    pointers = re.findall(r"@cfunction\(tfbridge_entry_(\w+),", text)
    if defined != ops or pointers != ops:
        raise RuntimeError(f"{source} gave {len(pointers)} entry pointers for {len(ops)} ops {ops} "
                           f"(it defines entries for {defined}): rebuild the op (delete its build folder)")
    return source


def _register_entries(spec: OpSpec, source: Path) -> None:
    """Include the op's compiled entries and point its kernels at them, so
    they call the Julia functions without jl_call and dispatch
    (kernels_cpp/README.md, "Compiled entries")."""
    from .. import julia

    pointers = [int(p) for p in julia.call("include", str(source))]
    ops = [entry.op for entry in entries(spec)]
    if len(pointers) != len(ops):
        raise RuntimeError(f"{source} gave {len(pointers)} entry pointers for {len(ops)} ops {ops}: "
                           "rebuild the op (delete its build folder)")
    for op, pointer in zip(ops, pointers):
        julia.register_entry(op, pointer)


def _check_names_are_free(spec: OpSpec, library: Path) -> None:
    """TensorFlow ignores a library's registration of an op name it already
    knows (a built-in op such as Square, or an op of another library), which
    would leave the op silently missing: refuse such a name up front."""
    from .. import op_library

    if op_library.is_loaded(library):
        return
    for op_type in (spec.name, f"{spec.name}Grad"):
        if op_library.is_registered(op_type):
            name_line = next((i for i, text in enumerate(spec.source.splitlines(), 1)
                              if text.strip() and not text.lstrip().startswith("#")), 1)
            raise SpecError(spec.path, name_line,
                            f"the op name {spec.name} cannot be used: TensorFlow already has an op named "
                            f"{op_type} (built in, or from another loaded library); rename the op")


def _register_gradient(op_type: str) -> None:
    """Differentiate the op with <Op>Grad, when bridge has symbolic gradients.

    <Op>Grad takes the gradients of the float outputs, then every output, then
    every input, and the op's attributes; it returns one gradient per float
    input (bridge.grad.register_custom_op_gradient follows the same order)."""
    try:
        from ..grad import register_custom_op_gradient
    except ImportError:  # a bridge without symbolic gradients: the op still runs
        return
    register_custom_op_gradient(op_type)
