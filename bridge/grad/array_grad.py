"""Gradients of array ops TensorFlow's C++ registry lacks (after TF's array_grad.py)."""
from __future__ import annotations

from .registry import NotDifferentiable, RegisterGradient


@RegisterGradient("PreventGradient")
def _prevent_gradient_grad(op, _grad):
    message = op.get_attr("message")
    raise LookupError(f"gradient explicitly disabled for '{op.name}'"
                      + (f": {message.decode(errors='replace')}" if message else ""))


# TF's C++ registry lacks OnesLike's (empty) gradient.
NotDifferentiable("OnesLike")
