"""Julia functions inside modules: `@forward MyModule.f` / `@backward
MyModule.g` (and `A.B.f`, `f!`), the case of ADCME's ops whose functions a
module or package defines and exports.

The op folder's Julia file defines the module; including it puts the module
in Main, from where both call paths resolve the name: the compiled entry
(templates/entries.jl.j2) and the generic path (invoke.cc's
resolve_function, taken here by unregistering the entry).  Each test runs
real builds, Julia and TensorFlow.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import bridge
from bridge import customop, errors, julia
from bridge.customop import codegen
from support.build import op_folder, toolchain_missing

MISSING = toolchain_missing()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)

# A module that exports the op's functions, as a package would.
SCALE_SPEC = """
ModScale
double x(n)
double y(n) -> output
@attr double factor = 2.0
@forward ScaleOps.scale!
@backward ScaleOps.scale_grad!
"""
SCALE_JL = """
module ScaleOps
export scale!, scale_grad!
scale!(y, x, factor) = (y .= factor .* x; nothing)
scale_grad!(grad_x, grad_y, y, x, factor) = (grad_x .+= factor .* grad_y; nothing)
end
"""
# The same module included again, with other functions: a new module replaces it.
SCALE_JL_V2 = SCALE_JL.replace("y .= factor .* x", "y .= factor .* x .+ 100").replace(
    "grad_x .+= factor .* grad_y", "grad_x .+= 3 .* grad_y")

# Nested modules, the backward function's name by default (Outer.Inner.shift_grad);
# the Julia file is the generated stub, bodies filled in.
SHIFT_SPEC = """
NestedShift
double x(n)
double y(n) -> output
@forward Outer.Inner.shift
"""
SHIFT_FORWARD = ["y .= x .+ 1"]
SHIFT_BACKWARD = ["grad_x .+= 5 .* grad_y"]

# Names that resolve to nothing: a module Main does not have, a function its module lacks.
MISSING_SPEC = """
ModMissing
double x(n)
double y(n) -> output
@forward Nowhere.f
@backward HalfMod.not_there
"""
MISSING_JL = "module HalfMod\nother() = 1\nend\n"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    root = tmp_path_factory.mktemp("modules")
    shift_jl = codegen.julia_stub(customop.parse(SHIFT_SPEC), SHIFT_FORWARD, SHIFT_BACKWARD)
    return {"root": root,
            "scale": customop.load(op_folder(root, "ModScale", SCALE_SPEC, SCALE_JL)),
            "shift": customop.load(op_folder(root, "NestedShift", SHIFT_SPEC, shift_jl)),
            "missing": customop.load(op_folder(root, "ModMissing", MISSING_SPEC, MISSING_JL),
                                              check_functions=False)}  # missing on purpose: the run is tested


def _graph(op, **attrs):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3], name="x")
        y = op(x, **attrs)
        (dx,) = bridge.gradients(bridge.ops.sum(y, [0]), [x])
    return x, y, dx


def _run(fetches, feeds):
    """(values, compiled-entry calls they took); no constant folding."""
    config = bridge.SessionConfig()
    config.disable_meta_optimizer = True
    before = julia.entry_calls()
    with bridge.Session(fetches[0].graph, config=config) as sess:
        values = sess.run(fetches, feeds)
    return values, julia.entry_calls() - before


def _generic(op_types):
    """Unregister the ops' compiled entries: their kernels take the generic path."""
    for op_type in op_types:
        julia.register_entry(op_type, 0)


def test_the_entries_call_the_qualified_functions():
    spec = customop.parse(SCALE_SPEC)
    source = codegen.entries_source(spec)
    assert "Main.ScaleOps.scale!(args...)" in source
    assert 'TFBridge.entry_failure(e, catch_backtrace(), "ScaleOps.scale!")' in source
    assert "TFBridge.is_bound(Main, :Outer, Main.Outer) && TFBridge.is_bound(Main.Outer, :Inner, Main.Outer.Inner)" \
        in codegen.entries_source(customop.parse(SHIFT_SPEC))


@pytest.mark.parametrize("case", ["scale", "shift"])
def test_functions_in_modules_run_forward_and_backward_through_entry_and_generic_path(ops, case):
    op, op_types = {"scale": (ops["scale"].mod_scale, ["ModScale", "ModScaleGrad"]),
                    "shift": (ops["shift"].nested_shift, ["NestedShift", "NestedShiftGrad"])}[case]
    folder = ops["root"] / op_types[0]
    value = np.array([1.0, -2.0, 0.5])
    want_y, want_dx = ((2 * value, np.full(3, 2.0)) if case == "scale" else (value + 1, np.full(3, 5.0)))
    x, y, dx = _graph(op)
    (got_y, got_dx), calls = _run([y, dx], {x: value})
    assert calls == 2  # the op and its gradient op took their compiled entries
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_dx, want_dx)
    _generic(op_types)
    try:
        (got_y, got_dx), calls = _run([y, dx], {x: value})
    finally:
        customop.load(folder)  # includes and registers the entries again
    assert calls == 0
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_dx, want_dx)


def test_a_module_included_again_is_the_one_both_paths_call(ops, tmp_path):
    """Including the file again replaces the module by a new one; a compiled
    entry holds the module it was compiled against, so it checks, and calls
    the new module's function, as the generic path does.  A method redefined
    inside the module takes effect too."""
    x, y, dx = _graph(ops["scale"].mod_scale, factor=0.5)
    value = np.array([2.0, 4.0, 6.0])
    v2 = tmp_path / "scale_v2.jl"
    v2.write_text(SCALE_JL_V2)
    try:
        julia.include(v2)
        (got_y, got_dx), calls = _run([y, dx], {x: value})
        assert calls == 2
        np.testing.assert_array_equal(got_y, 0.5 * value + 100)
        np.testing.assert_array_equal(got_dx, np.full(3, 3.0))
        _generic(["ModScale", "ModScaleGrad"])
        (got_y, got_dx), calls = _run([y, dx], {x: value})
        assert calls == 0
        np.testing.assert_array_equal(got_y, 0.5 * value + 100)
        np.testing.assert_array_equal(got_dx, np.full(3, 3.0))
        customop.load(ops["root"] / "ModScale")  # entries again (includes the original module too)
        julia.eval("@eval ScaleOps scale!(y, x, factor) = (y .= factor .* x .- 1; nothing)")
        (got_y, _), calls = _run([y, dx], {x: value})
        assert calls == 2
        np.testing.assert_array_equal(got_y, 0.5 * value - 1)
    finally:
        customop.load(ops["root"] / "ModScale")


@pytest.mark.parametrize("path", ["entry", "generic"])
def test_a_missing_module_or_function_is_not_found_naming_it(ops, path):
    mod = ops["missing"]
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        y = mod.mod_missing(x)
        dx = mod.mod_missing_grad(np.ones(2), np.ones(2), x)  # the gradient op, called directly
    if path == "generic":
        _generic(["ModMissing", "ModMissingGrad"])
    try:
        with bridge.Session(g) as sess:
            with pytest.raises(errors.NotFoundError, match=re.escape(
                    "ModMissing: Julia function Nowhere.f failed: UndefVarError: Nowhere not defined: Main has no "
                    "module Nowhere, which should hold the Julia function Nowhere.f (define the module")):
                sess.run(y, {x: np.ones(2)})
            with pytest.raises(errors.NotFoundError, match=re.escape(
                    "ModMissingGrad: Julia function HalfMod.not_there failed: UndefVarError: not_there not "
                    "defined: module Main.HalfMod has no not_there, so the Julia function HalfMod.not_there "
                    "does not exist (define it in the module before the call)")):
                sess.run(dx, {x: np.ones(2)})
    finally:
        customop.load(ops["root"] / "ModMissing", check_functions=False)


def test_a_module_defined_after_load_is_found_at_the_next_call(ops):
    mod = ops["missing"]
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        y = mod.mod_missing(x)
    with bridge.Session(g) as sess:
        with pytest.raises(errors.NotFoundError, match="Main has no module Nowhere"):
            sess.run(y, {x: np.ones(2)})
        julia.eval("module Nowhere\nf(y, x) = (y .= -x; nothing)\nend")
        before = julia.entry_calls()
        np.testing.assert_array_equal(sess.run(y, {x: np.array([1.0, 2.0])}), [-1.0, -2.0])
        assert julia.entry_calls() == before + 1


def test_bridge_julia_call_says_what_is_missing(ops):
    julia.eval("module CallMod\nhere(x) = x + 1\nend\nconst NotAModule = 3")
    assert julia.call("CallMod.here", 1) == 2
    with pytest.raises(julia.JuliaError, match=r"module Main.CallMod has no gone, so the Julia function "
                                               r"CallMod.gone does not exist") as info:
        julia.call("CallMod.gone", 1)
    assert info.value.kind == 2  # not found (ERROR_KINDS in bridge/julia/contract.py)
    with pytest.raises(julia.JuliaError, match=r"Main.NotAModule is a Int64, not a module, so it holds no Julia "
                                               r"function NotAModule.f"):
        julia.call("NotAModule.f", 1)
    with pytest.raises(julia.JuliaError, match=r"UndefVarError: plain_gone not defined: no such Julia function "
                                               r"in Main"):
        julia.call("plain_gone", 1)


@pytest.mark.skipif(shutil.which("julia") is None, reason="julia executable not on PATH")
def test_the_stub_puts_each_function_in_its_modules(tmp_path):
    """tfbridge customop stub: a qualified name becomes a function inside
    `module ... end`, nested as the name says, both functions in one module
    when they share it."""
    cases = {
        "nested": ("@forward A.B.f!\n@backward A.g\n", "isdefined(A.B, :f!) && isdefined(A, :g)"),
        "shared": ("@forward M.f\n", "isdefined(M, :f) && isdefined(M, :f_grad)"),
        "apart": ("@forward P.f\n@backward Q.R.g\n", "isdefined(P, :f) && isdefined(Q.R, :g)"),
        "main_and_module": ("@backward K.g\n", "isdefined(Main, :op) && isdefined(K, :g)"),
    }
    for name, (directives, check) in cases.items():
        stub = codegen.julia_stub(customop.parse("Op\ndouble x(n)\ndouble y(n) -> output\n" + directives))
        (tmp_path / f"{name}.jl").write_text(stub)
        script = f'include({str(tmp_path / f"{name}.jl")!r}); print({check})'.replace("'", '"')
        proc = subprocess.run([shutil.which("julia"), "--startup-file=no", "-e", script],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout == "true", (name, stub, proc.stderr[-2000:])
    stub = codegen.julia_stub(customop.parse("Op\ndouble x(n)\ndouble y(n) -> output\n@forward M.f\n"))
    assert stub.splitlines().count("module M") == 1 and stub.splitlines().count("end # module M") == 1


def test_julia_function_names_in_the_spec():
    spec = customop.parse("Op\ndouble x(n)\ndouble y(n) -> output\n@forward MyModule.f!\n")
    assert (spec.forward, spec.backward) == ("MyModule.f!", "MyModule.f_grad!")
    spec = customop.parse("Op\ndouble x(n)\ndouble y(n) -> output\n@forward A.B.f\n@backward C.where\n")
    assert (spec.forward, spec.backward) == ("A.B.f", "C.where")
