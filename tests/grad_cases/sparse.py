"""Gradient cases: TF's sparse_grad.py, CSR matrices, ragged tensors, composite tensors and optionals."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "CSRSparseMatrixToDense", "CSRSparseMatrixToSparseTensor",
    "CompositeTensorVariantFromComponents", "CompositeTensorVariantToComponents",
    "DenseToCSRSparseMatrix", "OptionalFromValue", "OptionalGetValue", "RaggedFillEmptyRows",
    "RaggedGather", "RaggedTensorFromVariant", "RaggedTensorToSparse", "RaggedTensorToTensor",
    "RaggedTensorToVariant", "SparseAdd", "SparseDenseCwiseAdd", "SparseDenseCwiseDiv",
    "SparseDenseCwiseMul", "SparseFillEmptyRows", "SparseMatrixAdd", "SparseMatrixMatMul",
    "SparseMatrixMul", "SparseMatrixSoftmax", "SparseMatrixSparseMatMul",
    "SparseMatrixTranspose", "SparseReduceSum", "SparseReorder", "SparseSlice", "SparseSoftmax",
    "SparseSparseMaximum", "SparseSparseMinimum", "SparseTensorDenseAdd",
    "SparseTensorDenseMatMul", "SparseTensorToCSRSparseMatrix", "SparseToDense",
})
