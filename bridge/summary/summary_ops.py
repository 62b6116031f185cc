"""``scalar``, ``histogram``, ``merge`` and ``merge_all``: TF's summary ops, tagged and collected as TF1 does."""
from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator, Optional, Sequence

from bridge.framework.builders import constant
from bridge.framework.graph import get_default_graph

__all__ = ["SUMMARIES", "scalar", "histogram", "merge", "merge_all"]

#: The collection every summary joins unless told otherwise (TF's GraphKeys.SUMMARIES).
SUMMARIES = "summaries"


def _collect(summary: Any, collections: Optional[Sequence[str]]) -> Any:
    graph = summary.graph
    for key in (SUMMARIES,) if collections is None else collections:
        graph.collections.setdefault(key, []).append(summary)
    return summary


@contextlib.contextmanager
def _summary_scope(name: str, family: Optional[str]) -> Iterator[str]:
    """Yield the tag as TF1's ``summary_scope`` makes it: the op's name scope
    (uniquified, under the current scope), prefixed with ``family`` when given."""
    if not name or not isinstance(name, str):
        raise ValueError(f"summary name must be a non-empty str, got {name!r}")
    name, family = _clean_tag(name), family and _clean_tag(family)
    with get_default_graph().name_scope(f"{family}/{name}" if family else name) as scope:
        tag = scope.rstrip("/")
        yield f"{family}/{tag}" if family else tag


def _clean_tag(name: str) -> str:
    """TF's ``clean_tag``: characters a name scope refuses become '_', leading '/' dropped."""
    return re.sub(r"[^-/\w\.]", "_", name).lstrip("/")


def scalar(name: str, tensor: Any, collections: Optional[Sequence[str]] = None,
           family: Optional[str] = None) -> Any:
    """A ``ScalarSummary`` of the scalar ``tensor`` (real dtype), tagged ``name``; a string Output."""
    from bridge import ops
    with _summary_scope(name, family) as tag:
        summary = ops.scalar_summary(constant(tag), tensor)
    return _collect(summary, collections)


def histogram(name: str, values: Any, collections: Optional[Sequence[str]] = None,
              family: Optional[str] = None) -> Any:
    """A ``HistogramSummary`` of ``values`` (any shape, real dtype), tagged ``name``; a string Output."""
    from bridge import ops
    with _summary_scope(name, family) as tag:
        summary = ops.histogram_summary(constant(tag), values)
    return _collect(summary, collections)


def merge(inputs: Sequence[Any], collections: Optional[Sequence[str]] = None, name: Optional[str] = None) -> Any:
    """One ``Summary`` holding the values of every summary in ``inputs`` (``MergeSummary``)."""
    from bridge import ops
    inputs = list(inputs)
    if not inputs:
        raise ValueError("summary.merge: no summaries to merge")
    summary = ops.merge_summary(inputs, name=name)
    for key in collections or ():
        summary.graph.collections.setdefault(key, []).append(summary)
    return summary


def merge_all(key: str = SUMMARIES, graph: Any = None, name: Optional[str] = None) -> Optional[Any]:
    """Merge every summary of ``graph``'s collection ``key``; None when it has none (as TF)."""
    graph = graph or get_default_graph()
    items = graph.collections.get(key, [])
    if not items:
        return None
    with graph.as_default():
        return merge(items, name=name)
