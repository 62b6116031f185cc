"""What the code generator and the loader derive from a parsed spec: where
each named dimension gets its value, which outputs are dynamic, which
arguments have gradients, and the op types an op's library registers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from bridge.julia import contract
from .model import Arg, Expr, OpSpec

__all__ = ["DimBinding", "dim_bindings", "is_dynamic", "is_float", "grad_inputs", "grad_outputs", "has_gradient",
           "op_types"]

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


def is_dynamic(spec: OpSpec, arg: Arg, bound: Optional[dict[str, DimBinding]] = None) -> bool:
    """An output the kernel cannot allocate before the call (a dim it cannot
    compute).  ``bound``: ``dim_bindings(spec)``, when the caller asks for
    every output (computing it per output is quadratic in the arguments)."""
    if bound is None:
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
