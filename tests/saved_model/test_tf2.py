"""SavedModels written the TF2 way (tf.saved_model.save, Keras' model.export)
load with bridge.load_saved_model: the init op fills lookup tables, variables
are restored, every signature (float, int and string inputs) gives what
stock TF's tf.saved_model.load gives (the make_tf2_models oracle)."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import ops


@pytest.fixture(scope="module")
def tf2_models(oracle) -> dict:
    return oracle("make_tf2_models")


def _check_signature(sig: bridge.saved_model.Signature, info: dict) -> None:
    assert set(sig.inputs) == set(info["inputs"])
    assert sorted(sig.outputs) == info["outputs"]
    for key, spec in info["inputs"].items():
        assert sig.inputs[key].dtype.name == spec["dtype"], key
    got = sig(**info["feeds"])
    assert set(got) == set(info["expected"])
    for key, want in info["expected"].items():
        value = np.asarray(got[key])
        if want.dtype.kind in "OSU" or value.dtype == object:
            assert value.tolist() == np.asarray(want, dtype=object).tolist(), key
            continue
        assert value.dtype == want.dtype and value.shape == want.shape, key
        np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-7, err_msg=key)


@pytest.mark.parametrize("signature", ["serving_default", "strings", "ints"])
def test_tf2_module_signatures_match_tensorflow(tf2_models, signature):
    manifest = tf2_models["models"]["module"]
    with bridge.load_saved_model(manifest["path"]) as model:
        assert set(model.signatures) == set(manifest["signatures"])   # __saved_model_init_op is not one
        _check_signature(model.signatures[signature], manifest["signatures"][signature])


def test_tf2_init_op_ran_and_variables_are_restored(tf2_models):
    manifest = tf2_models["models"]["module"]
    with bridge.load_saved_model(manifest["path"]) as model:
        assert model.init_op is not None and model.init_op.type == "NoOp"
        # The table the init op fills answers (the "strings" signature looks words up).
        ids = model.signatures["strings"](words=["gamma", "nope"], times=1)["ids"]
        np.testing.assert_array_equal(ids, [30, -1])
        handles = {op.name: op for op in model.graph if op.type == "VarHandleOp"}
        assert set(handles) == set(manifest["variables"])
        with model.graph.as_default():
            reads = {name: ops.read_variable_op(handles[name].output(0), dtype=handles[name].get_attr("dtype"))
                     for name in handles}
        values = model.session.run(reads)
    for name, want in manifest["variables"].items():
        np.testing.assert_array_equal(values[name], want)


def test_tf2_signature_feeds_are_checked(tf2_models):
    manifest = tf2_models["models"]["module"]
    with bridge.load_saved_model(manifest["path"]) as model:
        sig = model.signatures["serving_default"]
        with pytest.raises(ValueError, match=r"shape \(2, 4\).*\(\?, 3\)"):
            sig(x=np.ones((2, 4), np.float32))
        with pytest.raises(TypeError, match="needs input"):
            model.signatures["strings"](words=["alpha"])
        with pytest.raises(TypeError, match="string"):
            model.signatures["strings"](words=[1, 2], times=1)


def test_keras_export_matches_tensorflow(tf2_models):
    if tf2_models["keras_error"]:
        pytest.skip(f"Keras is not importable next to stock TF: {tf2_models['keras_error']}")
    manifest = tf2_models["models"]["keras"]
    with bridge.load_saved_model(manifest["path"]) as model:
        assert set(model.signatures) == set(manifest["signature_names"])
        _check_signature(model.signatures["serving_default"], manifest["signatures"]["serving_default"])
        x = next(iter(manifest["signatures"]["serving_default"]["feeds"].values()))
        # "serve" is Keras' own endpoint: the same function.
        (out,) = model.signatures["serve"](**{k: x for k in model.signatures["serve"].inputs}).values()
    np.testing.assert_allclose(out, manifest["model_output"], rtol=1e-5, atol=1e-6)
