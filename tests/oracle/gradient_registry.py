"""Oracle: which op types TF Python differentiates, and which it declares NotDifferentiable.

Request: None.  Response::

    {"differentiable": [op type, ...],      # a gradient function is registered
     "not_differentiable": [op type, ...],  # ops.NotDifferentiable / no_gradient
     "modules": {op type: "math_grad.py"},  # the file defining each gradient
     "tf_version": str}

Read from ``tensorflow.python.framework.ops._gradient_registry`` after
``import tensorflow`` (which imports every module registering gradients).
"""
from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import tensorflow  # noqa: F401  (registers the gradients)
from tensorflow.python.framework import ops

import _common


def handle(request: Any, out_dir: Path) -> dict:
    registry = ops._gradient_registry._registry
    diff = sorted(k for k, v in registry.items() if v["type"] is not None)
    modules = {}
    for k in diff:
        try:
            modules[k] = os.path.basename(inspect.getsourcefile(registry[k]["type"]))
        except TypeError:
            modules[k] = "?"
    return {"differentiable": diff,
            "not_differentiable": sorted(k for k, v in registry.items() if v["type"] is None),
            "modules": modules}


if __name__ == "__main__":
    _common.main(handle)
