"""``FileWriter``: TensorBoard event files (TF1's ``tf.compat.v1.summary.FileWriter``).

An event file is a sequence of TFRecords, each a serialized ``Event``
(wall_time = 1, step = 2, file_version = 3, graph_def = 4, summary = 5,
tagged_run_metadata = 8); the first says ``brain.Event:2``.  Records are appended and flushed as they come
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

_WALL_TIME, _STEP, _FILE_VERSION, _GRAPH_DEF, _SUMMARY, _TAGGED_RUN_METADATA = 1, 2, 3, 4, 5, 8
#: GraphDef.node, NodeDef.op, NodeDef.attr (map entry: key = 1, value = 2), AttrValue.s
_GRAPH_NODE, _NODE_OP, _NODE_ATTR, _ATTR_S = 1, 2, 5, 2


def _event(wall_time: float, step: int = 0, **fields: bytes) -> bytes:
    out = _proto._varint(_WALL_TIME << 3 | _proto.I64) + struct.pack("<d", wall_time)
    if step:
        out += _proto.field_varint(_STEP, step)
    for number, value in ((_FILE_VERSION, fields.get("file_version")), (_GRAPH_DEF, fields.get("graph_def")),
                          (_SUMMARY, fields.get("summary")),
                          (_TAGGED_RUN_METADATA, fields.get("tagged_run_metadata"))):
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
        self._path, self._file = _new_file(self._logdir, name)
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

    def add_scalar(self, tag: str, value: float, global_step: Optional[int] = None) -> None:
        """Append one scalar computed in Python (no summary op): a ``Summary``
        holding ``simple_value`` ``value`` (float32, as TF's ScalarSummary) tagged ``tag``."""
        value_msg = _proto.field_bytes(1, str(tag).encode()) + _proto.field_float(2, float(value))
        self.add_summary(_proto.field_bytes(1, value_msg), global_step)

    def add_graph(self, graph: Any, global_step: Optional[int] = None) -> None:
        """Append ``graph``'s GraphDef (a bridge Graph, or serialized GraphDef
        bytes).  Nodes of custom ops built from a spec (Julia and Fortran ops)
        carry their spec, language, file and function as extra attributes
        (``_tfbridge_*``) that TensorBoard's graph shows on the node; only the
        copy in the event file has them."""
        graph_def = graph if isinstance(graph, (bytes, bytearray)) else graph.as_graph_def()
        step = 0 if global_step is None else int(global_step)
        self.add_event(_event(time.time(), step, graph_def=_annotated(bytes(graph_def))))

    def add_run_metadata(self, run_metadata: Any, tag: str, global_step: Optional[int] = None) -> None:
        """Append a run's ``RunMetadata`` (``bridge.RunMetadata`` filled by
        ``Session.run(..., run_metadata=)``, or its serialized bytes) under
        ``tag``: TensorBoard's graph then offers that run's per-node compute
        time and memory."""
        data = run_metadata if isinstance(run_metadata, (bytes, bytearray)) else run_metadata.SerializeToString()
        tagged = _proto.field_bytes(1, str(tag).encode()) + _proto.field_bytes(2, bytes(data))
        step = 0 if global_step is None else int(global_step)
        self.add_event(_event(time.time(), step, tagged_run_metadata=tagged))

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


def _new_file(logdir: Path, name: str) -> tuple[Path, Any]:
    """A new event file ``logdir/name``, or ``name.1``, ``name.2``... where another
    writer of this second and host has that name (TensorBoard reads every
    ``*tfevents*`` file of a run): two writers never append to one file."""
    for k in range(1000):
        path = logdir / (name if not k else f"{name}.{k}")
        try:
            return path, open(path, "xb")
        except FileExistsError:
            continue
    raise FileExistsError(f"FileWriter: {logdir} holds 1000 event files named {name}*")


def _annotated(graph_def: bytes) -> bytes:
    """``graph_def`` with the descriptions recorded for its nodes' op types
    (``op_library.describe_op``) added to those nodes as string attributes."""
    from bridge.ops.op_library import op_description

    out, changed = [], False
    for number, wire, value in _proto.iter_fields(graph_def):
        if number == _GRAPH_NODE and wire == _proto.LEN:
            node = bytes(value)
            op = next((bytes(v).decode() for n, _, v in _proto.iter_fields(node) if n == _NODE_OP), "")
            extra = op_description(op) if op else {}
            if extra:
                node += b"".join(_proto.field_bytes(_NODE_ATTR, _proto.field_bytes(1, key.encode())
                                                    + _proto.field_bytes(2, _proto.field_bytes(_ATTR_S, text.encode())))
                                 for key, text in extra.items())
                changed = True
            out.append(_proto.field_bytes(number, node))
        elif wire == _proto.LEN:
            out.append(_proto.field_bytes(number, bytes(value)))
        elif wire == _proto.VARINT:
            out.append(_proto.field_varint(number, value))
        else:  # GraphDef has no fixed-width fields: keep the bytes as they were
            return graph_def
    return b"".join(out) if changed else graph_def


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
