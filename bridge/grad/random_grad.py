"""Gradients of random ops with reparameterised samples (RandomGamma, ...), after TF's random_grad.py."""
from __future__ import annotations
