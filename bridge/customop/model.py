"""The parsed form of a custom_op.txt spec: what the parser produces and the
code generator consumes (spec -> generated code -> build -> load -> run)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from bridge.julia import contract

# A dimension is an int (fixed size), a str naming a dimension ("n", shared
# between arguments: every argument that names it must agree at run time), an
# Expr (simple arithmetic over named dims, e.g. n*n), or None for "?" (unknown).


@dataclass(frozen=True)
class Expr:
    """Arithmetic over named dimensions and integers, e.g. ``n*n`` or ``m+1``.

    ``text`` is normalised source (no spaces); ``names`` the dimension names used.
    Only + - * // and parentheses are allowed.
    """
    text: str
    names: tuple[str, ...]


Dim = Union[int, str, Expr, None]


@dataclass(frozen=True)
class Arg:
    """One input or output of the op."""
    name: str            # lower-case identifier, as in the spec
    dtype: contract.DType  # its row of contract.DTYPES (a spec type name given here becomes its row)
    shape: tuple[Dim, ...]  # () for a scalar
    line: int            # 1-based line in the spec file, for error messages

    def __post_init__(self):
        object.__setattr__(self, "dtype", _row(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Attr:
    """An op attribute (extension: ``@attr TYPE NAME [= DEFAULT]``)."""
    name: str
    dtype: contract.DType  # its row of contract.DTYPES, one with an AttrType (a spec type name becomes its row)
    default: Optional[object]
    line: int

    def __post_init__(self):
        object.__setattr__(self, "dtype", _row(self.dtype))


def _row(dtype: Union[str, contract.DType]) -> contract.DType:
    """The contract row of a spec type name (``double``), or the row itself."""
    return contract.by_spec(dtype) if isinstance(dtype, str) else dtype


@dataclass(frozen=True)
class OpSpec:
    name: str                        # CamelCase op name, e.g. TwoLayer
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    attrs: tuple[Attr, ...] = ()
    forward: str = ""                # Julia function: f, f! or MyModule.f (a module Main reaches);
                                     #   default snake_case(name)
    backward: str = ""               # Julia gradient function; default forward + "_grad"
    path: str = "custom_op.txt"      # where the spec came from, for messages
    source: str = field(default="", compare=False)  # the spec text, for cache keys
    line: int = 1                    # the line of the op name, for messages about it
    language: str = ""               # "julia" or "fortran" (@language); "" decides by the op folder's
                                     #   files (bridge.customop.fortran.resolve_language)
    language_line: int = 0           # the line of @language, for messages about it
    gradient: str = ""               # "forwarddiff" (@gradient): the gradient op differentiates the forward
                                     #   function with ForwardDiff; "": the backward function is the user's
    gradient_line: int = 0           # the line of @gradient, for messages about it
