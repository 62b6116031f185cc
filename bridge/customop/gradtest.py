"""The gradient test of a custom op: ``tfbridge gradtest DIR`` and the
``gradtest.py`` each build writes beside the op's library.

The generated script holds sample inputs made from the spec (small random
floats or complex numbers, small integers, the string ``"a"``: each kind's
sample in ``bridge/julia/contract.py``'s ``KINDS``) and calls :func:`main`,
which lets the command line replace any of them, differentiates the
differentiable (float and complex) inputs only (the others stay as given),
and runs :func:`bridge.gradcheck`::

    tfbridge gradtest ops/sinkhorn --input iter=20
    tfbridge gradtest ops/sinkhorn --inputs inputs.npz     # arrays named like the inputs
    tfbridge gradtest ops/sinkhorn --inputs inputs.py      # a file defining them

Exit status: 0 PASS (or LINEAR: the op is linear along the direction and
its gradient exact there), 1 FAIL (a wrong or non-finite gradient), 2 the
test could not run: bad inputs, an op that fails on them or returns NaN or
Inf, an op whose outputs do not change along the direction (CONSTANT), or
one without a gradient (the reason is printed, never a traceback).
"""
from __future__ import annotations

import argparse
import ast
import runpy
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from bridge.julia import contract as julia_contract
from .model import Arg, Attr, OpSpec

__all__ = ["main", "GradtestError", "read_inputs_file", "parse_assignment", "apply_given"]

PASS, FAIL, ERROR = 0, 1, 2


class GradtestError(Exception):
    """The gradient test cannot run: bad given inputs, an op that fails on them."""


def _arguments(spec: OpSpec) -> dict[str, Arg | Attr]:
    return {**{a.name: a for a in spec.inputs}, **{t.name: t for t in spec.attrs}}


def _choices(spec: OpSpec) -> str:
    inputs = ", ".join(a.name for a in spec.inputs)
    attrs = ", ".join(t.name for t in spec.attrs)
    return f"inputs: {inputs}" + (f"; attributes: {attrs}" if attrs else "")


def read_inputs_file(path: Path, spec: OpSpec) -> dict[str, Any]:
    """The values an ``--inputs`` file gives: an ``.npz`` (arrays named like
    the op's inputs and attributes) or a ``.py`` file (its global variables
    of those names; others are ignored)."""
    if not path.is_file():
        raise GradtestError(f"--inputs {path}: no such file")
    known = _arguments(spec)
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as archive:
                values = {name: archive[name] for name in archive.files}
        except (OSError, ValueError) as exc:
            raise GradtestError(f"--inputs {path}: not a readable .npz file ({exc})") from None
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise GradtestError(f"--inputs {path} holds {', '.join(unknown)}, which {spec.name} does not take "
                                f"({_choices(spec)})")
        return values
    if path.suffix == ".py":
        try:
            namespace = runpy.run_path(str(path))
        except Exception as exc:  # the user's file: any error is theirs to see, without our traceback
            raise GradtestError(f"--inputs {path} failed to run: {type(exc).__name__}: {exc}") from None
        values = {name: namespace[name] for name in known if name in namespace}
        if not values:
            raise GradtestError(f"--inputs {path} defines none of {spec.name}'s {_choices(spec)}")
        return values
    raise GradtestError(f"--inputs {path}: expected an .npz file or a .py file")


def parse_assignment(text: str, spec: OpSpec) -> tuple[str, Any]:
    """``NAME=VALUE`` from ``--input``: VALUE a Python literal (``3``,
    ``[1, 2]``, ``"text"``, ``True``); for a string input or attribute, any
    other text is taken as the string itself."""
    name, sep, value = text.partition("=")
    name = name.strip()
    known = _arguments(spec)
    if not sep or not name:
        raise GradtestError(f"--input {text!r}: expected NAME=VALUE, e.g. --input {next(iter(known))}=...")
    if name not in known:
        raise GradtestError(f"--input {name}: {spec.name} has no input or attribute of that name "
                            f"({_choices(spec)})")
    try:
        return name, ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        if known[name].dtype.kind == "string":
            return name, value
        raise GradtestError(f"--input {name}={value}: not a Python literal (a number, a list of numbers, "
                            "True/False or a quoted string)") from None


def _as_input(arg: Arg, value: Any, spec: OpSpec) -> np.ndarray:
    """``value`` as the array the input takes, or GradtestError naming it."""
    dtype = arg.dtype
    try:
        array = np.asarray(value, dtype=object if dtype.np_dtype is None else dtype.np_dtype)
    except (TypeError, ValueError) as exc:
        raise GradtestError(f"input '{arg.name}' of {spec.name} is {arg.dtype}: cannot use {value!r} ({exc})") \
            from None
    if array.ndim != len(arg.shape):
        raise GradtestError(f"input '{arg.name}' of {spec.name} has rank {len(arg.shape)} in {spec.path} "
                            f"({arg.dtype} {arg.name}({', '.join(_dim(d) for d in arg.shape)})), "
                            f"got rank {array.ndim} (shape {array.shape})")
    return array


def _dim(dim: Any) -> str:
    return "?" if dim is None else str(getattr(dim, "text", dim))


def apply_given(spec: OpSpec, inputs: Mapping[str, Any], attrs: Mapping[str, Any],
                given: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The sample ``inputs`` and ``attrs`` with the ``given`` values in their
    place, each input converted to its dtype and checked for its rank."""
    known = _arguments(spec)
    inputs, attrs = dict(inputs), dict(attrs)
    for name, value in given.items():
        if isinstance(known.get(name), Arg):
            inputs[name] = value
        elif name in known:
            attrs[name] = value
        else:
            raise GradtestError(f"{spec.name} has no input or attribute '{name}' ({_choices(spec)})")
    arrays = {a.name: _as_input(a, inputs[a.name], spec) for a in spec.inputs}
    return arrays, attrs


def _parser(op: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradtest", description=f"gradient test of {op}: bridge.gradcheck along a random direction of "
                                     "its differentiable inputs (the other inputs stay as given)")
    parser.add_argument("--plot", metavar="PATH", help="write the log-log convergence plot (PNG) here")
    parser.add_argument("--order", type=int, choices=(1, 2), default=1,
                        help="1: the gradient (default); 2: the Hessian too, from the gradient op's own gradient")
    parser.add_argument("--inputs", metavar="FILE", type=Path,
                        help="values for inputs and attributes: an .npz of arrays named like them, or a "
                             ".py file defining them")
    parser.add_argument("--input", metavar="NAME=VALUE", action="append", default=[],
                        help="one input's or attribute's value, a Python literal (repeatable; wins over "
                             "--inputs)")
    return parser


def main(op_dir: Union[str, Path], inputs: Mapping[str, Any], attrs: Mapping[str, Any],
         argv: Optional[Sequence[str]] = None, *, built_from: Optional[Path] = None) -> int:
    """Run the gradient test of the op in ``op_dir`` on its sample ``inputs``
    and ``attrs`` (by spec name), replaced by what the command line gives;
    print the op folder tested, the verdict, and return the exit status (0
    PASS, LINEAR or, for ``--order 2``, QUADRATIC; 1 FAIL; 2 could not run
    or could not tell, with the reason printed).  ``built_from``: the spec
    the samples were generated from (the build folder's copy); a folder
    whose spec has changed since is not tested with them."""
    from bridge.grad.gradient_check import CANNOT_TEST, CONSTANT, FAIL as FAILED, gradcheck, write_plot
    from bridge.grad.check_verdict import NOT_TWICE_DIFFERENTIABLE
    from . import SPEC_FILE, load, parse_file
    from .spec import grad_inputs, grad_outputs, has_gradient, snake_case

    op_dir = Path(op_dir).resolve()
    spec = parse_file(op_dir / SPEC_FILE)
    args = _parser(spec.name).parse_args(argv)
    print(f"gradtest {spec.name}: op folder {op_dir}")
    if built_from is not None and built_from.is_file() and built_from.read_text() != spec.source:
        print(f"gradtest {spec.name}: {op_dir / SPEC_FILE} has changed since this script was generated "
              f"(from {built_from}): run `tfbridge gradtest {op_dir}`, which builds the op again and runs "
              "the script of the new build")
        return ERROR
    if not has_gradient(spec):
        print(f"gradtest {spec.name}: cannot test: {no_gradient_reason(spec)}")
        return ERROR
    try:
        given: dict[str, Any] = {}
        if args.inputs is not None:
            given.update(read_inputs_file(args.inputs, spec))
        given.update(parse_assignment(text, spec) for text in args.input)
        values, attr_values = apply_given(spec, inputs, attrs, given)
    except GradtestError as exc:
        print(f"gradtest {spec.name}: {exc}")
        return ERROR
    try:
        function = getattr(load(op_dir), snake_case(spec.name))
    except Exception as exc:  # a build or load error, already worded for the user
        print(f"gradtest {spec.name}: the op could not be built or loaded: {exc}")
        return ERROR
    floats = [a.name for a in grad_inputs(spec)]
    keywords = _keywords(spec, attr_values)

    def op(*float_values):
        merged = {**values, **dict(zip(floats, float_values))}
        return function(*[merged[a.name] for a in spec.inputs], **keywords)

    try:
        result = gradcheck(op, [values[name] for name in floats], names=floats, order=args.order,
                                  output_names=[a.name for a in grad_outputs(spec)])
    except Exception as exc:  # the op failed on these inputs: say so, and how to give others
        message = str(exc).strip() or type(exc).__name__
        print(f"gradtest {spec.name}: running the op failed: {type(exc).__name__}: {message}\n"
              f"The inputs not given on the command line are samples ({_sample_note(spec)}); give valid "
              f"ones with --input NAME=VALUE or --inputs FILE (.npz or .py).")
        return ERROR
    print(f"{spec.name}: {result}")
    samples = f"The inputs not given on the command line are samples ({_sample_note(spec)}); "
    if result.verdict == CONSTANT or (result.verdict == CANNOT_TEST and not result.evaluated
                                      and not result.message.startswith(NOT_TWICE_DIFFERENTIABLE)):
        print(samples + f"give inputs where {spec.name} is finite and depends on its differentiable inputs "
                        "with --input NAME=VALUE or --inputs FILE (.npz or .py).")
    elif result.verdict == CANNOT_TEST and result.evaluated:
        print(samples + "others (--input NAME=VALUE or --inputs FILE, .npz or .py) may leave the test steps "
                        "to measure.")
    if args.plot:
        if not result.evaluated:
            print("convergence plot skipped: no step was evaluated")
        else:
            try:
                print(f"convergence plot: {write_plot(result, args.plot)}")
            except ImportError as exc:  # the verdict stands without its picture
                print(f"convergence plot skipped: {exc}")
    if result.passed:
        return PASS
    return FAIL if result.verdict == FAILED else ERROR


def no_gradient_reason(spec: OpSpec) -> str:
    """Why ``spec`` has no gradient op to test."""
    from .analysis import differentiable_types
    return (f"{spec.name} has no gradient to test: it needs a differentiable ({differentiable_types()}) input "
            f"and output in {spec.path}")


def _sample_note(spec: OpSpec) -> str:
    kinds = {a.dtype.kind for a in spec.inputs}
    return ", ".join(k.sample_note for k in julia_contract.KINDS if k.name in kinds)


def _keywords(spec: OpSpec, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes as the op function's keyword arguments (it renames
    parameters that would shadow Python names, as the op generator does)."""
    from bridge.ops.opgen import safe_name

    params: dict[str, str] = {}
    for name in [a.name for a in spec.inputs] + [t.name for t in spec.attrs]:
        params[name] = safe_name(name, params.values())
    return {params[name]: value for name, value in attrs.items()}
