"""Gradients of sparse tensors and CSR sparse matrices, after TF's sparse_grad.py and sparse_csr_matrix_grad.py."""
from __future__ import annotations
