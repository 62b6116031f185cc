"""Smoke tests of the stock-TF oracle (tests/oracle/*, run in subprocesses).

These check the plumbing other tests rely on: the manifest's shape, the
disk cache, and the eval_ops / eval_gradients / import_check formats.
Nothing here imports tensorflow (conftest blocks it).
"""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from support.oracle import OracleError, run_oracle


def test_tensorflow_is_not_imported_here() -> None:
    assert "tensorflow" not in sys.modules
    with pytest.raises(ImportError, match="not allowed in the test process"):
        import tensorflow  # noqa: F401
    # The bridge locates TF's libraries this way; the block must not break it.
    spec = importlib.util.find_spec("tensorflow")
    assert spec is not None and spec.submodule_search_locations


def test_make_models_manifest(oracle_models: dict) -> None:
    m = oracle_models
    assert m["tf_version"] and Path(m["out_dir"]).is_dir()
    assert set(m["models"]) == {"mlp", "conv", "strings", "saved_model"}
    for name, model in m["models"].items():
        assert Path(model["path"]).exists(), name
        assert set(model["feeds"]) == set(model["inputs"]), name
        assert set(model["expected"]) == set(model["outputs"]), name
        assert all(t.count(":") == 1 and t.endswith(":0") for t in model["inputs"] + model["outputs"])

    mlp = m["models"]["mlp"]
    assert mlp["kind"] == "graphdef" and mlp["inputs"] == ["x:0"]
    probs = mlp["expected"]["probs:0"]
    assert probs.shape == (5, 3) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    # The weights in the manifest reproduce the expected output in numpy.
    w = mlp["weights"]
    logits = np.tanh(mlp["feeds"]["x:0"] @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]
    np.testing.assert_allclose(mlp["expected"]["logits:0"], logits, rtol=1e-4, atol=1e-5)

    assert m["models"]["conv"]["expected"]["logits:0"].shape == (2, 3)

    s = m["models"]["strings"]["expected"]
    assert s["s_join:0"][0] == b"hello-hello" and s["s_len:0"].dtype == np.int32
    assert s["n_cumsum:0"].dtype == np.int64 and s["n_cumsum:0"][-1] == 2**40 + 9

    sm = m["models"]["saved_model"]
    assert sm["kind"] == "saved_model" and sm["tags"] == ["serve"]
    assert (Path(sm["path"]) / "saved_model.pb").is_file()
    assert set(sm["signatures"]) == {"predict", "double"}
    assert sm["signatures"]["predict"]["inputs"] == {"x": "x:0"}
    assert sm["signatures"]["double"]["outputs"] == {"b": "b:0"}
    a = sm["signatures"]["double"]["feeds"]["a:0"]
    np.testing.assert_allclose(sm["signatures"]["double"]["expected"]["b:0"], 2 * a)
    v = sm["variables"]
    np.testing.assert_allclose(sm["expected"]["y:0"],
                               sm["feeds"]["x:0"] @ v["W_read:0"] + v["bias_read:0"], rtol=1e-5)


def test_second_call_is_served_from_cache(oracle_models: dict) -> None:
    start = time.monotonic()
    again = run_oracle("make_models")
    assert time.monotonic() - start < 1.0, "a cached answer must not start TensorFlow"
    assert again["out_dir"] == oracle_models["out_dir"]
    np.testing.assert_array_equal(again["models"]["mlp"]["expected"]["probs:0"],
                                  oracle_models["models"]["mlp"]["expected"]["probs:0"])


def test_eval_ops() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    cases = [
        {"op": "AddV2", "inputs": [x, x], "attrs": {"T": np.float32}},
        {"op": "ConcatV2", "inputs": [[x, 2 * x], np.int32(1)]},
        {"op": "Split", "inputs": [np.int32(0), x], "attrs": {"num_split": 2}},
        {"op": "MatMul", "inputs": [x, np.ones((3, 3), np.float32)]},   # TF rejects
        {"op": "AddV2", "inputs": [x, x], "attrs": {"T": np.float64}},   # T mismatch
    ]
    res = run_oracle("eval_ops", cases)["results"]
    np.testing.assert_array_equal(res[0][0], 2 * x)
    np.testing.assert_array_equal(res[1][0], np.concatenate([x, 2 * x], axis=1))
    assert len(res[2]) == 2 and res[2][1].tolist() == [[3.0, 4.0]]
    assert isinstance(res[3], str), res[3]
    assert isinstance(res[4], str) and "inferred" in res[4]


def test_eval_gradients() -> None:
    x = np.array([0.5, -1.0, 2.0], np.float32)
    y = np.array([1.5, 3.0, -0.5], np.float32)
    cases = [
        {"op": "Mul", "inputs": [x, y], "wrt": [0, 1]},
        {"op": "Tanh", "inputs": [x], "wrt": [0], "grad_ys": [np.full(3, 2.0, np.float32)]},
        {"op": "AddN", "inputs": [[x, y]], "wrt": [0]},
    ]
    resp = run_oracle("eval_gradients", cases)
    mul, tanh, addn = resp["results"]
    np.testing.assert_allclose(mul[0], y)
    np.testing.assert_allclose(mul[1], x)
    np.testing.assert_allclose(tanh[0], 2 * (1 - np.tanh(x) ** 2), rtol=1e-6)
    assert isinstance(addn[0], list) and len(addn[0]) == 2
    np.testing.assert_allclose(resp["outputs"][0][0], x * y)


def test_import_check() -> None:
    build = [
        {"op": "Placeholder", "id": "a", "name": "a", "attrs": {"dtype": np.float32, "shape": [2]}},
        {"name_scope": "outer", "device": "/cpu:0", "control_dependencies": ["a"], "body": [
            {"op": "Const", "id": "c", "name": "c", "value": np.ones(2, np.float32)},
            {"op": "AddV2", "id": "sum", "inputs": ["a", "c"]},
        ]},
    ]
    built = run_oracle("import_check", {"build": build})
    nodes = {n["name"]: n for n in built["built"]}
    assert built["ids"]["sum"] == "outer/AddV2"
    # TF leaves out a control input already implied by a data input.
    assert nodes["outer/AddV2"]["inputs"] == ["a", "outer/c"]
    assert nodes["outer/c"]["inputs"] == ["^a"] and nodes["outer/c"]["device"] == "/device:CPU:0"

    # Re-import the built GraphDef under a prefix: names and inputs get the prefix.
    again = run_oracle("import_check", {"graph_def": built["built_graph_def"], "import_name": "p"})
    assert {n["name"] for n in again["imported"]} == {"p/" + n for n in nodes}
    bad = run_oracle("import_check", {"graph_def": b"not a graph"})
    assert isinstance(bad["imported"], str)


def test_failure_reports_stderr() -> None:
    with pytest.raises(OracleError, match="no oracle script"):
        run_oracle("no_such_script")
    # A bad build spec is a test bug: the script dies and its traceback comes back.
    with pytest.raises(OracleError, match="KeyError: 'missing'"):
        run_oracle("import_check", {"build": [{"op": "Identity", "inputs": ["missing"]}]})
    with pytest.raises(OracleError, match="timed out"):
        run_oracle("eval_ops", [{"op": "NoOp", "inputs": []}], timeout=0.05, refresh=True)
