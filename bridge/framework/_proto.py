"""Just enough of the protobuf wire format for the few messages the binding
reads and writes (ConfigProto, MetaGraphDef signatures, OpDef, NodeDef).

The generated ``*_pb2`` modules live inside the ``tensorflow`` package, and
importing one runs ``tensorflow/__init__`` (seconds, and forbidden in a process
that hosts Julia), so the binding decodes the wire format itself.
"""
from __future__ import annotations

import struct
from typing import Iterator

# Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3 | VARINT) + _varint(int(value))


def field_bytes(number: int, value: bytes | str) -> bytes:
    if isinstance(value, str):
        value = value.encode()
    return _varint(number << 3 | LEN) + _varint(len(value)) + value


def field_float(number: int, value: float) -> bytes:
    return _varint(number << 3 | I32) + struct.pack("<f", value)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """Yield (field number, wire type, value): ints for varints and fixed
    fields, memoryview slices for length-delimited ones."""
    view = memoryview(buf)
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire == LEN:
            size, pos = read_varint(buf, pos)
            value = view[pos:pos + size]
            pos += size
        elif wire == I64:
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == I32:
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} in field {number}")
        yield number, wire, value


def fields(buf: bytes) -> dict[int, list]:
    """All fields of a message, grouped by number, in order."""
    out: dict[int, list] = {}
    for number, _, value in iter_fields(buf):
        out.setdefault(number, []).append(value)
    return out


def as_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def as_float(value: int) -> float:
    return struct.unpack("<f", struct.pack("<I", value))[0]


def packed_varints(value) -> list[int]:
    """A repeated varint field may arrive packed (one LEN field) or not."""
    if isinstance(value, int):
        return [value]
    buf, pos, out = bytes(value), 0, []
    while pos < len(buf):
        v, pos = read_varint(buf, pos)
        out.append(v)
    return out


def text(value) -> str:
    return bytes(value).decode("utf-8", "replace")
