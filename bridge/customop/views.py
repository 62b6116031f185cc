"""What the templates see of a spec: one view per argument, attribute,
dimension and check, with the C++ and Julia spellings precomputed from the
contract table (bridge/julia/contract.py), so the templates hold no logic
beyond loops and ifs.  bridge/customop/codegen.py builds them from an
:class:`OpSpec` and renders the templates with them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from bridge.framework import double_attrs
from bridge.julia import contract
from .model import Attr, Expr


def camel(name: str) -> str:
    """grad_w1 -> GradW1, for C++ function names."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def shape_text(shape) -> str:
    """The spec's spelling of a shape: (h,n), (?,2), ()."""
    parts = []
    for dim in shape:
        if dim is None:
            parts.append("?")
        elif isinstance(dim, Expr):
            parts.append(dim.text)
        else:
            parts.append(str(dim))
    return "(" + ",".join(parts) + ")"


@dataclass
class DimView:
    """One axis of an argument."""
    axis: int
    kind: str                 # "any" (?), "fixed", "bound" (a known name), "free" (a name
                              # only Julia knows), "expr" (arithmetic over known names)
    text: str                 # as in the spec
    size: str = ""            # C++ int64 expression of the size in the kernel ("" if unknown)
    binds: bool = False       # kind "bound": this axis is where the name gets its value
    func: str = ""            # kind "expr": the DimFoo_0 function computing it
    params: list[str] = field(default_factory=list)  # its arguments (dimension names)


@dataclass
class ArgView:
    name: str
    dtype: contract.DType     # its row (str(): the spec type)
    tf_type: str
    cxx_type: str
    tfjl_dtype: str
    julia_type: str
    rank: int
    shape: str                # as in the spec
    dims: list[DimView]
    index: int                # position among the op's inputs, or among its outputs
    dynamic: bool = False
    is_string: bool = False
    like: str = ""            # gradient op: the forward argument this one mirrors
    like_index: int = -1      # gradient op output: the input it is shaped like

    @property
    def size_text(self) -> str:
        """Julia-style size: (h, n)."""
        return "(" + ", ".join(d.text for d in self.dims) + ("," if self.rank == 1 else "") + ")"

    def julia_doc(self, role: str) -> str:
        """What the Julia function receives for this argument and what to do
        with it, as an "output" of the function, an "input" (which a forward
        output is to the gradient function: TensorFlow's tensor, whatever
        size Julia gave a dynamic one), or a "gradient" to accumulate into
        (only what it is: the caller says what to do)."""
        t = self.julia_type
        if self.is_string:
            if role == "input":
                return "String" if self.rank == 0 else f"Array{{String}} of size {self.size_text}"
            if self.dynamic:
                return f"Ref: assign an Array{{String}} of size {self.size_text}: `{self.name}[] = A`"
            return f"Array{{String}} of size {self.size_text}, filled with \"\": set its elements"
        if self.dynamic and role == "output":
            return (f"Ref: assign a {t} array of size {self.size_text}: `{self.name}[] = A` (the output "
                    f"takes A's size, so there is nothing to write in place)")
        if self.rank == 0:
            kind = f"{t} scalar (a 0-dimensional array)"
            if role == "gradient":
                return kind
            return f"{kind}, read-only: read `{self.name}[]`" if role == "input" else f"{kind}: set `{self.name}[] = v`"
        if self.rank == 1:
            kind = f"{t} vector of length {self.dims[0].text}"
        elif self.rank == 2:
            kind = f"{t} matrix of size {self.size_text}"
        else:
            kind = f"{t} array of size {self.size_text}"
        if role == "gradient":
            return kind
        return kind + ", read-only" if role == "input" else kind + f": write it in place (`{self.name} .= ...`)"

    @property
    def gradient_doc(self) -> str:
        """What a gradient op's output (grad_<input>) is to the backward function."""
        note = self.dtype.gradient_note.format(grad=self.name, like=self.like)
        return self.julia_doc("gradient") + f", zeros on entry: add into it (`{self.name} .+= ...`)" + note

    @property
    def cxx_dims(self) -> str:
        """Brace list of the sizes of an allocatable argument."""
        return "{" + ", ".join(d.size for d in self.dims) + "}"

    @property
    def expected_dims(self) -> str:
        """Brace list for tfjl::Arg::dims of a dynamic output (-1 = any size)."""
        return "{" + ", ".join(d.size if d.size else "-1" for d in self.dims) + "}"


@dataclass
class AttrView:
    name: str
    dtype: contract.DType
    tf_decl: str              # "alpha: float = 0.5"
    cxx_type: str
    julia_type: str
    default: Optional[str]    # as the user wrote it, for comments
    bits_decl: str = ""       # carrier "float+bits": "alpha_f64bits: int = 4602678819172646912"

    @property
    def tf_decls(self) -> list[str]:
        """Its REGISTER_OP attributes: one, or a double's float and bits (contract's AttrType.carrier)."""
        return [self.tf_decl] + ([self.bits_decl] if self.bits_decl else [])

    @property
    def cxx_read(self) -> str:
        """The kernel constructor's status expression reading it into its member."""
        if self.bits_decl:
            return f'DoubleAttr(ctx, "{self.name}", "{double_attrs.bits_name(self.name)}", &{self.name}_)'
        return f'ctx->GetAttr("{self.name}", &{self.name}_)'

    @property
    def cxx_value(self) -> str:
        """CallFrame::Attr's arguments (the contract's AttrType.frame_args)."""
        return self.dtype.attr.frame_args.format(member=f"{self.name}_")


@dataclass
class DimFunction:
    """A C++ function computing one dimension expression, shared by shape
    inference and the kernel so both agree.  Its parameters are the
    dimensions' names; the expression wraps each in Size(...), so the
    arithmetic detects overflow, and declares nothing else (a dimension may
    be called anything the spec allows)."""
    name: str
    text: str                 # the spec's expression
    where: str                # "output 'y' dimension 0"
    params: list[str]
    body: str                 # C++ Size expression over params
    divisors: list[tuple[str, str]]  # (C++ Size expression, spec text) that must not be 0

    @property
    def values(self) -> str:
        """The DimValues list naming each parameter for messages: {{"m", m}, {"n", n}}."""
        return "{" + ", ".join(f'{{"{p}", {p}}}' for p in self.params) + "}"


@dataclass
class BoundDim:
    name: str
    attr: Optional[str]
    arg: Optional[str]
    axis: int

    @property
    def origin(self) -> str:
        return f"attribute '{self.attr}'" if self.attr else f"input '{self.arg}'"


@dataclass
class Check:
    """One input dimension the kernel verifies: ``arg.dim_size(axis) == expected``."""
    arg: ArgView
    dim: DimView
    expected: str             # C++ expression
    message: str              # C++ arguments of InvalidArgument(), up to "but has shape "


def attr_view(attr: Attr, sizes_dim: bool) -> AttrView:
    """The view of ``attr``; ``sizes_dim``: it sets a named dimension, so TF refuses a negative value."""
    dtype = attr.dtype
    decl = f"{attr.name}: {dtype.attr.tf_type}"
    if sizes_dim:  # TensorFlow itself then rejects a negative size
        decl += " >= 0"
    default = None
    if attr.default is not None:
        if dtype.kind == "bool":
            default = "true" if attr.default else "false"
        elif dtype.kind == "string":
            default = '\\"' + str(attr.default) + '\\"'
        else:
            default = repr(attr.default)
        # A double's float attribute holds it rounded to 32 bits: written so that TF reads back that float.
        decl += f" = {_float32_text(attr.default) if dtype.attr.carrier == 'float+bits' else default}"
        if dtype.kind == "string":
            default = '"' + str(attr.default) + '"'
    bits = ""
    if dtype.attr.carrier == "float+bits":
        bits = f"{double_attrs.bits_name(attr.name)}: int = {double_attrs.default_bits(attr.default)}"
    return AttrView(attr.name, attr.dtype, decl, dtype.attr.cxx, dtype.julia, default, bits)


def _float32_text(value: float) -> str:
    """The shortest decimal that TensorFlow's float parser reads as ``value``
    rounded to 32 bits (double_attrs.encode's float: inf where it overflows)."""
    import numpy as np
    return str(np.float32(double_attrs.encode(value)[0]))
