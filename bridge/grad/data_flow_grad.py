"""Gradients of DynamicPartition and DynamicStitch, after TF's data_flow_grad.py."""
from __future__ import annotations
