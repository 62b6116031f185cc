"""Serialized GraphDefs and NodeDefs read without TensorFlow: nodes with their
attributes, and the names of a library's functions."""
from __future__ import annotations

from typing import Any

from . import _proto as pb
from .attrs import decode_attr_value

__all__ = ["NodeInfo", "parse_node_def", "parse_graph_def", "graph_def_library"]


class NodeInfo:
    """A decoded NodeDef: name, op, inputs (``^name`` for control inputs), device, raw attrs."""

    __slots__ = ("name", "op", "inputs", "device", "attrs")

    def __init__(self, name, op, inputs, device, attrs):
        self.name, self.op, self.inputs, self.device, self.attrs = name, op, inputs, device, attrs

    def attr(self, key: str) -> Any:
        return decode_attr_value(self.attrs[key])

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, {self.op!r}, inputs={self.inputs}, device={self.device!r})"


def parse_node_def(buf: bytes) -> NodeInfo:
    f = pb.fields(buf)
    attrs = {}
    for entry in f.get(5, []):
        e = pb.fields(bytes(entry))
        attrs[pb.text(e[1][0])] = bytes(e.get(2, [b""])[0])
    return NodeInfo(pb.text(f.get(1, [b""])[0]), pb.text(f.get(2, [b""])[0]),
                    [pb.text(x) for x in f.get(3, [])], pb.text(f.get(4, [b""])[0]), attrs)


def parse_graph_def(buf: bytes) -> list[NodeInfo]:
    """Nodes of a serialized GraphDef, in order."""
    return [parse_node_def(bytes(n)) for n in pb.fields(buf).get(1, [])]


def graph_def_library(buf: bytes) -> list[str]:
    """Names of the functions in a serialized GraphDef's library."""
    lib_fields = pb.fields(buf).get(2, [])
    names = []
    for lib_buf in lib_fields:
        for fdef in pb.fields(bytes(lib_buf)).get(1, []):
            sig = pb.fields(bytes(fdef)).get(1, [b""])[0]
            names.append(pb.text(pb.fields(bytes(sig)).get(1, [b""])[0]))
    return names
