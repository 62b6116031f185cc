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

__all__ = ["OPERATORS", "BINARY"]


def _ops() -> Any:
    from . import ops
    return ops


def _binary(op: str) -> tuple[Callable[[Any, Any], Output], Callable[[Any, Any], Output]]:
    """``x <op> y`` and its reflection ``y <op> x`` (``__radd__`` is called on
    the right operand, so it swaps them back: ``2.0 * x`` is ``mul(2.0, x)``)."""
    return (lambda x, y: getattr(_ops(), op)(x, y)), (lambda x, y: getattr(_ops(), op)(y, x))


#: Python's binary operators -> the generated op function each calls.
BINARY = {"add": "add_v2", "sub": "sub", "mul": "mul", "truediv": "real_div", "matmul": "mat_mul",
          "pow": "pow"}

#: Output's special method -> what it does.
OPERATORS: dict[str, Callable[..., Output]] = {
    "__neg__": lambda x: _ops().neg(x),
    "__abs__": lambda x: _ops().abs(x),
}
for _operator, _op in BINARY.items():
    OPERATORS[f"__{_operator}__"], OPERATORS[f"__r{_operator}__"] = _binary(_op)
del _operator, _op

for _name, _fn in OPERATORS.items():
    setattr(Output, _name, _fn)
del _name, _fn

# numpy defers to Output: ``array + x`` calls ``x.__radd__(array)`` (a graph
# op) instead of numpy applying ``+`` to each element with x, which built an
# object array of Outputs.  TF's Tensor does the same (__array_priority__).
Output.__array_ufunc__ = None
