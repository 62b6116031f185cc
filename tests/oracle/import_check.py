"""Oracle: how stock TensorFlow sees a GraphDef, and reference graphs built with scopes.

Request (both parts optional)::

    {"graph_def": bytes,            # serialized GraphDef, e.g. from the bridge
     "import_name": "",             # prefix for import_graph_def (default "")
     "build": [item, ...]}          # a reference graph to build (see below)

A build item is either a node::

    {"op": "AddV2", "id": "sum",            # id: how later items refer to it
     "name": "add",                         # optional; default: the op type
     "inputs": ["a", "b:0"],                # refs "id" or "id:k"; list inputs as lists
     "attrs": {...}}                        # as in eval_ops
    {"op": "Placeholder", "id": "a", "attrs": {"dtype": np.float32, "shape": [2]}}
    {"op": "Const", "id": "c", "value": np.ones(2, np.float32)}

or a scope whose "body" (a list of items) is built inside, like a with-block;
the keys present are entered in this order::

    {"name_scope": "outer",                 # graph.name_scope: "" resets, "x/" re-enters
     "device": "/cpu:0",                    # graph.device
     "colocate_with": "a",                  # graph.colocate_with(ref)
     "control_dependencies": ["a", "c"],    # graph.control_dependencies (None clears)
     "body": [...]}

Response::

    {"imported": [node, ...] | "ErrorType: message",   # when graph_def was given
     "built": [node, ...], "ids": {id: op name},       # when build was given
     "built_graph_def": bytes,
     "tf_version": str}

A node is ``{"name", "op", "device", "inputs", "attrs"}`` in GraphDef
order, as TF writes it back out (``graph.as_graph_def()``): inputs are
"name", "name:k" or "^name" (control), attrs are plain values (bytes, int,
float, bool, dtype name such as "float32", shape as a list or None, tensors
as numpy arrays, lists of those, function names as str).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

import _common
from _build_spec import SpecBuilder


def _attr_value(v) -> Any:
    """AttrValue proto -> plain Python value."""
    kind = v.WhichOneof("value")
    if kind == "list":
        lst = v.list
        for field in ("s", "i", "f", "b"):
            if getattr(lst, field):
                return list(getattr(lst, field))
        if lst.type:
            return [tf.as_dtype(t).name for t in lst.type]
        if lst.shape:
            return [_shape(s) for s in lst.shape]
        if lst.tensor:
            return [tf.make_ndarray(t) for t in lst.tensor]
        if lst.func:
            return [f.name for f in lst.func]
        return []
    if kind == "type":
        return tf.as_dtype(v.type).name
    if kind == "shape":
        return _shape(v.shape)
    if kind == "tensor":
        return tf.make_ndarray(v.tensor)
    if kind == "func":
        return v.func.name
    if kind == "placeholder":
        return f"${v.placeholder}"
    return getattr(v, kind) if kind else None


def _shape(s) -> list | None:
    return None if s.unknown_rank else [d.size for d in s.dim]


def describe(graph_def) -> list[dict]:
    """Each node of a GraphDef as a plain dict."""
    return [{"name": n.name, "op": n.op, "device": n.device, "inputs": list(n.input),
             "attrs": {k: _attr_value(v) for k, v in sorted(n.attr.items())}}
            for n in graph_def.node]


def import_graph_def(data: bytes, name: str) -> list[dict] | str:
    """Import serialized GraphDef bytes into a fresh graph; describe what TF made of it."""
    try:
        graph_def = tf.compat.v1.GraphDef.FromString(data)
        with tf.Graph().as_default() as g:
            tf.graph_util.import_graph_def(graph_def, name=name)
        return describe(g.as_graph_def())
    except Exception as exc:
        return _common.error_string(exc)


class _Builder(SpecBuilder):
    """Builds a nested item list into one TF graph."""

    def __init__(self) -> None:
        super().__init__(tf.Graph())

    def tensor(self, ref: str) -> tf.Tensor:
        name, _, index = ref.partition(":")
        return self.ids[name].outputs[int(index or 0)]

    def node(self, item: dict) -> None:
        op_type = item["op"]
        name = item.get("name")
        if op_type == "Const" and "value" in item:
            dtype = (item.get("attrs") or {}).get("dtype")
            arr = _common.to_array(item["value"])
            op = tf.constant(arr, dtype=_common.to_dtype(dtype or arr.dtype),
                             name=name or "Const").op
        else:
            inputs = [[self.tensor(r) for r in ref] if isinstance(ref, (list, tuple))
                      else self.tensor(ref) for ref in item.get("inputs", [])]
            op = _common.apply_op(op_type, inputs, item.get("attrs"), name)
        self.ids[item.get("id") or name or op.name] = op


def handle(request: Any, out_dir: Path) -> dict:
    request = request or {}
    response: dict = {}
    if request.get("graph_def") is not None:
        response["imported"] = import_graph_def(bytes(request["graph_def"]),
                                                request.get("import_name", ""))
    if request.get("build") is not None:
        b = _Builder()
        b.build(request["build"])  # a bad spec is a test bug: let it raise
        graph_def = b.graph.as_graph_def()
        response["built"] = describe(graph_def)
        response["ids"] = {key: op.name for key, op in b.ids.items()}
        response["built_graph_def"] = graph_def.SerializeToString(deterministic=True)
    return response


if __name__ == "__main__":
    _common.main(handle)
