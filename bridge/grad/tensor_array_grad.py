"""Gradients of TensorArrays (TF v1), after TF's tensor_array_grad.py."""
from __future__ import annotations
