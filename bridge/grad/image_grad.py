"""Gradients of image ops (resizing, crops, colour, projective transforms), after TF's image_grad.py."""
from __future__ import annotations
