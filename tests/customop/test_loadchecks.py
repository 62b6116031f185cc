"""Mistakes in an op's Julia file that customop.load catches before the op's
first run, each naming the file or spec line and the fix (issue 27, item 2).
Each test shows the old behaviour is gone: a rebound output returned
uninitialised memory, a missing, misnamed or wrong-arity function was found
only at the first (gradient) run, a name of Base gave a MethodError, a
`x::Vector{Float64}` annotation a MethodError with no hint, and `y(?)` made
an output dynamic without a word.

One op, LoadProbe, is built once; its Julia functions live in a module
(`@forward LoadProbeJl.sinc`), so each test's file replaces them all."""
from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, errors, julia
from bridge.customop import checks
from support.build import toolchain_missing
from support import REPO

ROOT = REPO
MISSING = toolchain_missing()
needs_toolchain = pytest.mark.skipif(bool(MISSING), reason=f"cannot compile custom ops: {MISSING}")

# z is dynamic only because of its '?': the build announces it.
SPEC = """LoadProbe
double x(n)
double y(n) -> output
double z(?) -> output
@forward LoadProbeJl.sinc
@backward LoadProbeJl.sinc_grad
"""
# Another op name: refused before compiling, these never take LoadProbe's name.
REBIND_SPEC = SPEC.replace("LoadProbe", "LoadRebind", 1)
FORWARD = "sinc(y, z, x) = (y .= 2 .* x; z[] = [1.0]; nothing)"
BACKWARD = "sinc_grad(grad_x, grad_y, grad_z, y, z, x) = (grad_x .+= 2 .* grad_y; nothing)"


def _module(*definitions: str) -> str:
    return "module LoadProbeJl\n" + "\n".join(definitions) + "\nend\n"


def _write(folder: Path, source: str, name: str = "load_probe.jl") -> Path:
    path = folder / name
    path.write_text(source)
    return path


def _probe_graph(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3], name="x")
        y, z = ops.load_probe(x)
    return g, x, y, z


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The built op folder, and what its first load raised: its file defined no module LoadProbeJl."""
    if MISSING:
        pytest.skip(MISSING)
    folder = tmp_path_factory.mktemp("loadchecks").resolve() / "LoadProbe"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(SPEC)
    _write(folder, "# defines nothing the spec names\nprobe_helper(x) = x\n")
    with warnings.catch_warnings(record=True) as announced:
        warnings.simplefilter("always")
        customop.build(folder)  # (the announcement's line: BUILD_LINE)
    with pytest.raises(customop.JuliaFunctionError) as missing:
        customop.load(folder)
    return folder, missing.value, [w for w in announced if issubclass(w.category, customop.DynamicOutputWarning)]


BUILD_LINE = next(n for n, line in enumerate(Path(__file__).read_text().splitlines(), start=1)
                  if line.endswith("# (the announcement's line: BUILD_LINE)"))


def test_an_output_rebound_with_equals_is_refused_before_compiling_naming_file_line_and_fix(tmp_path):
    folder = tmp_path.resolve() / "LoadRebind"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(REBIND_SPEC)
    source = _write(folder, _module("global LOADCHECK_FILE_RAN = true",
                                    "function sinc(y, z, x)",
                                    "    y = sin.(x) ./ x",
                                    "    z[] = [1.0]",
                                    "end", BACKWARD), "load_rebind.jl")
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(folder)
    assert str(info.value) == (
        f"op LoadRebind: {source}:4: `y = ...` in LoadProbeJl.sinc rebinds the name y, so the output y keeps "
        "whatever its memory held (uninitialised values, and no error); write `y .= ...` instead")
    assert not (folder / "build").exists()  # refused before anything was compiled
    assert julia.eval("isdefined(Main, :LoadProbeJl) && isdefined(Main.LoadProbeJl, :LOADCHECK_FILE_RAN)") is False


def test_a_dynamic_output_rebound_is_refused_with_the_ref_fix(tmp_path):
    folder = tmp_path.resolve() / "LoadRebind"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(REBIND_SPEC)
    source = _write(folder, _module("sinc(y, z, x) = (y .= x; z = [1.0]; nothing)", BACKWARD), "load_rebind.jl")
    with pytest.raises(customop.JuliaFunctionError, match=re.escape(
            f"{source}:2: `z = ...` in LoadProbeJl.sinc rebinds the name z, so the dynamic output z is never set "
            "(it is a Ref to assign); write `z[] = ...` instead")):
        customop.load(folder)


def test_an_output_written_in_place_or_through_an_alias_is_not_refused(tmp_path):
    """`y .= ...`, `y[i] = ...`, `y = reshape(y, ...)` and a loop variable named like an output pass."""
    spec = customop.parse(SPEC, str(tmp_path / "custom_op.txt"))
    source = _write(tmp_path, _module(
        "function sinc(y, z, x)",
        "    y = reshape(y, 1, :)",
        "    y .= 2 .* x'",
        "    for y in x; y = 1; end",
        "    f = y -> (y = 2)",
        "    z[] = [1.0]",
        "end", BACKWARD))
    checks.check_output_assignments(spec, source)  # raises nothing


@needs_toolchain
def test_a_missing_forward_function_is_refused_at_load_naming_function_file_and_spec_line(probe):
    folder, error, _ = probe
    assert str(error) == (
        f"op LoadProbe: {folder / 'custom_op.txt'}:5: the forward function LoadProbeJl.sinc is not defined after "
        f"including {folder / 'load_probe.jl'} (there is no module LoadProbeJl in Main): define "
        "`function sinc(y, z, x) ... end` there, or name the function the file defines with @forward in the spec")


@needs_toolchain
def test_a_name_that_resolves_to_base_is_refused_naming_both(probe):
    folder, _, _ = probe
    source = _write(folder, _module("sinc_(y, z, x) = (y .= x; z[] = x; nothing)  # misspelt", BACKWARD))
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(folder)
    assert str(info.value) == (
        f"op LoadProbe: {folder / 'custom_op.txt'}:5: the forward function LoadProbeJl.sinc resolves to "
        f"Base.Math.sinc, a function of Base.Math, not one the op's file {source} defines: define "
        f"`function sinc(y, z, x) ... end` in {source} (it then makes a new sinc of Main.LoadProbeJl, "
        "provided nothing in Main.LoadProbeJl used sinc before), or name a function of the op's own "
        "with @forward in the spec")


@needs_toolchain
def test_a_forward_function_without_a_method_of_the_specs_arity_is_refused(probe):
    folder, _, _ = probe
    source = _write(folder, _module("sinc(y, x) = (y .= x; nothing)", BACKWARD))
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(folder)
    assert str(info.value) == (
        f"op LoadProbe: {folder / 'custom_op.txt'}:5: the forward function LoadProbeJl.sinc has methods taking 2 "
        f"arguments ({source}:2), none taking the 3 arguments the kernel passes, sinc(y, z, x): give "
        f"LoadProbeJl.sinc a method with these 3 parameters in {source}")


@needs_toolchain
def test_a_backward_function_without_a_method_of_the_specs_arity_is_refused(probe):
    folder, _, _ = probe
    _write(folder, _module(FORWARD, "sinc_grad(grad_x, grad_y) = nothing"))
    with pytest.raises(customop.JuliaFunctionError, match=re.escape(
            f"{folder / 'custom_op.txt'}:6: the backward function LoadProbeJl.sinc_grad has methods taking 2 "
            "arguments") + ".*" + re.escape("none taking the 6 arguments the kernel passes, "
                                            "sinc_grad(grad_x, grad_y, grad_z, y, z, x)")):
        customop.load(folder)


@needs_toolchain
def test_a_missing_backward_function_warns_at_load_and_the_forward_op_runs(probe):
    folder, _, _ = probe
    _write(folder, _module(FORWARD))
    with pytest.warns(customop.MissingBackwardWarning, match=re.escape(
            f"{folder / 'custom_op.txt'}:6: the backward function LoadProbeJl.sinc_grad is not defined after "
            "including")):
        ops = customop.load(folder)
    g, x, y, z = _probe_graph(ops)
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0, 3.0]}), [2.0, 4.0, 6.0])


@needs_toolchain
def test_a_method_error_against_read_only_inputs_says_how_to_annotate(probe):
    folder, _, _ = probe
    _write(folder, _module("sinc(y, z, x::Vector{Float64}) = (y .= x; z[] = x; nothing)", BACKWARD))
    ops = customop.load(folder)  # the arity is right: only the run can tell the type
    g, x, y, z = _probe_graph(ops)
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(y, {x: [1.0, 2.0, 3.0]})
    assert "MethodError: no method matching sinc(" in str(info.value)
    assert ("Hint: an op's inputs arrive as TFBridge.ReadOnlyArray <: AbstractArray (a read-only view of "
            "TensorFlow's buffer; a matrix as its transpose), not as an Array: annotate them "
            "AbstractVector{Float64} (not Vector{Float64}), or not at all") in str(info.value)


#: What the announcement says after naming the outputs: no size guessed from the inputs.
ANNOUNCED = ("which costs an array of Julia's and a copy of it, and leaves the op without a compiled entry and "
             "the output without a static shape. Where an output's size follows from the inputs' sizes, name "
             "those dimensions in the spec (as x(n, d), y(m, d) and z(n, m) -> output); where only the values "
             "decide it, '?' is right (filter bridge.customop.DynamicOutputWarning)")


@needs_toolchain
def test_an_output_dynamic_only_because_of_a_question_mark_is_announced_at_the_users_build(probe):
    folder, _, announced = probe
    assert [str(w.message) for w in announced] == [
        f"{folder / 'custom_op.txt'}:4: op LoadProbe: output z(?) (line 4) is dynamic only because of '?': "
        f"Julia assigns it (z[] = A), {ANNOUNCED}"]
    assert (announced[0].filename, announced[0].lineno) == (__file__, BUILD_LINE)  # the call, not the bridge's code


def test_the_announcement_names_only_outputs_a_question_mark_makes_dynamic():
    spec = customop.parse("Dyn\ndouble x(?)\nint32 k(m, 2)\ndouble y(?) -> output\ndouble w(q) -> output\n"
                          "double v(?, 3) -> output\ndouble u(r) -> output\n", "spec.txt")
    assert checks.unsized_outputs(spec) == [
        f"spec.txt:4: op Dyn: outputs y(?) (line 4) and v(?, 3) (line 6) are dynamic only because of '?': "
        f"Julia assigns each (y[] = A), {ANNOUNCED}",
    ]  # w(q) and u(r): dynamic through a name nothing binds, not a '?'


@pytest.mark.parametrize("text, outputs", [
    # ADCME's specs name no dimension: an output of an input's rank need not have its size.
    ("Dist\ndouble x(?,?)\ndouble y(?,?)\ndouble d(?,?) -> output\n",      # rows(x) x rows(y)
     "output d(?, ?) (line 4) is dynamic only because of '?': Julia assigns it (d[] = A)"),
    ("ZeroOutRow\nint64 indices(?,2)\ndouble vv(?)\nint64 bd(?)\nint64 oindices(?,2) -> output\n"
     "double ovv(?) -> output\n",                                           # the rows a filter kept
     "outputs oindices(?, 2) (line 5) and ovv(?) (line 6) are dynamic only because of '?': Julia assigns "
     "each (oindices[] = A)"),
])
def test_the_announcement_suggests_no_input_to_size_an_output_after(text, outputs):
    """The old announcement proposed x's shape for Dist's d and vv's for ZeroOutRow's ovv."""
    spec = customop.parse(text, "spec.txt")
    assert checks.unsized_outputs(spec) == [f"spec.txt:{spec.outputs[0].line}: op {spec.name}: {outputs}, {ANNOUNCED}"]


def test_the_announcement_points_at_the_users_call_and_the_command_prints_a_note(tmp_path):
    """customop.load and build reach the announcement through several of the bridge's frames;
    the warning is the caller's (here, this test's line).  `tfbridge` has no caller's line:
    its notes are lines of their own."""
    spec = customop.parse("Dist\ndouble x(?,?)\ndouble y(?,?)\ndouble d(?,?) -> output\n", "spec.txt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checks.announce_unsized_outputs(spec); line = sys._getframe().f_lineno  # noqa: E702
    assert [(w.category, w.filename, w.lineno) for w in caught] == [(customop.DynamicOutputWarning, __file__, line)]
    from bridge import cli
    with cli._notes_from_warnings((customop.DynamicOutputWarning,)), warnings.catch_warnings():
        warnings.simplefilter("always")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            checks.announce_unsized_outputs(spec)
    assert err.getvalue() == f"tfbridge: note: {checks.unsized_outputs(spec)[0]}\n"


CHECK_RUN = """
import sys
import numpy as np
import bridge
from bridge import customop, errors
folder = sys.argv[1]
ops = customop.load(folder)
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [3], name="x")
    y, z = ops.load_probe(x)
with bridge.Session(g) as sess:
    try:
        print("values", sess.run(y, {x: [1.0, 2.0, 3.0]}).tolist())
    except errors.InternalError as exc:
        print("error", str(exc).splitlines()[0])
"""


@needs_toolchain
def test_julia_check_mode_refuses_an_output_element_never_written(probe):
    folder, _, _ = probe
    _write(folder, _module("sinc(y, z, x) = (y[1:2] .= x[1:2]; z[] = x; nothing)  # y[3] forgotten", BACKWARD))

    def run(check: str) -> str:
        env = dict(os.environ, TFBRIDGE_JULIA_CHECK=check, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-c", CHECK_RUN, str(folder)], capture_output=True, text=True,
                              timeout=600, env=env, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.strip().splitlines()[-1]

    assert run("1") == (
        "error LoadProbe: output 'y' has 1 of 3 elements that LoadProbeJl.sinc never wrote (the first at flat "
        "index 2, in TF's row-major order): TFBRIDGE_JULIA_CHECK=1 filled the output with a signalling NaN before "
        "the call; write every element, in place: `y .= ...` writes into the output, `y = ...` only rebinds the "
        "name")
    assert run("0").startswith("values [1.0, 2.0, ")  # without it, y[3] is whatever the buffer held
    _write(folder, _module(FORWARD, BACKWARD))
    assert run("1") == "values [2.0, 4.0, 6.0]"


def test_an_output_expression_over_a_name_nothing_binds_is_a_spec_error_naming_the_line(tmp_path):
    """`y(2*m)` with `m` in no input and no attribute: refused before compiling (the generated
    kernel did not compile: `DimensionHandle 2*m = ...`)."""
    (tmp_path / "custom_op.txt").write_text("Rep2\ndouble x(n)\ndouble y(2*m) -> output\n")
    (tmp_path / "Rep2.jl").write_text("rep2(y, x) = nothing\nrep2_grad(gx, gy, y, x) = nothing\n")
    with pytest.raises(customop.SpecError) as info:
        customop.build(tmp_path, progress=lambda _: None)
    assert str(info.value) == (
        f"{tmp_path / 'custom_op.txt'}:3: dimension '2*m' of output 'y' uses 'm', which no input or int64 "
        "attribute binds: name it alone in an input's shape, declare '@attr int64 m', or write '?' for a size "
        "the Julia function chooses (it assigns y[] = A)")
    assert not (tmp_path / "build").exists() or not any((tmp_path / "build").iterdir())
