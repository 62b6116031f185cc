"""Julia ops receive their inputs read-only (issue: a Julia op that wrote its
input changed a read-only numpy feed, and would change a Const for every later
run).  Every write path a Julia function commonly takes is refused with an
InvalidArgumentError naming the op, the input and that inputs are read-only;
the fed array, the Const and the session are left as they were, on the
compiled-entry path and on the generic (jl_call) path, in every scheduling mode.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import customop, errors
from support.build import op_folder

SPEC = """WriteInput
double x(n)
double m(p, q)
double t(a, b, c)
string mode()
double y(n) -> output
"""

# Each mode writes one input a different way; "none" only reads them.
JULIA = r"""
using LinearAlgebra
function write_input(y, x, m, t, mode)
    y .= 2 .* x .+ sum(m) .+ sum(t)       # reading is fine: broadcast, sum, BLAS below
    mode == "none" && return nothing
    mode == "setindex" && (x[1] = 99.0)
    mode == "broadcast" && (x .= 99.0)
    mode == "fill" && fill!(x, 99.0)
    mode == "copyto" && copyto!(x, fill(99.0, length(x)))
    mode == "matrix" && (m[1, 1] = 99.0)
    mode == "rank3" && (t[1, 1, 1] = 99.0)
    mode == "view" && (view(x, 1:1) .= 99.0)
    mode == "mul" && mul!(x, Matrix(1.0I, length(x), length(x)), ones(length(x)))
    mode == "mul_view" && mul!(view(x, 1:length(x)), Matrix(1.0I, length(x), length(x)), ones(length(x)))
    mode == "mul_reshaped" && mul!(reshape(x, length(x)), Matrix(1.0I, length(x), length(x)), ones(length(x)))
    mode == "ldiv" && ldiv!(lu(Matrix(2.0I, length(x), length(x))), x)
    mode == "sort" && sort!(x; rev=true)
    # Issue 36 item 6: LinearAlgebra's in-place functions that reach BLAS's symv!/symm!/hemv! and
    # LAPACK's ormqr!/gemqrt! through other methods than gemv!'s.
    n = length(x)
    A = reshape(collect(1.0:n*n), n, n) + n * I
    mode == "mul_symmetric" && mul!(x, Symmetric(A), ones(n))
    mode == "mul_symmetric_5" && mul!(x, Symmetric(A), ones(n), 2.0, 0.0)
    mode == "mul_hermitian" && mul!(x, Hermitian(A), ones(n))
    mode == "mul_hermitian_5" && mul!(x, Hermitian(A), ones(n), 1.0, 1.0)
    mode == "mul_symmetric_view" && mul!(view(x, 1:n), Symmetric(A), ones(n))
    mode == "mul_hermitian_view_5" && mul!(view(x, 1:n), Hermitian(A), ones(n), 2.0, 1.0)
    mode == "mul_symmetric_reshaped" && mul!(reshape(x, n, 1), Symmetric(A), ones(n, 1))
    mode == "mul_hermitian_reshaped_5" && mul!(reshape(x, n, 1), Hermitian(A), ones(n, 1), 1.0, 0.0)
    mode == "lmul_qr_q" && lmul!(qr(A).Q, x)
    mode == "lmul_pivoted_qr_q" && lmul!(qr(A, Val(true)).Q, x)
    mode == "lmul_qr_q_adjoint" && lmul!(qr(A).Q', x)
    mode == "rmul_qr_q" && rmul!(reshape(x, 1, n), qr(A).Q)
    B = reshape(collect(1.0:9.0), 3, 3) + 3I   # m is a Const: a later run would read what these wrote
    mode == "mul_symmetric_const" && mul!(view(parent(m), :, 1), Symmetric(B), ones(3))
    mode == "lmul_qr_q_const" && lmul!(qr(B).Q, view(parent(m), :, 2))
    mode == "blas_read" && (y .= transpose(m) * ones(size(m, 1)) .+ 0 .* y)  # a BLAS read, not a write
    # Ways to the memory behind the wrapper (issue #31 item 4): each leads back to it, read-only.
    mode == "parent" && (parent(x)[1] = 99.0)
    mode == "parent_matrix" && (parent(parent(m))[1] = 99.0)
    mode == "parent_rank3" && (parent(parent(t))[1] = 99.0)
    mode == "unaliascopy" && (Base.unaliascopy(x)[1] = 99.0)
    mode == "unaliascopy_matrix" && (parent(Base.unaliascopy(m))[1] = 99.0)
    mode == "unaliascopy_rank3" && (parent(Base.unaliascopy(t))[1] = 99.0)
    mode == "unaliascopy_view" && (parent(Base.unaliascopy(view(x, 1:2)))[1] = 99.0)
    mode == "reshape_parent" && (parent(reshape(x, :, 1))[1] = 99.0)
    mode == "vec_parent" && (parent(parent(vec(m)))[1] = 99.0)
    mode == "view_parent" && (parent(view(x, 1:2))[1] = 99.0)
    mode == "view_rank3_parent" && (parent(parent(view(t, :, 1, 1)))[1] = 99.0)
    mode == "transpose_parent" && (parent(parent(transpose(m)))[1] = 99.0)
    mode == "permuteddims_parent" && (parent(parent(PermutedDimsArray(t, (2, 1, 3))))[1] = 99.0)
    mode == "fields" && write_reachable_arrays((x, m, t))
    if mode == "copies"  # copies are the op's own: writable, and writing them changes no input
        copy(x)[1] = 99.0; similar(x)[1] = 99.0; collect(m)[1] = 99.0; Array(t)[1] = 99.0
        copy(m)[1, 1] = 99.0; convert(Array, t)[1] = 99.0; deepcopy(x) isa AbstractArray
    end
    return nothing
end

# getfield reaches past every method: walk every field of the wrappers and
# write into any Array found; an input's wrapper holds its address, no Array.
function write_reachable_arrays(v, depth = 0)
    if v isa Array
        isempty(v) || (v[1] = 99.0)
        throw(ErrorException("getfield reached a writable Array: $(typeof(v))"))
    end
    depth > 4 && return
    for i in 1:nfields(v)
        isdefined(v, i) && write_reachable_arrays(getfield(v, i), depth + 1)
    end
end
"""

# The generic path: a string input keeps the op off the compiled entries.
WRITES = {"setindex": "x", "broadcast": "x", "fill": "x", "copyto": "x", "matrix": "m", "rank3": "t",
          "view": "x", "mul": "x", "mul_view": "x", "mul_reshaped": "x", "ldiv": "x", "sort": "x",
          "parent": "x", "parent_matrix": "m", "parent_rank3": "t", "unaliascopy": "x", "unaliascopy_matrix": "m",
          "unaliascopy_rank3": "t", "unaliascopy_view": "x", "reshape_parent": "x", "vec_parent": "m",
          "view_parent": "x", "view_rank3_parent": "t", "transpose_parent": "m", "permuteddims_parent": "t",
          **{mode: "x" for mode in ("mul_symmetric", "mul_symmetric_5", "mul_hermitian", "mul_hermitian_5",
                                    "mul_symmetric_view", "mul_hermitian_view_5", "mul_symmetric_reshaped",
                                    "mul_hermitian_reshaped_5", "lmul_qr_q", "lmul_pivoted_qr_q",
                                    "lmul_qr_q_adjoint", "rmul_qr_q")},
          "mul_symmetric_const": "m", "lmul_qr_q_const": "m"}


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    return customop.load(op_folder(tmp_path_factory.mktemp("readonly"), "WriteInput", SPEC, JULIA)).write_input


def _graph(op):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        m = bridge.constant(np.arange(6.0).reshape(2, 3), name="m")
        t = bridge.constant(np.arange(24.0).reshape(2, 3, 4), name="t")
        mode = bridge.placeholder(bridge.string, [], name="mode")
        y = op(x, m, t, mode)
    return g, x, mode, y


@pytest.mark.parametrize("config", [None, {"julia_thread": True}, {"inline_small_graphs": 0}],
                         ids=["caller-thread", "julia-thread", "tf-pool"])
@pytest.mark.parametrize("mode", sorted(WRITES))
def test_a_write_into_an_input_is_refused_and_changes_nothing(op, mode, config):
    g, x, mode_in, y = _graph(op)
    feed = np.ones(4)
    feed.flags.writeable = False
    expected = 2 * feed + 15.0 + 276.0
    with bridge.Session(g, config=config) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(y, {x: feed, mode_in: mode})
        message = str(info.value)
        assert message.startswith("WriteInput: Julia function write_input failed: ReadOnlyInputError: "
                                  f"input '{WRITES[mode]}' is read-only"), message
        assert "must not write into its inputs" in message
        np.testing.assert_array_equal(feed, np.ones(4))  # the fed array is untouched
        # ... and so are the Consts: a clean run gives the original values.
        np.testing.assert_array_equal(sess.run(y, {x: feed, mode_in: "none"}), expected)


def _aligned_ones(n: int) -> np.ndarray:
    """A writable float64 array on a 64-byte boundary: fed zero-copy."""
    buffer = np.empty(n + 8)
    start = (-buffer.ctypes.data % 64) // 8
    out = buffer[start:start + n]
    out[:] = 1.0
    assert out.ctypes.data % 64 == 0
    return out


@pytest.mark.parametrize("config", [None, {"julia_thread": True}], ids=["caller-thread", "julia-thread"])
@pytest.mark.parametrize("mode", ["fields", "copies"])
def test_no_field_leads_to_a_writable_array_and_copies_are_the_ops_own(op, mode, config):
    """Issue #31 item 4: parent(x)[1] = v and getfield(x, 1)[1] = v wrote
    through the wrapper into a Const (later runs read the new value) and the
    user's aligned numpy feed.  parent and the rest are refused above; here
    getfield finds no Array at all, and copies are writable but change nothing."""
    g, x, mode_in, y = _graph(op)
    feed = _aligned_ones(4)
    expected = 2 * feed + 15.0 + 276.0
    with bridge.Session(g, config=config) as sess:
        for _ in range(2):
            np.testing.assert_array_equal(sess.run(y, {x: feed, mode_in: mode}), expected)
        np.testing.assert_array_equal(feed, np.ones(4))
        np.testing.assert_array_equal(sess.run(y, {x: feed, mode_in: "none"}), expected)


def test_escapes_through_parent_leave_an_aligned_feed_and_the_consts_unchanged(op):
    g, x, mode_in, y = _graph(op)
    feed = _aligned_ones(4)
    with bridge.Session(g) as sess:
        for mode in ("parent", "parent_matrix", "parent_rank3", "unaliascopy", "view_parent", "mul_symmetric",
                     "mul_hermitian_5", "mul_symmetric_reshaped", "lmul_qr_q", "lmul_pivoted_qr_q",
                     "lmul_qr_q_adjoint", "rmul_qr_q"):
            with pytest.raises(errors.InvalidArgumentError, match="is read-only"):
                sess.run(y, {x: feed, mode_in: mode})
        np.testing.assert_array_equal(feed, np.ones(4))
        np.testing.assert_array_equal(sess.run(y, {x: feed, mode_in: "none"}), 2 * feed + 15.0 + 276.0)


def test_inputs_are_read_in_place_including_blas(op):
    g, x, mode_in, y = _graph(op)
    with bridge.Session(g) as sess:
        out = sess.run(y, {x: np.ones(3), mode_in: "blas_read"})
    np.testing.assert_array_equal(out, np.arange(6.0).reshape(2, 3).sum(axis=0))


ENTRY_SPEC = "WriteEntry\ndouble x(n)\ndouble w(n, k)\ndouble y(n) -> output\n"
ENTRY_JULIA = """
write_entry(y, x, w) = (y .= x; w[1, 1] = 5.0; nothing)
write_entry_grad(gx, gw, gy, y, x, w) = (gy .= 0; nothing)
"""


def test_compiled_entries_refuse_writes_too_including_the_gradient_op(tmp_path):
    ops = customop.load(op_folder(tmp_path, "WriteEntry", ENTRY_SPEC, ENTRY_JULIA))
    calls = bridge.julia.entry_calls()
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        w = bridge.constant(np.ones((3, 2)), name="w")
        y = ops.write_entry(x, w)
        grads = ops.write_entry_grad(x, x, x, w)  # (grad_y, y, x, w), independent of y
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=r"^WriteEntry: .*input 'w' is read-only"):
            sess.run(y, {x: np.ones(3)})
        with pytest.raises(errors.InvalidArgumentError, match=r"^WriteEntryGrad: .*input 'grad_y' is read-only"):
            sess.run(grads, {x: np.ones(3)})
    assert bridge.julia.entry_calls() > calls  # the compiled entries were the path taken


def test_julia_call_arrays_stay_writable():
    """bridge.julia.call documents zero-copy, writable numpy arrays: unchanged."""
    bridge.julia.eval("tfbridge_test_fill!(a) = (a .= 7; nothing)")
    a = np.zeros(3)
    bridge.julia.call("tfbridge_test_fill!", a)
    np.testing.assert_array_equal(a, [7, 7, 7])
