"""``FileWriter``: TensorBoard event files (TF1's ``tf.compat.v1.summary.FileWriter``).

An event file is a sequence of TFRecords, each a serialized ``Event``
(wall_time = 1, step = 2, file_version = 3, graph_def = 4, summary = 5); the
first says ``brain.Event:2``.  Records are appended and flushed as they come
(``flush_secs`` bounds how long one may sit in Python's buffer), so a run
that dies keeps every event written before its last flush.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Optional, Union

from bridge.framework import _proto

from .records import frame

__all__ = ["FileWriter"]

_WALL_TIME, _STEP, _FILE_VERSION, _GRAPH_DEF, _SUMMARY = 1, 2, 3, 4, 5


def _event(wall_time: float, step: int = 0, **fields: bytes) -> bytes:
    out = _proto._varint(_WALL_TIME << 3 | _proto.I64) + struct.pack("<d", wall_time)
    if step:
        out += _proto.field_varint(_STEP, step)
    for number, value in ((_FILE_VERSION, fields.get("file_version")), (_GRAPH_DEF, fields.get("graph_def")),
                          (_SUMMARY, fields.get("summary"))):
        if value is not None:
            out += _proto.field_bytes(number, value)
    return out


class FileWriter:
    """Write summaries and the graph to ``logdir/events.out.tfevents.<time>.<host>[suffix]``.

    ``add_summary(summary, global_step)`` takes what a summary op returns from
    ``Session.run`` (a serialized ``Summary``; bytes or a 0-d bytes array).
    ``graph``: written first, so TensorBoard's Graphs tab shows it.  Use as a
    context manager, or call ``close()``.
    """

    def __init__(self, logdir: Union[str, os.PathLike], graph: Any = None, max_queue: int = 10,
                 flush_secs: float = 120, filename_suffix: Optional[str] = None):
        self._logdir = Path(logdir)
        self._logdir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}{filename_suffix or ''}"
        self._path = self._logdir / name
        self._file = open(self._path, "ab")
        self._lock = threading.Lock()
        self._max_queue = max(1, int(max_queue))
        self._flush_secs = float(flush_secs)
        self._pending = 0
        self._last_flush = time.monotonic()
        self._closed = False
        self.add_event(_event(time.time(), file_version=b"brain.Event:2"))
        self.flush()
        if graph is not None:
            self.add_graph(graph)

    @property
    def path(self) -> Path:
        """The event file this writer appends to."""
        return self._path

    def get_logdir(self) -> str:
        return str(self._logdir)

    def add_event(self, event: bytes) -> None:
        """Append one serialized ``Event``."""
        with self._lock:
            if self._closed:
                raise ValueError(f"FileWriter for {self._path} is closed")
            self._file.write(frame(bytes(event)))
            self._pending += 1
            if self._pending >= self._max_queue or time.monotonic() - self._last_flush >= self._flush_secs:
                self._flush_locked()

    def add_summary(self, summary: Any, global_step: Optional[int] = None) -> None:
        """Append a serialized ``Summary`` (a summary op's value) at ``global_step``."""
        data = _summary_bytes(summary)
        step = 0 if global_step is None else int(global_step)
        self.add_event(_event(time.time(), step, summary=data))

    def add_graph(self, graph: Any, global_step: Optional[int] = None) -> None:
        """Append ``graph``'s GraphDef (a bridge Graph, or serialized GraphDef bytes)."""
        graph_def = graph if isinstance(graph, (bytes, bytearray)) else graph.as_graph_def()
        step = 0 if global_step is None else int(global_step)
        self.add_event(_event(time.time(), step, graph_def=bytes(graph_def)))

    def _flush_locked(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._pending = 0
        self._last_flush = time.monotonic()

    def flush(self) -> None:
        """Write every pending event to disk."""
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self) -> None:
        """Flush and close; later ``add_*`` calls raise."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._file.close()
            self._closed = True

    def reopen(self) -> None:
        """Append to the same file again after ``close()``."""
        with self._lock:
            if self._closed:
                self._file = open(self._path, "ab")
                self._closed = False

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _summary_bytes(summary: Any) -> bytes:
    if isinstance(summary, (bytes, bytearray)):
        return bytes(summary)
    if hasattr(summary, "SerializeToString"):  # a protobuf Summary built by the user
        return summary.SerializeToString()
    try:
        import numpy as np
        arr = np.asarray(summary)
        if arr.shape == () and isinstance(arr.item(), bytes):
            return arr.item()
    except Exception:  # noqa: BLE001 - fall through to the error naming the type
        pass
    raise TypeError(f"add_summary: expected a serialized Summary (bytes, as a summary op returns), "
                    f"got {type(summary).__name__}")
