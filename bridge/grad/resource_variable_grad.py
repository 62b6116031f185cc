"""Gradients of reads of resource variables (ReadVariableOp, ResourceGather, ResourceGatherNd)."""
from __future__ import annotations
