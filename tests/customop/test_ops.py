"""Julia custom ops built from specs, run through the whole pipeline:
every dtype and rank 0-3, several outputs, attributes, the ADCME examples,
errors that keep the session usable, a multi-threaded stress test and a GC test."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, errors, julia
from bridge.framework.opdef import op_def
from support.build import mixed_inputs, op_folder
from support.threads import run_threads
from support import TESTS


def _make(root: Path, name: str, spec: str, julia: str, check_functions: bool = True):
    return customop.load(op_folder(root, name, spec, julia), check_functions=check_functions)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("customops")


# --- every dtype, rank 0 to 3, several outputs, attributes -------------------

ALL_TYPES_SPEC = """
AllTypes
double a()
float b(n)
int32 c(p,q)
int64 d(r,s,t)
bool e(k)
string w()
double a2() -> output
float b2(n) -> output
int32 c2(p,q) -> output
int64 d2(r,s,t) -> output
bool e2(k) -> output
string w2() -> output
@attr double scale = 2.0
@attr int64 shift = 1
@attr bool flip = true
@attr string tag = "!"
"""

ALL_TYPES_JL = """
function all_types(a2, b2, c2, d2, e2, w2, a, b, c, d, e, w, scale, shift, flip, tag)
    a2[] = scale * a[]
    b2 .= b .* Float32(scale)
    c2 .= c .+ Int32(shift)
    for I in CartesianIndices(d)   # TF index order: d[i, j, k] is TF's d[i-1, j-1, k-1]
        d2[I] = d[I] + 100 * I[1] + 10 * I[2] + I[3]
    end
    e2 .= flip ? .!e : e
    w2[] = uppercase(w) * tag
    return nothing
end
"""


def test_every_dtype_and_rank_with_attributes(root):
    ops = _make(root, "AllTypes", ALL_TYPES_SPEC, ALL_TYPES_JL)
    a, b, c, d, e = mixed_inputs(0)
    g = bridge.Graph()
    with g.as_default():
        defaults = ops.all_types(a, b, c, d, e, b"julia")
        custom = ops.all_types(a, b, c, d, e, b"tf", scale=-1.0, shift=-5, flip=False, tag="?")
    with bridge.Session(g) as sess:
        out, out2 = sess.run([defaults, custom])
    i, j, k = np.meshgrid(np.arange(1, 3), np.arange(1, 4), np.arange(1, 5), indexing="ij")
    assert out.a2 == 3.0 and out.a2.dtype == np.float64 and out.a2.shape == ()
    np.testing.assert_array_equal(out.b2, b * np.float32(2.0))
    assert out.b2.dtype == np.float32
    np.testing.assert_array_equal(out.c2, c + 1)
    assert out.c2.dtype == np.int32
    np.testing.assert_array_equal(out.d2, d + 100 * i + 10 * j + k)
    np.testing.assert_array_equal(out.e2, ~e)
    assert out.w2 == b"JULIA!"  # a string scalar is bytes, as TF1 fetches it
    assert out2.a2 == -1.5 and out2.w2 == b"TF?"
    np.testing.assert_array_equal(out2.c2, c - 5)
    np.testing.assert_array_equal(out2.e2, e)


# --- the ADCME examples -------------------------------------------------------

# The specs are the golden ones (tests/golden/customop/<Op>/custom_op.txt).
GOLDEN = TESTS / "golden" / "customop"
SINKHORN_SPEC = (GOLDEN / "SinkhornKnopp" / "custom_op.txt").read_text()

SINKHORN_JL = """
function sinkhorn_knopp(p, l, m, iter)
    n1, n2 = size(m)
    K = exp.(-Matrix(m) ./ 0.1)
    a, b = fill(1 / n1, n1), fill(1 / n2, n2)
    u, v = ones(n1), ones(n2)
    for _ in 1:iter[]
        u = a ./ (K * v)
        v = b ./ (K' * u)
    end
    P = u .* K .* v'
    p[] = P
    l[] = sum(P .* m)
    return nothing
end
"""


def _sinkhorn_numpy(m, iters):
    K = np.exp(-m / 0.1)
    a, b = np.full(m.shape[0], 1 / m.shape[0]), np.full(m.shape[1], 1 / m.shape[1])
    u, v = np.ones(m.shape[0]), np.ones(m.shape[1])
    for _ in range(iters):
        u = a / (K @ v)
        v = b / (K.T @ u)
    P = u[:, None] * K * v[None, :]
    return P, float((P * m).sum())


def test_adcme_sinkhorn_knopp(root):
    ops = _make(root, "SinkhornKnopp", SINKHORN_SPEC, SINKHORN_JL)
    m = np.random.default_rng(1).random((5, 7))
    g = bridge.Graph()
    with g.as_default():
        mp = bridge.placeholder(bridge.float64, [None, None], name="m")
        out = ops.sinkhorn_knopp(mp, np.int64(50))
    with bridge.Session(g) as sess:
        p, l = sess.run(out, {mp: m})
    p_ref, l_ref = _sinkhorn_numpy(m, 50)
    assert p.shape == (5, 7)
    np.testing.assert_allclose(p, p_ref, rtol=1e-10)
    np.testing.assert_allclose(l, l_ref, rtol=1e-10)
    np.testing.assert_allclose(p.sum(axis=1), np.full(5, 1 / 5), rtol=1e-6)


ZERO_OUT_ROW_SPEC = (GOLDEN / "ZeroOutRow" / "custom_op.txt").read_text()

ZERO_OUT_ROW_JL = """
function zero_out_row(oindices, ovv, indices, vv, bd)
    keep = [!(indices[k, 1] in bd) for k in 1:size(indices, 1)]
    oindices[] = indices[keep, :]
    ovv[] = vv[keep]
    return nothing
end
"""


def test_adcme_zero_out_row(root):
    ops = _make(root, "ZeroOutRow", ZERO_OUT_ROW_SPEC, ZERO_OUT_ROW_JL)
    indices = np.array([[0, 0], [0, 2], [1, 1], [2, 0], [3, 3]], np.int64)
    vv = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    g = bridge.Graph()
    with g.as_default():
        bd = bridge.placeholder(bridge.int64, [None], name="bd")
        out = ops.zero_out_row(indices, vv, bd)
    with bridge.Session(g) as sess:
        oi, ov = sess.run(out, {bd: np.array([0, 3], np.int64)})
        oi_none, ov_none = sess.run(out, {bd: np.array([9], np.int64)})
        oi_all, ov_all = sess.run(out, {bd: np.arange(4, dtype=np.int64)})
    np.testing.assert_array_equal(oi, [[1, 1], [2, 0]])
    np.testing.assert_array_equal(ov, [3.0, 4.0])
    np.testing.assert_array_equal(oi_none, indices)
    np.testing.assert_array_equal(ov_none, vv)
    assert oi_all.shape == (0, 2) and ov_all.shape == (0,)


# --- errors: each a TF error with a useful message, the session stays usable ---

FRAGILE_SPEC = """
Fragile
double x(n)
double m(?,2)
double y(n) -> output
"""

FRAGILE_JL = """
fragile(y, x, m) = x[1] < 0 ? throw(DomainError(x[1], "x[1] must be non-negative")) :
                              (y .= sqrt.(x) .+ sum(m); nothing)
"""


@pytest.fixture(scope="module")
def fragile(root):
    ops = _make(root, "Fragile", FRAGILE_SPEC, FRAGILE_JL)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        m = bridge.placeholder(bridge.float64, None, name="m")
        y = ops.fragile(x, m)
    return ops, g, x, m, y


def _ok(sess, fragile):
    _, _, x, m, y = fragile
    np.testing.assert_allclose(sess.run(y, {x: [4.0, 9.0], m: np.ones((1, 2))}), [4.0, 5.0])


def test_julia_exception_is_a_tf_error_and_the_next_run_works(fragile):
    _, g, x, m, y = fragile
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(y, {x: [-1.0, 1.0], m: np.ones((1, 2))})
        message = str(info.value)
        assert "Fragile" in message and "fragile" in message
        assert "DomainError" in message and "x[1] must be non-negative" in message
        _ok(sess, fragile)


def test_wrong_shape_names_the_op_and_argument(fragile):
    _, g, x, m, y = fragile
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=r"Fragile.*'m'") as info:
            sess.run(y, {x: [1.0], m: np.ones((3, 3))})
        assert "3" in str(info.value)
        _ok(sess, fragile)


def test_wrong_dtype_is_refused_with_the_op_named(fragile):
    ops, g, x, m, y = fragile
    with g.as_default():
        xi = bridge.placeholder(bridge.int32, [None], name="xi")
        with pytest.raises((TypeError, errors.InvalidArgumentError), match="(?i)fragile"):
            ops.fragile(xi, m)
    with bridge.Session(g) as sess:
        # A fed Tensor of another dtype is converted where no value changes (float32 -> double),
        # and refused, naming the placeholder, where values would change (complex -> double).
        np.testing.assert_allclose(
            sess.run(y, {x: bridge.Tensor(np.full(2, 0.5, np.float32)), m: np.ones((1, 2))}),
            sess.run(y, {x: np.full(2, 0.5), m: np.ones((1, 2))}))
        with pytest.raises(TypeError, match="placeholder 'x:0' \\(float64\\).*imaginary"):
            sess.run(y, {x: bridge.Tensor(np.ones(2, np.complex64)), m: np.ones((1, 2))})
        _ok(sess, fragile)


def test_missing_julia_function_is_not_found_and_the_next_run_works(root, fragile):
    orphan = _make(root, "Orphan", "Orphan\ndouble x(n)\ndouble y(n) -> output\n@forward orphan_never_defined\n",
                   "# the forward function is deliberately missing\n", check_functions=False)
    _, g, x, m, y = fragile
    with g.as_default():
        z = orphan.orphan(x)
    with bridge.Session(g) as sess:
        with pytest.raises(errors.NotFoundError, match="orphan_never_defined"):
            sess.run(z, {x: [1.0]})
        _ok(sess, fragile)


# --- stress: TF's multi-threaded executor, many Python threads and sessions ---

@pytest.mark.slow
@pytest.mark.serial  # eight threads racing on TF's pool and Julia's: on every core, not beside other tests
def test_stress_eight_threads_two_hundred_sessions_each(root):
    ops = _make(root, "JlAffine", "JlAffine\ndouble x(n)\ndouble y(n) -> output\n@attr double k = 1.0\n",
                "jl_affine(y, x, k) = (y .= k .* x .+ 1; nothing)\n")
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        ys = [ops.jl_affine(x, k=float(k)) for k in range(1, 5)]  # independent: TF runs them in parallel
    # TF's multi-threaded executor, even for this small graph (which by default
    # would run in the caller's thread): every kernel runs on TF's pool threads.
    pool = bridge.SessionConfig(inline_small_graphs=0)

    def worker(t: int) -> None:
        for i in range(200):
            xv = np.arange(64.0) + 1000 * t + i
            with bridge.Session(g, config=pool) as sess:
                outs = sess.run(ys, {x: xv})
            for k, out in enumerate(outs, start=1):
                np.testing.assert_array_equal(out, k * xv + 1, err_msg=f"thread {t}, run {i}, op {k}")

    direct_before, handed_before = julia.call_counts()
    run_threads(worker, 8, timeout=900)
    direct_after, handed_after = julia.call_counts()
    # Every call came from a pool thread, none from Julia's own.
    assert (direct_after - direct_before, handed_after - handed_before) == (0, 8 * 200 * 4)


# --- output buffers: small ones are recycled, never while still in use --------

def test_recycled_output_buffers_never_back_two_live_tensors(root):
    """Outputs of up to 4 KiB come from free lists (kernels_cpp/include/tfjl/
    output_pool.h).  Fetched results are views of TF's buffers: each must keep
    its values through hundreds of later runs whose outputs are recycled, for
    every size class, at the 4 KiB boundary (512 doubles) and beyond it, with
    intermediate outputs freed and reused inside each run."""
    ops = _make(root, "Stamp", "Stamp\ndouble x(n)\nint64 k()\ndouble y(n) -> output\n",
                "stamp(y, x, k) = (y .= x .+ k[]; nothing)\n")
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        k = bridge.placeholder(bridge.int64, [], name="k")
        first = ops.stamp(x, k)
        last = ops.stamp(ops.stamp(first, k), k)
    sizes = [1, 7, 8, 9, 16, 100, 511, 512, 513, 2000]
    kept = []
    with bridge.Session(g) as sess:
        for i in range(400):
            n = sizes[i % len(sizes)]
            kept.append((n, i, sess.run([first, last], {x: np.arange(n, dtype=np.float64), k: i})))
    for n, i, (f, l) in kept:
        assert np.array_equal(f, np.arange(n) + i), (n, i)
        assert np.array_equal(l, np.arange(n) + 3 * i), (n, i)


# --- GC: a body that allocates and collects on every call ---------------------

GC_RUNS, GC_FULL_EVERY = 10_000, 100

GC_HEAVY_JL = f"""
# [quick collections that ran, full collections that ran], inside the op's calls
const GC_HEAVY_COUNTS = zeros(Int, 2)
const GC_HEAVY_CALLS = Ref(0)
function gc_heavy(y, x)
    garbage = [rand(256) for _ in 1:100]
    GC_HEAVY_CALLS[] += 1
    full = GC_HEAVY_CALLS[] % {GC_FULL_EVERY} == 0
    before = Base.gc_num()
    GC.gc(full)
    after = Base.gc_num()
    if full
        GC_HEAVY_COUNTS[2] += after.full_sweep > before.full_sweep
    else
        GC_HEAVY_COUNTS[1] += after.pause > before.pause
    end
    y .= 2 .* x .+ (length(garbage) - 100)
    return nothing
end
"""


@pytest.mark.slow
def test_gc_in_every_call_ten_thousand_runs(root):
    """10,000 runs, each collecting garbage inside the op's Julia function while
    its arguments (Julia arrays over TF's buffers) and its own allocations are
    live.  Every 100th call runs a full collection; the others a quick (young)
    one, which frees every unreachable object the call allocated just as a
    full one does (they are all young) and, unlike a full one, also frees
    young objects that an old object reaches without a write barrier.  A full
    collection costs about 100 ms here against 0.3 ms for a quick one: 10,000
    full ones took 15 minutes.  Julia's own collection counters, read around
    each GC.gc, show that every collection ran."""
    ops = _make(root, "GcHeavy", "GcHeavy\ndouble x(n)\ndouble y(n) -> output\n", GC_HEAVY_JL)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = ops.gc_heavy(x)
    with bridge.Session(g) as sess:
        for i in range(GC_RUNS):
            xv = np.full(16, float(i))
            out = sess.run(y, {x: xv})
            assert np.array_equal(out, 2 * xv), i
    assert julia.eval("GC_HEAVY_CALLS[]") == GC_RUNS
    full = GC_RUNS // GC_FULL_EVERY
    assert (julia.eval("GC_HEAVY_COUNTS[1]"), julia.eval("GC_HEAVY_COUNTS[2]")) == (GC_RUNS - full, full)


# --- a Julia op runs when the graph runs, never while TF optimizes it --------

COUNTED_SPEC = """
Counted
double x(n)
double y(n) -> output
"""
COUNTED_JULIA = """
const COUNTED_CALLS = Ref(0)
counted(y, x) = (COUNTED_CALLS[] += 1; y .= x; nothing)
counted_grad(grad_x, grad_y, y, x) = (grad_x .= grad_y; nothing)
"""


def test_julia_ops_with_constant_inputs_run_at_every_run_and_are_not_merged(root):
    """Julia functions may have side effects: their ops are stateful, as tf.py_func's, so Grappler
    neither folds one whose inputs are constants (it ran once, at optimization, on the master)
    nor merges two identical calls (common subexpressions)."""
    counted = _make(root, "Counted", COUNTED_SPEC, COUNTED_JULIA).counted
    g = bridge.Graph()
    with g.as_default():
        c = bridge.constant(np.array([1.0, 2.0, 3.0]))
        y, z = counted(c), counted(c)
    assert op_def("Counted").is_stateful and op_def("CountedGrad").is_stateful
    before = julia.eval("COUNTED_CALLS[]")
    with bridge.Session(g) as sess:
        for _ in range(3):
            out_y, out_z = sess.run([y, z])
            np.testing.assert_array_equal(out_y, [1.0, 2.0, 3.0])
    assert julia.eval("COUNTED_CALLS[]") - before == 6
