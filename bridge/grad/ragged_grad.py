"""Gradients of ragged tensors, composite-tensor variants and optionals."""
from __future__ import annotations
