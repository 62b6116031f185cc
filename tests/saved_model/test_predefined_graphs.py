"""Predefined graphs written by stock TensorFlow (in a separate process) run
under the bridge and give TensorFlow's answers."""
from pathlib import Path

import numpy as np
import pytest

import bridge


def _run_graphdef(model: dict) -> dict:
    g = bridge.Graph()
    g.import_graph_def(Path(model["path"]).read_bytes())
    with bridge.Session(g) as s:
        values = s.run(list(model["outputs"]), {name: model["feeds"][name] for name in model["inputs"]})
    return dict(zip(model["outputs"], values, strict=True))


@pytest.mark.parametrize("name", ["mlp", "conv", "strings"])
def test_graphdef_runs_like_tensorflow(oracle_models, name):
    model = oracle_models["models"][name]
    got = _run_graphdef(model)
    for out, expected in model["expected"].items():
        value = got[out]
        if np.asarray(expected).dtype == object:
            assert value.tolist() == np.asarray(expected).tolist(), out
        else:
            assert value.dtype == np.asarray(expected).dtype, out
            np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=out)


def test_graphdef_ops_are_browsable(oracle_models):
    model = oracle_models["models"]["conv"]
    g = bridge.Graph()
    g.import_graph_def(Path(model["path"]).read_bytes(), prefix="net")
    types = {op.type for op in g}
    assert {"Conv2D", "BiasAdd", "Relu", "MaxPool", "MatMul"} <= types
    conv = next(op for op in g if op.type == "Conv2D")
    assert conv.name.startswith("net/")
    assert conv.get_attr("padding") in (b"SAME", b"VALID")
    assert conv.get_attr("strides") == [1, 1, 1, 1]
    assert all(inp.op.graph is g for inp in conv.inputs)


def test_saved_model_signatures(oracle_models):
    manifest = oracle_models["models"]["saved_model"]
    model = bridge.load_saved_model(manifest["path"], tags=manifest["tags"])
    assert set(model.signatures) >= {"predict", "double"}
    for name, sig_info in manifest["signatures"].items():
        sig = model.signatures[name]
        assert {k: v.name for k, v in sig.inputs.items()} == sig_info["inputs"]
        assert {k: v.name for k, v in sig.outputs.items()} == sig_info["outputs"]
        feeds = {key: sig_info["feeds"][tensor] for key, tensor in sig_info["inputs"].items()}
        got = sig(**feeds)
        for key, tensor in sig_info["outputs"].items():
            np.testing.assert_allclose(got[key], sig_info["expected"][tensor], rtol=1e-5, atol=1e-6)


def test_saved_model_restores_variables(oracle_models):
    manifest = oracle_models["models"]["saved_model"]
    model = bridge.load_saved_model(manifest["path"], tags=manifest["tags"])
    for fetch, expected in manifest["variables"].items():
        np.testing.assert_allclose(model.session.run(fetch), expected)


def test_saved_model_errors(oracle_models, tmp_path):
    manifest = oracle_models["models"]["saved_model"]
    with pytest.raises(FileNotFoundError):
        bridge.load_saved_model(tmp_path / "missing")
    with pytest.raises(bridge.errors.OpError, match="tag"):
        bridge.load_saved_model(manifest["path"], tags=["no-such-tag"])
    model = bridge.load_saved_model(manifest["path"], tags=manifest["tags"])
    with pytest.raises(TypeError, match="has no input"):
        model.signatures["predict"](nope=1)
