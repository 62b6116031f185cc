"""TF2 SavedModels: variables restored through the object graph, as ``tf.saved_model.load`` does.

``TF_LoadSessionFromSavedModel`` (TensorFlow's C++ loader, loader.cc)
restores variables the TF1 way: it runs the SaverDef's restore op, which
fills the variable handles that the saved ``_traced_restore`` function was
given.  A TF2 SavedModel does not promise that those are the handles its
signatures read.  A Keras 3 model saved with ``tf.saved_model.save`` holds
each variable twice: the handles the traced functions capture
(``sequential/dense/kernel``) and copies (``Variable``, ``Variable_1``, ...)
that the save and restore functions use; the TF1 restore fills the copies
and the signatures fail with "Could not find variable sequential/dense/kernel".

TF2 (``tf.saved_model.load``, and C++'s ``SavedModelV2Bundle``) restores
through objects instead, and so does this module:

- the MetaGraphDef's ``object_graph_def`` (a SavedObjectGraph) lists the
  saved objects (variables among them) and, for each concrete function, the
  objects it captures (``bound_inputs``, its last inputs, in order);
- a call of such a function in the graph (``StatefulPartitionedCall`` whose
  ``f`` is the function: the signatures) passes, as those last inputs, the
  ``VarHandleOp`` that stands for each captured variable;
- the checkpoint's ``_CHECKPOINTABLE_OBJECT_GRAPH`` entry (a
  TrackableObjectGraph) gives each object's checkpoint keys; its nodes are
  matched to the SavedObjectGraph's by walking both from the root along
  children of the same local name (``SavedModelV2Bundle::VisitObjectsToRestore``).

Each variable handle a function call reads is then assigned its object's
``VARIABLE_VALUE`` from the checkpoint (one ``RestoreV2``), unless the TF1
restore already filled that very handle (it is an input of the SaverDef's
restore op, the saved ``_traced_restore`` function, which TF generated from
the same objects and keys): a ``tf.Module``'s variables are not read twice.
Names play no part.  Protocol buffers are decoded with
:mod:`bridge.framework._proto`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from bridge.framework import _proto as pb
from bridge.framework import proto_fields as pf
from bridge.framework import dtypes, errors
from bridge.framework.attrs import Shape, decode_attr_value, decode_shape
from bridge.framework.graph import Graph, Operation
from bridge.framework.graph_def import NodeInfo, parse_graph_def
from bridge.framework.session import Session

#: The checkpoint entry holding the TrackableObjectGraph (TF's kObjectGraphProtoKey).
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
#: The attribute under which a variable object's value is saved.
VARIABLE_VALUE = "VARIABLE_VALUE"
#: Where a SavedModel keeps its checkpoint, relative to the export folder.
VARIABLES_PREFIX = Path("variables") / "variables"
#: Name scope of the operations that restore objects (added to the loaded graph).
RESTORE_SCOPE = "restore_saved_objects"

# Field numbers: bridge/framework/proto_fields.py.
_TRACKABLE = pf.TrackableObjectGraph.TrackableObject
_REFERENCE = _TRACKABLE.ObjectReference


@dataclass(frozen=True)
class SavedVariable:
    """A variable of the SavedObjectGraph."""
    node_id: int
    name: str
    dtype: dtypes.DType
    shape: Shape


@dataclass(frozen=True)
class VariableRestore:
    """One variable handle of the graph and where its value is in the checkpoint."""
    handle: str               # the VarHandleOp's name
    node_id: int              # its object in the SavedObjectGraph
    checkpoint_key: str
    dtype: dtypes.DType
    tf1_restored: bool = False   # the SaverDef's restore op fills this handle already


@dataclass
class _Object:
    children: list[tuple[int, str]]
    variable: Optional[SavedVariable] = None
    attributes: Optional[dict[str, str]] = None   # checkpoint nodes: attribute name -> key


def _references(entries) -> list[tuple[int, str]]:
    out = []
    for entry in entries:
        ref = pb.fields(bytes(entry))
        out.append((ref.get(_REFERENCE.node_id, [0])[-1], pb.text(ref.get(_REFERENCE.local_name, [b""])[-1])))
    return out


def parse_saved_object_graph(buf: bytes) -> tuple[list[_Object], dict[str, list[int]]]:
    """A SavedObjectGraph: its nodes, and each concrete function's bound inputs (node ids)."""
    f = pb.fields(buf)
    nodes = []
    for node_id, raw in enumerate(f.get(pf.SavedObjectGraph.nodes, [])):
        obj = pb.fields(bytes(raw))
        variable = None
        if pf.SavedObject.variable in obj:
            v = pb.fields(bytes(obj[pf.SavedObject.variable][-1]))
            variable = SavedVariable(node_id, pb.text(v.get(pf.SavedVariable.name, [b""])[-1]),
                                     dtypes.from_enum(v.get(pf.SavedVariable.dtype, [0])[-1]),
                                     decode_shape(v.get(pf.SavedVariable.shape, [b""])[-1]))
        nodes.append(_Object(_references(obj.get(pf.SavedObject.children, [])), variable))
    functions = {}
    for entry in f.get(pf.SavedObjectGraph.concrete_functions, []):
        e = pb.fields(bytes(entry))
        fn = pb.fields(bytes(e.get(pf.MapEntry.value, [b""])[-1]))
        bound: list[int] = []
        for value in fn.get(pf.SavedConcreteFunction.bound_inputs, []):
            bound.extend(pb.as_signed(v) for v in pb.packed_varints(value))
        functions[pb.text(e.get(pf.MapEntry.key, [b""])[-1])] = bound
    return nodes, functions


def parse_trackable_object_graph(buf: bytes) -> list[_Object]:
    """A TrackableObjectGraph (the checkpoint's): children and attributes of each node."""
    nodes = []
    tensor = _TRACKABLE.SerializedTensor
    for raw in pb.fields(buf).get(pf.TrackableObjectGraph.nodes, []):
        obj = pb.fields(bytes(raw))
        attributes = {}
        for entry in obj.get(_TRACKABLE.attributes, []):
            t = pb.fields(bytes(entry))
            attributes[pb.text(t.get(tensor.name, [b""])[-1])] = pb.text(t.get(tensor.checkpoint_key, [b""])[-1])
        nodes.append(_Object(_references(obj.get(_TRACKABLE.children, [])), attributes=attributes))
    return nodes


def checkpoint_attributes(saved: list[_Object], trackable: list[_Object]) -> dict[int, dict[str, str]]:
    """Saved node id -> its attributes' checkpoint keys: both graphs walked
    from their roots along children of the same local name, each checkpoint
    node visited once (the graphs may have cycles).  A checkpoint node with
    no saved counterpart is skipped, as ``expect_partial`` does."""
    out: dict[int, dict[str, str]] = {}
    if not saved or not trackable:
        return out
    seen = {0}
    stack = [(0, 0)]
    while stack:
        saved_id, trackable_id = stack.pop()
        node = trackable[trackable_id]
        if saved_id != 0 and node.attributes:   # the root is never a restorable object
            out[saved_id] = node.attributes
        by_name = {}
        for child_id, name in saved[saved_id].children:
            by_name.setdefault(name, child_id)
        for child_id, name in node.children:
            if child_id in seen or not 0 <= child_id < len(trackable):
                continue
            saved_child = by_name.get(name)
            if saved_child is None or not 0 <= saved_child < len(saved):
                continue
            seen.add(child_id)
            stack.append((saved_child, child_id))
    return out


def _source_node(name: str, nodes: dict[str, NodeInfo]) -> Optional[NodeInfo]:
    """The node an input name (``op``, ``op:1``) comes from, through Identity ops."""
    for _ in range(len(nodes) + 1):
        op_name, _, index = name.partition(":")
        node = nodes.get(op_name)
        if node is None or node.op not in ("Identity", "IdentityN") or not node.inputs:
            return node
        if node.op == "IdentityN":
            data = [i for i in node.inputs if not i.startswith("^")]
            k = int(index or 0)
            if k >= len(data):
                return node
            name = data[k]
        else:
            name = node.inputs[0]
    return None


def _variable_inputs(node: NodeInfo, nodes: dict[str, NodeInfo]) -> list[Optional[str]]:
    """Per data input of ``node``: the VarHandleOp it comes from, or None."""
    out = []
    for name in node.inputs:
        if not name.startswith("^"):
            source = _source_node(name, nodes)
            out.append(source.name if source is not None and source.op == "VarHandleOp" else None)
    return out


def bound_variable_handles(graph_def: bytes, functions: dict[str, list[int]],
                           restore_op: str = "") -> tuple[dict[int, list[str]], set[str]]:
    """Saved node id -> the VarHandleOps the graph's calls of saved concrete
    functions pass for it (a function's bound inputs are its last inputs);
    and the VarHandleOps the node ``restore_op`` (the SaverDef's) takes."""
    nodes = {n.name: n for n in parse_graph_def(graph_def)}
    restorer = nodes.get(restore_op.partition(":")[0]) if restore_op else None
    tf1_restored = {h for h in _variable_inputs(restorer, nodes) if h} if restorer is not None else set()
    out: dict[int, list[str]] = {}
    for node in nodes.values():
        raw = node.attrs.get("f")
        if raw is None:
            continue
        fn = decode_attr_value(raw)
        bound = functions.get(fn if isinstance(fn, str) else "")
        if not bound:
            continue
        data = _variable_inputs(node, nodes)
        if len(data) < len(bound):
            continue
        for node_id, handle in zip(bound, data[len(data) - len(bound):]):
            if handle is not None:
                handles = out.setdefault(node_id, [])
                if handle not in handles:
                    handles.append(handle)
    return out, tf1_restored


def _read_object_graph(prefix: Path) -> bytes:
    """The checkpoint's TrackableObjectGraph, read by RestoreV2 in a session of its own."""
    g = Graph()
    string = dtypes.as_dtype("string")
    p = g.create_op("Placeholder", [], {"dtype": string, "shape": Shape([])}, name="prefix").output(0)
    names = g.create_op("Const", [], {"dtype": string, "value": np.array([OBJECT_GRAPH_KEY], object)},
                        attr_types={"value": "tensor"}, name="names").output(0)
    slices = g.create_op("Const", [], {"dtype": string, "value": np.array([""], object)},
                         attr_types={"value": "tensor"}, name="slices").output(0)
    restore = g.create_op("RestoreV2", [p, names, slices], {"dtypes": [string]},
                          attr_types={"dtypes": "list(type)"})
    with Session(g) as sess:
        value = np.asarray(sess.run(restore.output(0), {p: str(prefix)}), dtype=object).item()
    return value.encode() if isinstance(value, str) else bytes(value)


def restore_plan(export_dir: Path, meta_fields: dict) -> list[VariableRestore]:
    """What to restore: each variable handle that a call of a saved concrete
    function reads, with its object's checkpoint key ([] for a TF1
    SavedModel, one without variables, or one whose calls capture none)."""
    meta = pf.MetaGraphDef
    if meta.object_graph_def not in meta_fields or meta.graph_def not in meta_fields:
        return []
    prefix = export_dir / VARIABLES_PREFIX
    if not Path(f"{prefix}.index").is_file():
        return []      # a program-only SavedModel
    saved, functions = parse_saved_object_graph(bytes(meta_fields[meta.object_graph_def][-1]))
    saver_def = pb.fields(bytes(meta_fields[meta.saver_def][-1])) if meta.saver_def in meta_fields else {}
    restore_op = pb.text(saver_def.get(pf.SaverDef.restore_op_name, [b""])[-1])
    handles, tf1_restored = bound_variable_handles(bytes(meta_fields[meta.graph_def][-1]), functions, restore_op)
    handles = {i: h for i, h in handles.items() if 0 <= i < len(saved) and saved[i].variable is not None}
    if not handles:
        return []
    from bridge.train.bundle import read_index   # the index, read without TensorFlow
    index = read_index(prefix)
    if OBJECT_GRAPH_KEY not in index:
        return []      # a checkpoint without objects: the TF1 restore is all there is
    keys = checkpoint_attributes(saved, parse_trackable_object_graph(_read_object_graph(prefix)))
    plan: dict[str, VariableRestore] = {}
    for node_id in sorted(handles):
        variable = saved[node_id].variable
        attributes = keys.get(node_id, {})
        key = attributes.get(VARIABLE_VALUE) or (next(iter(attributes.values())) if len(attributes) == 1 else None)
        if key is None:
            continue   # no value in the checkpoint: whatever the TF1 restore left stands
        entry = index.get(key)
        if entry is None:
            raise errors.NotFoundError(f"SavedModel {export_dir}: the checkpoint has no entry '{key}' for the "
                                       f"variable '{variable.name}' (object {node_id})")
        if entry.sliced:
            continue   # a partitioned variable's slice: the TF1 restore knows its slice spec
        if entry.dtype != variable.dtype:
            raise errors.InvalidArgumentError(
                f"SavedModel {export_dir}: the variable '{variable.name}' (object {node_id}) is "
                f"{variable.dtype.name}, its checkpoint entry '{key}' {entry.dtype.name}")
        for handle in handles[node_id]:
            earlier = plan.get(handle)
            if earlier is not None and earlier.checkpoint_key != key:
                raise errors.InvalidArgumentError(
                    f"SavedModel {export_dir}: the variable handle '{handle}' stands for two objects, "
                    f"{earlier.node_id} ('{earlier.checkpoint_key}') and {node_id} ('{key}')")
            plan.setdefault(handle, VariableRestore(handle, node_id, key, variable.dtype, handle in tf1_restored))
    return list(plan.values())


def restore(export_dir: Path, graph: Graph, session: Session, plan: list[VariableRestore]) -> list[Operation]:
    """Assign each planned handle the TF1 restore did not fill its checkpoint
    value: one RestoreV2 and an AssignVariableOp per handle, added to
    ``graph`` under ``restore_saved_objects/`` and run once.  Returns the
    assign operations."""
    plan = [p for p in plan if not p.tf1_restored]
    if not plan:
        return []
    string = dtypes.as_dtype("string")
    with graph.name_scope(RESTORE_SCOPE):
        prefix = graph.create_op("Placeholder", [], {"dtype": string, "shape": Shape([])},
                                 name="prefix").output(0)
        names = graph.create_op("Const", [], {"dtype": string,
                                              "value": np.array([p.checkpoint_key for p in plan], object)},
                                attr_types={"value": "tensor"}, name="tensor_names").output(0)
        slices = graph.create_op("Const", [], {"dtype": string, "value": np.array([""] * len(plan), object)},
                                 attr_types={"value": "tensor"}, name="shape_and_slices").output(0)
        restored = graph.create_op("RestoreV2", [prefix, names, slices], {"dtypes": [p.dtype for p in plan]},
                                   attr_types={"dtypes": "list(type)"}, name="RestoreV2")
        assigns = [graph.create_op("AssignVariableOp",
                                   [graph.get_operation_by_name(p.handle).output(0), restored.output(i)],
                                   {"dtype": p.dtype}, attr_types={"dtype": "type"}, name="Assign")
                   for i, p in enumerate(plan)]
    session.run(assigns, {prefix: str(export_dir / VARIABLES_PREFIX)})
    return assigns
