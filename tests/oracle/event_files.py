"""Oracle: TensorBoard event files both ways between stock TensorFlow and the bridge.

Request ``{"mode": "read", "data": bytes}``: the bytes of an event file the
bridge wrote are read back by TF's own reader (``summary_iterator``, which
checks every record's CRCs)::

    {"events": [{"wall_time": float, "step": int, "file_version": str,
                 "graph_nodes": [str] | None,          # the GraphDef's node names, parsed by TF
                 "graph_attrs": {node: {key: str}},    # its nodes' string attributes named _tfbridge_*
                 "run_metadata": (tag, [node names in its step stats]) | None,
                 "values": [(tag, "simple_value", float) | (tag, "histo", dict)]}]}

Request ``{"mode": "write", "scalars": [(tag, step, value)]}``: TF's
``tf.compat.v1.summary.FileWriter`` writes the scalars, each through a
``tf.compat.v1.summary.scalar`` op named by the tag; the response is
``{"data": bytes, "tags": [str]}`` (the file, and the tags TF gave).

Request ``{"mode": "summaries", "cases": [(kind, name, value, kwargs)]}``:
TF1's ``tf.compat.v1.summary.<kind>(name, tf.constant(value), **kwargs)``
(kind: image, audio, text, scalar, histogram) in one graph; the response is
``{"summaries": [bytes], "nodes": [(name, op type)]}``: each op's serialized
Summary, and the graph's nodes in creation order.
"""
from __future__ import annotations

import glob
from pathlib import Path

import tensorflow as tf

import _common

tf1 = tf.compat.v1


def _read(request: dict, out_dir: Path) -> dict:
    path = out_dir / "events.out.tfevents.bridge"
    path.write_bytes(request["data"])
    events = []
    for event in tf1.train.summary_iterator(str(path)):
        graph_nodes, graph_attrs, run_metadata = None, {}, None
        if event.graph_def:
            graph_def = tf1.GraphDef()
            graph_def.ParseFromString(event.graph_def)
            graph_nodes = [n.name for n in graph_def.node]
            graph_attrs = {n.name: {k: v.s.decode() for k, v in n.attr.items() if k.startswith("_tfbridge_")}
                           for n in graph_def.node if any(k.startswith("_tfbridge_") for k in n.attr)}
        if event.HasField("tagged_run_metadata"):
            meta = tf1.RunMetadata()
            meta.ParseFromString(event.tagged_run_metadata.run_metadata)
            run_metadata = (event.tagged_run_metadata.tag,
                            sorted({n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats}))
        values = []
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                values.append((value.tag, kind, value.simple_value))
            elif kind == "histo":
                h = value.histo
                values.append((value.tag, kind, {"min": h.min, "max": h.max, "num": h.num, "sum": h.sum,
                                                 "sum_squares": h.sum_squares,
                                                 "bucket_limit": list(h.bucket_limit),
                                                 "bucket": list(h.bucket)}))
            else:
                values.append((value.tag, str(kind), None))
        events.append({"wall_time": event.wall_time, "step": event.step, "file_version": event.file_version,
                       "graph_nodes": graph_nodes, "graph_attrs": graph_attrs, "run_metadata": run_metadata,
                       "values": values})
    return {"events": events}


def _write(request: dict, out_dir: Path) -> dict:
    graph = tf1.Graph()
    tags = []
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [], name="x")
        ops = {}
        for tag, _, _ in request["scalars"]:
            if tag not in ops:
                ops[tag] = tf1.summary.scalar(tag, x)
                tags.append(tag)
        with tf1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            writer = tf1.summary.FileWriter(str(out_dir / "tf"))
            for tag, step, value in request["scalars"]:
                writer.add_summary(sess.run(ops[tag], {x: value}), step)
            writer.close()
    (path,) = glob.glob(str(out_dir / "tf" / "events.out.tfevents.*"))
    return {"data": Path(path).read_bytes(), "tags": tags}


def _summaries(request: dict, out_dir: Path) -> dict:
    graph = tf1.Graph()
    with graph.as_default():
        ops = []
        for kind, name, value, kwargs in request["cases"]:
            kwargs = dict(kwargs)
            if "sample_rate" in kwargs:   # TF converts a Python float with this name
                kwargs["sample_rate"] = float(kwargs["sample_rate"])
            ops.append(getattr(tf1.summary, kind)(name, tf.constant(value), **kwargs))
        with tf1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            values = sess.run(ops)
    return {"summaries": [bytes(v) for v in values],
            "nodes": [(n.name, n.op) for n in graph.as_graph_def().node]}


def handle(request: dict, out_dir: Path) -> dict:
    return {"read": _read, "write": _write, "summaries": _summaries}[request["mode"]](request, out_dir)


if __name__ == "__main__":
    _common.main(handle)
