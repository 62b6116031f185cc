"""The op generator: OpDefs -> Python source for one function per op.

The rules (names, signatures, docstrings, outputs) are listed in
``bridge.ops``'s docstring; the layout of the code is in
``templates/python_op.py.j2`` and ``templates/python_ops_module.py.j2``.
Generated modules are written once into ``bridge.platform.cache.root()/ops/`` under
a hash of the op list and of the generator itself, with their compiled code
beside them, so later imports cost neither generation nor compilation.  Where
the cache cannot be written they are generated and compiled in memory, each
time.
"""
from __future__ import annotations

import contextlib
import inspect
import marshal
import math
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from bridge.platform import cache
from bridge.framework import double_attrs
from bridge.framework.attrs import py_str, python_literal
from bridge.framework.opdef import ArgDef, AttrDef, OpDef

LINE_WIDTH = 100

#: Python keywords (3.9-3.13): an OpDef name among them cannot be a parameter or function name.
KEYWORDS = frozenset("""
False None True and as assert async await break class continue def del elif else except finally
for from global if import in is lambda nonlocal not or pass raise return try while with yield
""".split())

#: Python's builtin functions and types: parameters named like them would
#: shadow them inside the function (``input``, ``filter``, ``min``, ``type``...).
BUILTINS = frozenset("""
abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod compile
complex copyright credits delattr dict dir divmod enumerate eval exec exit filter float format
frozenset getattr globals hasattr hash help hex id input int isinstance issubclass iter len license
list locals map max memoryview min next object oct open ord pow print property quit range repr
reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip
""".split())

#: Names the generated functions use themselves (every local starts with "_").
GENERATED_NAMES = frozenset({"name"})

#: Parameter and output names get "_" appended while they are in this set.
RESERVED = KEYWORDS | BUILTINS | GENERATED_NAMES


def snake_case(op_name: str) -> str:
    """TensorFlow's own CamelCase -> snake_case rule: a "_" goes before an
    upper-case letter that follows a lower-case one or starts a new word
    (MatMul -> mat_mul, AddV2 -> add_v2, HSVToRGB -> hsv_to_rgb,
    Conv2DBackpropInput -> conv2d_backprop_input)."""
    out: list[str] = []
    last = len(op_name) - 1
    for i, c in enumerate(op_name):
        if c == ">":  # namespaced ops ("Namespace>Op")
            out.append("_")
            continue
        if c.isupper() and i > 0 and out[-1] != "_" and (
                op_name[i - 1].islower() or (i < last and op_name[i + 1].islower())):
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def safe_name(name: str, taken: Iterable[str] = ()) -> str:
    """``name`` with "_" appended while it is reserved or already taken."""
    taken = set(taken)
    while name in RESERVED or name in taken:
        name += "_"
    return name


@dataclass(frozen=True)
class FunctionNames:
    """Function name per op type, and the names that are not plain snake_case."""

    by_op: dict[str, str]
    renamed: dict[str, str]      # op type -> why its name differs from snake_case
    collisions: dict[str, list]  # snake_case name -> the op types that share it


def function_names(op_names: Iterable[str]) -> FunctionNames:
    """Assign function names deterministically: ops sorted by name, the first
    op of a shared snake_case name keeps it, later ones get "_2", "_3"...;
    Python keywords get "_" appended (builtin names such as ``abs`` stay,
    as in ``tf.abs``)."""
    ordered = sorted(set(op_names))
    groups: dict[str, list] = {}
    for op in ordered:
        groups.setdefault(snake_case(op), []).append(op)
    by_op: dict[str, str] = {}
    renamed: dict[str, str] = {}
    used: set[str] = set()
    for op in ordered:
        base = snake_case(op)
        fn = base
        while fn in KEYWORDS:
            fn += "_"
        if fn != base:
            renamed[op] = f"'{base}' is a Python keyword"
        k = 1
        candidate = fn
        while candidate in used:
            k += 1
            candidate = f"{fn}_{k}"
        if candidate != fn:
            renamed[op] = f"'{base}' is also the name of {groups[base][0]}"
        used.add(candidate)
        by_op[op] = candidate
    return FunctionNames(by_op, renamed, {s: ops for s, ops in groups.items() if len(ops) > 1})


def param_names(op_def: OpDef) -> dict[str, str]:
    """Python parameter name for each input and non-inferred attribute."""
    inferred = op_def.inferred_attrs
    names: dict[str, str] = {}
    for n in [a.name for a in op_def.input_args] + [a.name for a in op_def.attrs if a.name not in inferred]:
        names[n] = safe_name(n, names.values())
    return names


def output_names(op_def: OpDef) -> list[str]:
    """Field names of the outputs (the namedtuple of a multi-output op)."""
    names: list[str] = []
    for a in op_def.output_args:
        names.append(safe_name(a.name, names))
    return names


# --- literals and descriptions --------------------------------------------------

def default_literal(value: Any, attr_type: str) -> str:
    """Python source for an attribute's default in a signature: its kind's
    literal (bridge.framework.attrs.ATTR_KINDS), else ``_TF_DEFAULT`` (tensors
    and functions: left unset, TensorFlow fills its default in)."""
    literal = python_literal(value, attr_type)
    return "_TF_DEFAULT" if literal is None else literal


def default_text(value: Any, attr_type: str) -> str:
    """An attribute's default as the docstring shows it."""
    if attr_type == "type":
        return value.name
    if attr_type == "list(type)":
        return "[" + ", ".join(v.name for v in value) + "]"
    if attr_type == "tensor":
        try:
            return str(np.asarray(value).tolist())
        except TypeError:
            return "a tensor"
    literal = default_literal(value, attr_type)
    return "unknown shape (None)" if attr_type == "shape" and literal == "None" else literal


def _allowed_text(values: Optional[list]) -> str:
    if values is None:
        return ""
    return ", ".join(v.name if hasattr(v, "name") else py_str(_text(v)) for v in values)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _arg_type_text(arg: ArgDef) -> str:
    single = arg.type.name if arg.type is not None else arg.type_attr
    if arg.number_attr:
        text = f"list of {arg.number_attr} tensors of type {single}"
    elif arg.type_list_attr:
        text = f"list of tensors with types {arg.type_list_attr}"
    else:
        text = f"tensor of type {single}"
    return ("reference: " + text) if arg.is_ref else text


def _doc_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _doc_entry(head: str, text: str, indent: str = "        ") -> list[str]:
    """``head: text`` wrapped to the line width, continuation lines indented."""
    first, *rest = _doc_escape(text).split("\n") if text else [""]
    lines = textwrap.wrap(f"{head}: {first}".rstrip(), LINE_WIDTH - len(indent),
                          subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
    for extra in rest:
        lines.append(("    " + extra) if extra.strip() else "")
    return [indent + line if line else "" for line in lines]


def _doc_paragraphs(text: str) -> list[str]:
    return [("    " + line).rstrip() for line in _doc_escape(inspect.cleandoc(text)).split("\n")]


def _wrap_call(head: str, args: list, indent: int = 4) -> str:
    """``head(args)`` on one line, or one argument per line when too long.
    An argument may be (keyword, [tuple items]), laid out by _tuple_literal."""
    flat = [a if isinstance(a, str) else f"{a[0]}={_tuple_literal(a[1], 0)}" for a in args]
    line = f"{head}({', '.join(flat)})"
    if indent + len(line) <= LINE_WIDTH and "\n" not in line:
        return line
    col = indent + 4
    lines = [a if isinstance(a, str) else f"{a[0]}={_tuple_literal(a[1], col + len(a[0]) + 1)}" for a in args]
    return f"{head}(\n" + ",\n".join(" " * col + a for a in lines) + ",\n" + " " * indent + ")"


def _tuple_literal(items: list[str], col: int) -> str:
    """``(a, b, ...)`` wrapped to the line width, continuation lines aligned
    after the parenthesis that opens at column ``col``."""
    body = ", ".join(items) + ("," if len(items) == 1 else "")
    if col + len(body) + 2 <= LINE_WIDTH:
        return f"({body})"
    lines = textwrap.wrap(body, LINE_WIDTH - col - 2, break_long_words=False, break_on_hyphens=False)
    return "(" + ("\n" + " " * (col + 1)).join(lines) + ")"


# --- one function -----------------------------------------------------------------

@dataclass
class FunctionView:
    """What the function template needs for one op."""

    name: str
    op_type: str
    signature: str
    doc_lines: list[str]
    statements: list[str]
    returns: str


def _signature(fn_name: str, params: list[str]) -> str:
    line = f"def {fn_name}({', '.join(params)}):"
    if len(line) <= LINE_WIDTH:
        return line
    return f"def {fn_name}(\n" + "".join(f"        {p},\n" for p in params) + "):"


def double_pairs(op_def: OpDef) -> dict[str, AttrDef]:
    """A custom op's float64 attributes (bridge.framework.double_attrs): the
    float attribute's name -> its bits attribute, which no parameter shows."""
    inferred = op_def.inferred_attrs
    by_name = {a.name: a for a in op_def.attrs if a.name not in inferred}
    return {f: by_name[b] for f, b in double_attrs.pairs((a.name, a.type) for a in by_name.values()).items()}


def _double_default(a: AttrDef, bits: AttrDef) -> str:
    """The float64 a double attribute's defaults (float, bits) come to, as a literal."""
    value = double_attrs.decode(a.default, bits.default if bits.has_default else double_attrs.NO_DEFAULT_BITS)
    if math.isnan(value) or math.isinf(value):
        return f'float("{value}")'
    return repr(value)


def function_view(op_def: OpDef, fn_name: str) -> FunctionView:
    names = param_names(op_def)
    inferred = op_def.inferred_attrs
    doubles = double_pairs(op_def)
    hidden = {b.name for b in doubles.values()}
    attrs = [a for a in op_def.attrs if a.name not in inferred and a.name not in hidden]
    required = [a for a in attrs if not a.has_default]
    optional = [a for a in attrs if a.has_default]

    params = [names[a.name] for a in op_def.input_args] + ["*"]
    params += [names[a.name] for a in required]
    for a in optional:
        default = _double_default(a, doubles[a.name]) if a.name in doubles else default_literal(a.default, a.type)
        params.append(f"{names[a.name]}={default}")
    params.append("name=None")

    statements: list[str] = []
    for a in op_def.attrs:
        if a.name in inferred:
            args: list = [py_str(a.name)]
            if a.allowed_values is not None:
                args.append(("allowed", _names(a.allowed_values)))
            if a.has_default and a.type == "type":
                args.append(f"default={py_str(a.default.name)}")
            if a.has_minimum:
                args.append(f"minimum={a.minimum}")
            if len(args) > 1:
                statements.append(_wrap_call("_b.inferred", args))
    for arg in op_def.input_args:
        args = [py_str(arg.name), names[arg.name]]
        if arg.type is not None:
            args.append(f"dtype={py_str(arg.type.name)}")
        for key in ("type_attr", "number_attr", "type_list_attr"):
            if getattr(arg, key):
                args.append(f"{key}={py_str(getattr(arg, key))}")
        if arg.is_ref:
            args.append("is_ref=True")
        statements.append(_wrap_call("_b.list_input" if arg.is_list else "_b.input", args))
    for a in attrs:
        if a.name in doubles:
            statements.append(_wrap_call("_b.double_attr", [py_str(a.name), names[a.name]]))
            continue
        args = [py_str(a.name), names[a.name], py_str(a.type)]
        if a.allowed_values is not None:
            args.append(("allowed", _names(a.allowed_values)))
        if a.has_minimum:
            args.append(f"minimum={a.minimum}")
        statements.append(_wrap_call("_b.attr", args))

    outs = op_def.output_args
    if not outs:
        returns = "return _b.finish()"
    elif len(outs) == 1 and not outs[0].is_list:
        returns = "return _Output(_b.finish(), 0)"
    else:
        fields = [f"({py_str(f)}, {py_str(a.number_attr or a.type_list_attr) if a.is_list else None})"
                  for f, a in zip(output_names(op_def), outs)]
        returns = _wrap_call("return _b.finish_outputs", fields)

    return FunctionView(fn_name, op_def.name, _signature(fn_name, params),
                        _docstring(op_def, names, inferred, doubles), statements, returns)


def _names(values: list) -> list[str]:
    """Allowed values (dtypes by name, strings) as literals."""
    return [py_str(v.name if hasattr(v, "name") else _text(v)) for v in values]


def _double_doc(a: AttrDef, bits: AttrDef, head: str) -> list[str]:
    text = "float64"
    text += f", default {_double_default(a, bits)}" if a.has_default else ", required"
    text += (f". Carried exactly: TensorFlow's float attribute '{a.name}' holds it rounded to 32 bits, the int "
             f"attribute '{bits.name}' its bits.")
    if a.description:
        text += " " + a.description
    return _doc_entry(head, text)


def _attr_doc(a: AttrDef, head: str, inferred: bool) -> list[str]:
    text = a.type
    allowed = _allowed_text(a.allowed_values)
    if allowed:
        text += f", one of {allowed}"
    if a.has_minimum:
        text += f", minimum {a.minimum}"
    if inferred:
        text += ", inferred from the inputs"
        if a.has_default and a.type == "type":
            text += f" (Python values become {a.default.name})"
    elif a.has_default:
        text += f", default {default_text(a.default, a.type)}"
    else:
        text += ", required"
    text += "."
    if a.description:
        text += " " + a.description
    return _doc_entry(head, text)


def _docstring(op_def: OpDef, names: dict, inferred: set, doubles: Optional[dict] = None) -> list[str]:
    """Docstring lines (without the quotes), indented for the function body."""
    lines: list[str] = []
    builds = f"Builds TensorFlow's ``{op_def.name}`` op."
    if op_def.summary:
        lines += _doc_paragraphs(op_def.summary)
        lines += ["", "    " + builds]
    else:
        lines.append("    " + builds)
    if op_def.description:
        lines += [""] + _doc_paragraphs(op_def.description)
    if op_def.deprecation_version:
        lines += ["", f"    Deprecated at GraphDef version {op_def.deprecation_version}: "
                      f"{_doc_escape(op_def.deprecation_explanation)}".rstrip()]
    if op_def.input_args:
        lines += ["", "    Args:"]
        for arg in op_def.input_args:
            text = _arg_type_text(arg) + "." + (f" {arg.description}" if arg.description else "")
            lines += _doc_entry(_head(arg.name, names), text)
    doubles = doubles or {}
    hidden = {b.name for b in doubles.values()}
    attrs = [a for a in op_def.attrs if a.name not in inferred and a.name not in hidden]
    if attrs:
        lines += ["", "    Attributes (keyword-only):"]
        for a in attrs:
            if a.name in doubles:
                lines += _double_doc(a, doubles[a.name], _head(a.name, names))
            else:
                lines += _attr_doc(a, _head(a.name, names), False)
    hidden = [a for a in op_def.attrs if a.name in inferred]
    if hidden:
        lines += ["", "    Attributes set from the inputs:"]
        for a in hidden:
            lines += _attr_doc(a, a.name, True)
    lines += ["", "    Returns:"]
    outs = op_def.output_args
    if not outs:
        lines.append(f"        The Operation ({op_def.name} has no outputs).")
    elif len(outs) == 1:
        arg = outs[0]
        kind = "A list of Outputs" if arg.is_list else "An Output"
        text = f"{_arg_type_text(arg)}." + (f" {arg.description}" if arg.description else "")
        lines += _doc_entry(f"{kind} ({arg.name})", text)
    else:
        lines.append(f"        A namedtuple ``{op_def.name}`` of:")
        for field, arg in zip(output_names(op_def), outs):
            text = _arg_type_text(arg) + "." + (f" {arg.description}" if arg.description else "")
            lines += _doc_entry(field, text, indent="          ")
    return lines


def _head(opdef_name: str, names: dict) -> str:
    py = names[opdef_name]
    return py if py == opdef_name else f"{py} (OpDef name '{opdef_name}')"


# --- rendering --------------------------------------------------------------------

_env = None


def _jinja():
    global _env
    if _env is None:
        import jinja2  # only needed when generating: keeps warm imports light
        from bridge.platform.paths import templates_dir
        _env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                                  trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                                  autoescape=False, undefined=jinja2.StrictUndefined)
        _env.filters["py"] = repr  # Python literals (jinja's tojson escapes HTML)
        _env.filters["py_str"] = py_str
        _env.filters["py_list"] = lambda items: "[" + ", ".join(py_str(i) for i in items) + "]"
    return _env


def render_function(op_def: OpDef, fn_name: Optional[str] = None) -> str:
    """Source of the function for one op."""
    view = function_view(op_def, fn_name or function_names([op_def.name]).by_op[op_def.name])
    return _jinja().get_template("python_op.py.j2").render(fn=view)


def render_module(op_defs: list[OpDef], title: str, source: str) -> str:
    """Source of a module with a function per op, sorted by op name."""
    by_name = {op.name: op for op in op_defs}
    names = function_names(by_name)
    ordered = sorted(by_name)
    functions = [render_function(by_name[op], names.by_op[op]) for op in ordered]
    return _jinja().get_template("python_ops_module.py.j2").render(
        title=title, source=source, count=len(ordered),
        op_types=[(names.by_op[op], op) for op in ordered],
        renamed=sorted((names.by_op[op], why) for op, why in names.renamed.items()),
        collisions=sorted(names.collisions.items()),
        functions=functions)


# --- the cache of generated modules --------------------------------------------------

_TEMPLATES = ("python_op.py.j2", "python_ops_module.py.j2")


def generator_fingerprint() -> bytes:
    """Bytes that change whenever the generated code would: the generator,
    the runtime it targets, and its templates."""
    from bridge.platform.paths import templates_dir
    # The generated code calls op_helpers, which the generator does not import.
    key = cache.Key(f"python{sys.version_info[:2]}").add_modules(__name__, "bridge.ops.op_helpers")
    for name in _TEMPLATES:
        key.add_file(templates_dir() / name)
    return key.digest()


def module_path(kind: str, op_list: bytes) -> Path:
    """Where the module generated for ``op_list`` is cached."""
    key = cache.Key(generator_fingerprint(), op_list).hexdigest(24)
    return cache.root() / "ops" / f"{kind}-{key}.py"


def _code(path: Path, op_list: bytes, title: str, source: str) -> types.CodeType:
    """The compiled module for ``path``, generating and compiling as needed.

    The bytecode is cached by hand beside the source (``.<cache tag>.bin``)
    rather than by the import system, so PYTHONDONTWRITEBYTECODE cannot make
    every import recompile two megabytes of source."""
    code_path = path.with_name(f"{path.stem}.{sys.implementation.cache_tag}.bin")
    try:
        return marshal.loads(code_path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass
    if path.exists():
        text = path.read_bytes()
    else:
        from bridge.framework.opdef import decode_op_list
        text = render_module(decode_op_list(op_list), title, source).encode("utf-8")
        if cache.publish_file(path, text):  # else an unwritable cache: the module lives in memory only
            _prune(path)
    code = compile(text, str(path), "exec", dont_inherit=True)
    cache.publish_file(code_path, marshal.dumps(code))
    return code


KEEP_MODULES = 4


def _prune(newest: Path) -> None:
    """Keep the KEEP_MODULES most recent modules of ``newest``'s kind: each TF
    version or generator change adds one (about 5 MB with its bytecode).  A
    process still using a pruned one has it in memory; the next regenerates it."""
    kind = newest.name.rsplit("-", 1)[0]
    sources = sorted(newest.parent.glob(f"{kind}-*.py"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in sources[KEEP_MODULES:]:
        for p in [old, *old.parent.glob(f"{old.stem}.*.bin")]:
            with contextlib.suppress(OSError):
                p.unlink()


def load_generated(kind: str, op_list: bytes, module_name: str, title: str, source: str,
                   exclude: frozenset = frozenset()) -> types.ModuleType:
    """The module of functions for a serialized OpList (generated on first use),
    leaving out the op types in ``exclude``.

    ``kind`` names the cache file ("registry", "library_<name>") and the
    set of files pruned together (see KEEP_MODULES).  The
    module is registered in ``sys.modules`` under ``module_name``."""
    from bridge.framework.opdef import canonical_op_list
    op_list = canonical_op_list(op_list, exclude)
    path = module_path(kind, op_list)
    code = _code(path, op_list, title, source)
    module = types.ModuleType(module_name, title)
    module.__file__ = str(path)
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
