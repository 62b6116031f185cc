"""Oracle: write model fixtures with stock TensorFlow and record their expected outputs.

Request: None, or ``{"seed": int}`` (default 0; weights and sample feeds
come from ``numpy.random.default_rng(seed)``).

Writes into OUT_DIR: mlp.pb, conv.pb, strings.pb (binary GraphDefs with
frozen Const weights) and saved_model/ (a TF1 SavedModel, tag "serve",
signatures "predict" and "double", with variables).

Response (the manifest)::

    {"tf_version": str, "out_dir": str,
     "models": {
        "mlp" | "conv" | "strings": {
            "kind": "graphdef", "path": str,          # the .pb file
            "inputs": ["x:0", ...], "outputs": ["probs:0", ...],
            "feeds": {input: ndarray}, "expected": {output: ndarray},
            "weights": {name: ndarray}},              # the frozen constants (mlp, conv)
        "saved_model": {
            "kind": "saved_model", "path": str,       # the export dir
            "tags": ["serve"],
            "signatures": {"predict" | "double": {
                "method_name": str,
                "inputs": {key: "x:0"}, "outputs": {key: "y:0"},
                "feeds": {tensor: ndarray}, "expected": {tensor: ndarray}}},
            "variables": {"W_read:0": ndarray, ...},  # saved values, keyed by a fetchable read
            "inputs": [...], "outputs": [...],        # union over signatures
            "feeds": {...}, "expected": {...}}}}      # union over signatures

Expected values for the GraphDefs are computed by re-importing the written
.pb into a fresh graph, so they check the file, not just the Python graph.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common

v1 = tf.compat.v1


def _run_graph_def(path: Path, feeds: dict, outputs: list[str]) -> dict:
    """Import a written GraphDef into a fresh graph and run it."""
    graph_def = v1.GraphDef.FromString(path.read_bytes())
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        with v1.Session(graph=g, config=_common.SESSION_CONFIG) as sess:
            values = sess.run(outputs, feed_dict=feeds)
    return {name: _common.to_numpy(v) for name, v in zip(outputs, values, strict=True)}


def _write_graph_def(graph: tf.Graph, path: Path) -> None:
    # deterministic=True: same bytes every run, so file hashes are stable too.
    path.write_bytes(graph.as_graph_def().SerializeToString(deterministic=True))


def _graph_model(graph: tf.Graph, path: Path, inputs: list[str], outputs: list[str],
                 feeds: dict, weights: dict | None = None) -> dict:
    """Write ``graph`` to ``path`` and return its manifest entry."""
    _write_graph_def(graph, path)
    return {"kind": "graphdef", "path": str(path), "inputs": inputs, "outputs": outputs,
            "feeds": feeds, "expected": _run_graph_def(path, feeds, outputs),
            "weights": weights or {}}


def make_mlp(out: Path, rng: np.random.Generator) -> dict:
    """x[None,4] -> dense(8, tanh) -> dense(3) -> softmax 'probs'."""
    w = {"w1": rng.normal(size=(4, 8)).astype(np.float32),
         "b1": rng.normal(size=(8,)).astype(np.float32),
         "w2": rng.normal(size=(8, 3)).astype(np.float32),
         "b2": rng.normal(size=(3,)).astype(np.float32)}
    with tf.Graph().as_default() as g:
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        with tf.name_scope("dense1"):
            h = tf.tanh(tf.nn.bias_add(tf.matmul(x, tf.constant(w["w1"], name="w")),
                                       tf.constant(w["b1"], name="b")))
        with tf.name_scope("dense2"):
            logits = tf.nn.bias_add(tf.matmul(h, tf.constant(w["w2"], name="w")),
                                    tf.constant(w["b2"], name="b"))
        tf.identity(logits, name="logits")
        tf.nn.softmax(logits, name="probs")
    feeds = {"x:0": rng.normal(size=(5, 4)).astype(np.float32)}
    return _graph_model(g, out / "mlp.pb", ["x:0"], ["probs:0", "logits:0"], feeds, w)


def make_conv(out: Path, rng: np.random.Generator) -> dict:
    """image[None,8,8,1] -> Conv2D(3x3x4, SAME)+BiasAdd+Relu -> MaxPool 2x2 -> Reshape -> MatMul."""
    w = {"filter": rng.normal(size=(3, 3, 1, 4)).astype(np.float32),
         "bias": rng.normal(size=(4,)).astype(np.float32),
         "fc": (rng.normal(size=(64, 3)) / 8).astype(np.float32)}
    with tf.Graph().as_default() as g:
        x = v1.placeholder(tf.float32, [None, 8, 8, 1], name="image")
        y = tf.nn.conv2d(x, tf.constant(w["filter"], name="filter"), strides=1,
                         padding="SAME", data_format="NHWC", name="conv")
        y = tf.nn.relu(tf.nn.bias_add(y, tf.constant(w["bias"], name="bias")), name="relu")
        y = tf.nn.max_pool2d(y, ksize=2, strides=2, padding="VALID", name="pool")
        y = tf.reshape(y, [-1, 4 * 4 * 4], name="flatten")
        tf.matmul(y, tf.constant(w["fc"], name="fc"), name="logits")
    feeds = {"image:0": rng.normal(size=(2, 8, 8, 1)).astype(np.float32)}
    return _graph_model(g, out / "conv.pb", ["image:0"], ["logits:0"], feeds, w)


def make_strings(out: Path, rng: np.random.Generator) -> dict:
    """string and int64 tensors: StringLength/StringJoin/Substr and Cumsum/Cast."""
    with tf.Graph().as_default() as g:
        s = v1.placeholder(tf.string, [None], name="s")
        tf.strings.length(s, name="s_len")                       # int32
        tf.strings.join([s, s], separator="-", name="s_join")
        tf.strings.substr(s, pos=0, len=3, name="s_sub")  # pos 0: valid for b""
        n = v1.placeholder(tf.int64, [None], name="n")
        tf.cumsum(n, axis=0, name="n_cumsum")
        tf.cast(n, tf.float64, name="n_float")
    words = np.array([b"hello", b"tf", b"julia bridge", b"", "\u00e9t\u00e9".encode()],
                     dtype=object)
    # 2**40 keeps the int64 path honest (it does not fit in int32).
    feeds = {"s:0": words, "n:0": np.array([1, -2, 3, 2**40, 7], dtype=np.int64)}
    outputs = ["s_len:0", "s_join:0", "s_sub:0", "n_cumsum:0", "n_float:0"]
    return _graph_model(g, out / "strings.pb", ["s:0", "n:0"], outputs, feeds)


def make_saved_model(out: Path, rng: np.random.Generator) -> dict:
    """TF1 SavedModel with variables: predict (x -> y = x@W + b), double (a -> b = a*factor).

    The variables are initialised to zeros/one and then assigned their real
    values before saving, so a loader that ran the initialisers instead of
    restoring the checkpoint would give visibly wrong answers.
    """
    export_dir = out / "saved_model"
    shutil.rmtree(export_dir, ignore_errors=True)  # the Builder refuses an existing dir
    # Keyed by a fetchable read of each variable (the variables are resource
    # variables: "W:0" is a handle, not a value).
    values = {"W_read:0": rng.normal(size=(3, 2)).astype(np.float32),
              "bias_read:0": rng.normal(size=(2,)).astype(np.float32),
              "factor_read:0": np.float32(2.0)}
    with tf.Graph().as_default() as g:
        W = v1.Variable(tf.zeros([3, 2]), name="W")
        bias = v1.Variable(tf.zeros([2]), name="bias")
        factor = v1.Variable(1.0, name="factor")
        for var in (W, bias, factor):
            tf.identity(var, name=var.op.name + "_read")
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        y = tf.add(tf.matmul(x, W), bias, name="y")
        a = v1.placeholder(tf.float32, [None], name="a")
        b = tf.multiply(a, factor, name="b")
        sigs = {
            "predict": v1.saved_model.predict_signature_def({"x": x}, {"y": y}),
            "double": v1.saved_model.predict_signature_def({"a": a}, {"b": b}),
        }
        with v1.Session(graph=g, config=_common.SESSION_CONFIG) as sess:
            sess.run(v1.global_variables_initializer())
            for var in (W, bias, factor):
                sess.run(var.assign(values[var.op.name + "_read:0"]))
            builder = v1.saved_model.Builder(str(export_dir))
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=sigs)
            builder.save()

    sample = {"x:0": rng.normal(size=(4, 3)).astype(np.float32),
              "a:0": np.array([1.5, -2.0, 0.25], dtype=np.float32)}
    signatures: dict = {}
    # Expected values come from loading the export, as a C API client would.
    with tf.Graph().as_default() as g, v1.Session(graph=g, config=_common.SESSION_CONFIG) as sess:
        meta = v1.saved_model.load(sess, ["serve"], str(export_dir))
        for key, sig in sorted(meta.signature_def.items()):
            ins = {k: t.name for k, t in sig.inputs.items()}
            outs = {k: t.name for k, t in sig.outputs.items()}
            feeds = {t: sample[t] for t in ins.values()}
            got = sess.run(list(outs.values()), feed_dict=feeds)
            signatures[key] = {"method_name": sig.method_name, "inputs": ins, "outputs": outs,
                               "feeds": feeds,
                               "expected": {t: _common.to_numpy(v)
                                            for t, v in zip(outs.values(), got, strict=True)}}
        restored = {name: _common.to_numpy(sess.run(name)) for name in values}
    for name, value in values.items():  # the export must hold the assigned values
        np.testing.assert_array_equal(restored[name], value)

    union = lambda field: {k: v for s in signatures.values() for k, v in s[field].items()}  # noqa: E731
    return {"kind": "saved_model", "path": str(export_dir), "tags": ["serve"],
            "signatures": signatures,
            "variables": {k: np.asarray(v) for k, v in values.items()},
            "inputs": sorted(union("feeds")), "outputs": sorted(union("expected")),
            "feeds": union("feeds"), "expected": union("expected")}


def handle(request: Any, out_dir: Path) -> dict:
    seed = int((request or {}).get("seed", 0))
    rng = np.random.default_rng(seed)
    models = {}
    # Fixed order: each maker draws from the same rng stream.
    for name, maker in (("mlp", make_mlp), ("conv", make_conv),
                        ("strings", make_strings), ("saved_model", make_saved_model)):
        models[name] = maker(out_dir, rng)
    return {"out_dir": str(out_dir), "models": models}


if __name__ == "__main__":
    _common.main(handle)
