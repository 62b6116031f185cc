"""SavedModels of Keras models and tf.Modules written by ``tf.saved_model.save``
(and Keras 3's ``model.export``) load with bridge.load_saved_model, and every
signature gives bit for bit what stock TF's ``tf.saved_model.load(path).signatures``
gives (the make_keras_models oracle).

A Keras 3 model saved with tf.saved_model.save holds each variable twice:
the handles its signatures read, and copies that the TF1 restore
(TF_LoadSessionFromSavedModel's SaverDef) fills.  The loader restores the
former through the object graph, as TF2 does (bridge.saved_model.objects)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.framework import _proto as pb
from bridge.saved_model import objects

CASES = [("lazy_module", "serving_default"), ("sequential", "serving_default"),
         ("functional", "serving_default"), ("signatures", "serving_default"), ("signatures", "features"),
         ("signatures", "scaled"), ("export", "serving_default"), ("export", "serve")]


@pytest.fixture(scope="module")
def keras_models(oracle) -> dict:
    return oracle("make_keras_models")


def _manifest(keras_models: dict, name: str) -> dict:
    if name not in keras_models["models"]:
        pytest.skip(f"Keras is not importable next to stock TF: {keras_models['keras_error']}")
    return keras_models["models"][name]


def _meta_graph(path: str) -> dict:
    """The fields of the SavedModel's (only) MetaGraphDef."""
    (meta,) = pb.fields(Path(path, "saved_model.pb").read_bytes())[2]
    return pb.fields(bytes(meta))


def _restore_assigns(model) -> list:
    return [op for op in model.graph
            if op.type == "AssignVariableOp" and op.name.startswith(objects.RESTORE_SCOPE + "/")]


@pytest.mark.parametrize("name,signature", CASES, ids=[f"{m}-{s}" for m, s in CASES])
def test_signatures_match_tensorflow_bit_for_bit(keras_models, name, signature):
    manifest = _manifest(keras_models, name)
    info = manifest["signatures"][signature]
    with bridge.load_saved_model(manifest["path"]) as model:
        assert set(model.signatures) == set(manifest["signatures"])
        sig = model.signatures[signature]
        assert {k: v.dtype.name for k, v in sig.inputs.items()} == info["inputs"]
        assert sorted(sig.outputs) == info["outputs"]
        got = sig(**info["feeds"])
        again = sig(**info["feeds"])
    for key, want in info["expected"].items():
        value = np.asarray(got[key])
        assert value.dtype == want.dtype and value.shape == want.shape, key
        np.testing.assert_array_equal(value, want, err_msg=key, strict=True)
        np.testing.assert_array_equal(again[key], want, err_msg=key, strict=True)


def test_keras_variables_are_restored_through_the_object_graph(keras_models):
    manifest = _manifest(keras_models, "sequential")
    meta = _meta_graph(manifest["path"])
    with bridge.load_saved_model(manifest["path"]) as model:
        call = model.signatures["serving_default"].outputs["output_0"].op
        read = {inp.op.name for inp in call.inputs if inp.op.type == "VarHandleOp"}
        saver_def = pb.fields(bytes(meta[3][0]))
        tf1_restore = model.graph.get_operation_by_name(pb.text(saver_def[3][0]))
        tf1_restored = {inp.op.name for inp in tf1_restore.inputs if inp.op.type == "VarHandleOp"}
        # The signature reads handles that the TF1 restore does not fill ...
        assert read and tf1_restored and not read & tf1_restored
        # ... and the object graph restore fills exactly those.
        assigned = {op.inputs[0].op.name for op in _restore_assigns(model)}
        assert assigned == read
        plan = objects.restore_plan(Path(manifest["path"]), meta)
    assert {p.handle for p in plan} == read and not any(p.tf1_restored for p in plan)
    # Checkpoint keys are object paths, not variable names.
    assert all(p.checkpoint_key.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for p in plan)
    assert len({p.checkpoint_key for p in plan}) == len(plan) == 8   # 2 Dense x 2 + BatchNormalization's 4


def test_lazy_module_variables_named_alike_are_told_apart(keras_models):
    manifest = _manifest(keras_models, "lazy_module")
    plan = objects.restore_plan(Path(manifest["path"]), _meta_graph(manifest["path"]))
    # Two variables named "v", and "scale": three handles, three distinct objects and keys.
    assert len(plan) == 3
    assert len({p.handle for p in plan}) == len({p.node_id for p in plan}) == len({p.checkpoint_key for p in plan}) == 3
    assert sorted(p.dtype.name for p in plan) == ["float32", "float32", "float64"]
    # A tf.Module's signatures read the handles the TF1 restore fills: nothing is read twice.
    assert all(p.tf1_restored for p in plan)
    with bridge.load_saved_model(manifest["path"]) as model:
        assert _restore_assigns(model) == []


def test_object_restore_alone_gives_every_value(keras_models):
    """Variables zeroed after loading get their values back from the object
    graph restore alone (here it also does what the TF1 restore did)."""
    manifest = _manifest(keras_models, "lazy_module")
    info = manifest["signatures"]["serving_default"]
    plan = objects.restore_plan(Path(manifest["path"]), _meta_graph(manifest["path"]))
    with bridge.load_saved_model(manifest["path"]) as model:
        graph = model.graph
        with graph.as_default():
            zero = [ops.assign_variable_op(graph.get_operation_by_name(p.handle).output(0),
                                           ops.zeros_like(ops.read_variable_op(
                                               graph.get_operation_by_name(p.handle).output(0), dtype=p.dtype)))
                    for p in plan]
        model.session.run(zero)
        zeroed = model.signatures["serving_default"](**info["feeds"])
        assert not np.any(zeroed["y"])
        assigns = objects.restore(Path(manifest["path"]), graph, model.session,
                                  [dataclasses.replace(p, tf1_restored=False) for p in plan])
        assert len(assigns) == 3
        got = model.signatures["serving_default"](**info["feeds"])
    for key, want in info["expected"].items():
        np.testing.assert_array_equal(got[key], want, err_msg=key, strict=True)


def test_tf1_saved_models_get_no_object_restore(fixtures_dir):
    with bridge.load_saved_model(fixtures_dir / "saved_model") as model:
        assert _restore_assigns(model) == []
        assert not any(op.name.startswith(objects.RESTORE_SCOPE) for op in model.graph)


# --- the object graph walk, on hand-made protocol buffers ------------------------

def _ref(node_id: int, name: str) -> bytes:
    return pb.field_varint(1, node_id) + pb.field_bytes(2, name)


def _saved_graph(children: list[list[tuple[int, str]]], variables: dict[int, str],
                 functions: dict[str, list[int]]) -> bytes:
    out = b""
    for i, kids in enumerate(children):
        node = b"".join(pb.field_bytes(1, _ref(c, n)) for c, n in kids)
        if i in variables:
            node += pb.field_bytes(7, pb.field_varint(1, 1) + pb.field_bytes(6, variables[i]))   # DT_FLOAT
        out += pb.field_bytes(1, node)
    for name, bound in functions.items():
        packed = b"".join(pb._varint(b) for b in bound)
        out += pb.field_bytes(2, pb.field_bytes(1, name) + pb.field_bytes(2, pb.field_bytes(2, packed)))
    return out


def _trackable_graph(children: list[list[tuple[int, str]]], keys: dict[int, str]) -> bytes:
    out = b""
    for i, kids in enumerate(children):
        node = b"".join(pb.field_bytes(1, _ref(c, n)) for c, n in kids)
        if i in keys:
            node += pb.field_bytes(2, pb.field_bytes(1, objects.VARIABLE_VALUE) + pb.field_bytes(3, keys[i]))
        out += pb.field_bytes(1, node)
    return out


def test_object_graphs_are_matched_by_local_names_not_ids():
    # Saved: root -> layer(1) -> {kernel(3), bias(2)}; the checkpoint numbers them otherwise,
    # has a cycle (layer -> root) and a child the SavedModel does not hold.
    saved, functions = objects.parse_saved_object_graph(
        _saved_graph([[(1, "layer")], [(3, "kernel"), (2, "bias")], [], []], {2: "b", 3: "k"}, {"f": [3, 2]}))
    assert functions == {"f": [3, 2]}
    assert saved[3].variable.name == "k" and saved[3].variable.dtype.name == "float32"
    trackable = objects.parse_trackable_object_graph(_trackable_graph(
        [[(2, "layer")], [], [(0, "parent"), (1, "bias"), (3, "kernel"), (4, "optimizer")], [], []],
        {1: "layer/bias/.ATTRIBUTES/VARIABLE_VALUE", 3: "layer/kernel/.ATTRIBUTES/VARIABLE_VALUE",
         4: "optimizer/iter"}))
    keys = objects.checkpoint_attributes(saved, trackable)
    assert keys == {2: {objects.VARIABLE_VALUE: "layer/bias/.ATTRIBUTES/VARIABLE_VALUE"},
                    3: {objects.VARIABLE_VALUE: "layer/kernel/.ATTRIBUTES/VARIABLE_VALUE"}}


def _node(name: str, op: str, inputs: list[str], f: str = "") -> bytes:
    body = pb.field_bytes(1, name) + pb.field_bytes(2, op) + b"".join(pb.field_bytes(3, i) for i in inputs)
    if f:
        body += pb.field_bytes(5, pb.field_bytes(1, "f") + pb.field_bytes(2, pb.field_bytes(10, pb.field_bytes(1, f))))
    return pb.field_bytes(1, body)


def test_bound_inputs_are_the_calls_last_inputs_through_identities():
    graph_def = b"".join([
        _node("a", "VarHandleOp", []), _node("b", "VarHandleOp", []), _node("copy", "VarHandleOp", []),
        _node("b/id", "Identity", ["b"]), _node("x", "Placeholder", []),
        _node("call", "StatefulPartitionedCall", ["x", "a", "b/id:0", "^copy"], f="sig"),
        _node("restore", "StatefulPartitionedCall", ["x", "copy", "b"], f="__inference__traced_restore_1"),
    ])
    assert objects.bound_variable_handles(graph_def, {"sig": [7, 9]}) == ({7: ["a"], 9: ["b"]}, set())
    assert objects.bound_variable_handles(graph_def, {"sig": [7, 9]}, "restore") == ({7: ["a"], 9: ["b"]},
                                                                                  {"copy", "b"})
