"""bridge.saved_model.save writes SavedModels stock TensorFlow loads and
serves (the serve_saved_model oracle: tf.saved_model.load and
tf.compat.v1.saved_model.loader.load give the bridge's outputs), which
bridge.load_saved_model loads back too, Julia ops included (with
op_libraries; without it, an error naming the op type and its library)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import errors, ops
from support import REPO


PREDICT = "tensorflow/serving/predict"


def _files(export_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(export_dir)): p.read_bytes() for p in sorted(export_dir.rglob("*")) if p.is_file()}


def _assert_outputs(got: dict, want: dict, where: str) -> None:
    assert set(got) == set(want), where
    for key, value in want.items():
        value = np.asarray(value)
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, f"{where}: {key}"
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[key], value, rtol=1e-6, atol=0, err_msg=f"{where}: {key}")
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=f"{where}: {key}")


# --- a small MLP with trained-looking variables ------------------------------------------------

def _mlp() -> tuple[bridge.Graph, dict, dict]:
    rng = np.random.default_rng(17)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 4], name="x")
        values = {"dense/kernel": rng.normal(0, 0.5, (4, 8)).astype(np.float32),
                  "dense/bias": rng.normal(0, 0.1, 8).astype(np.float32),
                  "dense_1/kernel": rng.normal(0, 0.5, (8, 3)).astype(np.float32),
                  "dense_1/bias": rng.normal(0, 0.1, 3).astype(np.float32)}
        v = {name: bridge.Variable(value, name=name) for name, value in values.items()}
        step = bridge.Variable(np.int64(1234), name="global_step", trainable=False)
        hidden = ops.relu(ops.bias_add(ops.mat_mul(x, v["dense/kernel"].value()), v["dense/bias"].value()))
        logits = ops.bias_add(ops.mat_mul(hidden, v["dense_1/kernel"].value()), v["dense_1/bias"].value(),
                              name="logits")
        probs = ops.softmax(logits, name="probs")
        label = ops.arg_max(logits, 1, name="label")
    values["global_step"] = np.int64(1234)
    signatures = {"serving_default": ({"x": x}, {"probs": probs, "logits": logits}),
                  "classify": ({"x": x}, {"label": label, "step": step.value()})}
    return g, signatures, values


@pytest.fixture(scope="module")
def mlp_export(tmp_path_factory) -> dict:
    g, signatures, values = _mlp()
    export_dir = tmp_path_factory.mktemp("mlp") / "export"
    feeds = {"x": np.random.default_rng(3).normal(0, 1, (5, 4)).astype(np.float32)}
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, export_dir, signatures)
        want = {name: sess.run(outputs, {inputs["x"]: feeds["x"]}) for name, (inputs, outputs) in signatures.items()}
    return {"dir": export_dir, "feeds": feeds, "want": want, "values": values, "graph": g}


@pytest.fixture(scope="module")
def mlp_served(mlp_export, oracle) -> dict:
    feeds = {name: mlp_export["feeds"] for name in mlp_export["want"]}
    return oracle("serve_saved_model", {"files": _files(mlp_export["dir"]), "tags": ["serve"], "feeds": feeds})


def test_tensorflow_serves_the_mlp_as_the_bridge_computes_it(mlp_export, mlp_served):
    assert mlp_served["tf2_error"] is None, mlp_served["tf2_error"]
    assert mlp_served["tf1_error"] is None, mlp_served["tf1_error"]
    for name, want in mlp_export["want"].items():
        _assert_outputs(mlp_served["tf2"][name], want, f"tf.saved_model.load, signature {name}")
        _assert_outputs(mlp_served["tf1"][name], want, f"loader.load, signature {name}")
    # TF1's loader restored every variable exactly; TF2's load tracks them all.
    _assert_outputs(mlp_served["tf1_variables"], mlp_export["values"], "restored variables")
    assert mlp_served["tf2_variables"] == sorted(f"{name}:0" for name in mlp_export["values"])


def test_the_mlps_proto_is_what_tensorflow_writes(mlp_export, mlp_served):
    proto = mlp_served["proto"]
    assert proto["schema_version"] == 1 and proto["tags"] == ["serve"]
    assert proto["tensorflow_version"] == mlp_served["tf_version"]
    assert proto["stripped_ops"] == proto["graph_ops"]   # the OpDef of every op type used, sorted
    assert {"MatMul", "SaveV2", "RestoreV2", "MergeV2Checkpoints", "VarHandleOp"} <= set(proto["stripped_ops"])
    assert proto["saver_def"] == {"filename_tensor_name": "save/Const:0", "save_tensor_name": "save/Identity:0",
                                  "restore_op_name": "save/restore_all", "max_to_keep": 5, "sharded": True,
                                  "keep_checkpoint_every_n_hours": 10000.0, "version": "V2"}
    assert proto["collections"] == ["trainable_variables", "variables"]
    assert [(d["variable_name"], d["trainable"]) for d in proto["variable_defs"]] == \
        [(f"{name}:0", name != "global_step") for name in mlp_export["values"]]
    assert all(d["is_resource"] and d["snapshot_name"].endswith("/Read/ReadVariableOp:0")
               for d in proto["variable_defs"])
    assert proto["signatures"] == {
        "serving_default": {"method_name": PREDICT,
                            "inputs": {"x": {"name": "x:0", "dtype": "float32", "shape": [None, 4]}},
                            "outputs": {"probs": {"name": "probs:0", "dtype": "float32", "shape": [None, 3]},
                                        "logits": {"name": "logits:0", "dtype": "float32", "shape": [None, 3]}}},
        "classify": {"method_name": PREDICT,
                     "inputs": {"x": {"name": "x:0", "dtype": "float32", "shape": [None, 4]}},
                     "outputs": {"label": {"name": "label:0", "dtype": "int64", "shape": [None]},
                                 "step": {"name": "global_step/Read/ReadVariableOp:0", "dtype": "int64",
                                          "shape": []}}}}
    assert mlp_served["files"] == ["saved_model.pb", "variables/variables.data-00000-of-00001",
                                   "variables/variables.index"]


def test_the_bridge_loads_its_own_export_back(mlp_export):
    with bridge.load_saved_model(mlp_export["dir"]) as model:
        assert set(model.signatures) == {"serving_default", "classify"}
        for name, want in mlp_export["want"].items():
            sig = model.signatures[name]
            assert sig.method_name == PREDICT
            _assert_outputs(sig(**mlp_export["feeds"]), want, f"bridge.load_saved_model, signature {name}")


# --- a graph without variables -------------------------------------------------------------------

def test_a_graph_without_variables(tmp_path, oracle):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        n = bridge.placeholder(bridge.int32, [], name="n")
        y = ops.add_v2(ops.mul(x, x), 1.0, name="y")
        k = ops.mul(n, 3, name="k")
    feeds = {"x": np.array([0.5, -2.0, 3.0]), "n": np.int32(7)}
    with bridge.Session(g) as sess:
        want = sess.run({"y": y, "k": k}, {x: feeds["x"], n: feeds["n"]})
        # A lone (inputs, outputs) pair is the "serving_default" signature.
        bridge.saved_model.save(sess, tmp_path / "export", ({"x": x, "n": n}, {"y": y, "k": k}))
    assert sorted(os.listdir(tmp_path)) == ["export"]
    assert sorted(os.listdir(tmp_path / "export")) == ["saved_model.pb", "variables"]
    assert os.listdir(tmp_path / "export" / "variables") == []   # as TF's builder: an empty folder
    served = oracle("serve_saved_model", {"files": _files(tmp_path / "export"), "tags": ["serve"],
                                          "feeds": {"serving_default": feeds}})
    assert served["tf2_error"] is None and served["tf1_error"] is None, (served["tf2_error"], served["tf1_error"])
    _assert_outputs(served["tf2"]["serving_default"], want, "tf.saved_model.load")
    _assert_outputs(served["tf1"]["serving_default"], want, "loader.load")
    assert served["proto"]["saver_def"] is None and served["proto"]["collections"] == []
    assert served["proto"]["signatures"]["serving_default"]["inputs"]["n"] == {"name": "n:0", "dtype": "int32",
                                                                               "shape": []}
    with bridge.load_saved_model(tmp_path / "export") as model:
        _assert_outputs(model.signatures["serving_default"](**feeds), want, "bridge.load_saved_model")


# --- the export folder, failures, arguments -------------------------------------------------------

def test_an_existing_non_empty_folder_is_refused_and_an_empty_one_used(tmp_path):
    g, signatures, _ = _mlp()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        with pytest.raises(FileExistsError, match=r"export folder .*full already exists and is not empty"):
            bridge.saved_model.save(sess, tmp_path / "full", signatures)
        bridge.saved_model.save(sess, tmp_path / "empty", signatures)
        count = len(g)
        # A second export of the same variables reuses the Saver: the graph does not grow.
        bridge.saved_model.save(sess, tmp_path / "nested" / "again", signatures)
        assert len(g) == count
    assert os.listdir(tmp_path / "full") == ["keep.txt"]
    # The export is as readable as any folder made here (a temporary folder is private).
    assert (tmp_path / "nested" / "again").stat().st_mode == (tmp_path / "nested").stat().st_mode
    assert sorted(os.listdir(tmp_path)) == ["empty", "full", "nested"]
    assert (tmp_path / "empty" / "saved_model.pb").read_bytes() == \
        (tmp_path / "nested" / "again" / "saved_model.pb").read_bytes()


def test_a_failed_save_leaves_nothing_behind(tmp_path):
    g, signatures, _ = _mlp()
    with bridge.Session(g) as sess:   # variables never initialized: writing them fails
        with pytest.raises(errors.FailedPreconditionError, match="saving checkpoint"):
            bridge.saved_model.save(sess, tmp_path / "export", signatures)
    assert os.listdir(tmp_path) == []


def test_signature_arguments_are_checked(tmp_path):
    g, signatures, _ = _mlp()
    x = signatures["serving_default"][0]["x"]
    other = bridge.Graph()
    with other.as_default():
        alien = bridge.placeholder(bridge.float32, [2], name="alien")
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        with pytest.raises(TypeError, match=r"signature 'bad' outputs\['y'\] is ndarray, not an Output"):
            bridge.saved_model.save(sess, tmp_path / "a", {"bad": ({"x": x}, {"y": np.ones(2)})})
        with pytest.raises(TypeError, match="signature 'half' must be an \\(inputs, outputs\\) pair"):
            bridge.saved_model.save(sess, tmp_path / "a", {"half": {"x": x}})
        with pytest.raises(ValueError, match=r"inputs\['a'\] \(alien:0\) belongs to another graph"):
            bridge.saved_model.save(sess, tmp_path / "a", ({"a": alien}, {"x": x}))
        with pytest.raises(TypeError, match="session must be a bridge.Session"):
            bridge.saved_model.save(g, tmp_path / "a", ({"x": x}, {"x": x}))
    assert os.listdir(tmp_path) == []


# --- Julia ops: saved, then loaded with op_libraries (in child processes: Julia can crash) ---------

SAVE_CHILD = """
import json, sys
import numpy as np
import bridge
from bridge import customop
folder, export = sys.argv[1], sys.argv[2]
module = customop.load(folder)
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    w = bridge.Variable(np.array([1.5, -2.0, 0.25]), name="w")
    y = module.twice(bridge.ops.mul(x, w.value()), name="y")
with bridge.Session(g) as sess:
    sess.run(bridge.global_variables_initializer(g))
    want = sess.run(y, {x: np.array([1.0, 2.0, 3.0])})
    bridge.saved_model.save(sess, export, ({"x": x}, {"y": y}))
# Loading in the process that has the op, given what customop.load returned.
with bridge.load_saved_model(export, op_libraries=[module]) as model:
    again = model.signatures["serving_default"](x=np.array([1.0, 2.0, 3.0]))["y"]
print("RESULT", json.dumps({"want": want.tolist(), "again": again.tolist(), "library": module.LIBRARY_PATH}))
"""

LOAD_CHILD = """
import json, sys
import numpy as np
import bridge
folder, export = sys.argv[1], sys.argv[2]
try:
    bridge.load_saved_model(export)
    error = None
except bridge.errors.NotFoundError as exc:
    error = str(exc)
with bridge.load_saved_model(export, op_libraries=[folder]) as model:
    got = model.signatures["serving_default"](x=np.array([1.0, 2.0, 3.0]))["y"]
print("RESULT", json.dumps({"error": error, "got": got.tolist()}))
"""


LOAD_LIBRARY_CHILD = """
import json, sys
import numpy as np
import bridge
library, export = sys.argv[1], sys.argv[2]
with bridge.load_saved_model(export, op_libraries=[library]) as model:
    got = model.signatures["serving_default"](x=np.array([1.0, 2.0, 3.0]))["y"]
print("RESULT", json.dumps({"got": got.tolist()}))
"""


def _child(code: str, *args: str, timeout: float = 240) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung for {timeout} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    assert proc.returncode == 0, f"the child died with exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_a_julia_op_saves_and_loads_with_its_op_library(twice_folder, tmp_path):
    export = tmp_path / "export"
    saved = _child(SAVE_CHILD, str(twice_folder), str(export))
    assert saved["want"] == [3.0, -8.0, 1.5]   # twice(x * w)
    assert saved["again"] == saved["want"]
    record = json.loads((export / "assets.extra" / "bridge_op_libraries.json").read_text())
    (library,) = record["libraries"]
    assert library["library"] == saved["library"] and library["folder"] == str(twice_folder.resolve())
    assert library["used"] == ["Twice"] and "Twice" in library["op_types"]
    assert bridge.saved_model.recorded_op_libraries(export) == record["libraries"]

    loaded = _child(LOAD_CHILD, str(twice_folder), str(export))
    assert loaded["got"] == saved["want"]
    error = loaded["error"]
    assert error is not None, "loading without the op library succeeded"
    assert "uses the op type 'Twice', which is not registered in this process" in error, error
    assert f"op library {saved['library']} (op folder {twice_folder.resolve()})" in error, error
    assert f"op_libraries=['{twice_folder.resolve()}']" in error, error

    # The built library alone will do: its op folder is found, so its Julia code is included.
    by_library = _child(LOAD_LIBRARY_CHILD, saved["library"], str(export))
    assert by_library["got"] == saved["want"]


def test_op_libraries_entries_are_checked(tmp_path):
    with pytest.raises(FileNotFoundError, match="op library '.*nowhere.so' not found"):
        bridge.load_saved_model(tmp_path, op_libraries=[tmp_path / "nowhere.so"])
    with pytest.raises(TypeError, match="op_libraries entry 42 is neither a path"):
        bridge.load_saved_model(tmp_path, op_libraries=[42])
