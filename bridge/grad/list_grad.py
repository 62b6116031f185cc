"""Gradients of TensorLists (FromTensor, GetItem, SetItem, Stack, Gather, Scatter, ...), after TF's list_ops.py."""
from __future__ import annotations
