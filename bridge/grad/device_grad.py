"""Gradients of device collectives and layouts (TPU, NCCL, XLA sharding, DTensor)."""
from __future__ import annotations
