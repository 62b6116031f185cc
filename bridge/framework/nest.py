"""Nested structures of tensors and Python values (TF's ``tensorflow/python/util/nest``):
the leaves of lists, tuples, namedtuples and dicts, and the structure rebuilt
from them.  ``bridge.function``, ``cond`` and ``while_loop`` pass what a Python
function takes and returns through them."""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["flatten", "pack_as"]


def flatten(structure: Any) -> list:
    """Leaves of nested lists, tuples, namedtuples and dicts (sorted keys), in order."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure, key=repr) for leaf in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in flatten(item)]
    return [structure]


def pack_as(structure: Any, flat: Sequence[Any]) -> Any:
    """Rebuild ``structure`` with the leaves of ``flat`` (the inverse of flatten)."""
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, dict):
            built = {k: build(s[k]) for k in sorted(s, key=repr)}
            return type(s)((k, built[k]) for k in s)
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[build(v) for v in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(v) for v in s)
        return next(it)

    result = build(structure)
    if next(it, None) is not None:
        raise ValueError("pack_as: more values than leaves in the structure")
    return result
