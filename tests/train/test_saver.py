"""bridge.train.Saver writes V2 checkpoints stock TensorFlow reads, and
restores the ones TF's tf.compat.v1.train.Saver writes (the checkpoints
oracle), values exact; max_to_keep, the state file, latest_checkpoint,
restore errors, and a failed save leaving the previous checkpoint intact."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge.framework import _proto as pb
from bridge import errors, train

#: Every dtype the issue names, a scalar and 3-D ones among them, names with scopes.
VALUES = {
    "dense/kernel": np.linspace(-1.5, 2.25, 12, dtype=np.float32).reshape(3, 4),
    "dense/bias": np.array([0.1, -0.2, 1e-30, 3.4e38], np.float32),
    "scale": np.float64(np.pi),
    "block/conv/weights": (np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7.0 - 1.0),
    "counts": np.array([[2**40 + 3, -(2**50)], [0, 9_007_199_254_740_993]], np.int64),
    "steps": np.array([-2**31, 2**31 - 1, 0, 5, -7], np.int32),
    "mask": np.array([[[True, False], [False, True]], [[True, True], [False, False]]]),
}


def _graph(values: dict, zeros: bool = False) -> tuple[bridge.Graph, dict, bridge.Operation]:
    """A graph holding a Variable per entry (zeros of its dtype and shape with ``zeros``)."""
    g = bridge.Graph()
    with g.as_default():
        variables = {name: bridge.Variable(np.zeros_like(v) if zeros else v, name=name)
                     for name, v in values.items()}
        init = bridge.global_variables_initializer()
    return g, variables, init


def _read_all(sess: bridge.Session, variables: dict) -> dict:
    with sess.graph.as_default():
        reads = {name: v.read_value() for name, v in variables.items()}
    return {k: np.array(v) for k, v in sess.run(reads).items()}


def _assert_exact(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for name, value in want.items():
        value = np.asarray(value)
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def _saved(tmp_path: Path, values: dict = VALUES, step: int = 3, **saver_args):
    g, variables, init = _graph(values)
    with g.as_default():
        saver = train.Saver(**saver_args)
    sess = bridge.Session(g)
    sess.run(init)
    prefix = saver.save(sess, tmp_path / "model.ckpt", global_step=step)
    return g, variables, saver, sess, prefix


# --- the bridge writes, stock TF reads ------------------------------------------------

def _state_for_oracle(text: str) -> str:
    # Timestamps change every run; fixed ones keep the oracle's answer cached.
    return re.sub(r"(timestamps?: )\S+", r"\g<1>1700000000.5", text)


def test_tensorflow_reads_the_bridges_checkpoint(tmp_path, oracle):
    _, _, _, sess, prefix = _saved(tmp_path)
    sess.close()
    assert prefix == str(tmp_path / "model.ckpt-3")
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.ckpt-3.data-00000-of-00001", "model.ckpt-3.index"]
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "checkpoint"}
    files["checkpoint"] = _state_for_oracle((tmp_path / "checkpoint").read_text()).encode()
    got = oracle("checkpoints", {"mode": "read", "files": files, "prefix": "model.ckpt-3"})
    _assert_exact(got["values"], VALUES)
    assert got["dtypes"] == {name: np.asarray(v).dtype.name for name, v in VALUES.items()}
    assert got["shapes"] == {name: list(np.shape(v)) for name, v in VALUES.items()}
    assert got["list_variables"] == sorted((name, list(np.shape(v))) for name, v in VALUES.items())
    # TF reads the state file: the newest checkpoint, and the list of kept ones.
    assert got["latest"] == "model.ckpt-3"
    assert got["all_model_checkpoint_paths"] == ["model.ckpt-3"]
    # The bridge's own reading of the index agrees with TF's.
    assert train.list_variables(prefix) == got["list_variables"]
    assert train.list_variables(tmp_path) == got["list_variables"]


# --- stock TF writes, the bridge restores ---------------------------------------------

@pytest.fixture(scope="module")
def tf_checkpoints(oracle) -> dict:
    return oracle("checkpoints", {"mode": "write", "variables": VALUES, "step": 7})


@pytest.mark.parametrize("kind", ["prefix", "sharded_prefix"])
def test_the_bridge_restores_tensorflows_checkpoint(tf_checkpoints, kind):
    _assert_exact(tf_checkpoints["values"], VALUES)   # what TF held when it saved
    g, variables, init = _graph(VALUES, zeros=True)
    with g.as_default():
        saver = train.Saver()
    with bridge.Session(g) as sess:
        sess.run(init)
        saver.restore(sess, tf_checkpoints[kind])
        _assert_exact(_read_all(sess, variables), tf_checkpoints["values"])


def test_latest_checkpoint_reads_tensorflows_state_file(tf_checkpoints):
    assert 'model_checkpoint_path: "model.ckpt-7"' in tf_checkpoints["state_file"]
    assert train.latest_checkpoint(tf_checkpoints["dir"]) == os.path.join(tf_checkpoints["dir"], "model.ckpt-7")
    assert train.latest_checkpoint(tf_checkpoints["sharded_dir"]) == tf_checkpoints["sharded_prefix"]
    state = train.get_checkpoint_state(tf_checkpoints["dir"])
    assert state.all_model_checkpoint_paths == [os.path.join(tf_checkpoints["dir"], "model.ckpt-7")]
    assert train.list_variables(tf_checkpoints["prefix"]) == sorted(
        (name, list(np.shape(v))) for name, v in VALUES.items())


def test_a_dict_var_list_restores_under_other_names(tf_checkpoints):
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.zeros((3, 4), np.float32), name="w")
        n = bridge.Variable(np.zeros(5, np.int32), name="n")
        saver = train.Saver({"dense/kernel": w, "steps": n})
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        saver.restore(sess, tf_checkpoints["prefix"])
        got = _read_all(sess, {"dense/kernel": w, "steps": n})
    _assert_exact(got, {"dense/kernel": VALUES["dense/kernel"], "steps": VALUES["steps"]})


# --- the graph the Saver builds ------------------------------------------------------------

def test_the_saver_builds_its_ops_once_as_tensorflows_saver(tmp_path):
    g, _, saver, sess, prefix = _saved(tmp_path, {"a": np.float32(1.0)})
    count = len(g)
    saver.save(sess, tmp_path / "again")
    saver.restore(sess, prefix)
    assert len(g) == count   # save and restore add nothing to the graph
    types = {op.name: op.type for op in g}
    assert types["save/Const"] == "PlaceholderWithDefault"
    assert types["save/SaveV2"] == "SaveV2" and types["save/MergeV2Checkpoints"] == "MergeV2Checkpoints"
    assert types["save/RestoreV2"] == "RestoreV2" and types["save/restore_all"] == "NoOp"
    saver_def = pb.fields(saver.as_saver_def())
    assert [pb.text(saver_def[i][0]) for i in (1, 2, 3)] == ["save/Const:0", "save/Identity:0", "save/restore_all"]
    assert saver_def[4] == [5] and saver_def[5] == [1] and saver_def[7] == [2]   # max_to_keep, sharded, V2
    with g.as_default():
        second = train.Saver(name="mine")
    assert pb.text(pb.fields(second.as_saver_def())[1][0]) == "mine/Const:0"
    sess.close()


def test_saver_arguments_are_checked():
    g = bridge.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="no variables to save"):
            train.Saver()
        assert train.Saver(allow_empty=True).save(None, "x") is None
        a = bridge.Variable(1.0, name="a")
        with pytest.raises(ValueError, match="two variables would be saved under the name 'a'"):
            train.Saver([a, a])
        with pytest.raises(TypeError, match="not a bridge.Variable"):
            train.Saver([a.value()])
    with pytest.raises(ValueError, match="different graphs"):
        other = bridge.Graph()
        with other.as_default():
            b = bridge.Variable(2.0, name="b")
        train.Saver([a, b])


# --- max_to_keep, the state file, latest_checkpoint -----------------------------------------

def test_max_to_keep_deletes_the_oldest_checkpoints(tmp_path):
    g, variables, init = _graph({"v": np.int64(0)})
    with g.as_default():
        saver = train.Saver(max_to_keep=2)
        step = bridge.Variable(np.int64(0), name="global_step")
        bump = step.assign_add(np.int64(10))
    with bridge.Session(g) as sess:
        sess.run([init, step.initializer])
        for _ in range(4):
            sess.run(bump)
            saver.save(sess, tmp_path / "model.ckpt", global_step=step)   # a Variable step is read
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["checkpoint"] + [f"model.ckpt-{s}.{ext}" for s in (30, 40)
                                          for ext in ("data-00000-of-00001", "index")]
        assert saver.last_checkpoints == [str(tmp_path / "model.ckpt-30"), str(tmp_path / "model.ckpt-40")]
        state = train.get_checkpoint_state(tmp_path)
        assert state.model_checkpoint_path == str(tmp_path / "model.ckpt-40")
        assert state.all_model_checkpoint_paths == saver.last_checkpoints
        assert len(state.all_model_checkpoint_timestamps) == 2
        # Paths inside the folder are written relative to it, as TF's CheckpointManager does.
        assert 'model_checkpoint_path: "model.ckpt-40"' in (tmp_path / "checkpoint").read_text()
        # The state file, replaced in one step, is as readable as the checkpoint TF wrote.
        assert (tmp_path / "checkpoint").stat().st_mode == (tmp_path / "model.ckpt-40.index").stat().st_mode
        assert train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-40")
        # Saving an existing prefix again makes it the newest, deleting nothing else.
        saver.save(sess, tmp_path / "model.ckpt-30")
        assert saver.last_checkpoints == [str(tmp_path / "model.ckpt-40"), str(tmp_path / "model.ckpt-30")]
        assert train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-30")
        keep_all = train.Saver([variables["v"]], max_to_keep=None)
        for s in range(3):
            keep_all.save(sess, tmp_path / "all", global_step=s, latest_filename="all_state")
        assert all((tmp_path / f"all-{s}.index").is_file() for s in range(3))
        assert train.latest_checkpoint(tmp_path, "all_state") == str(tmp_path / "all-2")
        assert train.latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-30")


def test_latest_checkpoint_without_a_checkpoint(tmp_path):
    assert train.latest_checkpoint(tmp_path) is None
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "gone-5"\n')
    assert train.latest_checkpoint(tmp_path) is None   # the state file names files that are gone
    (tmp_path / "checkpoint").write_text("model_checkpoint_path: gone\n")
    with pytest.raises(ValueError, match="checkpoint state file .*line 1"):
        train.latest_checkpoint(tmp_path)


def test_paths_with_quotes_and_unicode_round_trip_through_the_state_file(tmp_path):
    folder = tmp_path / 'we"ird \\ pätḣ'
    folder.mkdir()
    _, _, _, sess, prefix = _saved(folder, {"a": np.float32(2.0)}, step=1)
    sess.close()
    assert train.latest_checkpoint(folder) == prefix


# --- restore errors --------------------------------------------------------------------------------

def test_restore_errors_name_the_checkpoint_and_the_variable(tmp_path):
    g, variables, saver, sess, prefix = _saved(tmp_path, {"dense/kernel": VALUES["dense/kernel"],
                                                          "steps": VALUES["steps"]})
    sess.close()

    def restore_into(values: dict, var_list=None):
        g2, vs, init = _graph(values, zeros=True)
        with g2.as_default():
            s = train.Saver(var_list if var_list is None else {k: vs[n] for k, n in var_list.items()})
        with bridge.Session(g2) as sess2:
            sess2.run(init)
            try:
                s.restore(sess2, prefix)
            finally:
                left = _read_all(sess2, vs)
        return left

    missing = {"dense/kernel": VALUES["dense/kernel"], "dense/bias": VALUES["dense/bias"]}
    with pytest.raises(errors.NotFoundError, match=r"checkpoint '.*model.ckpt-3' has no variable named "
                                                   r"'dense/bias'; it holds: dense/kernel, steps"):
        restore_into(missing)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"'dense/kernel' is float32 \[3, 4\] there, but the variable is float64 \[3, 4\]"):
        restore_into({"dense/kernel": VALUES["dense/kernel"].astype(np.float64)})
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"'steps' is int32 \[5\] there, but the graph's variable 'n' is int32 \[4\]"):
        restore_into({"n": np.zeros(4, np.int32)}, {"steps": "n"})
    # A refused restore changes no variable, not even those that would fit.
    g3, vs3, init3 = _graph({"dense/kernel": VALUES["dense/kernel"], "steps": np.zeros(3, np.int32)}, zeros=True)
    with g3.as_default():
        s3 = train.Saver()
    with bridge.Session(g3) as sess3:
        sess3.run(init3)
        with pytest.raises(errors.InvalidArgumentError, match="'steps'"):
            s3.restore(sess3, prefix)
        assert not _read_all(sess3, vs3)["dense/kernel"].any()
        with pytest.raises(ValueError, match=r"'.*nothing' is not a checkpoint \(no file .*nothing.index\)"):
            s3.restore(sess3, tmp_path / "nothing")
        with pytest.raises(ValueError, match="is a folder: bridge.train.latest_checkpoint"):
            s3.restore(sess3, tmp_path)
        with pytest.raises(ValueError, match="save_path is None"):
            s3.restore(sess3, None)


def test_a_corrupt_index_fails_naming_the_checkpoint(tmp_path):
    g, _, saver, sess, prefix = _saved(tmp_path, {"a": np.float32(1.0)})
    Path(prefix + ".index").write_bytes(b"not an index at all" * 8)
    with pytest.raises(errors.OpError, match=f"restoring checkpoint '{re.escape(prefix)}' failed"):
        saver.restore(sess, prefix)
    sess.close()


def test_a_failed_save_leaves_the_previous_checkpoint_intact(tmp_path):
    values = {"a": np.arange(3, dtype=np.float32), "b": np.float64(2.5)}
    g, variables, init = _graph(values)
    with g.as_default():
        saver = train.Saver()
    with bridge.Session(g) as sess:
        sess.run(init)
        prefix = saver.save(sess, tmp_path / "model.ckpt")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with bridge.Session(g) as fresh:
        fresh.run(variables["a"].assign(np.full(3, 9.0, np.float32)))   # "b" stays uninitialized
        with pytest.raises(errors.FailedPreconditionError,
                           match=r"saving checkpoint '.*model.ckpt' failed \(a checkpoint saved there before "
                                 r"is unchanged\)"):
            saver.save(fresh, tmp_path / "model.ckpt")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before   # no temporary folder left either
    with bridge.Session(g) as sess:
        saver.restore(sess, prefix)
        _assert_exact(_read_all(sess, variables), values)
    with pytest.raises(ValueError, match="does not exist"):
        with bridge.Session(g) as sess:
            saver.save(sess, tmp_path / "no" / "such" / "folder" / "model.ckpt")


# --- nothing lost: atomic saves, concurrent saves, refused paths ----------------------

def _listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_a_nul_byte_or_an_empty_path_is_refused_before_anything_is_written(tmp_path):
    g, variables, init = _graph({"a": np.float32(1.0)})
    with g.as_default():
        saver = train.Saver()
    with bridge.Session(g) as sess:
        sess.run(init)
        for bad, message in [(str(tmp_path / "good\0evil"), "holds a NUL byte"),
                             (os.fsencode(tmp_path / "good\0evil"), "holds a NUL byte"),
                             ("", "is empty"),
                             (str(tmp_path) + os.sep, "names a folder")]:
            with pytest.raises(ValueError, match=f"Saver.save: save_path.*{message}"):
                saver.save(sess, bad, global_step=1)
            assert _listing(tmp_path) == []
        with pytest.raises(ValueError, match="latest_filename .*holds a NUL byte"):
            saver.save(sess, tmp_path / "model", latest_filename="check\0point")
        assert _listing(tmp_path) == []
        prefix = saver.save(sess, tmp_path / "good")
        with pytest.raises(ValueError, match="Saver.restore: save_path .*holds a NUL byte"):
            saver.restore(sess, prefix + "\0evil")
        with pytest.raises(ValueError, match="save_path is empty"):
            saver.restore(sess, "")
    assert _listing(tmp_path) == ["checkpoint", "good.data-00000-of-00001", "good.index"]


@pytest.mark.parametrize("content, message", [
    (b"\x89PNG\r\n\x1a\n\xff\xfe binary", r"is not a text file \(byte 0x89 at offset 0 is not UTF-8\)"),
    (b'model_checkpoint_path: "good\x00evil"\n', "holds a NUL byte at offset 28"),
    (b'model_checkpoint_path: "good\\000evil"\n', "must be non-empty and hold no NUL byte"),
])
def test_a_binary_or_corrupt_state_file_is_an_error_naming_it(tmp_path, content, message):
    state = tmp_path / "checkpoint"
    state.write_bytes(content)
    for read in (train.latest_checkpoint, train.get_checkpoint_state):
        with pytest.raises(ValueError, match=f"checkpoint state file {re.escape(str(state))}.*{message}"):
            read(tmp_path)


def _big_graph(size: int = 2_000_000):
    """One float64 Variable of ``size`` values and an op filling it with a number."""
    g = bridge.Graph()
    with g.as_default():
        v = bridge.Variable(np.zeros(size), name="big")
        fill = bridge.placeholder(bridge.float64, [], name="fill")
        assign = v.assign(bridge.ops.fill([size], fill))
        saver = train.Saver(max_to_keep=3)
        init = bridge.global_variables_initializer()
    return g, v, fill, assign, saver, init


def test_concurrent_saves_to_one_prefix_all_succeed(tmp_path):
    """Four threads saving to one prefix used to share '<prefix>_temp' (10-29% NotFound)."""
    import threading

    g, v, fill, assign, saver, init = _big_graph(500_000)
    sess = bridge.Session(g)
    sess.run(init)
    sess.run(assign, {fill: 7.0})
    failures, prefixes = [], []

    def work(n):
        for i in range(6):
            try:
                prefixes.append(saver.save(sess, tmp_path / "model"))
                prefixes.append(saver.save(sess, tmp_path / "stepped", global_step=n * 10 + i))
            except Exception as exc:  # noqa: BLE001 - every failure is the test's business
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(prefixes) == 48
    assert [n for n in _listing(tmp_path) if n.startswith(".") or n.endswith("_temp")] == []
    # max_to_keep 3: the three newest saves are on disk, whole, and nothing else.
    kept = saver.last_checkpoints
    assert len(kept) == 3
    on_disk = sorted(n for n in _listing(tmp_path) if n != "checkpoint")
    assert on_disk == sorted(os.path.basename(p) + end for p in kept for end in (".index", ".data-00000-of-00001"))
    assert train.latest_checkpoint(tmp_path) == kept[-1]
    with bridge.Session(g) as fresh:
        for prefix in kept:
            saver.restore(fresh, prefix)
            np.testing.assert_array_equal(fresh.run(v.value()), np.full(500_000, 7.0))
    sess.close()


#: Saves a checkpoint of 1.0s, then one of 2.0s to the same path, SIGKILLing itself at the
#: KILL_AT-th file operation of that second save (the os and shutil calls of saver.py, checkpoint_commit.py
#: and checkpoint_management.py).
KILL_AT_STEP = r"""
import os, shutil, signal, sys
import numpy as np
import bridge
from bridge import train
from bridge.train import checkpoint_commit, checkpoint_management
from bridge.train import saver as saver_module

folder, stepped, kill_at = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
g = bridge.Graph()
with g.as_default():
    v = bridge.Variable(np.zeros(1000), name="big")
    fill = bridge.placeholder(bridge.float64, [], name="fill")
    assign = v.assign(bridge.ops.fill([1000], fill))
    saver = train.Saver(max_to_keep=3)
    init = bridge.global_variables_initializer()
sess = bridge.Session(g)
sess.run(init)
sess.run(assign, {fill: 1.0})
print("first", saver.save(sess, folder + "/model", global_step=1 if stepped else None), flush=True)
sess.run(assign, {fill: 2.0})
calls = 0


class Stepping:
    def __init__(self, module, names):
        self.module, self.names = module, names

    def __getattr__(self, name):
        value = getattr(self.module, name)
        if name not in self.names:
            return value

        def step(*args, **kwargs):
            global calls
            calls += 1
            if calls == kill_at:   # the kernel ends the process here: no finally, no atexit
                print("killed at", calls, name, *args, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return value(*args, **kwargs)
        return step


for module in (saver_module, checkpoint_commit, checkpoint_management):
    module.os = Stepping(os, {"mkdir", "rename", "replace", "remove", "unlink", "rmdir", "fsync"})
checkpoint_commit.shutil = Stepping(shutil, {"rmtree"})
print("second", saver.save(sess, folder + "/model", global_step=1 if stepped else None), flush=True)
print("finished after", calls, flush=True)
"""


@pytest.mark.parametrize("stepped", [False, True], ids=["same_prefix", "global_step"])
def test_a_save_killed_at_each_file_operation_leaves_a_checkpoint_that_restores(tmp_path, stepped):
    """Every point of a save, deterministically, with a real SIGKILL: a child process
    kills itself at its n-th file operation (n = 1, 2, ... until a save finishes), so
    no clean-up of the bridge runs (a Python exception would run it).  The checkpoint
    then restores with exact values, the old or the new, and once the bridge has
    looked (latest_checkpoint, restore) nothing of the killed save is left."""
    import signal
    import subprocess
    import sys

    g, v, fill, assign, saver, init = _big_graph(1000)
    env = dict(os.environ, PYTHONPATH=str(Path(bridge.__file__).resolve().parents[1]))
    n = 0
    while True:
        n += 1
        folder = tmp_path / f"kill{n}"
        folder.mkdir()
        child = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(folder), "1" if stepped else "0", str(n)],
                               capture_output=True, text=True, timeout=120, env=env)
        lines = child.stdout.splitlines()
        finished = child.returncode == 0
        assert finished or child.returncode == -signal.SIGKILL, (n, child.returncode, child.stderr[-3000:])
        assert lines[0] == f"first {folder / ('model-1' if stepped else 'model')}", (n, lines)
        assert lines[-1].startswith("finished after" if finished else f"killed at {n} "), (n, lines)
        with bridge.Session(g) as fresh:
            latest = train.latest_checkpoint(folder)
            assert latest == lines[0].split(" ", 1)[1], (n, lines)
            saver.restore(fresh, latest)
            value = fresh.run(v.value())
        assert value[0] in (1.0, 2.0) and np.array_equal(value, np.full(1000, value[0])), (n, lines, value[:3])
        if finished:
            assert value[0] == 2.0
        leftovers = [p for p in _listing(folder) if p.startswith(".") or "_temp" in p]
        assert leftovers == [], (n, lines, _listing(folder))
        if finished:
            assert int(lines[-1].split()[-1]) < n
            break
    assert n > 8, n   # the save has that many file operations at least


KILL_CHILD = r"""
import sys
import numpy as np
import bridge
from bridge import train

folder, stepped = sys.argv[1], sys.argv[2] == "1"
size = 4_000_000                                   # 32 MB: a save takes tens of milliseconds
g = bridge.Graph()
with g.as_default():
    v = bridge.Variable(np.zeros(size), name="big")
    fill = bridge.placeholder(bridge.float64, [], name="fill")
    assign = v.assign(bridge.ops.fill([size], fill))
    saver = train.Saver(max_to_keep=2)
    init = bridge.global_variables_initializer()
sess = bridge.Session(g)
sess.run(init)
start = int(sys.argv[3])
for i in range(start, start + 1000):
    sess.run(assign, {fill: float(i)})
    saver.save(sess, folder + "/model", global_step=i if stepped else None)
    print(i, flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("stepped", [False, True], ids=["same_prefix", "global_step"])
def test_saves_killed_with_sigkill_never_lose_the_checkpoint(tmp_path, stepped):
    """Child processes save a 32 MB variable over and over and are SIGKILLed at
    random times; after each kill the checkpoint restores with the exact
    values of the last finished save (or of the one killed, if it had
    committed), and nothing is left behind once the bridge has looked."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(1234 + stepped)
    g, v, fill, assign, saver, init = _big_graph(4_000_000)
    deadline = time.monotonic() + 150
    kills, saves, next_value = 0, 0, 1
    while kills < 10 and time.monotonic() < deadline:
        child = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(tmp_path), "1" if stepped else "0",
                                  str(next_value)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = child.stdout.readline()   # one save finished: the child is in its loop
        if not first:
            child.wait()
            pytest.fail("the saving child died before its first save")
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()
        child.wait()
        done = [int(line) for line in (first + rest).split()]
        kills += 1
        saves += len(done)
        last = done[-1]
        with bridge.Session(g) as sess:
            prefix = train.latest_checkpoint(tmp_path) if stepped else str(tmp_path / "model")
            saver.restore(sess, prefix)
            value = sess.run(v.value())
        assert value[0] in (last, last + 1), (kills, last, value[0])
        np.testing.assert_array_equal(value, np.full(value.shape, value[0]))
        if stepped:
            assert prefix in (str(tmp_path / f"model-{last}"), str(tmp_path / f"model-{last + 1}"))
        leftovers = [n for n in _listing(tmp_path) if n.startswith(".") or n.endswith("_temp")]
        assert leftovers == [], leftovers
        next_value = last + 2
    assert kills >= 5 and saves >= 10, (kills, saves)
