"""Writing a SavedModel that stock TensorFlow loads and serves.

``save(session, export_dir, signatures)`` writes what TF1's SavedModel
builder (``tf.compat.v1.saved_model.Builder.add_meta_graph_and_variables``)
writes, which both ``tf.saved_model.load`` and
``tf.compat.v1.saved_model.loader.load`` read:

- ``saved_model.pb``: a SavedModel with one MetaGraphDef: ``meta_info_def``
  (the tags, TensorFlow's version, the OpDefs of the op types the graph
  uses), the GraphDef (``TF_GraphToGraphDef``, with the Saver's ops), the
  Saver's SaverDef, the ``variables`` and ``trainable_variables``
  collections (VariableDefs) and the signatures (predict SignatureDefs);
- ``variables/variables.{index,data-00000-of-00001}``: the checkpoint the
  Saver writes (bridge.train.Saver);
- ``assets.extra/bridge_op_libraries.json`` when the graph uses op types of
  custom op libraries: which library (and op folder) each came from, so
  ``load_saved_model`` can say what to pass as ``op_libraries``.

Everything is written into a temporary folder beside ``export_dir``, then
renamed into place: a failed save leaves nothing behind.  Protocol buffers
are encoded with :mod:`bridge.framework._proto` (the binding has no protobuf
dependency).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from bridge.framework import _proto as pb
from bridge.framework import buffers
from bridge.framework._lib import ffi, lib
from bridge.platform.paths import op_folder_of_library
from bridge.framework.attrs import Shape
from bridge.framework.graph import Graph, Output
from bridge.framework.session import Session
from .load import OP_LIBRARIES_RECORD

SERVING_DEFAULT = "serving_default"
PREDICT_METHOD = "tensorflow/serving/predict"
SAVED_MODEL_FILE = "saved_model.pb"
VARIABLES_DIR = "variables"
#: The collection of Savers this module made, reused by later exports of the same variables.
_SAVERS_COLLECTION = "savers"
_SCHEMA_VERSION = 1

TensorMap = Mapping[str, Output]
SignatureSpec = tuple[TensorMap, TensorMap]


# --- arguments -------------------------------------------------------------------

def _tensor_map(value: Any, graph: Graph, where: str) -> dict[str, Output]:
    if not isinstance(value, Mapping):
        raise TypeError(f"save: {where} must be a dict key -> Output, not {type(value).__name__}")
    out = {}
    for key, tensor in value.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"save: {where} has the key {key!r}; keys must be non-empty strings")
        if not isinstance(tensor, Output):
            raise TypeError(f"save: {where}['{key}'] is {type(tensor).__name__}, not an Output")
        if tensor.graph is not graph:
            raise ValueError(f"save: {where}['{key}'] ({tensor.name}) belongs to another graph than the session's")
        out[key] = tensor
    return out


def _is_pair(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, Mapping) for v in value)


def _signatures(signatures: Any, graph: Graph) -> dict[str, tuple[dict, dict]]:
    """name -> (inputs, outputs); a lone (inputs, outputs) pair is the default signature."""
    if signatures is None:
        return {}
    if _is_pair(signatures):
        signatures = {SERVING_DEFAULT: signatures}
    if not isinstance(signatures, Mapping):
        raise TypeError("save: signatures must be a dict name -> (inputs, outputs), or one (inputs, outputs) "
                        f"pair, not {type(signatures).__name__}")
    out = {}
    for name, pair in signatures.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"save: signature names must be non-empty strings, got {name!r}")
        if not _is_pair(pair):
            raise TypeError(f"save: signature '{name}' must be an (inputs, outputs) pair of dicts key -> Output")
        out[name] = (_tensor_map(pair[0], graph, f"signature '{name}' inputs"),
                     _tensor_map(pair[1], graph, f"signature '{name}' outputs"))
    return out


def _check_export_dir(export_dir: Path) -> None:
    if export_dir.exists():
        if not export_dir.is_dir():
            raise FileExistsError(f"save: the export folder {export_dir} is a file")
        if any(export_dir.iterdir()):
            raise FileExistsError(f"save: the export folder {export_dir} already exists and is not empty; "
                                  "choose another folder or delete it (TensorFlow refuses it too)")


# --- protocol buffers -----------------------------------------------------------------

def _shape_proto(shape: Shape) -> bytes:
    if shape.unknown_rank:
        return pb.field_varint(3, 1)
    return b"".join(pb.field_bytes(2, pb.field_varint(1, -1 if d is None else d)) for d in shape)


def _tensor_info(tensor: Output) -> bytes:
    return (pb.field_bytes(1, tensor.name) + pb.field_varint(2, tensor.dtype.enum)
            + pb.field_bytes(3, _shape_proto(tensor.shape)))


def _map_entry(number: int, key: str, value: bytes) -> bytes:
    return pb.field_bytes(number, pb.field_bytes(1, key) + pb.field_bytes(2, value))


def _signature_def(inputs: dict[str, Output], outputs: dict[str, Output]) -> bytes:
    return (b"".join(_map_entry(1, k, _tensor_info(t)) for k, t in sorted(inputs.items()))
            + b"".join(_map_entry(2, k, _tensor_info(t)) for k, t in sorted(outputs.items()))
            + pb.field_bytes(3, PREDICT_METHOD))


def _variable_def(var) -> bytes:
    """A VariableDef, as TF's collections hold resource variables."""
    return (pb.field_bytes(1, var.handle.name) + pb.field_bytes(2, var.initializer.name)
            + pb.field_bytes(3, var.value().name) + pb.field_varint(5, 1)
            + pb.field_bytes(6, var.initializer.inputs[1].name) + pb.field_varint(7, int(bool(var.trainable))))


def _collection(values: Sequence[bytes]) -> bytes:
    """A CollectionDef holding a bytes_list."""
    return pb.field_bytes(2, b"".join(pb.field_bytes(1, v) for v in values))


def _canonical_node(node: bytes) -> bytes:
    """The NodeDef with its fields in number order and its attrs sorted by
    name: TensorFlow serializes the attr map in hash order, which would make
    the same graph write different bytes from one process to the next."""
    entries = []
    for number, wire, value in pb.iter_fields(node):
        if wire != pb.LEN:   # NodeDef has only length-delimited fields; keep anything else as it came
            return node
        raw = bytes(value)
        key = pb.text(pb.fields(raw).get(1, [b""])[0]) if number == 5 else ""
        entries.append((number, key, pb.field_bytes(number, raw)))
    entries.sort(key=lambda e: (e[0], e[1]) if e[0] == 5 else (e[0], ""))
    return b"".join(e[2] for e in entries)


def canonical_graph_def(graph_def: bytes) -> bytes:
    """The GraphDef with each node's attrs in name order (see _canonical_node)."""
    out = []
    for number, wire, value in pb.iter_fields(graph_def):
        if number == 1 and wire == pb.LEN:
            out.append(pb.field_bytes(1, _canonical_node(bytes(value))))
        elif wire == pb.LEN:
            out.append(pb.field_bytes(number, bytes(value)))
        else:
            return graph_def
    return b"".join(out)


def _graph_op_types(graph: Graph, graph_def: bytes) -> set[str]:
    """Op types the graph and its functions use, function calls left out (as TF's stripped_op_list)."""
    used = {op.type for op in graph}
    functions = set()
    for lib_buf in pb.fields(graph_def).get(2, []):
        for fdef in pb.fields(bytes(lib_buf)).get(1, []):
            f = pb.fields(bytes(fdef))
            signature = pb.fields(bytes(f.get(1, [b""])[0]))
            functions.add(pb.text(signature.get(1, [b""])[0]))
            for node in f.get(3, []):
                used.add(pb.text(pb.fields(bytes(node)).get(2, [b""])[0]))
    return used - functions - {""}


def _stripped_op_list(graph: Graph, op_types: set[str]) -> bytes:
    op_defs = []
    for op_type in sorted(op_types):
        op_defs.append(pb.field_bytes(1, buffers.filled(
            lambda buf, s, t=op_type: lib.TF_GraphGetOpDef(graph._ptr, t.encode(), buf, s),
            f"looking up op {op_type}")))
    return b"".join(op_defs)


def _meta_graph_def(graph: Graph, graph_def: bytes, op_types: set[str], tags: Sequence[str], saver,
                    variables: list, signatures: dict[str, tuple[dict, dict]]) -> bytes:
    meta_info = (pb.field_bytes(2, _stripped_op_list(graph, op_types))
                 + b"".join(pb.field_bytes(4, t) for t in tags)
                 + pb.field_bytes(5, ffi.string(lib.TF_Version()).decode()))
    out = pb.field_bytes(1, meta_info) + pb.field_bytes(2, graph_def)
    if saver is not None:
        out += pb.field_bytes(3, saver.as_saver_def())
        trainable = [v for v in variables if v.trainable]
        out += _map_entry(4, "trainable_variables", _collection([_variable_def(v) for v in trainable])) \
            if trainable else b""
        out += _map_entry(4, "variables", _collection([_variable_def(v) for v in variables]))
    for name, (inputs, outputs) in sorted(signatures.items()):
        out += _map_entry(5, name, _signature_def(inputs, outputs))
    return out


# --- op libraries ------------------------------------------------------------------

def _op_library_record(used: set[str]) -> list[dict]:
    # The op layer loads here, not on import: `import bridge` stays free of it.
    from bridge.ops.op_library import loaded_libraries
    record = []
    for path, op_types in sorted(loaded_libraries().items()):
        here = sorted(used & op_types)
        if here:
            folder = op_folder_of_library(Path(path))
            record.append({"library": path, "folder": str(folder) if folder else None,
                           "op_types": sorted(op_types), "used": here})
    return record


# --- writing ---------------------------------------------------------------------------

def _saver_for(graph: Graph, variables: list):
    """A Saver of exactly ``variables``: one an earlier export made, or a new one."""
    from bridge.train.saver import Saver   # imports bridge.ops: only when saving

    by_name = {v.op.name: v for v in variables}  # the Saver's keys
    for saver in graph.collections.get(_SAVERS_COLLECTION, []):
        if isinstance(saver, Saver) and saver.variables == by_name:
            return saver
    saver = Saver(variables)   # max_to_keep 5 in its SaverDef, as TF's builder writes (it deletes nothing here)
    graph.collections.setdefault(_SAVERS_COLLECTION, []).append(saver)
    return saver


def save(session: Session, export_dir: Union[str, os.PathLike], signatures: Any = None,
         tags: Sequence[str] = ("serve",)) -> Path:
    """Export the session's graph and variable values as a SavedModel in ``export_dir``.

    ``signatures``: a dict signature name -> (inputs, outputs), each a dict
    key -> Output, or one (inputs, outputs) pair (the "serving_default"
    signature).  ``export_dir`` must not exist or be empty.  Returns its path."""
    from bridge.framework.builders import global_variables

    if not isinstance(session, Session):
        raise TypeError(f"save: session must be a bridge.Session, not {type(session).__name__}")
    if isinstance(tags, str):
        tags = [tags]
    tags = list(tags)
    if not tags or not all(isinstance(t, str) and t for t in tags):
        raise ValueError(f"save: tags must be non-empty strings, got {tags!r}")
    graph = session.graph
    sigs = _signatures(signatures, graph)
    export_dir = Path(export_dir)
    _check_export_dir(export_dir)
    variables = global_variables(graph)
    saver = _saver_for(graph, variables) if variables else None
    graph_def = canonical_graph_def(graph.as_graph_def())   # after the Saver's ops joined the graph
    op_types = _graph_op_types(graph, graph_def)
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    # Not tempfile.mkdtemp: its folder is private (0700), and the export is for others to read too.
    work = export_dir.parent / f".{export_dir.name}.tmp-{secrets.token_hex(6)}"
    work.mkdir()
    try:
        (work / VARIABLES_DIR).mkdir()
        if saver is not None:
            saver.save(session, work / VARIABLES_DIR / "variables", write_state=False)
        libraries = _op_library_record(op_types)
        if libraries:
            record = work / OP_LIBRARIES_RECORD
            record.parent.mkdir()
            record.write_text(json.dumps({"format": 1, "libraries": libraries}, indent=1) + "\n", encoding="utf-8")
        meta = _meta_graph_def(graph, graph_def, op_types, tags, saver, variables, sigs)
        (work / SAVED_MODEL_FILE).write_bytes(pb.field_varint(1, _SCHEMA_VERSION) + pb.field_bytes(2, meta))
        _check_export_dir(export_dir)   # nothing appeared there meanwhile
        if export_dir.is_dir():
            export_dir.rmdir()
        os.rename(work, export_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return export_dir
