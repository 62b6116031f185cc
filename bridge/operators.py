"""Python's operators on graph tensors: ``x + y``, ``x @ w``, ``-x``, ...

Each operator calls the generated op function TF Python's operator calls
(``x + y`` is ``ops.add_v2(x, y)``, as in TF's math_ops).  They live here
and are installed on :class:`bridge.Output` when ``bridge`` is imported,
rather than written in ``bridge/graph.py``, because the generated ops are
built on the graph module: graph must not import them back.  ``bridge.ops``
itself is imported on the first operator used, so ``import bridge`` stays light.
"""
from __future__ import annotations

from typing import Any, Callable

from .graph import Output

__all__ = ["OPERATORS"]


def _ops() -> Any:
    from . import ops
    return ops


#: Output's special method -> what it does.  Reflected forms (``__radd__``)
#: swap the operands, so ``2.0 * x`` is ``mul(2.0, x)``.
OPERATORS: dict[str, Callable[..., Output]] = {
    "__add__": lambda x, y: _ops().add_v2(x, y),
    "__radd__": lambda x, y: _ops().add_v2(y, x),
    "__sub__": lambda x, y: _ops().sub(x, y),
    "__rsub__": lambda x, y: _ops().sub(y, x),
    "__mul__": lambda x, y: _ops().mul(x, y),
    "__rmul__": lambda x, y: _ops().mul(y, x),
    "__truediv__": lambda x, y: _ops().real_div(x, y),
    "__rtruediv__": lambda x, y: _ops().real_div(y, x),
    "__matmul__": lambda x, y: _ops().mat_mul(x, y),
    "__rmatmul__": lambda x, y: _ops().mat_mul(y, x),
    "__pow__": lambda x, y: _ops().pow(x, y),
    "__rpow__": lambda x, y: _ops().pow(y, x),
    "__neg__": lambda x: _ops().neg(x),
    "__abs__": lambda x: _ops().abs(x),
}

for _name, _fn in OPERATORS.items():
    setattr(Output, _name, _fn)
del _name, _fn

# numpy defers to Output: ``array + x`` calls ``x.__radd__(array)`` (a graph
# op) instead of numpy applying ``+`` to each element with x, which built an
# object array of Outputs.  TF's Tensor does the same (__array_priority__).
Output.__array_ufunc__ = None
