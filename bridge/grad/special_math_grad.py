"""Gradients of special functions (Bessel, gamma and beta families, zeta, erf, Fresnel, ...), after TF's math_grad.py."""
from __future__ import annotations
