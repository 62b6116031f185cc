"""TF_Buffer: the bytes (serialized protos) the C API hands back."""
from __future__ import annotations

from typing import Any, Callable

from ._lib import ffi, lib
from .errors import check, status

__all__ = ["read", "filled"]


def read(buf: Any) -> bytes:
    """A copy of a TF_Buffer's bytes (the buffer stays its owner's)."""
    return bytes(ffi.buffer(buf.data, buf.length))


def filled(fill: Callable[[Any, Any], None], context: str) -> bytes:
    """The bytes a C call writes into a fresh TF_Buffer.  ``fill(buffer,
    status)`` makes the call; a failure raises the matching
    :class:`bridge.errors.OpError` prefixed with ``context``."""
    buf = ffi.gc(lib.TF_NewBuffer(), lib.TF_DeleteBuffer)
    s = status()
    fill(buf, s.ptr)
    check(s, context)
    return read(buf)
