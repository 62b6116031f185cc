"""Construction contexts on the default graph, as TensorFlow's module functions."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .graph import get_default_graph


def name_scope(name: Optional[str]):
    """``with name_scope("outer"):`` ops are named "outer/<name>" (nested, uniquified)."""
    return get_default_graph().name_scope(name)


def device(device_name: Optional[str]):
    """``with device("/cpu:0"):`` ops created inside are placed there."""
    return get_default_graph().device(device_name)


def control_dependencies(control_inputs: Optional[Sequence[Any]]):
    """``with control_dependencies([a, b]):`` ops created inside run after a and b."""
    return get_default_graph().control_dependencies(control_inputs)


def colocate_with(op: Any):
    """``with colocate_with(op):`` ops created inside are placed with ``op``."""
    return get_default_graph().colocate_with(op)
