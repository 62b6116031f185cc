"""Gradients of data-flow ops (after TF's data_flow_grad.py).

DynamicPartition, DynamicStitch and ParallelDynamicStitch take theirs from TF's C++ registry,
which matches TF Python's (``tests/support/grad_cases/array.py``): nothing needs registering here.
"""
from __future__ import annotations
