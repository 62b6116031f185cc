"""Parser for ``custom_op.txt``, the spec of a Julia-backed TensorFlow op.

The format is ADCME's, with a few extensions::

    # comments and blank lines are ignored
    TwoLayer                      # first line: the op name, CamelCase
    double x(n)                   # TYPE NAME(SHAPE): an input
    double w1(h, n)               # named dims are shared: every 'n' must agree
    double b1(h)
    double w2(m, h)
    double b2(m)
    double y(m*n) -> output       # '-> output' marks an output
    @attr double alpha = 0.5      # extension: an op attribute
    @forward two_layer            # extension: the Julia function (default: snake_case(Op))
    @backward two_layer_grad      # extension: its gradient (default: forward + "_grad")
    @gradient forwarddiff         # extension, instead of @backward: ForwardDiff differentiates the forward

Types: the spec names of the table in bridge/julia/contract.py, ``DTYPES``
(double, float, int32, int64, bool, string, ...; aliases float64 -> double,
float32 -> float, int -> int32).  Shapes: ``()`` a scalar, ``(?)``, ``(?,?)``,
fixed sizes ``(?,2)``, any rank; spaces inside are allowed.

Extensions over ADCME:

* named dimensions (``double x(n)``, ``double w(m, n)``): the first input
  that names a dimension binds it, every other use must agree at run time;
  an int64 attribute of the same name binds it too;
* arithmetic in dims (``(n*n)``, ``(m+1)``, ``((n+1)//2)``): only ``+ - * //``
  and parentheses over names and integers;
* ``@attr TYPE NAME [= DEFAULT]`` with TYPE double, float, int64 (alias int,
  int32), bool or string; string defaults are double-quoted printable ASCII
  without ``"``, ``\\`` or ``$``;
* ``@forward julia_fn`` / ``@backward julia_fn``: a function in Main (``f``,
  ``f!``) or in a module Main reaches (``MyModule.f``, ``A.B.f``);
* ``@gradient forwarddiff``: no backward function; the gradient op runs the
  forward function on ForwardDiff's dual numbers (GRADIENT_MODES,
  julia/ForwardDiffGradients.jl), and has a gradient op of its own.

An output whose dims cannot all be computed from the inputs' dims and the int
attributes (a ``?``, or a name no input or attribute binds) is *dynamic*: the
Julia function assigns it (``o[] = array``) and the kernel copies the result.

The file is UTF-8 (a byte-order mark is allowed; UTF-16 and UTF-32 with a
byte-order mark are read too).  Lines end at \\n, \\r\\n or \\r.  Limits that
keep the generated code valid: sizes and integer literals fit in int64,
expressions have at most ``MAX_EXPR_TOKENS`` tokens nested at most
``MAX_EXPR_DEPTH`` deep, op names have at most ``MAX_OP_NAME`` characters
(they name files) and other names ``MAX_NAME``, float defaults fit in
TensorFlow's 32-bit float attributes (double ones are finite: they travel
exactly, as bridge.framework.double_attrs says), Julia function and module names are
valid Julia names, and no name breaks the generated code it becomes an
identifier of (``reserved.reserved_reason``: C++ and Julia keywords, macros of the
kernel's headers, the kernel's own names).

This module is the line parser; its parts are modules of their own:
:mod:`~bridge.customop.reserved` (which names are allowed and why not),
:mod:`~bridge.customop.dims` (the dimension-expression language),
:mod:`~bridge.customop.errors` (SpecError) and :mod:`~bridge.customop.analysis`
(what the generator derives from a parsed spec).  Their public names are
importable from here too.

Every malformed line raises :class:`SpecError` as ``path:line: message``;
nothing else escapes :func:`parse` or :func:`parse_file`, whatever the input
(tests/fuzz/fuzz_spec.py checks this on mutated specs).
"""
from __future__ import annotations

import codecs
import difflib
import math
import re
import sys
from pathlib import Path
from typing import Iterator, Union

from bridge.framework import double_attrs
from bridge.julia import contract
from .model import Arg, Attr, Dim, Expr, OpSpec
# The parser's parts, each in its module; their names stay importable from here.
from .analysis import (DimBinding, differentiable_types, dim_bindings, generated_backward, grad_inputs,
                       grad_outputs, has_gradient, is_differentiable, is_dynamic, op_types, sizes_dimensions)
from .dims import (INT64_MAX, MAX_EXPR_DEPTH, MAX_EXPR_TOKENS, BinOp, ExprError, Name, Node, Num, dim_names,
                   divisors, evaluate, parse_expr, render_expr, to_dim)
from .errors import SpecError, show
from .reserved import JULIA_FN, MAX_NAME, NAME, julia_name_problem, reserved_reason

__all__ = [
    "SpecError", "parse", "parse_file", "decode", "snake_case", "parse_expr", "Num", "Name", "BinOp", "Node",
    "evaluate", "render_expr", "divisors", "dim_names", "is_differentiable", "dim_bindings", "is_dynamic",
    "DimBinding", "grad_inputs", "grad_outputs", "has_gradient", "op_types", "reserved_reason", "TYPES",
    "ATTR_TYPES", "MAX_OP_NAME", "MAX_NAME", "MAX_EXPR_TOKENS", "MAX_EXPR_DEPTH",
]

# The type names come from the contract table (bridge/julia/contract.py).
TYPES = contract.spec_types()             # double, float, int32, int64, bool, string, ...
ATTR_TYPES = contract.attr_types()        # double, float, int64, bool, string
_TYPE_ALIASES = contract.spec_aliases()   # float64 -> double, float32 -> float, int -> int32
_ATTR_ALIASES = contract.attr_aliases()   # float64 -> double, float32 -> float, int and int32 -> int64
# What a declaration line declares -> how errors call its type, its types, their aliases.
_DECLARED_TYPES = {"argument": ("type", TYPES, _TYPE_ALIASES),
                   "attribute": ("attribute type", ATTR_TYPES, _ATTR_ALIASES)}

LANGUAGES = ("julia", "fortran")  # @language: what implements the op (default: the op folder's files)
GRADIENT_MODES = ("forwarddiff",)  # @gradient: who writes the gradient (default: the user, @backward)
_OP_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
MAX_OP_NAME = 128  # lib<Op>Grad.so, <Op>_entries.jl and <op_snake>.jl must stay under 255 bytes
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_MIN_NORMAL = 1.1754943508222875e-38


def snake_case(name: str) -> str:
    """TensorFlow's CamelCase -> snake_case, as bridge.ops.opgen names op functions:
    a '_' before an upper-case letter that follows a lower-case one or starts a
    new word (TwoLayer -> two_layer, Conv2D -> conv2d, HSVToRGB -> hsv_to_rgb)."""
    out: list[str] = []
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0 and (name[i - 1].islower()
                                       or (i + 1 < len(name) and name[i + 1].islower())):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _strip_comment(line: str) -> str:
    """Drop a '#' comment, but not a '#' inside a double-quoted string default."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


# Lines end at \n, \r\n or \r, as editors count them (str.splitlines would
# also break at \f, \v, \x1c-\x1e, \x85, U+2028 and U+2029).
_NEWLINE = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(_NEWLINE.split(text), start=1):
        line = _strip_comment(raw).strip()
        if line:
            yield number, line


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


_ARG_HEAD = re.compile(r"(?P<type>\S+)\s+(?P<name>[^\s(]+)\s*(?P<rest>.*)")
_ATTR_LINE = re.compile(r"(?P<type>\S+)\s+(?P<name>[^\s=]+)\s*(?:=\s*(?P<default>.*))?")
_OUTPUT_MARK = re.compile(r"->\s*(?P<word>\S*)\s*")


class _Parser:
    def __init__(self, text: str, path: str):
        self.text = text
        self.path = path
        self.inputs: list[Arg] = []
        self.outputs: list[Arg] = []
        self.attrs: list[Attr] = []
        self.names: dict[str, int] = {}  # argument/attr name -> line, for duplicates
        self.directives: dict[str, tuple[str, int]] = {}

    def error(self, line: int, message: str) -> SpecError:
        return SpecError(self.path, line, message)

    def run(self) -> OpSpec:
        self.check_unicode()
        lines = list(_lines(self.text))
        if not lines:
            raise self.error(1, "empty spec: expected the op name in CamelCase (e.g. TwoLayer) "
                                "on the first line, then one line per argument")
        number_of_name, first = lines[0]
        op_name = self.op_name(number_of_name, first)
        for number, line in lines[1:]:
            if line.startswith("@"):
                self.directive(number, line)
            else:
                self.argument(number, line)
        last = lines[-1][0]
        if not self.outputs:
            raise self.error(last, f"op {op_name} has no output: mark at least one argument "
                                   "with '-> output', e.g. 'double y(?) -> output'")
        forward = self.directives.get("forward", (snake_case(op_name), 0))[0]
        default_backward = forward[:-1] + "_grad!" if forward.endswith("!") else forward + "_grad"
        backward = self.directives.get("backward", (default_backward, 0))[0]
        language, language_line = self.directives.get("language", ("", 0))
        gradient, gradient_line = self.directives.get("gradient", ("", 0))
        if gradient:
            backward = generated_backward(op_name)
        spec = OpSpec(name=op_name, inputs=tuple(self.inputs), outputs=tuple(self.outputs),
                      attrs=tuple(self.attrs), forward=forward, backward=backward,
                      path=self.path, source=self.text, line=number_of_name,
                      language=language, language_line=language_line,
                      gradient=gradient, gradient_line=gradient_line)
        self.check_dims(spec)
        self.check_gradient(spec)
        self.check_grad_names(spec)
        self.check_generated_names(spec)
        return spec

    def check_unicode(self) -> None:
        """Text from a str may hold lone surrogates, which no file can encode."""
        try:
            self.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            before = self.text[:exc.start]
            line = len(_NEWLINE.findall(before)) + 1
            column = exc.start - max(before.rfind("\n"), before.rfind("\r"))
            raise self.error(line, f"character U+{ord(self.text[exc.start]):04X} at column {column} "
                                   "is a lone surrogate, not a Unicode character") from None

    def op_name(self, number: int, line: str) -> str:
        first_word = line.split()[0].split("(")[0]
        if line.startswith("@") or first_word in TYPES or first_word in _TYPE_ALIASES:
            raise self.error(number, f"missing op name: expected the op name in CamelCase "
                                     f"(e.g. TwoLayer) on the first line, got '{show(line)}'")
        if not _OP_NAME.fullmatch(line):
            raise self.error(number, f"op name '{show(line)}' is not CamelCase: expected an upper-case "
                                     "letter followed by letters and digits (e.g. TwoLayer)")
        if len(line) > MAX_OP_NAME:
            raise self.error(number, f"op name '{show(line)}' has {len(line)} characters: at most "
                                     f"{MAX_OP_NAME} (it names the op's files)")
        return line

    def claim(self, number: int, name: str, what: str) -> None:
        if len(name) > MAX_NAME:
            raise self.error(number, f"{what} name '{show(name)}' has {len(name)} characters: "
                                     f"at most {MAX_NAME}")
        if not NAME.fullmatch(name):
            if NAME.fullmatch(name.lower()):
                raise self.error(number, f"{what} name '{show(name)}' must be lower-case "
                                         f"(TensorFlow requires [a-z][a-z0-9_]*): try '{show(name.lower())}'")
            raise self.error(number, f"bad {what} name '{show(name)}': expected a lower-case identifier "
                                     "(a letter, then letters, digits or '_')")
        reason = reserved_reason(name, what)
        if reason is not None:
            raise self.error(number, f"{what} name '{name}' is reserved: {reason}; choose another name")
        if name in self.names:
            raise self.error(number, f"duplicate name '{name}' (first defined on line "
                                     f"{self.names[name]})")
        self.names[name] = number

    def declaration(self, number: int, pattern: re.Pattern, text: str, what: str, expected: str,
                    shown: str) -> tuple[re.Match, str]:
        """A declaration line (``TYPE NAME ...``) of an argument or attribute
        (``what``), matched against ``pattern``: the match and the declared
        type, an alias resolved; its name is claimed.  SpecErrors say what
        was ``expected`` (quoting the line as ``shown``) or list the types."""
        m = pattern.fullmatch(text)
        if not m:
            raise self.error(number, f"expected {expected}, got '{show(shown)}'")
        word, (type_kind, names, aliases) = m["type"], _DECLARED_TYPES[what]
        dtype = aliases.get(word, word)
        if dtype not in names:
            raise self.error(number, f"unknown {type_kind} '{show(word)}'{_suggest(word, names)}: "
                                     f"expected one of {', '.join(names)} (aliases {', '.join(aliases)})")
        self.claim(number, m["name"], what)
        return m, dtype

    def argument(self, number: int, line: str) -> None:
        m, dtype = self.declaration(number, _ARG_HEAD, line, "argument",
                                    "'TYPE NAME(SHAPE)' or 'TYPE NAME(SHAPE) -> output' (e.g. 'double x(?,?)')",
                                    line)
        type_word, name, rest = m["type"], m["name"], m["rest"]
        if not rest.startswith("("):
            raise self.error(number, f"argument '{name}' has no shape: expected "
                                     f"'{type_word} {show(name)}(SHAPE)', e.g. '()' for a scalar or "
                                     "'(?,?)'")
        close = _matching_paren(rest)
        if close < 0:
            raise self.error(number, f"shape of '{name}' is missing its closing ')'")
        shape = self.shape(number, name, rest[1:close])
        tail = rest[close + 1:].strip()
        is_output = False
        if tail:
            mark = _OUTPUT_MARK.fullmatch(tail)
            if not mark or mark["word"] != "output":
                raise self.error(number, f"unexpected '{show(tail)}' after the shape of '{show(name)}': "
                                         "expected nothing (an input) or '-> output'")
            is_output = True
        arg = Arg(name=name, dtype=dtype, shape=shape, line=number)
        (self.outputs if is_output else self.inputs).append(arg)

    def shape(self, number: int, name: str, text: str) -> tuple[Dim, ...]:
        if not text.strip():
            return ()
        dims: list[Dim] = []
        for axis, part in enumerate(_split_top_level(text)):
            part = part.strip()
            if part == "?":
                dims.append(None)
                continue
            if not part:
                raise self.error(number, f"shape of '{name}' has an empty dimension {axis} in "
                                         f"'({show(text)})': expected '?', a size, a name or an "
                                         "expression")
            try:
                dim = to_dim(parse_expr(part))
            except ExprError as exc:
                hint = ("; expected '?', a size, a name, or + - * // and parentheses over names "
                        "and integers") if exc.syntax else ""
                message = f"dimension {axis} of '{name}', '{show(part)}': {exc}{hint}"
                raise self.error(number, message) from None
            if isinstance(dim, int) and dim < 0:
                raise self.error(number, f"dimension {axis} of '{name}', '{show(part)}', is negative "
                                         f"({dim})")
            if isinstance(dim, int) and dim > INT64_MAX:
                raise self.error(number, f"dimension {axis} of '{name}', '{show(part)}', is {dim}, "
                                         f"which does not fit in 64 bits (at most {INT64_MAX})")
            dims.append(dim)
        return tuple(dims)

    def directive(self, number: int, line: str) -> None:
        word, rest = (line.split(None, 1) + [""])[:2]
        rest = rest.strip()
        if word == "@attr":
            self.attr(number, rest)
            return
        if word not in ("@forward", "@backward", "@language", "@gradient"):
            raise self.error(number, f"unknown directive '{show(word)}': expected @attr, @forward, "
                                     "@backward, @gradient or @language")
        key = word[1:]
        if key in self.directives:
            raise self.error(number, f"{word} given twice (first on line {self.directives[key][1]})")
        if word == "@language":  # Fortran ops: bridge/customop/fortran.py
            if rest not in LANGUAGES:
                raise self.error(number, f"@language expects one of {', '.join(LANGUAGES)}, got '{show(rest)}'")
            self.directives[key] = (rest, number)
            return
        if word == "@gradient":  # julia/ForwardDiffGradients.jl
            if rest not in GRADIENT_MODES:
                raise self.error(number, f"@gradient expects {' or '.join(GRADIENT_MODES)} (the gradient op then "
                                         "differentiates the forward function with ForwardDiff), got "
                                         f"'{show(rest)}'")
            self.directives[key] = (rest, number)
            return
        if not JULIA_FN.fullmatch(rest):
            raise self.error(number, f"{word} expects one Julia function name (e.g. '{word} "
                                     f"my_op', 'my_op!' or 'MyModule.my_op'), got '{show(rest)}'")
        if len(rest) > MAX_NAME:
            raise self.error(number, f"{word}: the function name '{show(rest)}' has {len(rest)} "
                                     f"characters: at most {MAX_NAME}")
        *modules, function = rest.split(".")
        for part, kind in [(m, "module") for m in modules] + [(function, "function")]:
            why = julia_name_problem(part, kind)
            if why:
                raise self.error(number, f"{word} {rest}: '{part}' is not a valid Julia {kind} name "
                                         f"({why}): choose another name")
        self.directives[key] = (rest, number)

    def attr(self, number: int, text: str) -> None:
        m, dtype = self.declaration(
            number, _ATTR_LINE, text, "attribute",
            "'@attr TYPE NAME' or '@attr TYPE NAME = DEFAULT' (e.g. '@attr double alpha = 0.5')", f"@attr {text}")
        name, default_text = m["name"], m["default"]
        default = None
        if default_text is not None:
            default = self.attr_default(number, name, dtype, default_text.strip())
        self.attrs.append(Attr(name=name, dtype=dtype, default=default, line=number))

    def attr_default(self, number: int, name: str, dtype: str, text: str) -> object:
        def bad(expected: str) -> SpecError:
            return self.error(number, f"default of {dtype} attribute '{name}' is '{show(text)}': "
                                      f"expected {expected}")
        kind = contract.by_spec(dtype).kind
        if kind == "float":
            if not re.fullmatch(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", text):
                raise bad("a number such as 0.5 or 1e-3")
            value = float(text)
            if contract.by_spec(dtype).attr.carrier == "float+bits":  # exact in 64 bits (double_attrs)
                if not math.isfinite(value):
                    raise bad(f"a number a double can hold (a magnitude up to {sys.float_info.max:.8g})")
                return value
            # TensorFlow keeps float attributes in 32 bits: refuse what would
            # become inf, or a subnormal or 0.
            if value != 0 and not _FLOAT32_MIN_NORMAL <= abs(value) <= _FLOAT32_MAX:
                raise bad(f"a number TensorFlow's 32-bit float attributes can hold (0, or a "
                          f"magnitude between {_FLOAT32_MIN_NORMAL:.8g} and {_FLOAT32_MAX:.8g})")
            return value
        if kind == "int":
            bits = 8 * contract.by_spec(dtype).size
            if not re.fullmatch(r"[-+]?[0-9]+", text):
                raise bad("an integer")
            digits = text.lstrip("+-").lstrip("0") or "0"
            value = int(text[0] + digits if text[0] in "+-" else digits) if len(digits) <= 19 else 2**63
            if not -2**(bits - 1) <= value < 2**(bits - 1):
                raise bad(f"an integer that fits in {bits} bits")
            return value
        if kind == "bool":
            if text not in ("true", "false"):
                raise bad("true or false")
            return text == "true"
        # Printable ASCII but '"', '\\' and '$': the generated C++ and Julia quote
        # the default as is ('$' would interpolate in the Julia stub's docstrings).
        if not re.fullmatch(r'"[ !#%-\[\]-~]*"', text):
            raise bad('a double-quoted string of printable ASCII characters without ", \\ or $')
        return text[1:-1]

    # -------------------------------------------------------- whole-spec checks

    def check_dims(self, spec: OpSpec) -> None:
        attrs = {a.name: a for a in spec.attrs}
        args = {a.name for a in spec.inputs + spec.outputs}
        bound = set(dim_bindings(spec))
        inputs = {id(a) for a in spec.inputs}  # `arg in spec.inputs` compares field by field
        for arg in spec.inputs + spec.outputs:
            for dim in arg.shape:
                for dim_name in dim_names(dim):
                    if dim_name in args:
                        raise self.error(arg.line, f"dimension name '{dim_name}' in the shape of "
                                                   f"'{arg.name}' is also an argument name: "
                                                   "rename one of them")
                    reason = reserved_reason(dim_name, "dimension")
                    if reason is not None:
                        raise self.error(arg.line, f"dimension name '{dim_name}' is reserved: {reason}; "
                                                   "choose another name")
                    attr = attrs.get(dim_name)
                    if attr is not None and not sizes_dimensions(attr):
                        raise self.error(arg.line, f"dimension '{dim_name}' of '{arg.name}' names "
                                                   f"the {attr.dtype} attribute on line {attr.line}; "
                                                   "only int64 attributes can size a dimension")
                    if attr is not None and isinstance(attr.default, int) and attr.default < 0:
                        raise self.error(attr.line, f"attribute '{attr.name}' sizes a dimension of "
                                                    f"'{arg.name}' (line {arg.line}), so its default "
                                                    f"must be >= 0, not {attr.default}")
                if isinstance(dim, Expr) and id(arg) in inputs:
                    missing = [n for n in dim.names if n not in bound]
                    if missing:
                        raise self.error(arg.line, f"dimension '{dim.text}' of input '{arg.name}' "
                                                   f"uses '{missing[0]}', which no input binds: "
                                                   "name it alone in some input's shape, or "
                                                   "declare '@attr int64 " + missing[0] + "'")

    def check_gradient(self, spec: OpSpec) -> None:
        """@gradient forwarddiff replaces the backward function: refuse it beside @backward, and
        on an op without a gradient op."""
        if not spec.gradient:
            return
        if "backward" in self.directives:
            first, second = sorted([("@backward", self.directives["backward"][1]),
                                    ("@gradient", spec.gradient_line)], key=lambda item: item[1])
            raise self.error(second[1], f"{second[0]} contradicts {first[0]} on line {first[1]}: @backward names "
                                        "a backward function you write, @gradient forwarddiff has the bridge "
                                        "differentiate the forward function instead; keep one of them")
        if not has_gradient(spec):
            raise self.error(spec.gradient_line, f"@gradient {spec.gradient}: op {spec.name} has no gradient "
                                                 f"(it needs a differentiable ({differentiable_types()}) input and "
                                                 "output)")

    def check_grad_names(self, spec: OpSpec) -> None:
        if not has_gradient(spec):
            return
        generated = {f"grad_{a.name}" for a in grad_inputs(spec) + grad_outputs(spec)}
        second = f"{spec.name}Grad's gradient op {spec.name}GradGrad, which names its arguments grad_<name>, " \
                 "grad_grad_<name> and grad2_<name>"
        if spec.gradient:  # <Op>GradGrad's too (codegen.second_grad_context)
            generated |= {f"{prefix}{a.name}" for a in grad_inputs(spec) + grad_outputs(spec)
                          for prefix in ("grad_grad_", "grad2_")}
        for arg in spec.inputs + spec.outputs:
            if arg.name in generated:
                clash = second if spec.gradient else f"the gradient op {spec.name}Grad, which names its " \
                                                     "gradient arguments grad_<name>"
                raise self.error(arg.line, f"argument name '{arg.name}' clashes with {clash}: rename it")


    def check_generated_names(self, spec: OpSpec) -> None:
        """The kernel derives C++ names from the spec's names (y_shape, x_1,
        alpha_: kernel.cc.j2); a spec name equal to one of them would be
        declared twice, or hide the member."""
        derived: dict[str, str] = {}
        bound = dim_bindings(spec)
        for arg in spec.outputs:
            if arg.rank and not is_dynamic(spec, arg, bound):  # allocated in Prepare
                derived[f"{arg.name}_shape"] = f"output '{arg.name}'"
        for arg in spec.inputs + spec.outputs:
            for axis, dim in enumerate(arg.shape):
                if isinstance(dim, Expr):
                    derived[f"{arg.name}_{axis}"] = f"dimension {axis} of '{arg.name}'"
        for attr in spec.attrs:
            derived[f"{attr.name}_"] = f"attribute '{attr.name}'"
            if attr.dtype.attr.carrier == "float+bits":  # a TensorFlow attribute of its own, beside the float one
                derived[double_attrs.bits_name(attr.name)] = f"the bits of double attribute '{attr.name}'"
        user: dict[str, int] = {a.name: a.line for a in spec.inputs + spec.outputs + spec.attrs}
        for arg in spec.inputs + spec.outputs:
            for dim in arg.shape:
                for n in dim_names(dim):
                    user.setdefault(n, arg.line)
        for name, line in sorted(user.items(), key=lambda item: item[1]):
            if name in derived:
                raise self.error(line, f"name '{name}' clashes with the name the generated kernel "
                                       f"gives {derived[name]}: rename it")


def _matching_paren(text: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse(text: Union[str, bytes], path: str = "custom_op.txt") -> OpSpec:
    """Parse spec text, or the bytes of a spec file (see :func:`decode`);
    ``path`` only labels error messages and the result.  A leading
    byte-order mark is ignored."""
    path = str(path)
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = decode(bytes(text), path)
    elif isinstance(text, str):
        text = text[1:] if text.startswith("\ufeff") else text
    else:
        raise TypeError(f"parse() takes the spec as str or bytes, not {type(text).__name__}")
    return _Parser(text, path).run()


# Byte-order marks, longest first (UTF-32-LE's starts with UTF-16-LE's).
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def decode(data: bytes, path: str = "custom_op.txt") -> str:
    """The text of a spec file, without its byte-order mark: UTF-8, or UTF-8,
    UTF-16 or UTF-32 after a byte-order mark.  Anything else raises SpecError
    naming the line and column of the first bytes that are not text."""
    bom, encoding = next(((bom, enc) for bom, enc in _BOMS if data.startswith(bom)), (b"", "utf-8"))
    body = data[len(bom):]
    try:
        return body.decode(encoding)
    except UnicodeDecodeError as exc:
        before = body[:exc.start].decode(encoding, errors="replace")
        line = len(_NEWLINE.findall(before)) + 1
        column = len(before) - max(before.rfind("\n"), before.rfind("\r"))
        bad = body[exc.start:min(exc.end, exc.start + 4)].hex(" ")
        name = encoding.upper().replace("-LE", "").replace("-BE", "")
        raise SpecError(path, line, f"the file is not {name} text: bytes {bad} at column {column} "
                                    f"({exc.reason}); save it as UTF-8") from None


def parse_file(path: Union[str, Path]) -> OpSpec:
    """Parse a custom_op.txt file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(str(path), 1, "spec file not found: expected a custom_op.txt "
                                      "(create one with 'tfbridge customop init NAME DIR')") from None
    except IsADirectoryError:
        raise SpecError(str(path), 1, "is a folder: expected the spec file itself "
                                      f"({path / 'custom_op.txt'}?)") from None
    except OSError as exc:
        raise SpecError(str(path), 1, f"cannot read the spec file: {exc.strerror or exc}") from None
    return parse(data, str(path))
