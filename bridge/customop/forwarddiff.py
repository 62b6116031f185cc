"""Gradients from ForwardDiff: what ``customop.load`` does for an op whose
spec says ``@gradient forwarddiff`` (docs/guides/julia-ops.md, "Gradients from ForwardDiff").

Such an op has no backward function.  Its gradient op, ``<Op>Grad``, and the
gradient op of that, ``<Op>GradGrad``, call functions the build generates
(``<Op>_gradient.jl``, from templates/forwarddiff.jl.j2) into the Julia
module ``TFBridge.ForwardDiffGradients`` (julia/ForwardDiffGradients.jl),
which run the op's forward function on ForwardDiff's dual numbers.  Loading
such an op:

1. ``require``: ForwardDiff must load, or JuliaPackageError says how to
   install it, before any of the op's Julia code runs;
2. ``define``: includes the module into TFBridge (once per process; an op
   image may hold it already) and the op's generated file into it;
3. ``check``: refuses (JuliaFunctionError) a forward function that cannot
   take dual numbers, naming the line and the two fixes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from bridge.platform import paths
from . import codegen
from .analysis import FORWARDDIFF_MODULE, grad_inputs, grad_outputs
from .checks import JuliaFunctionError
from .environment import JuliaPackageError, how_to_add
from .model import OpSpec

__all__ = ["PACKAGE", "MODULE_FILE", "gradient_source", "gradient_file_name", "require", "define", "check",
           "gradient_line"]

PACKAGE = "ForwardDiff"
#: The Julia module of the gradient ops' functions, included into TFBridge.
MODULE_FILE = "ForwardDiffGradients.jl"


def gradient_source(spec: OpSpec) -> Optional[str]:
    """Julia source defining the functions of <Op>Grad and <Op>GradGrad of an
    op with ``@gradient forwarddiff`` (inside TFBridge.ForwardDiffGradients,
    from templates/forwarddiff.jl.j2, with codegen's context); None for other
    ops."""
    ctx = codegen.context(spec)
    if not ctx["second_grad"]:
        return None
    position = {id(a): i for i, a in enumerate(spec.inputs)}
    out_position = {id(a): i for i, a in enumerate(spec.outputs)}

    def vector(items, element: str) -> str:  # a Julia vector literal, typed when empty
        return ("" if items else element) + "[" + ", ".join(str(i) for i in items) + "]"
    inputs, outputs = ctx["inputs"], ctx["outputs"]
    layout = {
        "input_names": vector([f":{a.name}" for a in inputs], "Symbol"),
        "input_types": vector([a.julia_type for a in inputs], "DataType"),
        "input_ranks": vector([a.rank for a in inputs], "Int"),
        "output_names": vector([f":{a.name}" for a in outputs], "Symbol"),
        "output_types": vector([a.julia_type for a in outputs], "DataType"),
        "output_ranks": vector([a.rank for a in outputs], "Int"),
        "attr_types": vector([t.julia_type for t in ctx["attrs"]], "DataType"),
        "differentiable_inputs": vector([position[id(a)] + 1 for a in grad_inputs(spec)], "Int"),
        "differentiable_outputs": vector([out_position[id(a)] + 1 for a in grad_outputs(spec)], "Int"),
        "dynamic": vector(["true" if a.dynamic else "false" for a in outputs], "Bool"),
    }
    return codegen.render("forwarddiff.jl.j2", spec, layout=layout)


def gradient_file_name(spec: OpSpec) -> str:
    """Where a build puts gradient_source(spec), beside the op's library."""
    return f"{spec.name}_gradient.jl"


def gradient_line(spec: OpSpec) -> str:
    """``path:line`` of the spec's ``@gradient`` line."""
    return f"{spec.path}:{spec.gradient_line}"


def require(spec: OpSpec, directory: Path) -> None:
    """Raise JuliaPackageError, naming the spec line and how to install it,
    unless Julia can load ForwardDiff (from the user's environments, the op
    folder's, or the depot named by TFBRIDGE_JULIA_DEPOT)."""
    from bridge import julia

    why = julia.call("TFBridge.package_problem", PACKAGE)
    if not why:
        return
    load_path = julia.eval('join(Base.LOAD_PATH, ", ")')
    depots = julia.eval('join(Base.DEPOT_PATH, ", ")')
    raise JuliaPackageError(
        f"op {spec.name} ({directory}): '@gradient forwarddiff' ({gradient_line(spec)}) differentiates the op with "
        f"the Julia package {PACKAGE}, which Julia cannot load: {why}\n(load path: {load_path}; depots: "
        f"{depots})\n" + how_to_add(directory, [PACKAGE]), [PACKAGE], directory)


def define(spec: OpSpec, generated: Path) -> None:
    """Include TFBridge.ForwardDiffGradients (once per process) and the op's
    generated functions (``generated``, beside its library) into it."""
    from bridge import julia

    if not julia.eval("isdefined(TFBridge, :ForwardDiffGradients)"):
        julia.call("TFBridge.include", str(paths.julia_dir() / MODULE_FILE))
    if not generated.is_file():
        raise RuntimeError(f"{generated} is missing from the build of {spec.name}: rebuild the op "
                           "(delete its build folder)")
    julia.call(f"{FORWARDDIFF_MODULE}.include", str(generated))


def check(spec: OpSpec) -> None:
    """Refuse a forward function that cannot take the gradient's dual numbers
    (Julia's type inference over it and the op's own functions it calls:
    julia/ForwardDiffGradients/check.jl), naming the line and the fixes."""
    from bridge import julia

    default = spec.forward[:-1] + "_grad!" if spec.forward.endswith("!") else spec.forward + "_grad"
    problem = julia.call(f"{FORWARDDIFF_MODULE}.check_op", spec.name, gradient_line(spec), default)
    if problem:
        raise JuliaFunctionError(f"op {spec.name}: {problem}")
