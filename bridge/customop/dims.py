"""The dimension-expression language of custom_op.txt shapes.

A shape entry is ``?``, a size, a name, or arithmetic over names and integers
with ``+ - * //`` and parentheses (``(n*n)``, ``(m+1)``, ``((n+1)//2)``).
Here: its tokenizer and parser (:func:`parse_expr`, refusing what the
generated C++ could not compute in int64), its evaluator (:func:`evaluate`,
``//`` floors like Python), its renderer (:func:`render_expr`, spec text or
C++) and the conversion of a parsed expression to a shape entry
(:class:`bridge.customop.model.Expr`).  Errors are :class:`ExprError`; the
line parser (:mod:`bridge.customop.spec`) turns them into SpecErrors that
name the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional, Union

from .errors import show
from .model import Dim, Expr
from .reserved import MAX_NAME, NAME

__all__ = ["Num", "Name", "BinOp", "Node", "ExprError", "parse_expr", "evaluate", "render_expr", "divisors",
           "to_dim", "dim_names", "MAX_EXPR_TOKENS", "MAX_EXPR_DEPTH", "INT64_MAX"]

MAX_EXPR_TOKENS = 200
MAX_EXPR_DEPTH = 32
INT64_MAX = 2**63 - 1


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


class ExprError(Exception):
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
            if len(digits) > 19 or int(digits) > INT64_MAX:  # len first: int() refuses > 4300 digits
                raise ExprError(f"{show(number)} does not fit in 64 bits (at most {INT64_MAX})",
                                syntax=False)
            out.append(("num", digits))
        elif name is not None:
            out.append(("name", name))
        elif op is not None:
            out.append(("op", op))
        elif other is not None:
            hint = "; use // for integer division" if other == "/" else ""
            raise ExprError(f"unknown syntax at '{show(other)}'{hint}")
        if len(out) > MAX_EXPR_TOKENS:
            raise ExprError(f"expression too long: more than {MAX_EXPR_TOKENS} names, integers "
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
            raise ExprError("expression ends where a name, an integer or '(' was expected")
        pos += 1
        kind, value = tok
        if kind == "num":
            return Num(int(value))
        if kind == "name":
            if not NAME.fullmatch(value):
                raise ExprError(f"dimension name '{show(value)}' must be lower-case "
                                "(a letter, then letters, digits or '_')", syntax=False)
            if len(value) > MAX_NAME:
                raise ExprError(f"dimension name '{show(value)}' has {len(value)} characters: "
                                f"at most {MAX_NAME}", syntax=False)
            return Name(value)
        if value == "(":
            nonlocal depth
            depth += 1
            if depth > MAX_EXPR_DEPTH:
                raise ExprError(f"parentheses nested more than {MAX_EXPR_DEPTH} deep", syntax=False)
            inner = sum_()
            if peek() != ("op", ")"):
                raise ExprError("missing ')'")
            pos += 1
            depth -= 1
            return inner
        raise ExprError(f"unexpected '{show(value)}' where a name, an integer or '(' was expected")

    def term() -> Node:
        nonlocal pos
        left = atom()
        while (tok := peek()) in (("op", "*"), ("op", "//")):
            pos += 1
            right = atom()
            if tok[1] == "//" and right == Num(0):
                raise ExprError("division by zero", syntax=False)
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
        raise ExprError("empty dimension")
    node = sum_()
    if pos != len(toks):
        raise ExprError(f"unexpected '{show(toks[pos][1])}'")
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
        raise ExprError("division by zero", syntax=False)
    if left is None or right is None:
        return None
    value = evaluate(node, {})
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise ExprError(f"'{render_expr(node)}' = {value} does not fit in 64 bits", syntax=False)
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


def to_dim(node: Node) -> Dim:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return node.name
    if not _names(node):  # constant arithmetic folds to a size
        return evaluate(node, {})
    names = tuple(dict.fromkeys(_names(node)))
    return Expr(text=render_expr(node), names=names)


def dim_names(dim: Dim) -> list[str]:
    """The dimension names a shape entry uses."""
    if isinstance(dim, str):
        return [dim]
    if isinstance(dim, Expr):
        return list(dim.names)
    return []
