"""Mistakes in an op's Julia file that ``customop.load`` catches before the
op's first run, each with its fix in the message (the Julia side is
julia/TFBridge/checks.jl):

* an output rebound with ``=`` in the forward function (``y = 2x`` where
  ``y .= 2x`` was meant), found by parsing the file with Julia's parser,
  before any of its code runs;
* a forward or backward function the file does not define, one without a
  method taking the arguments the kernel passes, or a name that resolves to
  a function of Base or another module rather than the op's own.

And what a build announces: an output dynamic only because its size is ``?``.
"""
from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

from .analysis import dim_bindings, grad_inputs, grad_outputs, has_gradient, is_dynamic
from .dims import dim_names
from .errors import SpecError
from .model import Arg, Expr, OpSpec

__all__ = ["JuliaFunctionError", "MissingBackwardWarning", "DynamicOutputWarning", "check_output_assignments",
           "check_functions", "forward_parameters", "backward_parameters", "function_line",
           "announce_unsized_outputs"]


class JuliaFunctionError(ValueError):
    """The op's Julia file does not give what its spec names, or writes an
    output in a way that leaves it unset; the message names the file or spec
    line and the fix."""


class MissingBackwardWarning(UserWarning):
    """The op's Julia file defines no backward function: the op runs, its
    gradient op fails when it runs."""


class DynamicOutputWarning(UserWarning):
    """An output is dynamic only because its spec gives a ``?`` for its size."""


def forward_parameters(spec: OpSpec) -> list[str]:
    """The forward function's parameters, as the kernel passes them: outputs, inputs, attributes."""
    return [a.name for a in spec.outputs + spec.inputs] + [t.name for t in spec.attrs]


def backward_parameters(spec: OpSpec) -> list[str]:
    """The backward function's: gradients out, gradients in, outputs, inputs, attributes."""
    return ([f"grad_{a.name}" for a in grad_inputs(spec) + grad_outputs(spec)]
            + forward_parameters(spec)[:len(spec.outputs) + len(spec.inputs)] + [t.name for t in spec.attrs])


_NEWLINE = re.compile(r"\r\n|\r|\n")


def function_line(spec: OpSpec, role: str) -> str:
    """``path:line`` of the spec line naming the ``role`` ("forward",
    "backward") function, and how: its directive, or the op name it defaults to."""
    for number, line in enumerate(_NEWLINE.split(spec.source), start=1):
        words = line.split("#", 1)[0].split()
        if words and words[0] == f"@{role}":
            return f"{spec.path}:{number}"
    default = "snake_case of the op name" if role == "forward" else "the forward function's name + _grad"
    return f"{spec.path}:{spec.line} (no @{role} line: the name is {default})"


def check_output_assignments(spec: OpSpec, source: Path) -> None:
    """Refuse a forward function that rebinds an output parameter (``y = ...``),
    parsing ``source`` with Julia's parser (no code of it runs)."""
    from bridge import julia

    if not spec.outputs:
        return
    bound = dim_bindings(spec)
    dynamic = "".join("1" if is_dynamic(spec, a, bound) else "0" for a in spec.outputs)
    problem = julia.call("TFBridge.check_output_assignments", str(source), spec.forward, len(spec.outputs), dynamic)
    if problem:
        raise JuliaFunctionError(f"op {spec.name}: {problem}")


def check_functions(spec: OpSpec, source: Path) -> None:
    """After ``source`` was included: the forward function (and the backward
    one, where the op has a gradient) exists, is the op file's own, and has a
    method taking the kernel's arguments.  A missing backward function is a
    MissingBackwardWarning (the op runs; its gradient op would fail)."""
    from bridge import julia

    roles = [("forward", spec.forward, forward_parameters(spec))]
    if has_gradient(spec) and not spec.gradient:  # @gradient forwarddiff: the bridge writes it (forwarddiff.py)
        roles.append(("backward", spec.backward, backward_parameters(spec)))
    for role, name, params in roles:
        problem = julia.call("TFBridge.check_function", str(source), name, role, len(params), ", ".join(params),
                             function_line(spec, role))
        if not problem:
            continue
        if role == "backward" and " is not defined after including " in problem:
            warn_at_caller(f"op {spec.name}: {problem}; until then, its gradient op {spec.name}Grad fails when "
                           "it runs", MissingBackwardWarning)
            continue
        raise JuliaFunctionError(f"op {spec.name}: {problem}")


def unsized_outputs(spec: OpSpec) -> list[str]:
    """What a build announces about the outputs dynamic only because a dimension is ``?``
    (with each ``?`` named, every dimension would be known before the call): one message
    for the op, or none.

    It suggests no input to size an output after: a spec says how sizes relate only
    where it names them, and ADCME's specs, all ``?``, name none (an output as long as
    an input of its rank is as likely as one as long as the rows a filter kept, or of
    the rows of two inputs)."""
    bound = dim_bindings(spec)
    unsized = []
    for out in spec.outputs:
        if None not in out.shape or not is_dynamic(spec, out, bound):
            continue
        if any(d is not None and is_dynamic(spec, Arg(out.name, out.dtype, (d,), out.line), bound)
               for d in out.shape):
            continue  # dynamic for another reason too (a name nothing binds)
        unsized.append(out)
    if not unsized:
        return []
    shown = [f"{_shown(out)} (line {out.line})" for out in unsized]
    what = (f"output {shown[0]} is" if len(shown) == 1
            else f"outputs {', '.join(shown[:-1])} and {shown[-1]} are")
    first = unsized[0].name
    return [f"{spec.path}:{unsized[0].line}: op {spec.name}: {what} dynamic only because of '?': Julia "
            f"assigns {'it' if len(shown) == 1 else 'each'} ({first}[] = A), which costs an array of Julia's "
            "and a copy of it, and leaves the op without a compiled entry and the output without a static "
            "shape. Where an output's size follows from the inputs' sizes, name those dimensions in the spec "
            "(as x(n, d), y(m, d) and z(n, m) -> output); where only the values decide it, '?' is right "
            "(filter bridge.customop.DynamicOutputWarning)"]


def _shown(arg: Arg) -> str:
    dims = ("?" if d is None else d.text if isinstance(d, Expr) else str(d) for d in arg.shape)
    return f"{arg.name}({', '.join(dims)})"


def check_output_expressions(spec: OpSpec) -> None:
    """Refuse, naming the line, an output dimension computed from a name that
    nothing binds before the call (``y(2*m)``, ``m`` in no input's shape and
    no attribute): the kernel cannot compute it, and Julia's result cannot be
    checked against it."""
    bound = dim_bindings(spec)
    for out in spec.outputs:
        for dim in out.shape:
            missing = [n for n in dim_names(dim) if n not in bound] if isinstance(dim, Expr) else []
            if missing:
                raise SpecError(spec.path, out.line,
                                f"dimension '{dim.text}' of output '{out.name}' uses '{missing[0]}', which no "
                                "input or int64 attribute binds: name it alone in an input's shape, declare "
                                f"'@attr int64 {missing[0]}', or write '?' for a size the Julia function "
                                f"chooses (it assigns {out.name}[] = A)")


def announce_unsized_outputs(spec: OpSpec) -> None:
    """Warn (DynamicOutputWarning), naming the spec's lines, about the outputs dynamic only
    because of a ``?``; the warning points at the user's call (``customop.load``/``build``)."""
    for message in unsized_outputs(spec):
        warn_at_caller(message, DynamicOutputWarning)


_BRIDGE = str(Path(__file__).resolve().parents[1]) + os.sep


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside the bridge package: the user's
    call, whichever of the bridge's functions led to it (``skip_file_prefixes`` of Python
    3.12, which 3.11 lacks)."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_BRIDGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
