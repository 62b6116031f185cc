"""TF1's summary ops (``scalar``, ``histogram``, ``image``, ``audio``, ``text``,
``tensor_summary``, ``merge``, ``merge_all``), tagged and collected as TF1 does.

Each returns a string Output whose value is a serialized ``Summary`` for
``FileWriter.add_summary``.  Besides what TF1 takes, ``image`` takes
matplotlib figures (drawn to RGBA pixels when the graph is built).
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from bridge.framework import _proto
from bridge.framework.builders import constant
from bridge.framework.graph import get_default_graph

__all__ = ["SUMMARIES", "scalar", "histogram", "image", "audio", "text", "tensor_summary", "merge", "merge_all"]

#: The collection every summary joins unless told otherwise (TF's GraphKeys.SUMMARIES).
SUMMARIES = "summaries"


def _collect(summary: Any, collections: Optional[Sequence[str]]) -> Any:
    graph = summary.graph
    for key in (SUMMARIES,) if collections is None else collections:
        graph.collections.setdefault(key, []).append(summary)
    return summary


@contextlib.contextmanager
def _summary_scope(name: str, family: Optional[str]) -> Iterator[tuple[str, str]]:
    """Yield (tag, scope) as TF1's ``summary_scope`` makes them: the scope is
    the op's name scope (uniquified, under the current scope; the summary op
    takes it as its name, as TF1's ops do), the tag that scope prefixed with
    ``family`` when given."""
    if not name or not isinstance(name, str):
        raise ValueError(f"summary name must be a non-empty str, got {name!r}")
    name, family = _clean_tag(name), family and _clean_tag(family)
    with get_default_graph().name_scope(f"{family}/{name}" if family else name) as scope:
        tag = scope.rstrip("/")
        yield (f"{family}/{tag}" if family else tag), scope


def _clean_tag(name: str) -> str:
    """TF's ``clean_tag``: characters a name scope refuses become '_', leading '/' dropped."""
    return re.sub(r"[^-/\w\.]", "_", name).lstrip("/")


def scalar(name: str, tensor: Any, collections: Optional[Sequence[str]] = None,
           family: Optional[str] = None) -> Any:
    """A ``ScalarSummary`` of the scalar ``tensor`` (real dtype), tagged ``name``; a string Output."""
    from bridge import ops
    with _summary_scope(name, family) as (tag, scope):
        summary = ops.scalar_summary(tag, tensor, name=scope)
    return _collect(summary, collections)


def histogram(name: str, values: Any, collections: Optional[Sequence[str]] = None,
              family: Optional[str] = None) -> Any:
    """A ``HistogramSummary`` of ``values`` (any shape, real dtype), tagged ``name``; a string Output."""
    from bridge import ops
    with _summary_scope(name, family) as (tag, scope):
        summary = ops.histogram_summary(tag, values, name=scope)
    return _collect(summary, collections)


def image(name: str, tensor: Any, max_outputs: int = 3, collections: Optional[Sequence[str]] = None,
          family: Optional[str] = None) -> Any:
    """An ``ImageSummary`` of up to ``max_outputs`` images, tagged ``name/image/<i>`` (one image: ``name/image``).

    ``tensor``: ``[batch, height, width, channels]`` with 1 (grey), 3 (RGB) or
    4 (RGBA) channels; uint8, or floats (TF's rule: values in [0, 1] are
    scaled by 255, others mapped linearly so the largest magnitude is 255 or
    0 to 127/255 as TF does).  A numpy array, an Output, a matplotlib
    ``Figure`` or a list of Figures (each drawn now into RGBA pixels, all of
    one size).
    """
    from bridge import ops
    if _is_figure(tensor) or (isinstance(tensor, (list, tuple)) and tensor and all(map(_is_figure, tensor))):
        tensor = figures_to_array(tensor)
    with _summary_scope(name, family) as (tag, scope):
        summary = ops.image_summary(tag, tensor, max_images=_positive(max_outputs, "max_outputs"), name=scope)
    return _collect(summary, collections)


def audio(name: str, tensor: Any, sample_rate: Any, max_outputs: int = 3,
          collections: Optional[Sequence[str]] = None, family: Optional[str] = None) -> Any:
    """An ``AudioSummaryV2`` of up to ``max_outputs`` clips: ``tensor`` is float32
    ``[batch, frames, channels]`` or ``[batch, frames]`` in [-1, 1]; ``sample_rate``
    in Hz (a float or a scalar float32 Output)."""
    from bridge import ops
    with _summary_scope(name, family) as (tag, scope):
        # TF1 converts the rate first, as <scope>/sample_rate.
        rate = sample_rate if hasattr(sample_rate, "op") else constant(np.float32(sample_rate), name="sample_rate")
        summary = ops.audio_summary_v2(tag, tensor, rate, max_outputs=_positive(max_outputs, "max_outputs"),
                                       name=scope)
    return _collect(summary, collections)


def text(name: str, tensor: Any, collections: Optional[Sequence[str]] = None) -> Any:
    """A text summary (TensorBoard's Text dashboard) of a string tensor of any
    shape (Markdown; a 1-d or 2-d tensor shows as a table)."""
    if getattr(tensor, "dtype", None) is not None and getattr(tensor.dtype, "name", None) not in (None, "string"):
        raise ValueError(f"summary.text {name!r}: expected tensor {tensor.name} to have dtype string, "
                         f"got {tensor.dtype.name}")
    return tensor_summary(name, tensor, collections=collections, summary_metadata=plugin_metadata("text"))


def tensor_summary(name: str, tensor: Any, summary_description: Optional[str] = None,
                   collections: Optional[Sequence[str]] = None, summary_metadata: Optional[bytes] = None,
                   family: Optional[str] = None, display_name: Optional[str] = None) -> Any:
    """A ``TensorSummaryV2`` of ``tensor`` with ``summary_metadata`` (a serialized
    ``SummaryMetadata``, as :func:`plugin_metadata` makes), as TF1's ``tensor_summary``."""
    from bridge import ops
    metadata = bytes(summary_metadata or b"")
    if display_name is not None:
        metadata += _proto.field_bytes(_META_DISPLAY_NAME, display_name.encode())
    if summary_description is not None:
        metadata += _proto.field_bytes(_META_DESCRIPTION, summary_description.encode())
    with _summary_scope(name, family) as (tag, scope):
        summary = ops.tensor_summary_v2(tag, tensor, metadata, name=scope)
    return _collect(summary, collections)


#: SummaryMetadata's fields: plugin_data (PluginData: plugin_name = 1, content = 2), display_name, summary_description.
_META_PLUGIN_DATA, _META_DISPLAY_NAME, _META_DESCRIPTION = 1, 2, 3


def plugin_metadata(plugin_name: str, content: bytes = b"") -> bytes:
    """A serialized ``SummaryMetadata`` naming the TensorBoard plugin that shows the value."""
    data = _proto.field_bytes(1, plugin_name.encode())
    if content:
        data += _proto.field_bytes(2, bytes(content))
    return _proto.field_bytes(_META_PLUGIN_DATA, data)


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"summary: {what} must be a positive int, got {value!r}")
    return int(value)


def _is_figure(value: Any) -> bool:
    return type(value).__name__ == "Figure" and hasattr(value, "canvas") and hasattr(value, "savefig")


def figures_to_array(figures: Any) -> np.ndarray:
    """matplotlib figures drawn to ``[n, height, width, 4]`` uint8 RGBA pixels (one figure: n = 1)."""
    figures = list(figures) if isinstance(figures, (list, tuple)) else [figures]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    images = []
    for fig in figures:
        canvas = fig.canvas if hasattr(fig.canvas, "buffer_rgba") else FigureCanvasAgg(fig)
        canvas.draw()
        images.append(np.array(canvas.buffer_rgba(), dtype=np.uint8))
    shapes = {im.shape for im in images}
    if len(shapes) != 1:
        raise ValueError(f"summary.image: figures of different sizes {sorted(shapes)}: give them one figsize and dpi")
    return np.stack(images)


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
