"""Dynamic outputs of ops built from specs (`double p(?) -> output`, assigned
by Julia as `p[] = A`), and the output pool's allocation failure.

The runtime allocates a dynamic output during the call, once Julia's value
has a shape, and writes the value straight into TF's buffer: one memcpy when
the value's memory is already row-major, else one transposing pass.  These
tests pin the values and shapes for every dtype, ranks 1 to 3, empty arrays
and values that are views rather than Arrays, in the three places a Julia
kernel runs (asynchronously from TF's pool, in a graph run by the caller's
thread, on Julia's thread), and the checks around it.  The hand-written
kernels of tests/julia/test_runtime_threads.py cover rank 0 and the allocator-less form.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, errors
from support.build import op_folder
from support import REPO

ROOT = REPO
MODES = {
    "pool": bridge.SessionConfig(inline_small_graphs=0),  # asynchronous kernels, from TF's pool threads
    "caller": bridge.SessionConfig(),                       # the small graph runs in the caller's thread
    "julia_thread": bridge.SessionConfig(julia_thread=True),
}

ECHO_SPEC = """
DynEcho
double a(?)
float b(?, ?)
int32 c(?, ?, ?)
int64 d(?, ?)
bool e(?, ?, ?)
string w(?, ?)
double a2(?) -> output
float b2(?, ?) -> output
int32 c2(?, ?, ?) -> output
int64 d2(?, ?) -> output
bool e2(?, ?, ?) -> output
string w2(?, ?) -> output
double s(j) -> output
int64 t(j, 2) -> output
@attr int64 form = 0
"""

ECHO_JL = """
# x (TF index order) in several forms: 0 an Array (column-major: transposed on
# the way), 1 the input's own view (row-major memory: one memcpy), 2 a
# SubArray, 3 elements of type Any, 4 a lazy reversal of a row-major copy.
function as_form(x, form)
    N = ndims(x)
    form == 0 && return collect(x)
    form == 1 && return x
    form == 2 && return view(x, axes(x)...)
    form == 3 && return Array{Any}(x)
    rev = ntuple(i -> N + 1 - i, N)
    (N <= 1 || !(eltype(x) <: Number)) && return copy(x)
    return N == 2 ? transpose(permutedims(x)) : PermutedDimsArray(permutedims(x, rev), rev)
end

function dyn_echo(a2, b2, c2, d2, e2, w2, s, t, a, b, c, d, e, w, form)
    for (o, x) in ((a2, a), (b2, b), (c2, c), (d2, d), (e2, e), (w2, w))
        o[] = as_form(x, form)
    end
    m = length(a)
    s[] = collect(1.0:m)
    t[] = form == 5 ? zeros(Int64, m + 1, 2) :           # disagrees with s about j
          form == 6 ? zeros(Int64, m, 3) :               # not (j, 2)
          [i + 10k for i in 1:m, k in 1:2]
    form == 7 && (b2[] = nothing)                        # as if never assigned
    form == 8 && (a2[] = "text")                         # no Float64 array
    return nothing
end
"""

DTYPES = {"a": np.float64, "b": np.float32, "c": np.int32, "d": np.int64, "e": np.bool_, "w": np.object_}


def _values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.object_:  # strings
        words = ["", "a", "tf", "julia", "é", "x" * 40]
        picks = rng.integers(0, len(words), size=int(np.prod(shape)))
        return np.array([words[k] for k in picks] + [None], dtype=object)[:-1].reshape(shape)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    return customop.load(op_folder(tmp_path_factory.mktemp("dynamic"), "DynEcho", ECHO_SPEC, ECHO_JL))


def _graph(echo, forms):
    g = bridge.Graph()
    with g.as_default():
        inputs = {name: bridge.placeholder(bridge.string if dtype == np.object_ else bridge.as_dtype(dtype),
                                           shape=None, name=name)
                  for name, dtype in DTYPES.items()}
        outs = {form: echo.dyn_echo(*inputs.values(), form=form) for form in forms}
    return g, inputs, outs


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("sizes", [(6, (3, 4), (2, 3, 4), (5, 2), (2, 1, 3), (2, 3)),
                                   (0, (3, 0), (2, 0, 4), (0, 2), (0, 0, 0), (0, 4)),
                                   (1, (1, 1), (1, 1, 1), (1, 7), (4, 1, 1), (1, 1))],
                         ids=["filled", "empty", "ones"])
def test_every_dtype_and_form_exactly_in_every_scheduling_mode(echo, mode, sizes):
    g, inputs, outs = _graph(echo, range(5))
    shapes = dict(zip(DTYPES, [(sizes[0],), *sizes[1:]], strict=True))
    feed = {inputs[name]: _values(DTYPES[name], shapes[name], seed=k) for k, name in enumerate(DTYPES)}
    m = shapes["a"][0]
    s_want = np.arange(1.0, m + 1)
    t_want = np.arange(1, m + 1)[:, None] + 10 * np.arange(1, 3)[None, :]
    with bridge.Session(g, config=MODES[mode]) as sess:
        for _ in range(2):  # the second run takes recycled buffers
            got = sess.run(outs, feed)
            for form, values in got.items():
                for name, out in zip(DTYPES, values[:6], strict=True):
                    want = feed[inputs[name]]
                    where = f"form {form}, output {name}2"
                    assert out.dtype == want.dtype and out.shape == want.shape, (where, out.dtype, out.shape)
                    if name == "w":
                        assert out.tolist() == np.vectorize(str.encode, otypes=[object])(want).tolist(), where
                    else:
                        np.testing.assert_array_equal(out, want, err_msg=where)
                s, t = values[6:]
                assert s.shape == (m,) and t.shape == (m, 2) and t.dtype == np.int64
                np.testing.assert_array_equal(s, s_want)
                np.testing.assert_array_equal(t, t_want)


@pytest.mark.parametrize("mode", list(MODES))
def test_shape_checks_and_unassigned_outputs_are_errors_and_the_session_goes_on(echo, mode):
    g, inputs, outs = _graph(echo, [0, 5, 6, 7])
    feed = {inputs[name]: _values(DTYPES[name], shape, seed=1)
            for name, shape in zip(DTYPES, [(5,), (2, 3), (1, 2, 3), (2, 2), (1, 1, 2), (1, 2)], strict=True)}
    with bridge.Session(g, config=MODES[mode]) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                "DynEcho: output 't' dimension 0 is j, which output 's' sets to 5, but dyn_echo returned 6")):
            sess.run(outs[5], feed)
        with pytest.raises(errors.InvalidArgumentError,
                           match=re.escape("dynamic output 't' has shape (5, 3), expected (?, 2)")):
            sess.run(outs[6], feed)
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                "dynamic output 'b2' was not assigned: the function must set it, e.g. `b2[] = A`")):
            sess.run(outs[7], feed)
        got = sess.run(outs[0], feed)
        np.testing.assert_array_equal(got[1], feed[inputs["b"]])


@pytest.mark.parametrize("mode", list(MODES))
def test_errors_name_dynamic_outputs_by_their_spec_names(echo, mode):
    g, inputs, outs = _graph(echo, [8])
    feed = {inputs[name]: _values(DTYPES[name], shape, seed=1)
            for name, shape in zip(DTYPES, [(5,), (2, 3), (1, 2, 3), (2, 2), (1, 1, 2), (1, 2)], strict=True)}
    with bridge.Session(g, config=MODES[mode]) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                "DynEcho: Julia function dyn_echo failed: ArgumentError: dynamic output 'a2' holds a String, "
                "which does not convert to an Array{Float64}")):
            sess.run(outs[8], feed)


# --- what the Julia function may do with a dynamic output, and what the gradient sees

DYN_SPEC = """
DynGrad
double x(n)
double p(?) -> output
@attr int64 how = 0
"""

DYN_JL = """
# how: 0 assigns p, as documented; 1 broadcasts into it; 2 sets an element; 3 reads it first
function dyn_grad(p, x, how)
    how == 1 && (p .= 2 .* x)
    how == 2 && (p[1] = 1.0)
    how == 3 && (p[] .+= 1)
    p[] = 2 .* x
    return nothing
end

# What the gradient function received as the forward output p: recorded for the test.
const SEEN = Ref{Any}(nothing)
function dyn_grad_grad(grad_x, grad_p, p, x, how)
    refused = try
        p[1] = 0.0
        false
    catch e
        e isa TFBridge.ReadOnlyInputError
    end
    SEEN[] = (p isa AbstractVector{Float64}, p isa Ref, collect(p), refused)
    grad_x .+= 2 .* grad_p
    return nothing
end
"""


@pytest.fixture(scope="module")
def dyn_grad(tmp_path_factory):
    folder = op_folder(tmp_path_factory.mktemp("dyngrad"), "DynGrad", DYN_SPEC, DYN_JL)
    return customop.load(folder), folder


@pytest.mark.parametrize("path", ["entry", "generic"])
def test_the_gradient_function_gets_a_dynamic_output_as_a_read_only_array(dyn_grad, path):
    """The gradient op takes the forward op's outputs as inputs: a dynamic
    output arrives as TensorFlow's tensor of the size Julia gave it, like any
    input (an array, read-only), not as the Ref the forward function assigned."""
    from bridge import julia

    ops, folder = dyn_grad
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3], name="x")
        p = ops.dyn_grad(x)
        (dx,) = bridge.gradients(bridge.ops.sum(p, [0]), [x])
    if path == "generic":
        julia.register_entry("DynGradGrad", 0)
    try:
        before = julia.entry_calls()
        with bridge.Session(g) as sess:
            got_p, got_dx = sess.run([p, dx], {x: np.array([1.0, 2.0, 3.0])})
        assert julia.entry_calls() - before == (1 if path == "entry" else 0)  # the forward op has no entry
        seen = [julia.eval(f"SEEN[][{k}]") for k in range(1, 5)]
    finally:
        customop.load(folder)  # registers the entry again (and includes dyn_grad.jl: SEEN is new)
    np.testing.assert_array_equal(got_p, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(got_dx, [2.0, 2.0, 2.0])
    is_vector, is_ref, values, refused = seen
    assert is_vector and not is_ref and refused
    np.testing.assert_array_equal(values, [2.0, 4.0, 6.0])


@pytest.mark.parametrize("how, message", [
    (1, "DynGrad: Julia function dyn_grad failed: ArgumentError: dynamic output 'p' is assigned, not written in "
        "place: `p[] = A` sets it to the array A, whose size becomes the output's"),
    (2, "ArgumentError: dynamic output 'p' is assigned, not written in place: `p[] = A`"),
    (3, "ArgumentError: dynamic output 'p' has no value yet: the function assigns it, `p[] = A`, before reading it"),
])
def test_writing_into_a_dynamic_output_says_to_assign_it(dyn_grad, how, message):
    ops, _ = dyn_grad
    g = bridge.Graph()
    with g.as_default():
        p = ops.dyn_grad(np.array([1.0, 2.0]), how=how)
        ok = ops.dyn_grad(np.array([1.0, 2.0]))
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(message)):
            sess.run(p)
        np.testing.assert_array_equal(sess.run(ok), [2.0, 4.0])


def test_a_resized_string_output_is_named(tmp_path):
    ops = customop.load(op_folder(tmp_path, "StrOut", "StrOut\nstring s(n)\nstring t(n) -> output\n",
                                  "str_out(t, s) = (resize!(t, 1); t[1] = s[1]; nothing)\n"))
    g = bridge.Graph()
    with g.as_default():
        t = ops.str_out(np.array([b"a", b"b"], dtype=object))
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                "StrOut: Julia function str_out failed: string output 't' now has 1 elements, expected 2: "
                "fill it in place")):
            sess.run(t)


# --- the output pool's allocation failure ------------------------------------

POOL_SPEC = """
PoolFail
double x(n)
double y(n) -> output
double p(?) -> output
"""

POOL_JL = "pool_fail(y, p, x) = (y .= 2 .* x; p[] = fill(1.5, 100); nothing)\n"

RUN_POOL_FAIL = r"""
import ctypes, os, sys
import numpy as np
import bridge
from bridge import customop, errors

ops = customop.load(sys.argv[1])  # starts Julia: the runtime library is loaded from here on
runtime = ctypes.CDLL("libtfjl_runtime.so", mode=os.RTLD_NOLOAD)
Alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
runtime.tfjl_set_output_pool_alloc.argtypes = [Alloc]
runtime.tfjl_set_output_pool_alloc.restype = None
libc = ctypes.CDLL(None)
libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
libc.aligned_alloc.restype = ctypes.c_void_p
asked = []

@Alloc
def nothing_left(alignment, size):
    asked.append(size)
    return None

@Alloc
def small_only(alignment, size):  # y's 24 bytes (a 64-byte class), not p's 800 (1024)
    asked.append(size)
    return libc.aligned_alloc(alignment, size) if size < 1000 else None

x = bridge.placeholder("double", [3], name="x")
y, p = ops.pool_fail(x)
xv = np.array([1.0, 2.0, 3.0])
with bridge.Session() as sess:
    runtime.tfjl_set_output_pool_alloc(nothing_left)
    try:
        sess.run(y, {x: xv})
        raise SystemExit("no error with an allocator that fails")
    except errors.ResourceExhaustedError as e:
        assert "out of memory for output 'y' (24 bytes)" in e.message, e.message
    assert asked, "the pool did not call the installed allocator"

    del asked[:]
    runtime.tfjl_set_output_pool_alloc(small_only)
    try:
        sess.run(p, {x: xv})
        raise SystemExit("no error for the dynamic output")
    except errors.ResourceExhaustedError as e:
        assert ("PoolFail: Julia function pool_fail failed: dynamic output 'p': "
                "out of memory for output 1 (800 bytes)") in e.message, e.message
    assert sorted(asked) == [128, 1088], asked  # 64-byte header + class size

    runtime.tfjl_set_output_pool_alloc(Alloc())  # NULL: aligned_alloc again
    for _ in range(3):
        yv, pv = sess.run([y, p], {x: xv})
        assert np.array_equal(yv, 2 * xv) and np.array_equal(pv, np.full(100, 1.5)), (yv, pv)
print("ok")
"""


def test_output_pool_allocation_failure_is_resource_exhausted(tmp_path):
    """tfjl_set_output_pool_alloc (capi.h) makes the pool's raw allocation
    fail: a small output allocated before the call and a dynamic one
    allocated during it both fail with ResourceExhausted naming the output,
    and the session works again once the allocator is restored.  In a child
    process: the hook is process-wide."""
    folder = op_folder(tmp_path, "PoolFail", POOL_SPEC, POOL_JL)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(RUN_POOL_FAIL), str(folder)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
