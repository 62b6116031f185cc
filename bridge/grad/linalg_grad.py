"""Gradients of linear algebra (solves, decompositions, determinants, einsum), after TF's linalg_grad.py."""
from __future__ import annotations
