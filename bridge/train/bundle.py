"""What a V2 checkpoint holds, read from its ``.index`` file without TensorFlow.

A V2 checkpoint ``<prefix>`` is ``<prefix>.index`` (an SSTable, LevelDB's
table format as TensorFlow's ``tensorflow/core/lib/io/table`` writes it,
mapping each tensor name to a ``BundleEntryProto``: dtype, shape, where its
bytes are) and ``<prefix>.data-00000-of-00001`` (the bytes).  The Saver reads
the index to check names, dtypes and shapes before a restore changes any
variable, and ``list_variables`` lists it, as ``tf.train.list_variables``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

from bridge.framework import _proto as pb
from bridge.framework import dtypes
from bridge.framework.attrs import Shape, decode_shape

#: The SSTable footer: two block handles padded to 40 bytes, then the magic number.
_FOOTER_SIZE = 48
_MAGIC = 0xDB4775248B80FB57
_BLOCK_TRAILER_SIZE = 5   # compression type (1 byte) + masked crc32c (4 bytes)
_NO_COMPRESSION = 0


class BundleFormatError(ValueError):
    """The index file is not one this reader understands (or not an index at all)."""


@dataclass(frozen=True)
class BundleEntry:
    """One tensor of a checkpoint: its dtype and full shape."""
    name: str
    dtype: dtypes.DType
    shape: Shape
    sliced: bool = False   # a partitioned variable saved in slices


def index_path(prefix: Union[str, Path]) -> Path:
    return Path(f"{prefix}.index")


def _block_handle(buf: bytes, pos: int) -> tuple[int, int, int]:
    offset, pos = pb.read_varint(buf, pos)
    size, pos = pb.read_varint(buf, pos)
    return offset, size, pos


def _block(data: bytes, offset: int, size: int, path: Path) -> bytes:
    if offset + size + _BLOCK_TRAILER_SIZE > len(data):
        raise BundleFormatError(f"{path}: a block runs past the end of the file")
    if data[offset + size] != _NO_COMPRESSION:
        raise BundleFormatError(f"{path}: compressed blocks (type {data[offset + size]}) are not supported")
    return data[offset:offset + size]


def _block_entries(block: bytes, path: Path) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of a block: prefix-compressed keys, then the restart array."""
    if len(block) < 4:
        raise BundleFormatError(f"{path}: a block is too short")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end = len(block) - 4 * (restarts + 1)
    if end < 0:
        raise BundleFormatError(f"{path}: a block's restart array is corrupt")
    pos, key = 0, b""
    while pos < end:
        shared, pos = pb.read_varint(block, pos)
        unshared, pos = pb.read_varint(block, pos)
        value_size, pos = pb.read_varint(block, pos)
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + value_size]
        pos += value_size


def read_index(prefix: Union[str, Path]) -> dict[str, BundleEntry]:
    """Every tensor of the checkpoint ``prefix`` by name (the header left out).

    Raises FileNotFoundError when ``<prefix>.index`` is missing and
    BundleFormatError when it cannot be read."""
    path = index_path(prefix)
    data = path.read_bytes()
    if len(data) < _FOOTER_SIZE or struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
        raise BundleFormatError(f"{path} is not a checkpoint index (no table footer)")
    footer = data[len(data) - _FOOTER_SIZE:]
    try:
        _, _, pos = _block_handle(footer, 0)              # the metaindex: unused by bundles
        offset, size, _ = _block_handle(footer, pos)
        entries: dict[str, BundleEntry] = {}
        for _, handle in _block_entries(_block(data, offset, size, path), path):
            block_offset, block_size, _ = _block_handle(handle, 0)
            for key, value in _block_entries(_block(data, block_offset, block_size, path), path):
                if not key:
                    continue   # "" holds the BundleHeaderProto
                f = pb.fields(value)
                name = key.decode("utf-8", "replace")
                entries[name] = BundleEntry(name, dtypes.as_dtype(f.get(1, [0])[-1]),
                                            decode_shape(f.get(2, [b""])[-1]), sliced=bool(f.get(7)))
    except BundleFormatError:
        raise
    except (IndexError, struct.error, KeyError, TypeError, ValueError) as exc:
        raise BundleFormatError(f"{path}: corrupt index ({type(exc).__name__}: {exc})") from exc
    return entries
