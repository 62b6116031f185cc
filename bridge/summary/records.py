"""TFRecord framing with masked CRC-32C, the format of TensorBoard's event files.

Each record: length (uint64 LE), masked CRC of the length (uint32), data,
masked CRC of the data (uint32).  The CRC is Castagnoli's, masked as
TensorFlow's ``crc32c::Mask`` does so that CRCs of CRCs stay distinct.

The CRC comes from ``google-crc32c`` (a dependency: its C code, with SSE4.2
where the CPU has it, checksums a 20 MB graph in milliseconds); the pure
Python table below is the fallback where that package cannot be imported
(about 0.14 s per MB).
"""
from __future__ import annotations

import struct

try:
    import google_crc32c as _fast
except ImportError:  # pragma: no cover - exercised by tests/summary/test_summary.py in a child
    _fast = None

__all__ = ["crc32c", "masked_crc32c", "frame", "unframe"]


def _table() -> list[int]:
    poly = 0x82F63B78  # CRC-32C (Castagnoli), reflected
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _table()


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data``."""
    if _fast is not None:
        return _fast.value(bytes(data))
    return _crc32c_python(data)


def _crc32c_python(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One TFRecord holding ``data``."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data
            + struct.pack("<I", masked_crc32c(data)))


def unframe(buf: bytes) -> list[bytes]:
    """The records of ``buf``, checking both CRCs of each; ValueError names the record that is bad."""
    out, pos = [], 0
    while pos < len(buf):
        if pos + 12 > len(buf):
            raise ValueError(f"TFRecord {len(out)}: truncated header at byte {pos}")
        length_bytes = buf[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", buf[pos + 8:pos + 12])
        if length_crc != masked_crc32c(length_bytes):
            raise ValueError(f"TFRecord {len(out)}: bad length CRC at byte {pos}")
        data = buf[pos + 12:pos + 12 + length]
        if len(data) != length or pos + 16 + length > len(buf):
            raise ValueError(f"TFRecord {len(out)}: truncated data at byte {pos}")
        (data_crc,) = struct.unpack("<I", buf[pos + 12 + length:pos + 16 + length])
        if data_crc != masked_crc32c(data):
            raise ValueError(f"TFRecord {len(out)}: bad data CRC at byte {pos}")
        out.append(data)
        pos += 16 + length
    return out
