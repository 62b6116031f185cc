"""A distributed Session's fetches have TF1's types too: a 0-d result is a numpy scalar (bytes for
a string), as stock TF1's Session gives it on the same graph (tests/oracle/fetch_types.py)."""
from __future__ import annotations

import numpy as np

import bridge
from bridge import distribute
from support.oracle import run_oracle

#: The module's loopback cluster (the `cluster` fixture, tests/distribute/conftest.py).
CLUSTER = {"worker": 1}

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "string"]


def _leaf(x) -> dict:
    kind = type(x)
    return {"type": f"{kind.__module__}.{kind.__qualname__}",
            "dtype": str(x.dtype) if hasattr(x, "dtype") else None,
            "shape": tuple(np.shape(x)) if hasattr(x, "shape") else None}


def test_fetches_through_a_cluster_have_tf1s_types(cluster) -> None:
    want = run_oracle("fetch_types")
    graph = bridge.Graph()
    graph.import_graph_def(want["graph_def"])
    names = [f"{d}_{r}:0" for d in DTYPES for r in ("0d", "1d")]
    with distribute.Session(cluster.spec, ("worker", 0), graph=graph, timeout=30.0) as sess:
        got = sess.run(names)
        run = sess.make_callable(names[:4] + ["string_0d:0"])
        by_callable = run()
    for name, value in zip(names, got, strict=True):
        tf1 = want["single"][name]
        assert _leaf(value) == {k: tf1[k] for k in ("type", "dtype", "shape")}, (name, value, tf1)
        assert np.array_equal(np.asarray(value), np.asarray(tf1["value"])), (name, value, tf1["value"])
    for name, value in zip(names[:4] + ["string_0d:0"], by_callable, strict=True):
        tf1 = want["single"][name]
        assert _leaf(value) == {k: tf1[k] for k in ("type", "dtype", "shape")}, (name, value, tf1)
