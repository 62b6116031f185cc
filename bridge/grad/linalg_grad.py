"""Gradients of linear algebra (solves, decompositions, determinants, einsum), after TF's linalg_grad.py.

TF's C++ registry has only Einsum of these.  Every gradient here is built
from differentiable ops (solves, matmuls, band/diag ops), as TF's are, so
second derivatives come from differentiating these graphs again.
"""
from __future__ import annotations

from typing import Optional, Sequence

from bridge.framework.dtypes import as_dtype as _as_dtype
from bridge.framework.graph import Output
from ._helpers import _c, _const, _node, _op
from .registry import RegisterGradient

# --- small builders -------------------------------------------------------------------------


def _i32(value) -> Output:
    return _const(value, "int32")


def _mm(a: Output, b: Output, adj_a: bool = False, adj_b: bool = False) -> Output:
    """math_ops.matmul with adjoint flags: MatMul for matrices (its gradient is
    MatMul again, which has float16 kernels), BatchMatMulV2 for batches."""
    if _rank(a) == 2 and _rank(b) == 2:
        if adj_a and a.dtype.is_complex:
            a = _op("Conj", [a])
        if adj_b and b.dtype.is_complex:
            b = _op("Conj", [b])
        return _op("MatMul", [a, b], {"transpose_a": adj_a, "transpose_b": adj_b})
    return _op("BatchMatMulV2", [a, b], {"adj_x": adj_a, "adj_y": adj_b})


def _rank(x: Output) -> Optional[int]:
    shape = x.shape
    return None if shape.unknown_rank else len(shape)


def _transpose(x: Output, conjugate: bool = False) -> Output:
    """array_ops.matrix_transpose: swap the last two axes (and conjugate)."""
    rank = _rank(x)
    if rank is not None:
        perm = _i32(list(range(rank - 2)) + [rank - 1, rank - 2])
    else:
        r = _op("Rank", [x])
        perm = _op("ConcatV2", [[_op("Range", [_i32(0), _op("Sub", [r, _i32(2)]), _i32(1)]),
                                 _op("Sub", [_op("Reshape", [r, _i32([1])]), _i32([1, 2])])], _i32(0)])
    t = _op("Transpose", [x, perm])
    return _op("Conj", [t]) if conjugate and x.dtype.is_complex else t


def _adjoint(x: Output) -> Output:
    return _transpose(x, conjugate=True)


def _slice(x: Output, *spec) -> Output:
    """``x[..., *spec]``: each item an int (that axis is dropped) or a (start, stop) pair (None: open)."""
    begin, end, begin_mask, end_mask, shrink = [0], [0], 0, 0, 0
    for i, item in enumerate(spec, start=1):
        if isinstance(item, int):
            begin.append(item)
            end.append(item + 1 if item != -1 else 0)
            shrink |= 1 << i
            if item == -1:
                end_mask |= 1 << i
            continue
        start, stop = item
        begin.append(start or 0)
        end.append(stop or 0)
        begin_mask |= (start is None) << i
        end_mask |= (stop is None) << i
    return _op("StridedSlice", [x, _i32(begin), _i32(end), _i32([1] * len(begin))],
               {"ellipsis_mask": 1, "begin_mask": begin_mask, "end_mask": end_mask,
                "shrink_axis_mask": shrink})


def _shape_slice(shape: Output, start: Optional[int], stop: Optional[int]) -> Output:
    """``shape[start:stop]`` of a 1-D shape tensor."""
    return _op("StridedSlice", [shape, _i32([start or 0]), _i32([stop or 0]), _i32([1])],
               {"begin_mask": int(start is None), "end_mask": int(stop is None)})


def _shape_dim(shape: Output, index: int) -> Output:
    return _op("StridedSlice", [shape, _i32([index]), _i32([index + 1 if index != -1 else 0]), _i32([1])],
               {"shrink_axis_mask": 1, "end_mask": int(index == -1)})


def _diag(d: Output) -> Output:
    """array_ops.matrix_diag."""
    return _op("MatrixDiagV3", [d, _i32(0), _i32(-1), _i32(-1), _const(0, d.dtype)])


def _diag_part(x: Output) -> Output:
    return _op("MatrixDiagPartV3", [x, _i32(0), _const(0, x.dtype)])


def _set_diag(x: Output, d: Output) -> Output:
    return _op("MatrixSetDiagV3", [x, d, _i32(0)])


def _band(x: Output, lower: int, upper: int) -> Output:
    return _op("MatrixBandPart", [x, _const(lower, "int64"), _const(upper, "int64")])


def _eye(n: Output, batch_shape: Output, dtype) -> Output:
    """linalg_ops.eye(n, batch_shape=...): ones on a (batch of) diagonal(s)."""
    ones = _op("Fill", [_op("ConcatV2", [[batch_shape, _op("Reshape", [n, _i32([1])])], _i32(0)]),
                        _const(1, dtype)])
    return _diag(ones)


def _expand(x: Output, axis: int) -> Output:
    return _op("ExpandDims", [x, _i32(axis)])


def _safe_reciprocal(x: Output) -> Output:
    """x / (x^2 + 1e-20): TF's Lorentz broadening against degenerate spectra."""
    return _op("Mul", [x, _op("Reciprocal", [_op("AddV2", [_op("Mul", [x, x]), _c(x, 1e-20)])])])


def _unbroadcast(grad_a: Output, grad_b: Output, a: Output, b: Output):
    """Sum the gradients of a batched matrix op over broadcast batch axes (as TF does,
    only when the static batch shapes differ)."""
    sa, sb = a.shape, b.shape
    if (not sa.unknown_rank and not sb.unknown_rank and None not in sa and None not in sb
            and tuple(sa[:-2]) == tuple(sb[:-2])):
        return grad_a, grad_b
    a_shape, b_shape = _op("Shape", [a]), _op("Shape", [b])
    ra, rb = _node("BroadcastGradientArgs", [_shape_slice(a_shape, None, -2),
                                             _shape_slice(b_shape, None, -2)]).outputs
    return (_op("Reshape", [_op("Sum", [grad_a, ra]), a_shape]),
            _op("Reshape", [_op("Sum", [grad_b, rb]), b_shape]))


# --- inverses and solves --------------------------------------------------------------------


@RegisterGradient("MatrixInverse")
def _matrix_inverse_grad(op, grad):
    ainv = op.outputs[0]
    adj = op.get_attr("adjoint")
    return _op("Neg", [_mm(ainv, _mm(grad, ainv, adj_a=adj, adj_b=not adj), adj_a=not adj)])


@RegisterGradient("MatrixSolve")
def _matrix_solve_grad(op, grad):
    a = op.inputs[0]
    adj = op.get_attr("adjoint")
    c = op.outputs[0]
    grad_b = _op("MatrixSolve", [a, grad], {"adjoint": not adj})
    grad_a = _mm(c, grad_b, adj_b=True) if adj else _mm(grad_b, c, adj_b=True)
    return _op("Neg", [grad_a]), grad_b


def _triangular_solve_grads(op, grad, solve_type: str):
    a, b = op.inputs
    adj, lower = op.get_attr("adjoint"), op.get_attr("lower")
    c = op.outputs[0]
    grad_b = _op(solve_type, [a, grad], {"lower": lower, "adjoint": not adj})
    grad_a = _op("Neg", [_mm(c, grad_b, adj_b=True) if adj else _mm(grad_b, c, adj_b=True)])
    return grad_a, grad_b, lower


@RegisterGradient("MatrixTriangularSolve")
def _matrix_triangular_solve_grad(op, grad):
    grad_a, grad_b, lower = _triangular_solve_grads(op, grad, "MatrixTriangularSolve")
    # Only one triangle of the matrix is read.
    grad_a = _band(grad_a, -1, 0) if lower else _band(grad_a, 0, -1)
    return _unbroadcast(grad_a, grad_b, *op.inputs)


@RegisterGradient("BandedTriangularSolve")
def _banded_triangular_solve_grad(op, grad):
    grad_a, grad_b, lower = _triangular_solve_grads(op, grad, "BandedTriangularSolve")
    # Back to the compact band layout: the diagonals the band holds, aligned LEFT_RIGHT.
    bands_minus_1 = _op("Sub", [_shape_dim(_op("Shape", [op.inputs[0]]), -2), _i32(1)])
    zero = _i32(0)
    k = _op("Pack", [[_op("Neg", [bands_minus_1]), zero] if lower else [zero, bands_minus_1]])
    grad_a = _op("MatrixDiagPartV3", [grad_a, k, _const(0, grad_a.dtype)], {"align": "LEFT_RIGHT"})
    return _unbroadcast(grad_a, grad_b, *op.inputs)


def _regularized_gramian_cholesky(a: Output, l2: Output, first_kind: bool) -> Output:
    """Cholesky factor of A^H A + l2 I (first kind) or A A^H + l2 I."""
    gramian = _mm(a, a, adj_a=first_kind, adj_b=not first_kind)
    shape = _op("Shape", [a])
    small = _shape_dim(shape, -1 if first_kind else -2)
    eye = _eye(small, _shape_slice(shape, None, -2), a.dtype)
    return _op("Cholesky", [_op("AddV2", [gramian, _op("Mul", [l2, eye])])])


def _cholesky_solve(chol: Output, rhs: Output) -> Output:
    y = _op("MatrixTriangularSolve", [chol, rhs], {"lower": True, "adjoint": False})
    return _op("MatrixTriangularSolve", [chol, y], {"lower": True, "adjoint": True})


@RegisterGradient("MatrixSolveLs")
def _matrix_solve_ls_grad(op, grad):
    if op.get_attr("fast") is False:
        raise ValueError("Gradient not defined for fast=False")
    a, b, l2 = op.inputs
    l2 = _op("Cast", [l2], {"DstT": a.dtype})
    m, n = a.shape[-2:] if len(a.shape) >= 2 else (None, None)
    if m is None or n is None:
        # TF decides at run time with a cond; the bridge needs the static matrix shape.
        raise NotImplementedError("MatrixSolveLs gradient needs the static matrix shape")
    if m >= n:  # overdetermined: X = (A^H A + l2 I)^-1 A^H B
        x = op.outputs[0]
        z = _cholesky_solve(_regularized_gramian_cholesky(a, l2, True), grad)
        xzt = _mm(x, z, adj_b=True)
        zx_sym = _op("AddV2", [xzt, _transpose(xzt)])
        grad_a = _op("AddV2", [_op("Neg", [_mm(a, zx_sym)]), _mm(b, z, adj_b=True)])
        return grad_a, _mm(a, z), None
    # underdetermined: X = A^H (A A^H + l2 I)^-1 B
    chol = _regularized_gramian_cholesky(a, l2, False)
    grad_b = _cholesky_solve(chol, _mm(a, grad))
    tmp = _cholesky_solve(chol, b)
    a1 = _op("Neg", [_mm(grad_b, _mm(tmp, a, adj_a=True))])
    a2 = _mm(tmp, _op("Sub", [grad, _mm(a, grad_b, adj_a=True)]), adj_b=True)
    return _op("AddV2", [a1, a2]), grad_b, None


# --- determinants -----------------------------------------------------------------------------


def _det_grad(a: Output, c: Output, grad: Output) -> Output:
    a_adj_inv = _op("MatrixInverse", [a], {"adjoint": True})
    shape = _op("ConcatV2", [[_op("Shape", [c]), _i32([1, 1])], _i32(0)])
    return _op("Mul", [_op("Reshape", [grad, shape]), a_adj_inv])


@RegisterGradient("MatrixDeterminant")
def _matrix_determinant_grad(op, grad):
    c = op.outputs[0]
    return _det_grad(op.inputs[0], c, _op("Mul", [grad, c]))


@RegisterGradient("LogMatrixDeterminant")
def _log_matrix_determinant_grad(op, _grad_sign, grad_log_abs):
    return _det_grad(op.inputs[0], op.outputs[1], grad_log_abs)


# --- decompositions ---------------------------------------------------------------------------


@RegisterGradient("Cholesky")
def _cholesky_grad(op, grad):
    # l^-H ((l^H grad) * (tril(ones) - I/2)) l^-1, symmetrized.
    l = op.outputs[0]
    shape = _op("Shape", [l])
    l_inverse = _op("MatrixTriangularSolve",
                    [l, _eye(_shape_dim(shape, -1), _shape_slice(shape, None, -2), l.dtype)])
    middle = _mm(l, grad, adj_a=True)
    middle = _band(_set_diag(middle, _op("Mul", [_c(middle, 0.5), _diag_part(middle)])), -1, 0)
    grad_a = _mm(_mm(l_inverse, middle, adj_a=True), l_inverse)
    grad_a = _op("AddV2", [grad_a, _adjoint(grad_a)])
    return _op("Mul", [grad_a, _c(grad_a, 0.5)])


@RegisterGradient("Qr")
def _qr_grad(op, dq, dr):
    # https://arxiv.org/abs/2009.10071, as TF: static shapes only.
    q, r = op.outputs
    if r.shape.unknown_rank or r.shape[-2] is None or r.shape[-1] is None:
        raise NotImplementedError(f"QrGrad not implemented with dynamic shapes. Received r.shape: {r.shape}")
    if r.shape[-2] > r.shape[-1] and q.shape[-2] == q.shape[-1]:
        raise NotImplementedError("QrGrad not implemented when nrows > ncols and full_matrices is true. "
                                  f"Received r.shape={r.shape}.")

    def tri_solve(x, r):  # x r^-H for upper-triangular r
        return _adjoint(_op("MatrixTriangularSolve", [r, _adjoint(x)], {"lower": False, "adjoint": False}))

    def square_and_deep(q, r, dq, dr):
        qdq = _mm(q, dq, adj_a=True)
        qdq_ = _op("Sub", [qdq, _adjoint(qdq)])
        rdr = _mm(r, dr, adj_b=True)
        rdr_ = _op("Sub", [rdr, _adjoint(rdr)])
        tril = _band(_op("AddV2", [qdq_, rdr_]), -1, 0)
        grad_a = _mm(q, _op("AddV2", [dr, tri_solve(tril, r)]))
        grad_b = tri_solve(_op("Sub", [dq, _mm(q, qdq)]), r)
        ret = _op("AddV2", [grad_a, grad_b])
        if q.dtype.is_complex:  # TF's correction for the complex case
            m = _op("Sub", [rdr, _adjoint(qdq)])
            eyem = _set_diag(_op("ZerosLike", [m]), _diag_part(m))
            correction = _imaginary_part(eyem)
            ret = _op("AddV2", [ret, tri_solve(_mm(q, _adjoint(correction)), r)])
        return ret

    num_rows, num_cols = q.shape[-2], r.shape[-1]
    if num_rows >= num_cols:
        return square_and_deep(q, r, dq, dr)
    # Wide: partition a = [x, y], r = [u, v] and reduce to the square case.
    y = _slice(op.inputs[0], (None, None), (num_rows, None))
    u = _slice(r, (None, None), (None, num_rows))
    dv = _slice(dr, (None, None), (num_rows, None))
    du = _slice(dr, (None, None), (None, num_rows))
    dy = _mm(q, dv)
    dx = square_and_deep(q, u, _op("AddV2", [dq, _mm(y, dv, adj_b=True)]), du)
    return _op("ConcatV2", [[dx, dy], _i32(-1)])


def _imaginary_part(x: Output) -> Output:
    """x - cast(real(x), x.dtype), exactly, as (x - conj(x)) / 2: TF's C++ gradient
    of Real builds a complex64 Complex whatever the precision (complex128 breaks)."""
    return _op("Mul", [_op("Sub", [x, _op("Conj", [x])]), _c(x, 0.5)])


@RegisterGradient("Svd")
def _svd_grad(op, grad_s, grad_u, grad_v):
    # Giles (2008); j-towns.github.io/papers/svd-derivative.pdf; complex: re-ra.xyz/misc/complexsvd.pdf.
    a = op.inputs[0]
    grad_s = _op("Cast", [grad_s], {"DstT": a.dtype})
    grad_s_mat = _diag(grad_s)
    if not op.get_attr("compute_uv"):
        _, u, v = _node("Svd", [a], {"compute_uv": True, "full_matrices": False}).outputs
        return _mm(u, _mm(grad_s_mat, v, adj_b=True))

    full_matrices = op.get_attr("full_matrices")
    shape = a.shape
    m, n = (None, None) if shape.unknown_rank else shape[-2:]
    m = m if m is not None else grad_u.shape[-2] if not grad_u.shape.unknown_rank else None
    n = n if n is not None else grad_v.shape[-2] if not grad_v.shape.unknown_rank else None
    if m is None or n is None:
        raise NotImplementedError("SVD gradient has not been implemented for input with unknown "
                                  "inner matrix shape.")
    s, u, v = op.outputs
    s = _op("Cast", [s], {"DstT": a.dtype})
    use_adjoint = m > n
    if use_adjoint:  # differentiate A^H = V S U^H, take the adjoint at the end
        m, n, u, v, grad_u, grad_v = n, m, v, u, grad_v, grad_u
    if full_matrices and abs(m - n) > 1:
        raise NotImplementedError("svd gradient is not implemented for abs(m - n) > 1 when full_matrices "
                                  f"is True. Received: m={m} and n={n}.")
    s_mat = _diag(s)
    s2 = _op("Square", [s])
    # f[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal (infinite for repeated singular values).
    f = _set_diag(_safe_reciprocal(_op("Sub", [_expand(s2, -2), _expand(s2, -1)])), _op("ZerosLike", [s]))
    s_inv_mat = _diag(_safe_reciprocal(s))
    v1 = _slice(v, (None, None), (None, m))
    grad_v1 = _slice(grad_v, (None, None), (None, m))
    u_gu = _mm(u, grad_u, adj_a=True)
    v_gv = _mm(v1, grad_v1, adj_a=True)
    f_u = _op("Mul", [f, u_gu])
    f_v = _op("Mul", [f, v_gv])
    term1_nouv = _op("AddN", [[grad_s_mat, _mm(_op("AddV2", [f_u, _adjoint(f_u)]), s_mat),
                               _mm(s_mat, _op("AddV2", [f_v, _adjoint(f_v)]))]])
    grad_a = _mm(u, _mm(term1_nouv, v1, adj_b=True))
    if m != n:
        gv1t = _adjoint(grad_v1)
        term2_nous = _op("Sub", [gv1t, _mm(_mm(gv1t, v1), v1, adj_b=True)])
        if full_matrices:
            v2 = _slice(v, (None, None), (m, n))
            grad_v2 = _slice(grad_v, (None, None), (m, n))
            term2_nous = _op("Sub", [term2_nous, _mm(_mm(v1, grad_v2, adj_a=True), v2, adj_b=True)])
        grad_a = _op("AddV2", [grad_a, _mm(_mm(u, s_inv_mat), term2_nous)])
    if a.dtype.is_complex:
        s_shape = _op("Shape", [s])
        eye = _eye(_shape_dim(s_shape, -1), _shape_slice(s_shape, None, -1), a.dtype)
        l = _op("Mul", [eye, v_gv])
        term3_nouv = _mm(s_inv_mat, _op("Sub", [_adjoint(l), l]))
        term3 = _op("Mul", [_c(a, 0.5), _mm(u, _mm(term3_nouv, v1, adj_b=True))])
        grad_a = _op("AddV2", [grad_a, term3])
    return _adjoint(grad_a) if use_adjoint else grad_a


def _eigen_gaps(e: Output) -> Output:
    """f[i, j] = 1 / (e_j - e_i) off the diagonal, 0 on it."""
    return _set_diag(_safe_reciprocal(_op("Sub", [_expand(e, -2), _expand(e, -1)])), _op("ZerosLike", [e]))


@RegisterGradient("SelfAdjointEigV2")
def _self_adjoint_eig_v2_grad(op, grad_e, grad_v):
    e = op.outputs[0]
    if op.get_attr("compute_v"):
        v = op.outputs[1]
        inner = _op("AddV2", [_diag(grad_e), _op("Mul", [_eigen_gaps(e), _mm(v, grad_v, adj_a=True)])])
    else:
        v = _node("SelfAdjointEigV2", [op.inputs[0]], {"compute_v": True}).outputs[1]
        inner = _diag(grad_e)
    grad_a = _mm(v, _mm(inner, v, adj_b=True))
    # The op reads only the lower triangle of a: symmetrize, keep the lower triangle.
    grad_a = _band(_op("AddV2", [grad_a, _adjoint(grad_a)]), -1, 0)
    return _set_diag(grad_a, _op("Mul", [_c(grad_a, 0.5), _diag_part(grad_a)]))


@RegisterGradient("Eig")
def _eig_grad(op, grad_e, grad_v):
    # Boeddeker et al., https://arxiv.org/abs/1701.00392, eq. 4.77 (distinct eigenvalues).
    e = op.outputs[0]
    a = op.inputs[0]
    if op.get_attr("compute_v"):
        v = op.outputs[1]
        vt = _adjoint(v)
        f = _op("Conj", [_eigen_gaps(e)])
        vgv = _mm(vt, grad_v)
        diag_grad_part = _diag(_diag_part(_op("Sub", [vgv, _imaginary_part(vgv)])))
        mid = _op("AddV2", [_diag(grad_e),
                            _op("Mul", [f, _op("Sub", [vgv, _mm(_mm(vt, v), diag_grad_part)])])])
        grad_a = _op("MatrixSolve", [vt, _mm(mid, vt)])
    else:
        # linalg_ops.eig: the eigenvectors' dtype follows the input's precision.
        tout = "complex64" if a.dtype.name in ("float32", "complex64") else "complex128"
        v = _node("Eig", [a], {"Tout": _as_dtype(tout), "compute_v": True}).outputs[1]
        vt = _adjoint(v)
        grad_a = _op("MatrixSolve", [vt, _mm(_diag(grad_e), vt)])
    # math_ops.cast: to a real dtype it keeps the real part (Cast does that too).
    return grad_a if grad_a.dtype == a.dtype else _op("Cast", [grad_a], {"DstT": a.dtype})


@RegisterGradient("MatrixSquareRoot")
def _matrix_square_root_grad(op, grad):
    # A = R R, so dA = R dR + dR R: a Sylvester equation for dR, solved in
    # vectorized form with Kronecker products: (I (x) R^T + R (x) I) vec(dR) = vec(dA).
    sqrtm = op.outputs[0]
    shape = _op("Shape", [sqrtm])
    batch = _shape_slice(shape, None, -2)
    order = _op("Reshape", [_shape_dim(shape, -1), _i32([1])])
    one = _i32([1])

    def kron(b1, b2):
        r1 = _op("Reshape", [b1, _op("ConcatV2", [[batch, order, one, order, one], _i32(0)])])
        r2 = _op("Reshape", [b2, _op("ConcatV2", [[batch, one, order, one, order], _i32(0)])])
        square = _op("Mul", [order, order])
        return _op("Reshape", [_op("Mul", [r1, r2]), _op("ConcatV2", [[batch, square, square], _i32(0)])])

    eye = _eye(_shape_dim(shape, -1), batch, sqrtm.dtype)
    ksum = _op("AddV2", [kron(eye, _transpose(sqrtm)), kron(sqrtm, eye)])
    vec_shape = _op("ConcatV2", [[batch, _op("Mul", [order, order]), one], _i32(0)])
    vec_da = _op("Reshape", [_transpose(grad), vec_shape])
    vec_dsqrtm = _op("MatrixSolve", [ksum, vec_da])
    return _transpose(_op("Reshape", [vec_dsqrtm, shape]))


# --- tridiagonal --------------------------------------------------------------------------------


def _pad_tail(x: Output, tail: Sequence[Sequence[int]]) -> Output:
    """Pad the last len(tail) axes of x by ``tail`` (rows [before, after]), whatever its rank."""
    lead = _op("Sub", [_op("Rank", [x]), _i32(len(tail))])
    zeros = _op("Fill", [_op("Pack", [[lead, _i32(2)]]), _i32(0)])
    return _op("Pad", [x, _op("ConcatV2", [[zeros, _i32(tail)], _i32(0)])])


def _left_shift(x: Output) -> Output:
    """Shift the next-to-last axis left, adding zeros at the end."""
    return _pad_tail(_slice(x, (1, None), (None, None)), [[0, 1], [0, 0]])


def _right_shift(x: Output) -> Output:
    return _pad_tail(_slice(x, (None, -1), (None, None)), [[1, 0], [0, 0]])


@RegisterGradient("TridiagonalMatMul")
def _tridiagonal_mat_mul_grad(op, grad):
    superdiag, maindiag, subdiag, rhs = op.inputs
    superdiag_conj, maindiag_conj, subdiag_conj = (_adjoint(d) for d in (superdiag, maindiag, subdiag))
    rhs_conj = _op("Conj", [rhs]) if rhs.dtype.is_complex else rhs
    minus_one = _i32(-1)

    def row_sums(x):
        return _expand(_op("Sum", [_op("Mul", [x, grad]), minus_one]), -2)

    rhs_grad = _op("AddN", [[_right_shift(_op("Mul", [superdiag_conj, grad])),
                             _op("Mul", [maindiag_conj, grad]),
                             _left_shift(_op("Mul", [subdiag_conj, grad]))]])
    return row_sums(_left_shift(rhs_conj)), row_sums(rhs_conj), row_sums(_right_shift(rhs_conj)), rhs_grad


def _transpose_tridiagonal(diags: Output) -> Output:
    """The compact diagonals [super; main; sub] of the transposed matrix."""
    superdiag = _pad_tail(_slice(diags, 2, (1, None)), [[0, 1]])
    subdiag = _pad_tail(_slice(diags, 0, (None, -1)), [[1, 0]])
    return _op("Pack", [[superdiag, _slice(diags, 1, (None, None)), subdiag]], {"axis": -2})


def _matmul_three_diagonals(x: Output, y_tr: Output) -> Output:
    """The three diagonals of x @ y_tr^T, compact, without forming the product."""
    minus_one = _i32(-1)
    diag = _op("Sum", [_op("Mul", [x, y_tr]), minus_one])
    superdiag = _op("Sum", [_op("Mul", [x, _left_shift(y_tr)]), minus_one])
    subdiag = _op("Sum", [_op("Mul", [x, _right_shift(y_tr)]), minus_one])
    return _op("Pack", [[superdiag, diag, subdiag]], {"axis": -2})


@RegisterGradient("TridiagonalSolve")
def _tridiagonal_solve_grad(op, grad):
    diags = op.inputs[0]
    x = op.outputs[0]
    attrs = {"partial_pivoting": op.get_attr("partial_pivoting"),
             "perturb_singular": op.get_attr("perturb_singular")}
    grad_rhs = _op("TridiagonalSolve", [_transpose_tridiagonal(diags), grad], attrs)
    return _op("Neg", [_matmul_three_diagonals(grad_rhs, x)]), grad_rhs


# --- einsum -------------------------------------------------------------------------------------


@RegisterGradient("XlaEinsum")
def _xla_einsum_grad(op, grad):
    equation = op.get_attr("equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    inputs, output = equation.split("->")
    left, right = inputs.split(",")
    return (_op("XlaEinsum", [grad, op.inputs[1]], {"equation": f"{output},{right}->{left}"}),
            _op("XlaEinsum", [grad, op.inputs[0]], {"equation": f"{output},{left}->{right}"}))
