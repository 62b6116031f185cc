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

Types: double, float, int32, int64, bool, string; aliases float64 -> double,
float32 -> float, int -> int32 (the table in bridge/julia/contract.py).  Shapes: ``()`` a scalar, ``(?)``, ``(?,?)``,
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
  ``f!``) or in a module Main reaches (``MyModule.f``, ``A.B.f``).

An output whose dims cannot all be computed from the inputs' dims and the int
attributes (a ``?``, or a name no input or attribute binds) is *dynamic*: the
Julia function assigns it (``o[] = array``) and the kernel copies the result.

The file is UTF-8 (a byte-order mark is allowed; UTF-16 and UTF-32 with a
byte-order mark are read too).  Lines end at \\n, \\r\\n or \\r.  Limits that
keep the generated code valid: sizes and integer literals fit in int64,
expressions have at most ``MAX_EXPR_TOKENS`` tokens nested at most
``MAX_EXPR_DEPTH`` deep, op names have at most ``MAX_OP_NAME`` characters
(they name files) and other names ``MAX_NAME``, float defaults fit in
TensorFlow's 32-bit float attributes, Julia function and module names are
valid Julia names, and no name breaks the generated code it becomes an
identifier of (``reserved_reason``: C++ and Julia keywords, macros of the
kernel's headers, the kernel's own names).

Every malformed line raises :class:`SpecError` as ``path:line: message``;
nothing else escapes :func:`parse` or :func:`parse_file`, whatever the input
(tests/fuzz/fuzz_spec.py checks this on mutated specs).
"""
from __future__ import annotations

import codecs
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from bridge.julia import contract
from .model import Arg, Attr, Dim, Expr, OpSpec

__all__ = [
    "SpecError", "parse", "parse_file", "decode", "snake_case", "parse_expr", "Num", "Name", "BinOp", "Node",
    "evaluate", "render_expr", "divisors", "dim_names", "is_float", "dim_bindings", "is_dynamic",
    "DimBinding", "grad_inputs", "grad_outputs", "has_gradient", "op_types", "reserved_reason", "TYPES",
    "ATTR_TYPES",
]

# The type names come from the contract table (bridge/julia/contract.py).
TYPES = contract.spec_types()             # double, float, int32, int64, bool, string
ATTR_TYPES = contract.attr_types()        # double, float, int64, bool, string
_TYPE_ALIASES = contract.spec_aliases()   # float64 -> double, float32 -> float, int -> int32
_ATTR_ALIASES = contract.attr_aliases()   # float64 -> double, float32 -> float, int and int32 -> int64
# What a declaration line declares -> how errors call its type, its types, their aliases.
_DECLARED_TYPES = {"argument": ("type", TYPES, _TYPE_ALIASES),
                   "attribute": ("attribute type", ATTR_TYPES, _ATTR_ALIASES)}

_OP_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
MAX_OP_NAME = 128  # lib<Op>Grad.so, <Op>_entries.jl and <op_snake>.jl must stay under 255 bytes
MAX_NAME = 128     # argument, attribute, dimension and Julia function names
MAX_EXPR_TOKENS = 200
MAX_EXPR_DEPTH = 32
_INT64_MAX = 2**63 - 1
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_MIN_NORMAL = 1.1754943508222875e-38
_NAME = re.compile(r"[a-z][a-z0-9_]*")

# ---------------------------------------------------------------- Julia function names
#
# @forward and @backward name a function in Main (``f``, ``f!``) or in a module
# that Main reaches (``MyModule.f``, ``A.B.f``): a file defining ``module
# MyModule ... end`` puts it in Main, ``using MyPackage`` binds the package
# there.  The runtime resolves the path from Main at every call (generic path:
# kernels_cpp/src/tfjl_julia/invoke.cc; compiled entries: entries.jl.j2).
_JULIA_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_JULIA_FN = re.compile(rf"(?:{_JULIA_IDENTIFIER}\.)*{_JULIA_IDENTIFIER}!?")
# Julia's reserved words (Julia 1.5): no argument, function or module can
# have one of these names.  (`where`, `in` and `isa` are infix operators, and
# `abstract`, `primitive`, `mutable` and `type` keywords only before another
# word: all of them can name arguments and functions.)
_JULIA_KEYWORDS = frozenset("""
    baremodule begin break catch const continue do else elseif end export false finally for
    function global if import let local macro module quote return struct true try using while
""".split())
# Julia's lowering keeps these names for its special forms: "ccall" is not a
# valid function argument name (nor a function name).
_JULIA_SPECIAL_FORMS = frozenset({"ccall", "cglobal"})
# `module in ... end` and `module isa ... end` do not parse: infix operators there.
_JULIA_NOT_MODULES = frozenset({"in", "isa"})


def _julia_name_problem(name: str, kind: str) -> str:
    """Why ``name`` cannot name a Julia ``kind`` ("function" or "module"), or ""."""
    if name in _JULIA_KEYWORDS:
        return "a Julia keyword"
    if not name.strip("_!"):
        return "only underscores, which Julia reads as no value"
    if kind == "function" and name in _JULIA_SPECIAL_FORMS:
        return f"Julia keeps it for its {name}(...) special form"
    if kind == "module" and name in _JULIA_NOT_MODULES:
        return f"an infix operator: 'module {name}' does not parse"
    return ""


# ---------------------------------------------------------------- names in generated code
#
# Each spec name becomes an identifier of the generated code, so a name is
# refused exactly where it would break that code (tests/test_customop_names.py
# shows each refused name failing there, and builds and runs ops named with
# the others):
#   - an argument names a C++ variable of the kernel (kernel.cc.j2: a Tensor in
#     Prepare, a ShapeHandle in shape inference) and a parameter of the Julia
#     stub (julia_stub.jl.j2);
#   - a dimension names a C++ variable of the kernel only (its size);
#   - an attribute names a parameter of the Julia stub; the kernel writes only
#     `<name>_`, its member (an int64 attribute sizing a dimension is also that
#     dimension's name, checked as such); and TensorFlow's op registry refuses
#     attributes named like its data types.
# Python keywords need nothing: the op functions append "_" to them
# (bridge.ops.opgen.safe_name), and the compiled entries and gradtest.py write the
# names only inside strings and symbols.

# C++17's keywords and alternative tokens, as g++ -std=c++17 reads them (the
# kernel's CMakeLists.txt).  C++20's char8_t, concept, consteval, constinit,
# co_await, co_return, co_yield and requires are plain names there.
_CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t
    class compl const constexpr const_cast continue decltype default delete do double dynamic_cast
    else enum explicit export extern false float for friend goto if inline int long mutable namespace
    new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
    template this thread_local throw true try typedef typeid typename union unsigned using virtual
    void volatile wchar_t while xor xor_eq
""".split())
# Lower-case macros of the headers every kernel includes (kernel.cc.j2's
# includes, with TensorFlow 2.21): the preprocessor would replace a variable of
# that name by their expansion.  Macros that expand to their own name (stdin,
# stdout, stderr, sched_priority) are harmless.
_CXX_MACROS = {
    "errno": "the C library's <errno.h>",
    "math_errhandling": "the C library's <math.h>",
    "absl_nonnull": "Abseil's nullability annotations",
    "absl_nullable": "Abseil's nullability annotations",
    "absl_nullability_unknown": "Abseil's nullability annotations",
}
# Protobuf's include guards of TensorFlow's generated headers, e.g.
# tensorflow_2fcore_2fframework_2ftensor_2eproto_2epb_2eh, are macros too.
_CXX_MACRO_PATTERN = re.compile(r"[a-z0-9_]*_2epb_2eh")
# TensorFlow refuses to register an op with an attribute named like a data
# type ("Attr can't have name double that matches a data type", when the
# library loads): the names tensorflow::DataTypeFromString reads
# (TensorFlow 2.21), each also with "_ref".
_TF_DTYPE_NAMES = frozenset("""
    bfloat16 bool complex128 complex64 double float float16 float32 float4_e2m1fn float64
    float8_e4m3b11fnuz float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz half int16 int2
    int32 int4 int64 int8 qint16 qint32 qint8 quint16 quint8 resource string uint16 uint2 uint32
    uint4 uint64 uint8 variant
""".split())
# Names the kernel's own code declares where the spec's names are variables.
_KERNEL_NAMES = {
    "ctx": "the name of the TensorFlow context that every function of the generated kernel takes",
    "frame": "the name of the tfjl::CallFrame that the generated kernel's Prepare fills",
    "int64_t": "the C++ type of the generated kernel's sizes",
}


def reserved_reason(name: str, role: str) -> Optional[str]:
    """Why ``name`` cannot name a spec ``role`` ("argument", "dimension" or
    "attribute"), or None: what in the generated code it would break."""
    cxx = f"the generated kernel names a C++ variable after each {role}" if role != "attribute" else ""
    julia = f"the generated Julia stub names a parameter after each {role}" if role != "dimension" else ""
    if cxx and julia and name in _CXX_KEYWORDS and name in _JULIA_KEYWORDS:
        return f"it is a C++ and a Julia keyword ({cxx}, and {julia})"
    if cxx and name in _CXX_KEYWORDS:
        return f"it is a C++ keyword ({cxx})"
    if julia and name in _JULIA_KEYWORDS:
        return f"it is a Julia keyword ({julia})"
    if julia and name in _JULIA_SPECIAL_FORMS:
        return f"Julia keeps it for its {name}(...) special form, so it is no valid Julia argument name ({julia})"
    if cxx and (name in _CXX_MACROS or _CXX_MACRO_PATTERN.fullmatch(name)):
        header = _CXX_MACROS.get(name, "protobuf's include guards in TensorFlow's headers")
        return (f"it is a macro of {header}, which the generated kernel includes, and the macro would "
                f"replace the variable ({cxx})")
    if cxx and name in _KERNEL_NAMES:
        return f"it is {_KERNEL_NAMES[name]} ({cxx})"
    if role == "attribute" and (name in _TF_DTYPE_NAMES or name.endswith("_ref") and name[:-4] in _TF_DTYPE_NAMES):
        return "TensorFlow refuses attributes named like its data types (its op registry would read it as a type)"
    return None


class SpecError(ValueError):
    """A malformed custom_op.txt; the message reads ``path:line: what was expected``."""

    def __init__(self, path: str, line: int, message: str):
        message = _printable(message)  # one line, whatever the spec held
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


# ---------------------------------------------------------------- dim arithmetic

@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * //
    left: "Node"
    right: "Node"


Node = Union[Num, Name, BinOp]

_TOKEN = re.compile(r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*()])|(\S))")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2}


class _ExprError(Exception):
    """A bad dimension expression; ``syntax`` when the fix is to use the allowed operators."""

    def __init__(self, message: str, syntax: bool = True):
        super().__init__(message)
        self.syntax = syntax


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(text):
        number, name, op, other = m.groups()
        if number is not None:
            digits = number.lstrip("0") or "0"
            if len(digits) > 19 or int(digits) > _INT64_MAX:  # len first: int() refuses > 4300 digits
                raise _ExprError(f"{_show(number)} does not fit in 64 bits (at most {_INT64_MAX})",
                                 syntax=False)
            out.append(("num", digits))
        elif name is not None:
            out.append(("name", name))
        elif op is not None:
            out.append(("op", op))
        elif other is not None:
            hint = "; use // for integer division" if other == "/" else ""
            raise _ExprError(f"unknown syntax at '{_show(other)}'{hint}")
        if len(out) > MAX_EXPR_TOKENS:
            raise _ExprError(f"expression too long: more than {MAX_EXPR_TOKENS} names, integers "
                             "and operators", syntax=False)
    return out


def parse_expr(text: str) -> Node:
    """Parse a dimension expression (``n``, ``2``, ``m*n``, ``(m+1)//2``)."""
    toks = _tokens(text)
    pos = 0
    depth = 0

    def peek() -> Optional[tuple[str, str]]:
        return toks[pos] if pos < len(toks) else None

    def atom() -> Node:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise _ExprError("expression ends where a name, an integer or '(' was expected")
        pos += 1
        kind, value = tok
        if kind == "num":
            return Num(int(value))
        if kind == "name":
            if not _NAME.fullmatch(value):
                raise _ExprError(f"dimension name '{_show(value)}' must be lower-case "
                                 "(a letter, then letters, digits or '_')", syntax=False)
            if len(value) > MAX_NAME:
                raise _ExprError(f"dimension name '{_show(value)}' has {len(value)} characters: "
                                 f"at most {MAX_NAME}", syntax=False)
            return Name(value)
        if value == "(":
            nonlocal depth
            depth += 1
            if depth > MAX_EXPR_DEPTH:
                raise _ExprError(f"parentheses nested more than {MAX_EXPR_DEPTH} deep", syntax=False)
            inner = sum_()
            if peek() != ("op", ")"):
                raise _ExprError("missing ')'")
            pos += 1
            depth -= 1
            return inner
        raise _ExprError(f"unexpected '{_show(value)}' where a name, an integer or '(' was expected")

    def term() -> Node:
        nonlocal pos
        left = atom()
        while (tok := peek()) in (("op", "*"), ("op", "//")):
            pos += 1
            right = atom()
            if tok[1] == "//" and right == Num(0):
                raise _ExprError("division by zero", syntax=False)
            left = BinOp(tok[1], left, right)
        return left

    def sum_() -> Node:
        nonlocal pos
        left = term()
        while (tok := peek()) in (("op", "+"), ("op", "-")):
            pos += 1
            left = BinOp(tok[1], left, term())
        return left

    if not toks:
        raise _ExprError("empty dimension")
    node = sum_()
    if pos != len(toks):
        raise _ExprError(f"unexpected '{_show(toks[pos][1])}'")
    _check_constants(node)
    return node


def _check_constants(node: Node) -> Optional[int]:
    """The value of ``node`` if it has no names (None otherwise), refusing a
    constant part that divides by zero or leaves int64: the generated C++
    computes it in int64."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return None
    left, right = _check_constants(node.left), _check_constants(node.right)
    if node.op == "//" and right == 0:
        raise _ExprError("division by zero", syntax=False)
    if left is None or right is None:
        return None
    value = evaluate(node, {})
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise _ExprError(f"'{render_expr(node)}' = {value} does not fit in 64 bits", syntax=False)
    return value


def evaluate(node: Node, env: dict[str, int]) -> int:
    """Value of a dimension expression; ``//`` floors like Python."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return env[node.name]
    a, b = evaluate(node.left, env), evaluate(node.right, env)
    if node.op == "+":
        return a + b
    if node.op == "-":
        return a - b
    if node.op == "*":
        return a * b
    return a // b


def render_expr(node: Node, name: Callable[[str], str] = str, cxx: bool = False) -> str:
    """Render ``node`` with minimal parentheses, dimension names mapped by
    ``name``.  ``cxx`` writes C++: spaced operators and ``FloorDiv(a, b)`` for
    ``//`` (C++'s ``/`` truncates toward zero, the spec's ``//`` floors)."""

    def go(n: Node, parent: int, right_side: bool) -> str:
        if isinstance(n, Num):
            return str(n.value)
        if isinstance(n, Name):
            return name(n.name)
        if cxx and n.op == "//":
            return f"FloorDiv({go(n.left, 0, False)}, {go(n.right, 0, False)})"
        prec = _PRECEDENCE[n.op]
        sep = f" {n.op} " if cxx else n.op
        text = go(n.left, prec, False) + sep + go(n.right, prec, True)
        if prec < parent or (prec == parent and right_side):
            return f"({text})"
        return text

    return go(node, 0, False)


def divisors(node: Node) -> list[Node]:
    """The right-hand sides of every ``//`` in ``node`` (checked for zero at run time)."""
    if isinstance(node, BinOp):
        own = [node.right] if node.op == "//" else []
        return divisors(node.left) + divisors(node.right) + own
    return []


def _names(node: Node) -> list[str]:
    if isinstance(node, Name):
        return [node.name]
    if isinstance(node, BinOp):
        return _names(node.left) + _names(node.right)
    return []


def _to_dim(node: Node) -> Dim:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return node.name
    if not _names(node):  # constant arithmetic folds to a size
        return evaluate(node, {})
    names = tuple(dict.fromkeys(_names(node)))
    return Expr(text=render_expr(node), names=names)


# ---------------------------------------------------------------- line parsing

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


def _printable(text: str) -> str:
    """``text`` with control and other invisible characters escaped (\\n, \\x00, \\ufeff)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _show(text: str, limit: int = 80) -> str:
    """A fragment of the spec for a message: escaped, and cut at ``limit`` characters."""
    text = _printable(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
        spec = OpSpec(name=op_name, inputs=tuple(self.inputs), outputs=tuple(self.outputs),
                      attrs=tuple(self.attrs), forward=forward, backward=backward,
                      path=self.path, source=self.text, line=number_of_name)
        self.check_dims(spec)
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
                                     f"(e.g. TwoLayer) on the first line, got '{_show(line)}'")
        if not _OP_NAME.fullmatch(line):
            raise self.error(number, f"op name '{_show(line)}' is not CamelCase: expected an upper-case "
                                     "letter followed by letters and digits (e.g. TwoLayer)")
        if len(line) > MAX_OP_NAME:
            raise self.error(number, f"op name '{_show(line)}' has {len(line)} characters: at most "
                                     f"{MAX_OP_NAME} (it names the op's files)")
        return line

    def claim(self, number: int, name: str, what: str) -> None:
        if len(name) > MAX_NAME:
            raise self.error(number, f"{what} name '{_show(name)}' has {len(name)} characters: "
                                     f"at most {MAX_NAME}")
        if not _NAME.fullmatch(name):
            if _NAME.fullmatch(name.lower()):
                raise self.error(number, f"{what} name '{_show(name)}' must be lower-case "
                                         f"(TensorFlow requires [a-z][a-z0-9_]*): try '{_show(name.lower())}'")
            raise self.error(number, f"bad {what} name '{_show(name)}': expected a lower-case identifier "
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
            raise self.error(number, f"expected {expected}, got '{_show(shown)}'")
        word, (type_kind, names, aliases) = m["type"], _DECLARED_TYPES[what]
        dtype = aliases.get(word, word)
        if dtype not in names:
            raise self.error(number, f"unknown {type_kind} '{_show(word)}'{_suggest(word, names)}: "
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
                                     f"'{type_word} {_show(name)}(SHAPE)', e.g. '()' for a scalar or "
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
                raise self.error(number, f"unexpected '{_show(tail)}' after the shape of '{_show(name)}': "
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
                                         f"'({_show(text)})': expected '?', a size, a name or an "
                                         "expression")
            try:
                dim = _to_dim(parse_expr(part))
            except _ExprError as exc:
                hint = ("; expected '?', a size, a name, or + - * // and parentheses over names "
                        "and integers") if exc.syntax else ""
                message = f"dimension {axis} of '{name}', '{_show(part)}': {exc}{hint}"
                raise self.error(number, message) from None
            if isinstance(dim, int) and dim < 0:
                raise self.error(number, f"dimension {axis} of '{name}', '{_show(part)}', is negative "
                                         f"({dim})")
            if isinstance(dim, int) and dim > _INT64_MAX:
                raise self.error(number, f"dimension {axis} of '{name}', '{_show(part)}', is {dim}, "
                                         f"which does not fit in 64 bits (at most {_INT64_MAX})")
            dims.append(dim)
        return tuple(dims)

    def directive(self, number: int, line: str) -> None:
        word, rest = (line.split(None, 1) + [""])[:2]
        rest = rest.strip()
        if word == "@attr":
            self.attr(number, rest)
            return
        if word not in ("@forward", "@backward"):
            raise self.error(number, f"unknown directive '{_show(word)}': expected @attr, @forward "
                                     "or @backward")
        key = word[1:]
        if key in self.directives:
            raise self.error(number, f"{word} given twice (first on line {self.directives[key][1]})")
        if not _JULIA_FN.fullmatch(rest):
            raise self.error(number, f"{word} expects one Julia function name (e.g. '{word} "
                                     f"my_op', 'my_op!' or 'MyModule.my_op'), got '{_show(rest)}'")
        if len(rest) > MAX_NAME:
            raise self.error(number, f"{word}: the function name '{_show(rest)}' has {len(rest)} "
                                     f"characters: at most {MAX_NAME}")
        *modules, function = rest.split(".")
        for part, kind in [(m, "module") for m in modules] + [(function, "function")]:
            why = _julia_name_problem(part, kind)
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
            return self.error(number, f"default of {dtype} attribute '{name}' is '{_show(text)}': "
                                      f"expected {expected}")
        kind = contract.by_spec(dtype).kind
        if kind == "float":
            if not re.fullmatch(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", text):
                raise bad("a number such as 0.5 or 1e-3")
            value = float(text)
            # TensorFlow keeps float attributes, double ones too, in 32 bits:
            # refuse what would become inf, or a subnormal or 0.
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
                    if attr is not None and attr.dtype != "int64":
                        raise self.error(arg.line, f"dimension '{dim_name}' of '{arg.name}' names "
                                                   f"the {attr.dtype} attribute on line {attr.line}; "
                                                   "only int64 attributes can size a dimension")
                    if attr is not None and isinstance(attr.default, int) and attr.default < 0:
                        raise self.error(attr.line, f"attribute '{attr.name}' sizes a dimension of "
                                                    f"'{arg.name}' (line {arg.line}), so its default "
                                                    f"must be >= 0, not {attr.default}")
                if isinstance(dim, Expr) and arg in spec.inputs:
                    missing = [n for n in dim.names if n not in bound]
                    if missing:
                        raise self.error(arg.line, f"dimension '{dim.text}' of input '{arg.name}' "
                                                   f"uses '{missing[0]}', which no input binds: "
                                                   "name it alone in some input's shape, or "
                                                   "declare '@attr int64 " + missing[0] + "'")

    def check_grad_names(self, spec: OpSpec) -> None:
        if not has_gradient(spec):
            return
        generated = {f"grad_{a.name}" for a in grad_inputs(spec) + grad_outputs(spec)}
        for arg in spec.inputs + spec.outputs:
            if arg.name in generated:
                raise self.error(arg.line, f"argument name '{arg.name}' clashes with the gradient "
                                           f"op {spec.name}Grad, which names its gradient "
                                           "arguments grad_<name>: rename it")


    def check_generated_names(self, spec: OpSpec) -> None:
        """The kernel derives C++ names from the spec's names (y_shape, x_1,
        alpha_: kernel.cc.j2); a spec name equal to one of them would be
        declared twice, or hide the member."""
        derived: dict[str, str] = {}
        for arg in spec.outputs:
            if arg.rank and not is_dynamic(spec, arg):  # allocated in Prepare
                derived[f"{arg.name}_shape"] = f"output '{arg.name}'"
        for arg in spec.inputs + spec.outputs:
            for axis, dim in enumerate(arg.shape):
                if isinstance(dim, Expr):
                    derived[f"{arg.name}_{axis}"] = f"dimension {axis} of '{arg.name}'"
        for attr in spec.attrs:
            derived[f"{attr.name}_"] = f"attribute '{attr.name}'"
        user: dict[str, int] = {a.name: a.line for a in spec.inputs + spec.outputs + spec.attrs}
        for arg in spec.inputs + spec.outputs:
            for dim in arg.shape:
                for n in dim_names(dim):
                    user.setdefault(n, arg.line)
        for name, line in sorted(user.items(), key=lambda item: item[1]):
            if name in derived:
                raise self.error(line, f"name '{name}' clashes with the name the generated kernel "
                                       f"gives {derived[name]}: rename it")


def dim_names(dim: Dim) -> list[str]:
    """The dimension names a shape entry uses."""
    if isinstance(dim, str):
        return [dim]
    if isinstance(dim, Expr):
        return list(dim.names)
    return []


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


# ---------------------------------------------------------------- spec analysis

@dataclass(frozen=True)
class DimBinding:
    """Where a named dimension gets its value: an int64 attribute, or axis
    ``axis`` of input ``arg`` (the first input that names it alone)."""
    name: str
    attr: Optional[str] = None
    arg: Optional[str] = None
    axis: int = 0


def dim_bindings(spec: OpSpec) -> dict[str, DimBinding]:
    """Named dimensions whose value is known before the Julia call, in binding order."""
    out: dict[str, DimBinding] = {}
    for attr in spec.attrs:
        if attr.dtype == "int64":
            out[attr.name] = DimBinding(attr.name, attr=attr.name)
    for arg in spec.inputs:
        for axis, dim in enumerate(arg.shape):
            if isinstance(dim, str) and dim not in out:
                out[dim] = DimBinding(dim, arg=arg.name, axis=axis)
    return out


def is_dynamic(spec: OpSpec, arg: Arg) -> bool:
    """An output the kernel cannot allocate before the call (a dim it cannot compute)."""
    bound = dim_bindings(spec)
    for dim in arg.shape:
        if dim is None:
            return True
        if isinstance(dim, str) and dim not in bound:
            return True
        if isinstance(dim, Expr) and any(n not in bound for n in dim.names):
            return True
    return False


def is_float(arg: Arg) -> bool:
    """A float (differentiable) dtype: double or float (contract.DTYPES, kind "float")."""
    return contract.by_spec(arg.dtype).kind == "float"


def grad_inputs(spec: OpSpec) -> tuple[Arg, ...]:
    """Inputs that get a gradient (the float ones), in spec order."""
    return tuple(a for a in spec.inputs if is_float(a))


def grad_outputs(spec: OpSpec) -> tuple[Arg, ...]:
    """Outputs whose incoming gradient the gradient op takes (the float ones)."""
    return tuple(a for a in spec.outputs if is_float(a))


def has_gradient(spec: OpSpec) -> bool:
    """A gradient op exists when some float output depends on some float input."""
    return bool(grad_inputs(spec)) and bool(grad_outputs(spec))


def op_types(spec: OpSpec) -> tuple[str, ...]:
    """The op types the op's library registers: the op, and <Op>Grad when it has a gradient."""
    return (spec.name, f"{spec.name}Grad") if has_gradient(spec) else (spec.name,)
