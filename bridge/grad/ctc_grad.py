"""Gradients of CTC losses, after TF's ctc_ops.py."""
from __future__ import annotations
