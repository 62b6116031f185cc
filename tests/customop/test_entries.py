"""Compiled entries: the Julia functions generated per op (templates/entries.jl.j2)
that kernels call through C function pointers instead of jl_call.

Each test runs real builds, real Julia and real TF; where it matters the same
graph also runs through the generic path (the entry unregistered) and both
must agree to the bit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, errors, julia
from support.build import mixed_inputs, op_chain, op_folder
from support import REPO


def _make(root: Path, name: str, spec: str, source: str, check_functions: bool = True):
    folder = op_folder(root, name, spec, source)
    return customop.load(folder, check_functions=check_functions), folder


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("entries")


def _entry_pointer(folder: Path, op_type: str) -> int:
    """The entry's address, as load() registered it (re-including gives the same one)."""
    spec = customop.parse_file(folder / "custom_op.txt")
    source = customop.build(folder).parent / customop.codegen.entries_file_name(spec)
    ops = [e.op for e in customop.codegen.entries(spec)]
    return int(julia.call("include", str(source))[ops.index(op_type)])


def _run_counting(fetches, feeds=None, config=None):
    """(values, number of entry calls they took).  Grappler stays off: constant
    folding would run ops with constant inputs once more, while optimising."""
    config = config or bridge.SessionConfig()
    config.disable_meta_optimizer = True
    before = julia.entry_calls()
    with bridge.Session(fetches[0].graph if isinstance(fetches, list) else fetches.graph, config=config) as s:
        values = s.run(fetches, feeds)
    return values, julia.entry_calls() - before


MIXED_SPEC = """
Mixed
double a()
float b(n)
int32 c(p,q)
int64 d(r,s,t)
bool e(k)
double a2() -> output
float b2(n) -> output
int32 c2(p,q) -> output
int64 d2(r,s,t) -> output
bool e2(k) -> output
@attr double scale = 2.0
@attr float fscale = 0.5
@attr int64 shift = 1
@attr bool flip = true
@attr string tag = "label"
"""

MIXED_JL = """
function mixed(a2, b2, c2, d2, e2, a, b, c, d, e, scale, fscale, shift, flip, tag)
    scale isa Float64 && fscale isa Float32 && shift isa Int64 && flip isa Bool && tag isa String ||
        throw(ArgumentError("attribute types: $(typeof.((scale, fscale, shift, flip, tag)))"))
    a2[] = scale * a[] + length(tag)
    b2 .= b .* fscale
    c2 .= c .+ Int32(shift)
    for I in CartesianIndices(d)   # TF index order: d[i, j, k] is TF's d[i-1, j-1, k-1]
        d2[I] = d[I] + 100 * I[1] + 10 * I[2] + I[3]
    end
    e2 .= flip ? .!e : e
    return nothing
end
"""


def test_every_dtype_rank_and_attribute_type_through_the_entry_matches_the_generic_path(root):
    ops, _ = _make(root, "Mixed", MIXED_SPEC, MIXED_JL)
    a, b, c, d, e = mixed_inputs(1)
    g = bridge.Graph()
    with g.as_default():
        defaults = ops.mixed(a, b, c, d, e)
        custom = ops.mixed(a, b, c, d, e, scale=-1.0, fscale=4.0, shift=-5, flip=False, tag="?")
    fetches = list(defaults) + list(custom)
    through_entry, calls = _run_counting(fetches)
    assert calls == 2  # both ops took the compiled entry

    i, j, k = np.meshgrid(np.arange(1, 3), np.arange(1, 4), np.arange(1, 5), indexing="ij")
    np.testing.assert_array_equal(through_entry[0], 2.0 * a + 5)
    np.testing.assert_array_equal(through_entry[1], b * np.float32(0.5))
    np.testing.assert_array_equal(through_entry[2], c + 1)
    np.testing.assert_array_equal(through_entry[3], d + 100 * i + 10 * j + k)
    np.testing.assert_array_equal(through_entry[4], ~e)
    np.testing.assert_array_equal(through_entry[5], -a + 1)
    np.testing.assert_array_equal(through_entry[8], d + 100 * i + 10 * j + k)
    np.testing.assert_array_equal(through_entry[9], e)

    pointer = _entry_pointer(root / "Mixed", "Mixed")
    julia.register_entry("Mixed", 0)
    try:
        generic, calls = _run_counting(fetches)
    finally:
        julia.register_entry("Mixed", pointer)
    assert calls == 0
    for x, y in zip(through_entry, generic, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_ops_without_an_entry_take_the_generic_path(root):
    """String tensors and outputs sized by Julia need the runtime's conversions."""
    spec = customop.parse("Shout\nstring s(n)\nstring t(n) -> output\n", "custom_op.txt")
    assert customop.codegen.entries_source(spec) is None
    ops, _ = _make(root, "Shout", "Shout\nstring s(n)\nstring t(n) -> output\n",
                   "shout(t, s) = (t .= uppercase.(s); nothing)\n")
    g = bridge.Graph()
    with g.as_default():
        y = ops.shout(np.array([b"ab", b"c"], dtype=object))
    out, calls = _run_counting(y)
    assert list(out) == [b"AB", b"C"] and calls == 0


TANH_SPEC = "EntryTanh\ndouble x(n)\ndouble y(n) -> output\n"
TANH_JL = """
entry_tanh(y, x) = (y .= tanh.(x); nothing)
entry_tanh_grad(grad_x, grad_y, y, x) = (grad_x .+= grad_y .* (1 .- y .^ 2); nothing)
"""


@pytest.fixture(scope="module")
def tanh_op(root):
    return _make(root, "EntryTanh", TANH_SPEC, TANH_JL)


@pytest.mark.parametrize("mode", ["julia_thread", "pool", "caller"])
def test_entries_in_every_scheduling_mode(tanh_op, mode):
    """Direct on Julia's thread, posted from TF's pool threads, and a graph run in the caller's thread."""
    ops, _ = tanh_op
    config = {"julia_thread": bridge.SessionConfig(julia_thread=True),
              "pool": bridge.SessionConfig(inline_small_graphs=0),
              "caller": bridge.SessionConfig(inline_small_graphs=100)}[mode]
    g, x, y = op_chain(ops.entry_tanh, 20, [5])
    value = np.linspace(-2, 2, 5)
    expected = value.copy()
    for _ in range(20):
        expected = np.tanh(expected)
    out, calls = _run_counting(y, {x: value}, config)
    np.testing.assert_allclose(out, expected, rtol=1e-14)
    assert calls == 20


def test_gradient_op_takes_its_entry(tanh_op):
    ops, _ = tanh_op
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [5], name="x")
        y = ops.entry_tanh(x)
        (dx,) = bridge.gradients(bridge.ops.sum(y, [0]), [x])
    value = np.linspace(-1, 1, 5)
    out, calls = _run_counting(dx, {x: value})
    np.testing.assert_allclose(out, 1 - np.tanh(value) ** 2, rtol=1e-14)
    assert calls == 2  # EntryTanh and EntryTanhGrad


def test_a_wrong_rank_reaching_an_entry_is_an_error_not_a_crash(tanh_op):
    """The gradient op checks only its incoming gradients' shapes; called directly
    with a matrix where the spec says a vector, the entry must refuse it."""
    ops, _ = tanh_op
    g = bridge.Graph()
    with g.as_default():
        m = np.ones((2, 3))
        bad = ops.entry_tanh_grad(m, m, m)
        good = ops.entry_tanh_grad(np.ones(3), np.zeros(3), np.zeros(3))
    with bridge.Session(g) as s:
        with pytest.raises(errors.InvalidArgumentError, match=r"EntryTanhGrad: Julia function entry_tanh_grad "
                                                              r"failed: ArgumentError: output 'grad_x' has rank 2 "
                                                              r"where the op's spec says 1"):
            s.run(bad)
        np.testing.assert_array_equal(s.run(good), np.ones(3))


ERR_SPEC = "EntryErr\ndouble x(n)\ndouble y(n) -> output\n"


def test_errors_through_an_entry_name_the_op_and_leave_the_session_usable(root):
    ops, folder = _make(root, "EntryErr", ERR_SPEC, """
        function entry_err(y, x)
            x[1] < 0 && error("negative input: ", x[1])
            y .= 2 .* x
            return nothing
        end
    """)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        y = ops.entry_err(x)
    with bridge.Session(g) as s:
        with pytest.raises(errors.InternalError) as info:
            s.run(y, {x: np.array([-1.0, 2.0])})
        message = str(info.value)
        assert "EntryErr: Julia function entry_err failed: ErrorException: negative input: -1.0" in message
        # The backtrace reaches the user's file and stops before the entry.
        assert "entry_err.jl" in message and "tfbridge_entry_" not in message
        before = julia.entry_calls()
        np.testing.assert_array_equal(s.run(y, {x: np.array([1.0, 2.0])}), [2.0, 4.0])
        assert julia.entry_calls() == before + 1

        # A wrong arity is a bad argument (MethodError on the named function) ...
        julia.eval("entry_err(y, x, extra) = nothing; Base.delete_method(which(entry_err, (Any, Any)))")
        with pytest.raises(errors.InvalidArgumentError, match="EntryErr: Julia function entry_err failed: MethodError"):
            s.run(y, {x: np.array([1.0, 2.0])})
        # ... and a redefinition takes effect at the next run, through the same entry.
        julia.eval("entry_err(y, x) = (y .= 3 .* x; nothing)")
        np.testing.assert_array_equal(s.run(y, {x: np.array([1.0, 2.0])}), [3.0, 6.0])


def test_a_missing_function_is_not_found_through_an_entry(root):
    ops, _ = _make(root, "EntryMissing", "EntryMissing\ndouble x(n)\ndouble y(n) -> output\n",
                   "# entry_missing is not defined here\n", check_functions=False)  # the run is tested
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [2], name="x")
        y = ops.entry_missing(x)
    before = julia.entry_calls()
    with bridge.Session(g) as s:
        with pytest.raises(errors.NotFoundError, match="EntryMissing: Julia function entry_missing failed: "
                                                       "UndefVarError: entry_missing not defined"):
            s.run(y, {x: np.ones(2)})
        assert julia.entry_calls() == before + 1
        julia.eval("entry_missing(y, x) = (y .= x .+ 1; nothing)")
        np.testing.assert_array_equal(s.run(y, {x: np.ones(2)}), [2.0, 2.0])


def test_entries_can_be_switched_off(tmp_path):
    """TFBRIDGE_JULIA_ENTRIES=0 keeps every op on the generic path."""
    import os
    import subprocess
    import sys
    import textwrap

    folder = tmp_path / "Off"
    folder.mkdir()
    (folder / "custom_op.txt").write_text("Off\ndouble x(n)\ndouble y(n) -> output\n")
    (folder / "off.jl").write_text("off(y, x) = (y .= -x; nothing)\n")
    code = textwrap.dedent(f"""
        import numpy as np, bridge
        from bridge import customop, julia
        ops = customop.load({str(folder)!r})
        g = bridge.Graph()
        with g.as_default():
            y = ops.off(np.array([1.0, 2.0]))
        with bridge.Session(g) as s:
            assert list(s.run(y)) == [-1.0, -2.0]
        print("entry calls", julia.entry_calls())
    """)
    env = dict(os.environ, TFBRIDGE_JULIA_ENTRIES="0", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "entry calls 0" in proc.stdout


def test_an_entries_file_that_does_not_match_its_spec_is_refused(root):
    """A build folder edited by hand (or left half-written) must not register
    pointers against the wrong op types."""
    _, folder = _make(root, "Stale", "Stale\ndouble x(n)\ndouble y(n) -> output\n",
                      "stale(y, x) = (y .= x; nothing)\nstale_grad(gx, gy, y, x) = (gx .+= gy; nothing)\n")
    spec = customop.parse_file(folder / "custom_op.txt")
    source = customop.build(folder).parent / customop.codegen.entries_file_name(spec)
    text = source.read_text()
    source.write_text(text[:text.rindex("Int[")] + "Int[Int(@cfunction(tfbridge_entry_Stale, Cint, "
                      "(Ptr{Ptr{Cvoid}}, Ptr{Int64}, Ptr{Float64})))]\n")
    try:
        with pytest.raises(RuntimeError, match=r"gave 1 entry pointers for 2 ops \['Stale', 'StaleGrad'\]"):
            customop.load(folder)
    finally:
        source.write_text(text)
