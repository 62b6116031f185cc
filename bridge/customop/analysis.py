"""What the code generator and the loader derive from a parsed spec: where
each named dimension gets its value, which outputs are dynamic, which
arguments have gradients, and the op types an op's library registers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from bridge.julia import contract
from .model import Arg, Attr, Expr, OpSpec

__all__ = ["DimBinding", "dim_bindings", "sizes_dimensions", "is_dynamic", "is_differentiable",
           "differentiable_types", "grad_inputs", "grad_outputs", "has_gradient", "op_types", "FORWARDDIFF_MODULE",
           "generated_backward", "second_backward"]

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
        if sizes_dimensions(attr):
            out[attr.name] = DimBinding(attr.name, attr=attr.name)
    for arg in spec.inputs:
        for axis, dim in enumerate(arg.shape):
            if isinstance(dim, str) and dim not in out:
                out[dim] = DimBinding(dim, arg=arg.name, axis=axis)
    return out


def sizes_dimensions(attr: Attr) -> bool:
    """An attribute that can size a dimension: an integer one (int64)."""
    return attr.dtype.kind == "int"


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


def is_differentiable(arg: Arg) -> bool:
    """A differentiable dtype (contract.DType.differentiable: float or complex)."""
    return arg.dtype.differentiable


def differentiable_types() -> str:
    """The kinds of spec types gradients flow through, for messages: 'float or complex'."""
    kinds = list(dict.fromkeys(d.kind for d in contract.DTYPES if d.differentiable))
    return " or ".join(kinds)


def grad_inputs(spec: OpSpec) -> tuple[Arg, ...]:
    """Inputs that get a gradient (the differentiable ones), in spec order."""
    return tuple(a for a in spec.inputs if is_differentiable(a))


def grad_outputs(spec: OpSpec) -> tuple[Arg, ...]:
    """Outputs whose incoming gradient the gradient op takes (the differentiable ones)."""
    return tuple(a for a in spec.outputs if is_differentiable(a))


def has_gradient(spec: OpSpec) -> bool:
    """A gradient op exists when some differentiable output depends on some differentiable input."""
    return bool(grad_inputs(spec)) and bool(grad_outputs(spec))


def op_types(spec: OpSpec) -> tuple[str, ...]:
    """The op types the op's library registers: the op, <Op>Grad when it has a gradient, and
    <Op>GradGrad, the gradient op of <Op>Grad, when that comes from ForwardDiff (@gradient)."""
    if not has_gradient(spec):
        return (spec.name,)
    if spec.gradient:
        return spec.name, f"{spec.name}Grad", f"{spec.name}GradGrad"
    return spec.name, f"{spec.name}Grad"


#: The module of the functions <Op>Grad and <Op>GradGrad call for an op with
#: ``@gradient forwarddiff`` (julia/ForwardDiffGradients.jl, included into TFBridge).
FORWARDDIFF_MODULE = "TFBridge.ForwardDiffGradients"


def generated_backward(op: str) -> str:
    """The Julia function <Op>Grad calls for an op with ``@gradient forwarddiff``."""
    return f"{FORWARDDIFF_MODULE}.{op}Grad"


def second_backward(spec: OpSpec) -> str:
    """The Julia function <Op>GradGrad calls (an op with ``@gradient forwarddiff``)."""
    return f"{FORWARDDIFF_MODULE}.{spec.name}GradGrad"
