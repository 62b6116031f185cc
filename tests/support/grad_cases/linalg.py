"""Gradient cases: TF's linalg_grad.py (solves, decompositions, determinants, einsum).

Inputs are made well conditioned inside ``build``: SPD matrices as
``x x^H + n I``, triangular and tridiagonal ones with a dominant diagonal,
eigen/singular values spread apart.  Eigen- and singular vectors are defined
only up to sign (phase), so their cases differentiate ``v diag(c) v^H``,
which does not depend on it.
"""
from __future__ import annotations

import numpy as np

import bridge
from bridge import ops

from . import case, cplx, i32, i64, positive, signed  # noqa: F401


_F64_F32 = ("float64", "float32")


def _const(x, value):
    """``value`` (float64 numpy) as a constant of x's dtype."""
    return ops.cast(bridge.constant(np.asarray(value, dtype=np.float64)), DstT=x.dtype)


def _n(x):
    return int(x.shape[-1])


def _eye_plus(x, k):
    """x + k I: a dominant diagonal."""
    return ops.add_v2(x, _const(x, k * np.eye(_n(x))))


def _spd(x):
    """x x^H + n I: symmetric (Hermitian) positive definite."""
    return _eye_plus(ops.batch_mat_mul_v2(x, x, adj_y=True), _n(x))


def _adjoint(x):
    r = len(x.shape)
    t = ops.transpose(x, list(range(r - 2)) + [r - 1, r - 2])
    return ops.conj(t) if x.dtype.is_complex else t


def _spread(x, gaps):
    """Hermitian (x + x^H)/2 plus diag(gaps): well-separated eigenvalues."""
    h = ops.mul(ops.add_v2(x, _adjoint(x)), _const(x, 0.5))
    return ops.add_v2(h, _const(x, np.diag(gaps)))


def _weighted_gram(v, weights):
    """v diag(w) v^H: invariant to the sign/phase of v's columns."""
    w = _const(v, weights)
    return ops.batch_mat_mul_v2(ops.mul(v, w), v, adj_y=True)


def _tridiag(d):
    """Compact [3, n] diagonals with a dominant main diagonal."""
    return ops.add_v2(d, _const(d, [[0.0], [4.0], [0.0]]))


def _solve_ls(a, b, l2):
    """MatrixSolveLs: its l2 regularizer is double whatever T is (its gradient is None)."""
    return ops.matrix_solve_ls(a, b, ops.cast(l2, DstT=bridge.as_dtype("float64")))


def _svd_build(compute_uv, full_matrices):
    def build(x):
        s, u, v = ops.svd(x, compute_uv=compute_uv, full_matrices=full_matrices)
        if not compute_uv:
            return [s]
        return [s, _weighted_gram(u, np.arange(1.0, int(u.shape[-1]) + 1)),
                _weighted_gram(v, np.arange(1.0, int(v.shape[-1]) + 1))]
    return build


def _eigh_build(compute_v, gaps):
    def build(x):
        e, v = ops.self_adjoint_eig_v2(_spread(x, gaps), compute_v=compute_v)
        return [e, _weighted_gram(v, [1.0, 2.0, 3.0])] if compute_v else [e]
    return build


def _eig_build(compute_v):
    def build(x):
        tout = "complex64" if x.dtype.name in ("float32", "complex64") else "complex128"
        # A general (non-normal) matrix with its eigenvalues spread apart.
        e, v = ops.eig(ops.add_v2(x, _const(x, np.diag([0.0, 3.0, 6.0]))),
                       Tout=bridge.as_dtype(tout), compute_v=compute_v)
        return [e, _weighted_gram(v, [1.0, 2.0, 3.0])] if compute_v else [e]
    return build


CASES = [
    # Cholesky
    case("Cholesky", lambda x: ops.cholesky(_spd(x)), signed(3, 3)),
    case("Cholesky", lambda x: ops.cholesky(_spd(x)), signed(2, 3, 3), label="batch"),
    case("Cholesky", lambda x: ops.cholesky(_spd(x)), cplx(3, 3), label="complex"),
    # MatrixSolve
    case("MatrixSolve", lambda a, b: ops.matrix_solve(_eye_plus(a, 3), b), signed(3, 3), signed(3, 2)),
    case("MatrixSolve", lambda a, b: ops.matrix_solve(_eye_plus(a, 3), b, adjoint=True),
         signed(2, 3, 3), signed(2, 3, 2), label="adjoint-batch"),
    case("MatrixSolve", lambda a, b: ops.matrix_solve(_eye_plus(a, 3), b, adjoint=True),
         cplx(3, 3), cplx(3, 2), label="adjoint-complex"),
    # MatrixInverse
    case("MatrixInverse", lambda a: ops.matrix_inverse(_eye_plus(a, 3)), signed(3, 3)),
    # float16 is left out of the batch: the second order goes through TF's C++ gradient of
    # BatchMatMulV2, which builds BatchMatMulV3, and libtensorflow has no float16 kernel for it.
    case("MatrixInverse", lambda a: ops.matrix_inverse(_eye_plus(a, 3), adjoint=True),
         signed(2, 3, 3), label="adjoint-batch", dtypes=("float64", "float32")),
    case("MatrixInverse", lambda a: ops.matrix_inverse(_eye_plus(a, 3), adjoint=True),
         cplx(3, 3), label="adjoint-complex"),
    # MatrixTriangularSolve (reads one triangle of the matrix: the gradient is masked)
    case("MatrixTriangularSolve", lambda a, b: ops.matrix_triangular_solve(_eye_plus(a, 3), b),
         signed(3, 3), signed(3, 2)),
    case("MatrixTriangularSolve",
         lambda a, b: ops.matrix_triangular_solve(_eye_plus(a, 3), b, lower=False, adjoint=True),
         signed(3, 3), signed(3, 2), label="upper-adjoint"),
    case("MatrixTriangularSolve",
         lambda a, b: ops.matrix_triangular_solve(_eye_plus(a, 3), b, lower=True, adjoint=True),
         signed(2, 3, 3), signed(3, 2), label="lower-adjoint-broadcast"),
    case("MatrixTriangularSolve",
         lambda a, b: ops.matrix_triangular_solve(_eye_plus(a, 3), b, lower=False),
         cplx(3, 3), cplx(2, 3, 2), label="upper-complex-broadcast"),
    # MatrixDeterminant, LogMatrixDeterminant
    case("MatrixDeterminant", lambda a: ops.matrix_determinant(_eye_plus(a, 2)), signed(3, 3)),
    case("MatrixDeterminant", lambda a: ops.matrix_determinant(_eye_plus(a, 2)), signed(2, 3, 3),
         label="batch"),
    case("MatrixDeterminant", lambda a: ops.matrix_determinant(_eye_plus(a, 2)), cplx(3, 3),
         label="complex"),
    case("LogMatrixDeterminant", lambda a: ops.log_matrix_determinant(_eye_plus(a, 2)), signed(3, 3)),
    case("LogMatrixDeterminant", lambda a: ops.log_matrix_determinant(ops.neg(_eye_plus(a, 2))),
         signed(2, 3, 3), label="negative-batch"),
    case("LogMatrixDeterminant", lambda a: ops.log_matrix_determinant(_eye_plus(a, 2)), cplx(3, 3),
         label="complex"),
    # Qr (no float16: TF's own gradient needs MatrixTriangularSolve, which has no float16 kernel)
    case("Qr", lambda a: list(ops.qr(a)), signed(4, 3), label="deep", dtypes=_F64_F32),
    case("Qr", lambda a: list(ops.qr(a)), signed(2, 3, 3), label="square-batch", dtypes=_F64_F32),
    case("Qr", lambda a: list(ops.qr(a)), signed(3, 4), label="wide", dtypes=_F64_F32),
    case("Qr", lambda a: list(ops.qr(a)), cplx(4, 3), label="deep-complex"),
    # Svd
    case("Svd", _svd_build(False, False), signed(4, 3), label="values"),
    case("Svd", _svd_build(True, False), signed(4, 3), label="deep"),
    case("Svd", _svd_build(True, False), signed(2, 3, 4), label="wide-batch"),
    case("Svd", _svd_build(True, True), signed(4, 3), label="full"),
    case("Svd", _svd_build(True, True), signed(2, 3, 4), label="full-wide-batch"),
    case("Svd", _svd_build(True, False), cplx(3, 3), label="complex"),
    case("Svd", _svd_build(False, False), cplx(3, 4), label="values-complex"),
    # SelfAdjointEigV2 (reads the lower triangle)
    case("SelfAdjointEigV2", _eigh_build(True, [0.0, 3.0, 6.0]), signed(3, 3)),
    case("SelfAdjointEigV2", _eigh_build(False, [0.0, 3.0, 6.0]), signed(2, 3, 3), label="values-batch"),
    case("SelfAdjointEigV2", _eigh_build(True, [0.0, 3.0, 6.0]), cplx(3, 3), label="complex"),
    # a non-symmetric input: the op reads its lower triangle only
    case("SelfAdjointEigV2",
         lambda x: ops.self_adjoint_eig_v2(ops.add_v2(x, _const(x, np.diag([0.0, 3.0, 6.0]))), compute_v=False)[0],
         signed(3, 3), label="values-nonsymmetric"),
    # TridiagonalSolve
    case("TridiagonalSolve", lambda d, b: ops.tridiagonal_solve(_tridiag(d), b), signed(3, 4), signed(4, 2)),
    case("TridiagonalSolve", lambda d, b: ops.tridiagonal_solve(_tridiag(d), b, partial_pivoting=False),
         signed(2, 3, 4), signed(2, 4, 2), label="nopivot-batch"),
    case("TridiagonalSolve", lambda d, b: ops.tridiagonal_solve(_tridiag(d), b), cplx(3, 4), cplx(4, 2),
         label="complex"),
    # BandedTriangularSolve: [bands, n] compact band, main diagonal dominant
    case("BandedTriangularSolve",
         lambda a, b: ops.banded_triangular_solve(ops.add_v2(a, _const(a, [[0.0], [4.0]])), b, lower=True),
         signed(2, 4), signed(4, 2), label="lower"),
    case("BandedTriangularSolve",
         lambda a, b: ops.banded_triangular_solve(ops.add_v2(a, _const(a, [[4.0], [0.0]])), b, lower=False,
                                                  adjoint=True),
         signed(2, 4), signed(4, 2), label="upper-adjoint"),
    case("BandedTriangularSolve",
         lambda a, b: ops.banded_triangular_solve(ops.add_v2(a, _const(a, [[0.0], [0.0], [4.0]])), b,
                                                  lower=True, adjoint=True),
         cplx(3, 4), cplx(2, 4, 2), label="lower-adjoint-complex-broadcast"),
    # TridiagonalMatMul
    case("TridiagonalMatMul", lambda s, m, d, b: ops.tridiagonal_mat_mul(s, m, d, b),
         signed(1, 4), signed(1, 4), signed(1, 4), signed(4, 2)),
    case("TridiagonalMatMul", lambda s, m, d, b: ops.tridiagonal_mat_mul(s, m, d, b),
         cplx(2, 1, 4), cplx(2, 1, 4), cplx(2, 1, 4), cplx(2, 4, 3), label="complex-batch"),
    # MatrixSquareRoot
    case("MatrixSquareRoot", lambda x: ops.matrix_square_root(_spd(x)), signed(3, 3)),
    case("MatrixSquareRoot", lambda x: ops.matrix_square_root(_eye_plus(x, 3)), signed(2, 3, 3),
         label="nonsymmetric-batch"),
    case("MatrixSquareRoot", lambda x: ops.matrix_square_root(_spd(x)), cplx(3, 3), label="complex"),
    # MatrixSolveLs (the l2 regularizer is double whatever T is; its gradient is None)
    case("MatrixSolveLs", _solve_ls,
         signed(4, 3), signed(4, 2), np.float64(0.25), label="overdetermined"),
    case("MatrixSolveLs", _solve_ls,
         signed(2, 3, 4), signed(2, 3, 2), np.float64(0.5), label="underdetermined-batch"),
    case("MatrixSolveLs", _solve_ls,
         cplx(4, 3), cplx(4, 2), np.float64(0.25), wrt=[0, 1], label="overdetermined-complex"),
    # Eig (input real or complex, eigenvalues complex)
    case("Eig", _eig_build(False), signed(3, 3), label="values"),
    case("Eig", _eig_build(True), signed(3, 3)),
    case("Eig", _eig_build(True), cplx(3, 3), label="complex"),
    # Einsum
    case("Einsum", lambda a, b: ops.einsum([a, b], equation="ij,jk->ik"), signed(2, 3), signed(3, 4)),
    case("Einsum", lambda a, b: ops.einsum([a, b], equation="...ij,jk->...ik"), signed(2, 2, 3), signed(3, 4),
         label="ellipsis-broadcast"),
    case("Einsum", lambda a, b: ops.einsum([a, b], equation="abc,cd->ad"), signed(2, 3, 4), signed(4, 2),
         label="reduced"),
    case("Einsum", lambda a: ops.einsum([a], equation="ii->"), signed(3, 3), label="trace"),
    case("Einsum", lambda a: ops.einsum([a], equation="abc->ca"), signed(2, 3, 4), label="reduce-transpose"),
    case("Einsum", lambda a: ops.einsum([a], equation="abc->ac"), signed(2, 3, 4), label="reduce"),
    case("Einsum", lambda a: ops.einsum([a], equation="ij->ji"), signed(2, 3), label="transpose"),
    case("Einsum", lambda a, b: ops.einsum([a, b], equation="bij,bjk->bik"), cplx(2, 2, 3), cplx(2, 3, 2),
         label="complex"),
    # XlaEinsum (XLA-only: no CPU kernel outside a compiled cluster)
    case("XlaEinsum", lambda a, b: ops.xla_einsum(a, b, equation="ij,jk->ik"), signed(2, 3), signed(3, 4)),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset()
