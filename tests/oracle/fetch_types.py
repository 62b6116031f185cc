"""Oracle: the Python types of what TF1's ``Session.run`` returns, per dtype and rank.

Builds a ``tf.compat.v1`` graph holding, for each dtype of :data:`DTYPES`, a
0-d and a 1-d constant (``<dtype>_0d``, ``<dtype>_1d``, behind an Identity) and a
0-d placeholder (``<dtype>_fed``); a scalar resource variable and a scalar
ref variable; and a SavedModel (TF1's builder) with a signature of scalars.
Then fetches them with stock TF's ``tf.compat.v1.Session`` in every way the
test checks on the bridge, and describes each result (:func:`describe`).

Request: None.  Response::

    {"graph_def": bytes, "init": [op names],
     "dtypes": [name, ...],
     "single": {tensor name: description},        # sess.run(name), one at a time
     "listed": description,                        # sess.run([every name])
     "nested": description,                        # sess.run(NESTED)
     "callable": description,                      # sess.make_callable(...)(*values)
     "fed": {tensor name: description},           # fed a Python scalar and fetched
     "variables": description,                     # [resource var, its read, ref var]
     "saved_model": {"path": str, "signature": "scalars", "outputs": {key: description}}}

A description: ``{"type": "module.qualname", "dtype": str | None, "shape": tuple | None,
"value": the value}`` for a leaf, ``["list" | "tuple" | "dict" | "Pair", children]``
for a container.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "string"]

Pair = collections.namedtuple("Pair", "first second")


def value_of(dtype: str, shape: tuple) -> Any:
    """A value of ``dtype`` and ``shape`` away from 0 and 1 (exact in every dtype)."""
    n = int(np.prod(shape))
    if dtype == "string":
        flat = np.array([f"s{i}\u00e9".encode() for i in range(n)], dtype=object)
    elif dtype == "bool":
        flat = np.array([i % 2 == 0 for i in range(n)])
    elif dtype.startswith("complex"):
        flat = np.array([complex(3 + i, -2) for i in range(n)], dtype=dtype)
    else:
        flat = np.array([5 + 2 * i for i in range(n)], dtype=tf.as_dtype(dtype).as_numpy_dtype)
    return flat.reshape(shape)


#: The fed values: Python scalars, as a user feeds them.
def fed_value(dtype: str) -> Any:
    return {"string": "fed", "bool": True}.get(dtype, complex(7, 1) if dtype.startswith("complex") else 7)


def describe(x: Any) -> Any:
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return [type(x).__name__, [describe(v) for v in x]]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__, [describe(v) for v in x]]
    if isinstance(x, dict):
        return ["dict", {k: describe(v) for k, v in x.items()}]
    kind = type(x)
    return {"type": f"{kind.__module__}.{kind.__qualname__}",
            "dtype": str(x.dtype) if hasattr(x, "dtype") else None,
            "shape": tuple(np.shape(x)) if hasattr(x, "shape") else None,
            "value": x}


def _names() -> list[str]:
    return [f"{d}_{r}:0" for d in DTYPES for r in ("0d", "1d")]


def _nested() -> Any:
    return {"scalars": [f"{d}_0d:0" for d in DTYPES],
            "pair": Pair("float64_0d:0", ("int32_0d:0", "string_0d:0")),
            "vector": "float32_1d:0"}


def _saved_model(out_dir: Path) -> dict:
    path = out_dir / "scalars"
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [], name="x")
        outputs = {"f64": x * 2.0, "i32": tf.cast(x, tf.int32), "s": tf.strings.as_string(x),
                   "b": x > 0.0, "v": tf.stack([x, x])}
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            builder = tf.compat.v1.saved_model.Builder(str(path))
            sig = tf.compat.v1.saved_model.predict_signature_def({"x": x}, outputs)
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"scalars": sig})
            builder.save()
    with tf.Graph().as_default() as g, tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], str(path))
        sig = meta.signature_def["scalars"]
        fetches = {k: info.name for k, info in sig.outputs.items()}
        got = sess.run(fetches, {sig.inputs["x"].name: 2.5})
    return {"path": str(path), "signature": "scalars", "outputs": {k: describe(v) for k, v in got.items()}}


def handle(request: Any, out_dir: Path) -> dict:
    tf.compat.v1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        for d in DTYPES:
            for r, shape in (("0d", ()), ("1d", (2,))):
                tf.identity(tf.constant(value_of(d, shape), dtype=d), name=f"{d}_{r}")
            tf.compat.v1.placeholder(d, [], name=f"{d}_fed")
        var = tf.compat.v1.get_variable("var", initializer=np.float32(3.5), use_resource=True)
        ref = tf.compat.v1.get_variable("ref", initializer=np.int64(9), use_resource=False)
        read = var.read_value()
        init = tf.compat.v1.global_variables_initializer()
    names = _names()
    fed_names = [f"{d}_fed:0" for d in DTYPES]
    response: dict = {"graph_def": graph.as_graph_def().SerializeToString(), "init": [init.name],
                      "dtypes": DTYPES, "variable_names": {"var": var.name, "read": read.name, "ref": ref.name}}
    with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        sess.run(init)
        response["single"] = {n: describe(sess.run(n)) for n in names}
        response["listed"] = describe(sess.run(names))
        response["nested"] = describe(sess.run(_nested()))
        run = sess.make_callable({"out": names[:6] + ["string_0d:0"], "fed": fed_names[:2]}, fed_names[:2])
        response["callable"] = describe(run(*[fed_value(d) for d in DTYPES[:2]]))
        response["fed"] = {n: describe(sess.run(n, {n: fed_value(d)})) for n, d in zip(fed_names, DTYPES, strict=True)}
        response["variables"] = describe(sess.run([var, read, ref]))
    response["saved_model"] = _saved_model(out_dir)
    return response


if __name__ == "__main__":
    _common.main(handle)
