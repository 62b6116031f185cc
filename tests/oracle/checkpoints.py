"""Oracle: V2 checkpoints both ways between stock TensorFlow and the bridge.

Request ``{"mode": "read", "files": {name: bytes}, "prefix": str}``: the
files (a checkpoint the bridge wrote, and its ``checkpoint`` state file) are
written to OUT_DIR/ckpt; stock TF reads them::

    {"values": {name: ndarray},                 # tf.train.load_checkpoint(prefix).get_tensor
     "dtypes": {name: "float32"}, "shapes": {name: [int]},   # the reader's maps
     "list_variables": [(name, [int])],         # tf.train.list_variables
     "latest": str | None,                      # tf.train.latest_checkpoint(folder), its base name
     "all_model_checkpoint_paths": [str]}       # tf.train.get_checkpoint_state, base names

Request ``{"mode": "write", "variables": {name: ndarray}, "step": int}``:
graph-mode resource variables with those names and values (``dense/kernel``
made as ``kernel`` in variable scope ``dense``) are saved by
``tf.compat.v1.train.Saver`` twice: the default (``SaveV2`` to the prefix)
in OUT_DIR/tf and a sharded one (``MergeV2Checkpoints``) in
OUT_DIR/tf_sharded, both as ``model.ckpt-<step>`` with their state files::

    {"prefix": str, "sharded_prefix": str, "dir": str, "sharded_dir": str,
     "values": {name: ndarray},                 # what the session held when it saved
     "state_file": str}                         # TF's text of OUT_DIR/tf/checkpoint
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import tensorflow as tf

import _common

tf1 = tf.compat.v1


def _read(request: dict, out_dir: Path) -> dict:
    folder = out_dir / "ckpt"
    folder.mkdir()
    for name, data in request["files"].items():
        (folder / name).write_bytes(data)
    prefix = str(folder / request["prefix"])
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
    state = tf.train.get_checkpoint_state(str(folder))
    latest = tf.train.latest_checkpoint(str(folder))
    return {
        "values": {name: np.asarray(reader.get_tensor(name)) for name in shapes},
        "dtypes": {name: dtype.name for name, dtype in dtypes.items()},
        "shapes": {name: list(shape) for name, shape in shapes.items()},
        "list_variables": [(name, list(shape)) for name, shape in tf.train.list_variables(prefix)],
        "latest": os.path.basename(latest) if latest else None,
        "all_model_checkpoint_paths": [os.path.basename(p) for p in state.all_model_checkpoint_paths] if state else [],
    }


def _variable(name: str, value: np.ndarray):
    """A resource variable named ``name`` ("a/b/c": "c" in variable scopes "a", "b")."""
    *scopes, leaf = name.split("/")

    def make(remaining):
        if not remaining:
            return tf1.get_variable(leaf, initializer=tf.constant(value), use_resource=True)
        with tf1.variable_scope(remaining[0]):
            return make(remaining[1:])
    return make(scopes)


def _write(request: dict, out_dir: Path) -> dict:
    os.chdir(out_dir)   # relative save paths: the state files then name checkpoints relative to their folder
    step = request.get("step", 7)
    for folder in ("tf", "tf_sharded"):
        (out_dir / folder).mkdir()
    graph = tf.Graph()
    with graph.as_default():
        variables = [_variable(name, np.asarray(value)) for name, value in request["variables"].items()]
        plain = tf1.train.Saver()
        sharded = tf1.train.Saver(sharded=True)
        with tf1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            sess.run(tf1.global_variables_initializer())
            values = {v.op.name: np.asarray(sess.run(v)) for v in variables}
            prefix = plain.save(sess, "tf/model.ckpt", global_step=step)
            sharded_prefix = sharded.save(sess, "tf_sharded/model.ckpt", global_step=step)
    return {"prefix": str(out_dir / prefix), "sharded_prefix": str(out_dir / sharded_prefix),
            "dir": str(out_dir / "tf"), "sharded_dir": str(out_dir / "tf_sharded"),
            "values": values, "state_file": (out_dir / "tf" / "checkpoint").read_text()}


def handle(request: dict, out_dir: Path) -> dict:
    mode = request["mode"]
    if mode == "read":
        return _read(request, out_dir)
    if mode == "write":
        return _write(request, out_dir)
    raise ValueError(f"unknown mode {mode!r} (read, write)")


if __name__ == "__main__":
    _common.main(handle)
