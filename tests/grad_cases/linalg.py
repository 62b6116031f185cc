"""Gradient cases: TF's linalg_grad.py (solves, decompositions, determinants, einsum)."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "BandedTriangularSolve", "Cholesky", "Eig", "Einsum", "LogMatrixDeterminant",
    "MatrixDeterminant", "MatrixInverse", "MatrixSolve", "MatrixSolveLs", "MatrixSquareRoot",
    "MatrixTriangularSolve", "Qr", "SelfAdjointEigV2", "Svd", "TridiagonalMatMul",
    "TridiagonalSolve", "XlaEinsum",
})
