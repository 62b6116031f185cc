"""Functions of an imported library, rebuilt for the gradients (TF Python's
``function_def_to_graph``).

A GraphDef written by stock TensorFlow carries its functions (cond branches,
loop bodies, tf.function bodies) as FunctionDefs only.  The gradients need
them as bodies they can inline and differentiate, so each is turned back
into a FuncGraph as TF Python's function_def_to_graph does: a Placeholder
per argument, the nodes with their inputs rewritten from the FunctionDef
form ("node:output_arg:index") to the GraphDef form ("node:flat_index"),
and the library alongside for the functions they call.
"""
from __future__ import annotations

import weakref
from typing import Any, Optional

from . import buffers
from ._lib import ffi, lib
from .errors import check, status
from .func_graph import FuncGraph, TracedFunction
from .graph import Graph
from .proto_fields import AttrValue, FunctionDef, FunctionDefLibrary, GraphDef, MapEntry, NodeDef

__all__ = ["library_function"]

# graph -> (number of functions when read, {name: serialized FunctionDef})
_libraries: "weakref.WeakKeyDictionary[Graph, tuple[int, dict[str, bytes]]]" = weakref.WeakKeyDictionary()
# serialized FunctionDef -> the TracedFunction rebuilt from it (with the library it was read from)
_rebuilt: dict[bytes, "TracedFunction"] = {}


def _library(graph: Graph) -> dict[str, bytes]:
    n = lib.TF_GraphNumFunctions(graph._ptr)
    cached = _libraries.get(graph)
    if cached is not None and cached[0] == n:
        return cached[1]
    defs: dict[str, bytes] = {}
    if n:
        s = status()
        funcs = ffi.new("TF_Function*[]", n)
        got = lib.TF_GraphGetFunctions(graph._ptr, funcs, n, s.ptr)
        check(s, "reading the graph's function library")
        try:
            for i in range(got):
                name = ffi.string(lib.TF_FunctionName(funcs[i])).decode()
                defs[name] = buffers.filled(
                    lambda buf, st, f=funcs[i]: lib.TF_FunctionToFunctionDef(f, buf, st), name)
        finally:
            for i in range(got):
                lib.TF_DeleteFunction(funcs[i])
    _libraries[graph] = (n, defs)
    return defs


def library_function(graph: Graph, name: str) -> Optional["TracedFunction"]:
    """The function ``name`` of ``graph``'s library as a TracedFunction (None if
    the library has no such function).  Its inputs and outputs are the
    FunctionDef's arguments and results, in order."""
    library = _library(graph)
    fdef = library.get(name)
    if fdef is None:
        return None
    found = _rebuilt.get(fdef)
    if found is None:
        found = _rebuilt[fdef] = _function_from_def(graph, fdef, library)
    return found


def _arg_size(arg: Any, attrs: dict) -> int:
    if arg.number_attr:
        return int(attrs[arg.number_attr])
    if arg.type_list_attr:
        return len(attrs[arg.type_list_attr])
    return 1


def _function_from_def(graph: Graph, fdef: bytes, library: dict[str, bytes]) -> "TracedFunction":
    from . import _proto as pb
    from .attrs import decode_attr_value
    from .opdef import decode_op_def, op_def

    f = pb.fields(fdef)
    sig = decode_op_def(f[FunctionDef.signature][0])
    arg_shapes: dict[int, bytes] = {}
    for entry in f.get(FunctionDef.arg_attr, []):  # map<uint32, ArgAttrs>
        e = pb.fields(bytes(entry))
        index = e.get(MapEntry.key, [0])[0]
        arg_attrs = pb.fields(bytes(e[MapEntry.value][0])) if MapEntry.value in e else {}
        for a in arg_attrs.get(FunctionDef.ArgAttrs.attr, []):
            kv = pb.fields(bytes(a))
            if pb.text(kv[MapEntry.key][0]) == "_output_shapes" and MapEntry.value in kv:
                lst = pb.fields(bytes(kv[MapEntry.value][0])).get(AttrValue.list)
                shapes = pb.fields(bytes(lst[0])).get(AttrValue.ListValue.shape, []) if lst else []
                if shapes:
                    arg_shapes[index] = bytes(shapes[0])

    def attr(name: str, value: bytes) -> bytes:
        """A NodeDef's attr map entry."""
        return pb.field_bytes(NodeDef.attr, pb.field_bytes(MapEntry.key, name) + pb.field_bytes(MapEntry.value, value))

    nodes: list[bytes] = []
    for i, arg in enumerate(sig.input_args):
        attrs = attr("dtype", pb.field_varint(AttrValue.type, arg.type.enum))
        if i in arg_shapes:
            attrs += attr("shape", pb.field_bytes(AttrValue.shape, arg_shapes[i]))
        nodes.append(pb.field_bytes(NodeDef.name, arg.name) + pb.field_bytes(NodeDef.op, "Placeholder") + attrs)
    arg_names = {a.name for a in sig.input_args}

    # Each node's output args, to turn "node:arg:index" into "node:flat_index".
    node_defs = [bytes(n) for n in f.get(FunctionDef.node_def, [])]
    outputs_of: dict[str, dict[str, int]] = {}
    for nd in node_defs:
        nf = pb.fields(nd)
        node_name, op_type = pb.text(nf[NodeDef.name][0]), pb.text(nf[NodeDef.op][0])
        attrs = {}
        for entry in nf.get(NodeDef.attr, []):
            kv = pb.fields(bytes(entry))
            attrs[pb.text(kv[MapEntry.key][0])] = (decode_attr_value(bytes(kv[MapEntry.value][0]))
                                                   if MapEntry.value in kv else None)
        if op_type in library:
            out_args = decode_op_def(pb.fields(library[op_type])[FunctionDef.signature][0]).output_args
        else:
            od = op_def(op_type, graph)
            out_args = od.output_args
            for a in od.attrs:
                if a.name not in attrs and a.has_default:
                    attrs[a.name] = a.default
        starts, pos = {}, 0
        for a in out_args:
            starts[a.name] = pos
            pos += _arg_size(a, attrs)
        outputs_of[node_name] = starts

    def tensor_name(ref: str) -> str:
        if ref.startswith("^"):
            return ref
        parts = ref.split(":")
        if len(parts) == 1:
            return f"{ref}:0"
        if len(parts) == 2:  # "arg:index" of an argument
            return ref
        node, out, index = parts
        return f"{node}:{outputs_of[node][out] + int(index)}"

    for nd in node_defs:
        rebuilt = bytearray()
        for number, wire, value in pb.iter_fields(nd):
            if number == NodeDef.input:
                ref = pb.text(value)
                if ref.startswith("^") and ref[1:] in arg_names:
                    continue  # an argument's control edge: nothing to wait for
                rebuilt += pb.field_bytes(NodeDef.input, tensor_name(ref))
            elif wire == pb.LEN:
                rebuilt += pb.field_bytes(number, bytes(value))
            elif wire == pb.VARINT:
                rebuilt += pb.field_varint(number, value)
            # (NodeDef has no fixed-size fields)
        nodes.append(bytes(rebuilt))
    lib_def = b"".join(pb.field_bytes(FunctionDefLibrary.function, d) for d in library.values())
    versions = pb.fields(Graph().as_graph_def()).get(GraphDef.versions, [b""])[0]
    graph_def = (b"".join(pb.field_bytes(GraphDef.node, n) for n in nodes) + pb.field_bytes(GraphDef.library, lib_def)
                 + pb.field_bytes(GraphDef.versions, bytes(versions)))

    fg = FuncGraph(sig.name)
    fg.import_graph_def(graph_def)
    inputs = [fg.get_tensor_by_name(f"{a.name}:0") for a in sig.input_args]
    rets = {}
    for entry in f.get(FunctionDef.ret, []):
        kv = pb.fields(bytes(entry))
        rets[pb.text(kv[MapEntry.key][0])] = pb.text(kv[MapEntry.value][0])
    outputs = []
    with fg.as_default():
        for a in sig.output_args:
            t = fg.get_tensor_by_name(tensor_name(rets[a.name]))
            if t.op.type == "Placeholder":
                t = fg.create_op("Identity", [t], name=f"{a.name}_identity").output(0)
            outputs.append(t)
    traced = TracedFunction(fg, inputs, outputs, description=f"rebuilt from FunctionDef '{sig.name}'")
    traced.library_name = sig.name  # type: ignore[attr-defined]
    return traced
