"""Fortran subroutines as TensorFlow ops, from the same ``custom_op.txt`` spec.

An op is a Fortran op when its spec says ``@language fortran``, or when its
folder holds ``<op_snake>.f90`` and no ``<op_snake>.jl``.  The user writes
external subroutines (not in a module) named like the spec's ``@forward`` and
``@backward`` functions; the build generates

* ``<Op>_bridge.f90``: ``include``\\ s the user's file, declares the
  subroutines' interfaces as the spec implies them (module
  ``<op_snake>_interface``: gfortran checks the user's definitions against
  them in the same compilation, a mismatch is a BuildError), and wraps each
  in a ``bind(c)`` subroutine the kernel calls;
* ``<Op>.cc``: the op, its gradient op ``<Op>Grad`` and their CPU kernels,
  which call the Fortran directly on TensorFlow's threads (no Julia);
* a CMakeLists.txt with C++ and Fortran.

Calling convention: ``f(dims..., outputs..., inputs..., attrs...)`` and
``f_grad(dims..., grad_inputs..., grad_outputs..., outputs..., inputs...,
attrs...)``, where ``dims`` are the named dimensions no attribute sets, then
``<arg>_<axis>`` for each ``?`` axis of an input, then the sizes of dynamic
outputs, all ``integer(c_int64_t), value``.  An op with dynamic outputs (a
``?`` axis of an output, or a name no input or int attribute sets) has a
third subroutine, ``f_size(dims..., sizes..., inputs..., attrs...)``, which
the kernel calls first: it sets each such size (``integer(c_int64_t),
intent(out)``: the free names in order of first use, then ``<out>_<axis>``
for each ``?`` axis of an output); the kernel checks them, allocates the
outputs with TensorFlow's allocator and calls ``f`` with them as dims.  The
gradient op reads them back from the forward outputs it receives.  Arrays are explicit-shape with their dimensions *reversed*: TF's
row-major ``x[i, j]`` of shape ``(m, n)`` is Fortran's ``x(j+1, i+1)`` of
``x(n, m)``, the same memory, no copy.  Scalar inputs and attributes are
``value``.  ``error stop``, ``stop`` and gfortran's runtime errors
(bounds checks) become TF errors: the kernel defines libgfortran's entry
points for them inside the op's library, where they jump back to the kernel.
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Sequence

from bridge.julia import buildtools
from bridge.platform import cache, paths
from . import codegen
from .analysis import dim_bindings, grad_inputs, grad_outputs, has_gradient, is_dynamic
from .dims import Name, Node, Num, dim_names, parse_expr
from .errors import SpecError
from .model import Arg, Expr, OpSpec
from .spec import snake_case

#: The Fortran type of each spec dtype Fortran takes (strings it does not).
KINDS = {"double": "real(c_double)", "float": "real(c_float)", "int32": "integer(c_int32_t)",
         "int64": "integer(c_int64_t)", "bool": "logical(c_bool)",
         "complex64": "complex(c_float_complex)", "complex128": "complex(c_double_complex)"}
#: The C type the kernel passes an attribute's value as (by value).
_ATTR_CXX = {"double": "double", "float": "float", "int64": "int64_t", "bool": "bool"}
#: The @attr types a Fortran op takes (strings it does not).
ATTR_TYPES = tuple(_ATTR_CXX)
#: Set to 1 to compile the op's Fortran with run-time checks (bounds, ...) and -g.
DEBUG_VARIABLE = "TFBRIDGE_FORTRAN_DEBUG"
RELEASE_FLAGS = "-O2 -frecursive -ffree-line-length-none"
DEBUG_FLAGS = "-O1 -g -frecursive -ffree-line-length-none -fcheck=all"
TEMPLATES = ("fortran_kernel.cc.j2", "op_registration.cc.j2", "kernel_macros.cc.j2", "fortran_interface.f90.j2",
             "fortran_CMakeLists.txt.j2", "gradtest.py.j2")


def output_pool_header() -> Path:
    """The runtime's header a Fortran kernel includes (its small-output pool): part of the build's key."""
    return paths.kernels_cpp_dir() / "include" / "tfjl" / "output_pool.h"
_FORTRAN_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
_SOURCE_SUFFIXES = (".f90", ".F90", ".f95", ".f03", ".f08")


def source_file_name(spec: OpSpec) -> str:
    """The Fortran file beside custom_op.txt holding the op's subroutines: <op_snake>.f90."""
    return snake_case(spec.name) + ".f90"


def resolve_language(spec: OpSpec, directory: Path) -> OpSpec:
    """``spec`` with its language decided: ``@language``, else Fortran when the
    folder holds ``<op_snake>.f90`` but no ``<op_snake>.jl``."""
    if spec.language:
        return spec
    if (directory / source_file_name(spec)).is_file() and not (directory / codegen.julia_file_name(spec)).is_file():
        return dataclasses.replace(spec, language="fortran")
    return spec


def size_subroutine(spec: OpSpec) -> str:
    """The name of the subroutine that sizes the dynamic outputs: ``<forward>_size``."""
    return f"{spec.forward}_size"


def has_dynamic_outputs(spec: OpSpec) -> bool:
    """Some output has a size only the size subroutine knows (a ``?``, or a name nothing binds)."""
    bound = dim_bindings(spec)
    return any(is_dynamic(spec, out, bound) for out in spec.outputs)


def check_spec(spec: OpSpec) -> None:
    """Refuse what a Fortran op cannot have, naming the line: strings, a
    dimension expression over a size only the size subroutine knows, names
    Fortran cannot take."""
    where = spec.language_line or spec.line
    if spec.gradient:
        raise SpecError(spec.path, spec.gradient_line, f"@gradient {spec.gradient} differentiates a Julia forward "
                                                       "function with dual numbers, which Fortran subroutines cannot "
                                                       "take: write the backward subroutine (@backward) instead")
    bound = dim_bindings(spec)
    for arg in spec.inputs + spec.outputs:
        if arg.dtype.spec not in KINDS:
            raise SpecError(spec.path, arg.line, f"a Fortran op cannot take {arg.dtype} arguments ('{arg.name}'): "
                                                 f"Fortran ops take {', '.join(KINDS)}")
    for out in spec.outputs:
        for dim in out.shape:
            missing = [n for n in dim_names(dim) if n not in bound] if isinstance(dim, Expr) else []
            if missing:
                # The gradient op reads the sizes back from the outputs' shapes: a size must be an axis.
                raise SpecError(spec.path, out.line, f"dimension '{dim.text}' of output '{out.name}' uses "
                                                     f"'{missing[0]}', which only {size_subroutine(spec)} "
                                                     "knows: a size the size subroutine sets must be a whole "
                                                     "dimension (a name or '?'); give this dimension its own "
                                                     "name and set it there")
    for attr in spec.attrs:
        if attr.dtype.spec not in _ATTR_CXX:
            raise SpecError(spec.path, attr.line, f"a Fortran op cannot take {attr.dtype} attributes "
                                                  f"('{attr.name}'): use {', '.join(_ATTR_CXX)}")
    subroutines = {spec.forward: "@forward", spec.backward: "@backward"}
    if has_dynamic_outputs(spec):
        subroutines[size_subroutine(spec)] = "@forward"
    for fn, directive in subroutines.items():
        if not _FORTRAN_NAME.fullmatch(fn):
            raise SpecError(spec.path, where, f"{directive} {fn} is not a Fortran subroutine name (a lower-case "
                                              "letter, then letters, digits or '_', at most 63): name it with "
                                              f"{directive}")
    # Fortran arguments: the tensors, the attributes and the dimensions (sharing one namespace
    # with the subroutines and the interface module; iso_c_binding's names start with c_).
    taken = set(subroutines) | {f"{snake_case(spec.name)}_interface"}
    named = [(a.name, a.line) for a in spec.inputs + spec.outputs + spec.attrs]
    named += [(n, a.line) for a in spec.inputs + spec.outputs for d in a.shape for n in dim_names(d)]
    for name, line in named:
        if name in taken or name.startswith("c_") or len(name) > 63:
            raise SpecError(spec.path, line, f"'{name}' cannot name an argument of a Fortran subroutine: it is "
                                             "a subroutine's or the interface module's name, longer than 63 "
                                             "characters or starts with 'c_' (iso_c_binding's names); rename it")
    # Names the generator derives: <arg>_<axis> for a '?' (a Fortran argument), <out>_shape (the kernel's).
    users = {name: line for name, line in named}
    for arg in spec.inputs + spec.outputs:
        derived = [f"{arg.name}_{axis}" for axis, dim in enumerate(arg.shape) if dim is None]
        derived += [f"{arg.name}_shape"] if arg in spec.outputs else []
        for name in derived:
            if name in users:
                raise SpecError(spec.path, users[name], f"'{name}' clashes with the name the generated code "
                                                        f"gives a dimension or the shape of '{arg.name}' "
                                                        f"(line {arg.line}): rename it")


# --- the template context ------------------------------------------------------------------------------


def fortran_expr(node: Node) -> str:
    """A dimension expression in Fortran (int64): ``//`` floors like the spec's."""
    if isinstance(node, Num):
        return f"{node.value}_c_int64_t"
    if isinstance(node, Name):
        return node.name
    a, b = fortran_expr(node.left), fortran_expr(node.right)
    if node.op == "//":
        return f"(({a}) - modulo({a}, {b})) / ({b})"
    return f"({a} {node.op} {b})"


@dataclass
class FArg:
    """One array (or scalar) argument of a subroutine, as Fortran declares it."""
    name: str
    ftype: str                # real(c_double)
    cxx: str                  # the C++ element type
    extents: list[str]        # Fortran order (TF's reversed)
    intent: str               # in, out, inout
    doc: str = ""
    cxx_arg: str = ""         # what the kernel passes, where not the tensor's buffer (a size's address)

    def declaration(self, by_value: bool) -> str:
        shape = f"({', '.join(self.extents)})" if self.extents else ""
        attribute = "value" if by_value and not self.extents and self.intent == "in" else f"intent({self.intent})"
        return f"{self.ftype}, {attribute} :: {self.name}{shape}"


def _extents(arg: Arg, bound) -> list[str]:
    out = []
    for axis, dim in enumerate(arg.shape):
        if dim is None:
            out.append(f"{arg.name}_{axis}")
        elif isinstance(dim, int):
            out.append(str(dim))
        elif isinstance(dim, str):
            out.append(dim)
        else:
            out.append(fortran_expr(parse_expr(dim.text)))
    return list(reversed(out))


def _dims(spec: OpSpec) -> list[tuple[str, str, str]]:
    """The dimension arguments: (name, C++ value in either kernel, what it is).
    Named dimensions first (no attribute sets them), then the ``?`` axes of inputs."""
    out = []
    for b in dim_bindings(spec).values():
        if b.attr is None:
            out.append((b.name, f"{b.arg}.dim_size({b.axis})", f"named dimension, from input '{b.arg}'"))
    for arg in spec.inputs:
        for axis, dim in enumerate(arg.shape):
            if dim is None:
                out.append((f"{arg.name}_{axis}", f"{arg.name}.dim_size({axis})", f"axis {axis} of '{arg.name}'"))
    return out


@dataclass
class DynamicSize:
    """A size only the size subroutine knows: a name nothing binds, or ``<out>_<axis>`` for a ``?``."""
    name: str
    axes: list[tuple[str, int]]   # (output, axis) it sizes; the gradient op reads it from the first

    @property
    def where(self) -> str:
        return ", ".join(f"dimension {axis} of output '{out}'" for out, axis in self.axes)


def _dynamic_sizes(spec: OpSpec) -> list[DynamicSize]:
    """The dynamic outputs' sizes: the names no input or int attribute sets, in
    order of first use, then ``<out>_<axis>`` for each ``?`` axis of an output."""
    bound = dim_bindings(spec)
    named: dict[str, DynamicSize] = {}
    unnamed: list[DynamicSize] = []
    for out in spec.outputs:
        for axis, dim in enumerate(out.shape):
            if dim is None:
                unnamed.append(DynamicSize(f"{out.name}_{axis}", [(out.name, axis)]))
            elif isinstance(dim, str) and dim not in bound:
                named.setdefault(dim, DynamicSize(dim, [])).axes.append((out.name, axis))
    return list(named.values()) + unnamed


def _farg(arg: Arg, bound, intent: str, name: Optional[str] = None) -> FArg:
    return FArg(name or arg.name, KINDS[arg.dtype.spec], arg.dtype.cxx, _extents(arg, bound), intent)


def _subroutines(spec: OpSpec) -> list[dict]:
    """The subroutines the kernels call, in calling order: the size subroutine
    (only with dynamic outputs), the forward one, the backward one (with a gradient)."""
    bound = dim_bindings(spec)
    known = _dims(spec)
    dynamic = _dynamic_sizes(spec)
    dims = known + [(d.name, d.name, f"set by {size_subroutine(spec)}: {d.where}") for d in dynamic]
    attrs = [{"name": a.name, "ftype": KINDS[a.dtype.spec], "cxx": _ATTR_CXX[a.dtype.spec],
              "default": a.default} for a in spec.attrs]
    inputs = [_farg(a, bound, "in") for a in spec.inputs]
    subs = []
    if dynamic:
        sizes = [FArg(d.name, KINDS["int64"], "int64_t", [], "out", cxx_arg=f"&{d.name}") for d in dynamic]
        subs.append({"kind": "size", "name": size_subroutine(spec), "op": spec.name, "arrays": sizes + inputs,
                     "dims": known})
    forward = [_farg(a, bound, "out") for a in spec.outputs] + inputs
    subs.append({"kind": "forward", "name": spec.forward, "op": spec.name, "arrays": forward, "dims": dims})
    if has_gradient(spec):
        backward = ([_farg(a, bound, "inout", f"grad_{a.name}") for a in grad_inputs(spec)]
                    + [_farg(a, bound, "in", f"grad_{a.name}") for a in grad_outputs(spec)]
                    + [_farg(a, bound, "in") for a in spec.outputs] + inputs)
        subs.append({"kind": "backward", "name": spec.backward, "op": spec.name + "Grad", "arrays": backward,
                     "dims": dims})
    for s in subs:
        dims = s["dims"]
        s["attrs"] = attrs
        s["args"] = [d[0] for d in dims] + [a.name for a in s["arrays"]] + [a["name"] for a in attrs]
        s["wrapper"] = f"tfbridge_{spec.name}_{s['kind']}"
        head = [f"integer(c_int64_t), value :: {d[0]}" for d in dims] + [f"{a['ftype']}, value :: {a['name']}"
                                                                          for a in attrs]
        s["user_declarations"] = head + [a.declaration(True) for a in s["arrays"]]
        s["wrapper_declarations"] = head + [a.declaration(False) for a in s["arrays"]]
        # The kernel's call: dims by value, tensors' buffers, attributes by value.
        s["cxx_params"] = (["int64_t"] * len(dims)
                           + [f"{a.cxx}*" if a.intent != "in" else f"const {a.cxx}*" for a in s["arrays"]]
                           + [a["cxx"] for a in attrs])
        s["cxx_args"] = ([d[1] for d in dims]
                         + [a.cxx_arg or f"{a.name}{'->' if a.intent != 'in' else '.'}flat<{a.cxx}>().data()"
                            for a in s["arrays"]]
                         + [f"static_cast<{a['cxx']}>({a['name']}_)" for a in attrs])
    return subs


def context(spec: OpSpec) -> dict:
    ctx = codegen.context(spec)
    subs = _subroutines(spec)
    by_kind = {s["kind"]: s for s in subs}
    # A dynamic output's dimension is the variable the size subroutine set (kernel and gradient kernel).
    for out in ctx["outputs"]:
        for d in out.dims:
            if d.kind in ("free", "any"):
                d.size = d.text if d.kind == "free" else f"{out.name}_{d.axis}"
    ctx.update(subroutines=subs, size_sub=by_kind.get("size"), forward_sub=by_kind["forward"],
               backward_sub=by_kind.get("backward"), dynamic=_dynamic_sizes(spec),
               source_file=source_file_name(spec), module=f"{snake_case(spec.name)}_interface",
               language="fortran",
               stateful=False)  # the subroutines are pure (docs/guides/fortran-ops.md): TF may fold them
    return ctx


def _render(template: str, spec: OpSpec, **extra) -> str:
    ctx = context(spec)
    ctx.update(extra)
    return codegen._environment().get_template(template).render(**ctx)


def kernel_source(spec: OpSpec) -> str:
    """The C++ source of the op and its gradient op, calling the Fortran wrappers."""
    return codegen._tidy(_render("fortran_kernel.cc.j2", spec))


def interface_source(spec: OpSpec) -> str:
    """<Op>_bridge.f90: the user's file included, the interface module, the bind(c) wrappers."""
    return _render("fortran_interface.f90.j2", spec, wrappers=True)


# The scaffold's bodies, for its spec `double x(n)` -> `double y(n)`: y = 2x.
EXAMPLE_FORWARD = ["y = 2 * x"]
EXAMPLE_BACKWARD = ["grad_x = grad_x + 2 * grad_y"]


def stub(spec: OpSpec, forward_body: Optional[list[str]] = None,
         backward_body: Optional[list[str]] = None, size_body: Optional[list[str]] = None) -> str:
    """The Fortran file with the op's subroutines (size, with dynamic outputs;
    forward; backward) and their declarations; given bodies fill them in, else
    each body is an ``error stop`` naming what to compute."""
    return _render("fortran_stub.f90.j2", spec, forward_body=forward_body, backward_body=backward_body,
                   size_body=size_body)


def cmake_lists(spec: OpSpec, extra_sources: list[Path]) -> str:
    return _render("fortran_CMakeLists.txt.j2", spec, extra_sources=[str(p) for p in extra_sources])


# --- build ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def gfortran_version() -> str:
    """gfortran's first --version line; ToolchainError when there is none."""
    from .toolchain import ToolchainError
    try:
        out = subprocess.run(["gfortran", "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ToolchainError("gfortran is needed to build a Fortran op and was not found: install it "
                             "(Debian: apt-get install gfortran; `make setup` does)") from exc
    return out.splitlines()[0]


def fortran_flags() -> str:
    return DEBUG_FLAGS if os.environ.get(DEBUG_VARIABLE) == "1" else RELEASE_FLAGS


def _sources(directory: Path) -> list[Path]:
    """Every Fortran source of the op folder (the main file included)."""
    return sorted(p for p in directory.iterdir() if p.suffix in _SOURCE_SUFFIXES and p.is_file())


def cache_key(spec: OpSpec) -> str:
    """Hash of what the library depends on: the spec, the Fortran sources, the
    templates and generator, TensorFlow, gfortran and the flags."""
    from . import toolchain
    directory = Path(spec.path).resolve().parent
    key = cache.Key(spec.source)
    for path in _sources(directory):
        key.add_file(path, "source " + path.name)
    for name in TEMPLATES:
        key.add_file(paths.templates_dir() / name, "template " + name)
    key.add_file(output_pool_header(), "header tfjl/output_pool.h")
    key.add_modules(__name__)
    key.add(toolchain.tensorflow().fingerprint, *toolchain.tensorflow().definitions, gfortran_version(),
            fortran_flags())
    return key.hexdigest(16)


def build_in(spec: OpSpec, work: Path, report: Callable[[str], None], BuildError: type) -> None:
    """Generate the sources into ``work`` and compile lib<Op>.so there;
    failures raise ``BuildError`` (build.BuildError, passed in: build imports this module)."""
    from . import toolchain

    op = spec.name
    check_spec(spec)
    directory = Path(spec.path).resolve().parent
    main = directory / source_file_name(spec)
    if not main.is_file():
        raise BuildError(f"cannot build {op}: {main} not found: a Fortran op's subroutines {spec.forward}"
                         f"{' and ' + spec.backward if has_gradient(spec) else ''} go there "
                         f"(`tfbridge customop stub {directory}` prints them)")
    text = main.read_text(encoding="utf-8", errors="replace")
    for sub in _subroutines(spec):
        if not re.search(rf"^\s*(?:\w+\s+)*subroutine\s+{sub['name']}\b", text, re.IGNORECASE | re.MULTILINE):
            raise BuildError(f"cannot build {op}: {main} defines no subroutine {sub['name']} (the op's "
                             f"{sub['kind']} subroutine; `tfbridge customop stub {directory}` prints it)")
    report(f"building {op}: generating {op}.cc and {op}_bridge.f90")
    (work / f"{op}.cc").write_text(kernel_source(spec))
    (work / f"{op}_bridge.f90").write_text(interface_source(spec))
    extra = [p for p in _sources(directory) if p != main]
    (work / "CMakeLists.txt").write_text(cmake_lists(spec, extra))
    (work / paths.OP_SPEC_FILE).write_text(spec.source)
    (work / "gradtest.py").write_text(codegen.gradtest_script(spec))
    try:
        tf = toolchain.tensorflow()
        gfortran_version()
        cmake = toolchain.cmake()
    except toolchain.ToolchainError as exc:
        raise BuildError(f"cannot build {op}: {exc}") from exc
    objects, log = work / "cmake", work / "build.log"
    configure = [cmake, "-S", str(work), "-B", str(objects), "-DCMAKE_BUILD_TYPE=Release",
                 "-DCMAKE_Fortran_COMPILER=gfortran", f"-DCMAKE_Fortran_FLAGS={fortran_flags()}",
                 f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={work}", f"-DOP_SOURCE_DIR={directory}",
                 f"-DTF_INCLUDE_DIR={tf.include_dir}", f"-DTF_FRAMEWORK_LIBRARY={tf.framework_library}",
                 f"-DTF_DEFINITIONS={';'.join(tf.definitions)}",
                 f"-DTFJL_INCLUDE_DIR={paths.kernels_cpp_dir() / 'include'}"]
    report(f"building {op}: configuring...")
    buildtools.run(configure, log, what=op, step="configuring", error=BuildError)
    report(f"building {op}: compiling...")
    start = log.stat().st_size
    try:
        buildtools.run([cmake, "--build", str(objects), "--parallel", str(os.cpu_count() or 1)], log,
                       what=op, step="compiling", error=BuildError)
    except BuildError as exc:
        excerpt = fortran_errors(log.read_text(errors="replace")[start:], folders=(directory, work))
        if excerpt:
            raise BuildError(f"building {op} failed: gfortran reports:\n{excerpt}\nfull log: {log}") from exc
        raise
    mismatch = fortran_errors(log.read_text(errors="replace")[start:], mismatches=True, folders=(directory, work))
    if mismatch:
        raise BuildError(f"building {op} failed: the subroutines of {main} do not match the spec "
                         f"(`tfbridge customop stub {directory}` prints the expected declarations):\n"
                         f"{mismatch}\nfull log: {log}")
    if not (work / f"lib{op}.so").is_file():
        raise BuildError(f"building {op}: cmake succeeded but made no lib{op}.so; see {log}")
    import shutil
    shutil.rmtree(objects, ignore_errors=True)


# gfortran: "path.f90:12:7:" then the quoted source line and caret, then "Error: ...".
_LOCATION = re.compile(r"^(\S[^:]*):(\d+):(\d+):\s*$")
_MESSAGE = re.compile(r"^(Error|Fatal Error|Warning): (.*)")


def fortran_errors(output: str, mismatches: bool = False, folders: Sequence[Path] = ()) -> str:
    """gfortran's errors in ``output`` as ``file:line:column: Error: message``
    with the source line the message's "(1)" points at and a marker under its
    column; with ``mismatches``, only its warnings that a subroutine does not
    match its interface (a user subroutine that does not match the spec).
    gfortran quotes no source for a file the generated code ``include``s (the
    user's own): the line is then read from the first of ``folders`` that has
    the file."""
    lines = output.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        m = _LOCATION.match(line)
        if not m:
            continue
        for j in range(i + 1, min(i + 8, len(lines))):
            msg = _MESSAGE.match(lines[j])
            if msg is None:
                continue
            # gfortran compares a definition with an interface body of it as a warning:
            # "Type mismatch in argument 'x' (REAL(8)/REAL(4)) between (1) and (2)", "VALUE
            # mismatch ...", "'f' has the wrong number of arguments between ...", "Interface mismatch ...".
            wanted = (("between (1) and (2)" in msg[2] or "Interface mismatch" in msg[2]) if mismatches
                      else msg[1] != "Warning")
            if wanted:
                source = next((s for s in lines[i + 1:j] if s.strip() and "|" in s and not s.strip().startswith("|")),
                              "")
                text = source.split("|", 1)[1][1:] if source else _source_line(m[1], int(m[2]), folders)
                picked.append(f"  {m[1]}:{m[2]}:{m[3]}: {msg[1]}: {msg[2]}")
                if text is not None:
                    number = f"{int(m[2]):>5} | "
                    picked.append(f"  {number}{text.rstrip()}")
                    picked.append(f"  {' ' * (len(number) - 2)}| {' ' * max(0, int(m[3]) - 1)}1")
            break
    return "\n".join(picked[:60])


def _source_line(name: str, number: int, folders: Sequence[Path]) -> Optional[str]:
    """Line ``number`` of the file gfortran named, looked up in ``folders``; None where none has it."""
    for folder in (Path(name).parent,) if Path(name).is_absolute() else folders:
        path = Path(folder) / Path(name).name if Path(name).is_absolute() else Path(folder) / name
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for k, text in enumerate(f, 1):
                    if k == number:
                        return text.rstrip("\n")
        except OSError:
            continue
    return None
