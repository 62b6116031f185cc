"""TensorFlow's C++ gradient registry, reached through ``TF_AddGradientsWithPrefix``."""
from __future__ import annotations

from typing import Optional, Sequence

from bridge.framework import buffers
from bridge.framework._lib import ffi, lib
from bridge.framework.errors import OpError, check, status
from bridge.framework.graph import Graph, Operation, Output
from bridge.framework.opdef import op_def

# Op types whose C++ gradient turned out to be missing (the walk keeps them out of blocks).
missing_types: set[str] = set()


def _c_outputs(values: Sequence[Output]):
    arr = ffi.new("TF_Output[]", max(len(values), 1))
    for i, v in enumerate(values):
        arr[i].oper, arr[i].index = v.op._ptr, v.index
    return arr


def add_cpp_gradients(graph: Graph, ys: Sequence[Output], xs: Sequence[Output],
                      dys: Sequence[Output], prefix_hint: str) -> list[Optional[Output]]:
    """One TF_AddGradientsWithPrefix call: d(sum dys*ys)/dxs, None where TF says NoGradient.
    The prefix is made unique under the current name scope."""
    s = status()
    out = ffi.new("TF_Output[]", max(len(xs), 1))
    # TF's builder places nothing: its ops get the open device scopes (device
    # functions included) and colocation afterwards, as ops made in Python do.
    start = graph._end_position() if graph._placement_active() else None
    for _ in range(100):
        prefix = graph.unique_name(prefix_hint)
        lib.TF_AddGradientsWithPrefix(graph._ptr, prefix.encode(), _c_outputs(ys), len(ys), _c_outputs(xs),
                                      len(xs), _c_outputs(dys), s.ptr, out)
        # An imported graph may hold nodes under a prefix unique_name thinks is free.
        if s.code == 3 and "conflicts with existing node" in s.message:
            lib.TF_SetStatus(s.ptr, 0, b"")
            continue
        break
    check(s, "adding gradients")
    if start is not None:
        graph._place_ops_since(start)
    return [None if out[i].oper == ffi.NULL else Output(graph._wrap(out[i].oper), out[i].index)
            for i in range(len(xs))]


def note_missing_gradient(exc: OpError) -> Optional[str]:
    """The op type TF's error names as lacking a C++ gradient, if it says so,
    after adding it to :data:`missing_types`."""
    marker = "No gradient defined for op: "
    msg = exc.message
    if marker not in msg:
        return None
    missing = msg.split(marker, 1)[1].split(".", 1)[0].strip()
    missing_types.add(missing)
    return missing


def clone_op(op: Operation, replace: dict[Output, Output], name: str) -> Operation:
    """A copy of ``op`` (type, attributes and device; no control inputs) with
    the inputs in ``replace`` swapped for their values."""
    graph = op.graph
    s = status()
    desc = lib.TF_NewOperation(graph._ptr, op.type.encode(), graph.unique_name(name).encode())
    inputs = op.inputs
    pos = 0
    for arg in op_def(op.type, graph).input_args:
        if arg.is_list:
            n = lib.TF_OperationInputListLength(op._ptr, arg.name.encode(), s.ptr)
            check(s, f"reading input list '{arg.name}' of '{op.name}'")
            lib.TF_AddInputList(desc, _c_outputs([replace.get(t, t) for t in inputs[pos:pos + n]]), n)
            pos += n
        else:
            lib.TF_AddInput(desc, replace.get(inputs[pos], inputs[pos])._c())
            pos += 1
    for attr in op.attr_names:
        if attr == "_class":
            continue  # colocation with the original's neighbours is not the copy's business
        value = buffers.filled(lambda buf, st: lib.TF_OperationGetAttrValueProto(op._ptr, attr.encode(), buf, st),
                               f"reading attribute '{attr}' of '{op.name}'")
        lib.TF_SetAttrValueProto(desc, attr.encode(), value, len(value), s.ptr)
        check(s, f"copying attribute '{attr}' of '{op.name}'")
    if op.device:
        lib.TF_SetDevice(desc, op.device.encode())
    ptr = lib.TF_FinishOperation(desc, s.ptr)
    check(s, f"copying '{op.name}'")
    return graph._wrap(ptr)
