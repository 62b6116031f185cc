"""Oracle: stock TensorFlow loads a SavedModel the bridge wrote, and serves it.

Request::

    {"files": {relative path: bytes},          # the SavedModel folder, file by file
     "tags": ["serve"],
     "feeds": {signature: {input key: ndarray}}}

The files are written to OUT_DIR/model, then loaded twice: the TF2 way
(``tf.saved_model.load(dir).signatures[name](**feeds)``) and the TF1 way
(``tf.compat.v1.saved_model.loader.load`` in a Session, feeding and fetching
the SignatureDefs' tensor names).  The SavedModel proto is parsed with the
real protobuf classes, which checks the bridge's hand-written encoding.

Response::

    {"proto": {"schema_version", "tags", "tensorflow_version", "stripped_ops": [op type],
               "graph_ops": [op type], "saver_def": {field: value} | None, "collections": [key],
               "variable_defs": [{"variable_name", "snapshot_name", "is_resource", "trainable"}],
               "signatures": {name: {"method_name", "inputs"|"outputs": {key: {"name", "dtype", "shape"}}}}},
     "files": [relative path],                  # what the folder held
     "tf2": {signature: {output key: ndarray}}, "tf2_variables": [name], "tf2_error": str | None,
     "tf1": {signature: {output key: ndarray}}, "tf1_variables": {name: ndarray}, "tf1_error": str | None}

Shapes are lists (None for an unknown size) or None for an unknown rank.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import variable_pb2
from tensorflow.core.protobuf import saved_model_pb2, saver_pb2

import _common

tf1 = tf.compat.v1


def _shape(proto) -> list | None:
    if proto.unknown_rank:
        return None
    return [None if d.size < 0 else d.size for d in proto.dim]


def _tensor_infos(infos) -> dict:
    return {key: {"name": info.name, "dtype": tf.as_dtype(info.dtype).name, "shape": _shape(info.tensor_shape)}
            for key, info in infos.items()}


def _describe(path: Path) -> dict:
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(path.read_bytes())
    (meta,) = sm.meta_graphs
    saver_def = None
    if meta.HasField("saver_def"):
        sd = meta.saver_def
        saver_def = {"filename_tensor_name": sd.filename_tensor_name, "save_tensor_name": sd.save_tensor_name,
                     "restore_op_name": sd.restore_op_name, "max_to_keep": sd.max_to_keep, "sharded": sd.sharded,
                     "keep_checkpoint_every_n_hours": sd.keep_checkpoint_every_n_hours,
                     "version": saver_pb2.SaverDef.CheckpointFormatVersion.Name(sd.version)}
    variable_defs = []
    if "variables" in meta.collection_def:
        for raw in meta.collection_def["variables"].bytes_list.value:
            vd = variable_pb2.VariableDef()
            vd.ParseFromString(raw)
            variable_defs.append({"variable_name": vd.variable_name, "snapshot_name": vd.snapshot_name,
                                  "is_resource": vd.is_resource, "trainable": vd.trainable})
    return {
        "schema_version": sm.saved_model_schema_version,
        "tags": list(meta.meta_info_def.tags),
        "tensorflow_version": meta.meta_info_def.tensorflow_version,
        "stripped_ops": [op.name for op in meta.meta_info_def.stripped_op_list.op],
        "graph_ops": sorted({node.op for node in meta.graph_def.node}),
        "saver_def": saver_def,
        "collections": sorted(meta.collection_def),
        "variable_defs": variable_defs,
        "signatures": {name: {"method_name": sig.method_name, "inputs": _tensor_infos(sig.inputs),
                              "outputs": _tensor_infos(sig.outputs)}
                       for name, sig in meta.signature_def.items()},
    }


def _serve_tf2(export_dir: Path, tags: list, feeds: dict) -> tuple[dict, list]:
    model = tf.saved_model.load(str(export_dir), tags=tags)
    results = {}
    for name, inputs in feeds.items():
        fn = model.signatures[name]
        out = fn(**{key: tf.constant(value) for key, value in inputs.items()})
        results[name] = {key: value.numpy() for key, value in out.items()}
    return results, sorted(v.name for v in model.variables)


def _serve_tf1(export_dir: Path, tags: list, feeds: dict) -> tuple[dict, dict]:
    graph = tf.Graph()
    with graph.as_default(), tf1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        meta = tf1.saved_model.loader.load(sess, tags, str(export_dir))
        results = {}
        for name, inputs in feeds.items():
            sig = meta.signature_def[name]
            fetches = {key: info.name for key, info in sig.outputs.items()}
            feed_dict = {sig.inputs[key].name: value for key, value in inputs.items()}
            results[name] = {key: np.asarray(v) for key, v in sess.run(fetches, feed_dict).items()}
        variables = {v.op.name: np.asarray(sess.run(v)) for v in tf1.global_variables()}
    return results, variables


def handle(request: dict, out_dir: Path) -> dict:
    export_dir = out_dir / "model"
    for rel, data in request["files"].items():
        path = export_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (export_dir / "variables").mkdir(parents=True, exist_ok=True)   # an empty folder is no file to send
    tags, feeds = request.get("tags", ["serve"]), request.get("feeds", {})
    response = {"proto": _describe(export_dir / "saved_model.pb"),
                "files": sorted(str(p.relative_to(export_dir)) for p in export_dir.rglob("*") if p.is_file()),
                "tf2": {}, "tf2_variables": [], "tf2_error": None,
                "tf1": {}, "tf1_variables": {}, "tf1_error": None}
    try:
        response["tf2"], response["tf2_variables"] = _serve_tf2(export_dir, tags, feeds)
    except Exception as exc:  # reported to the test, which shows it
        response["tf2_error"] = _common.error_string(exc)
    try:
        response["tf1"], response["tf1_variables"] = _serve_tf1(export_dir, tags, feeds)
    except Exception as exc:
        response["tf1_error"] = _common.error_string(exc)
    return response


if __name__ == "__main__":
    _common.main(handle)
