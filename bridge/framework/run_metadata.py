"""TF1's ``RunOptions`` and ``RunMetadata`` for ``Session.run``: ask for a
trace of a run's kernels (``trace_level``) and receive it (``step_stats``,
the per-node timings TensorBoard's graph shows as "compute time")::

    meta = bridge.RunMetadata()
    sess.run(train_op, run_options=bridge.RunOptions(trace_level=bridge.RunOptions.FULL_TRACE),
             run_metadata=meta)
    writer.add_run_metadata(meta, "step 100")

Only the fields the bridge's users set are spelt out; the messages travel
serialized, as TensorFlow's C API takes and gives them.
"""
from __future__ import annotations

from typing import Union

from . import _proto as pb

__all__ = ["RunOptions", "RunMetadata"]


class RunOptions:
    """TF's ``RunOptions``: ``trace_level`` (NO_TRACE, SOFTWARE_TRACE,
    HARDWARE_TRACE, FULL_TRACE) and ``timeout_in_ms`` (0: none)."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3
    _TRACE_LEVEL, _TIMEOUT_IN_MS = 1, 2   # RunOptions' field numbers

    def __init__(self, trace_level: int = NO_TRACE, timeout_in_ms: int = 0):
        if trace_level not in (0, 1, 2, 3):
            raise ValueError(f"RunOptions: trace_level must be one of RunOptions.NO_TRACE .. FULL_TRACE, "
                             f"got {trace_level!r}")
        if isinstance(timeout_in_ms, bool) or not isinstance(timeout_in_ms, int) or timeout_in_ms < 0:
            raise ValueError(f"RunOptions: timeout_in_ms must be a non-negative int, got {timeout_in_ms!r}")
        self.trace_level, self.timeout_in_ms = trace_level, timeout_in_ms

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        out = pb.field_varint(self._TRACE_LEVEL, self.trace_level) if self.trace_level else b""
        return out + (pb.field_varint(self._TIMEOUT_IN_MS, self.timeout_in_ms) if self.timeout_in_ms else b"")


class RunMetadata:
    """TF's ``RunMetadata``, filled by ``Session.run(..., run_metadata=m)``:
    held serialized (``SerializeToString``); ``has_step_stats`` tells whether
    the run traced its kernels (a RunOptions trace level asked for it)."""

    _STEP_STATS = 1   # RunMetadata's field number

    def __init__(self) -> None:
        self._data = b""

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        return self._data

    def ParseFromString(self, data: Union[bytes, bytearray, memoryview]) -> None:  # noqa: N802
        self._data = bytes(data)

    @property
    def has_step_stats(self) -> bool:
        return bool(pb.fields(self._data).get(self._STEP_STATS)) if self._data else False
