"""Oracle: how stock TensorFlow reads a serialized ConfigProto.

Request::

    {"config": bytes}      # e.g. bridge.SessionConfig(...).to_proto()

Response::

    {"fields": {path: value}}   # every field set, e.g. "inter_op_parallelism_threads": -1,
                                # "graph_options.rewrite_options.disable_meta_optimizer": True
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import _common
import tensorflow as tf


def flatten(message, prefix: str = "") -> dict:
    out = {}
    for field, value in message.ListFields():
        path = prefix + field.name
        if hasattr(value, "ListFields"):  # a singular sub-message (repeated ones are containers)
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def handle(request: Any, out_dir: Path) -> dict:
    config = tf.compat.v1.ConfigProto()
    config.ParseFromString(bytes(request["config"]))
    return {"fields": flatten(config)}


if __name__ == "__main__":
    _common.main(handle)
