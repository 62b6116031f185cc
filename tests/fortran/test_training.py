"""Online training from Fortran: a SavedModel the bridge exported with a
"train" signature (its loss output waits on the Adam train op) trained for
100 steps by a Fortran loop gives losses equal bit for bit to the same 100
steps run from Python, and the checkpoint the Fortran program saves holds
the weights Python's training reached (restored into a fresh load, its
predictions equal Python's, and so do those of a fresh load that Fortran
restores it into)."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.train import AdamOptimizer
from support.fortran import compile_program, run_program

STEPS = 100
BATCHES = 4

TRAIN = """
program train
  use tf_bridge
  use, intrinsic :: iso_c_binding
  implicit none
  type(tf_model) :: m, fresh
  type(tf_status) :: st
  type(tf_tensor) :: inputs(2), loss(1), pred(1)
  real(c_float), target :: xs(2,32,%(batches)d), ys(1,32,%(batches)d)
  real(c_float) :: losses(%(steps)d), step_loss, prediction(1,32), restored(1,32)
  character(len=1024) :: dir
  integer :: step, b, u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  call check(st)
  print '(a)', "saver " // trim(m%%saver%%filename_tensor) // " " // trim(m%%saver%%restore_op)
  open(newunit=u, file="data.bin", access="stream", form="unformatted", status="old")
  read(u) xs, ys
  close(u)
  do step = 1, %(steps)d
    b = mod(step - 1, %(batches)d) + 1
    call tf_tensor_from(inputs(1), xs(:,:,b), st)
    call check(st)
    call tf_tensor_from(inputs(2), ys(:,:,b), st)
    call check(st)
    call m%%run("train", ["x", "y"], inputs, ["loss"], loss, st)
    call check(st)
    call tf_to_array(loss(1), step_loss, st)
    call check(st)
    losses(step) = step_loss
  end do
  call m%%save_checkpoint("ckpt/trained", st)
  call check(st)
  call tf_tensor_from(inputs(1), xs(:,:,1), st)
  call m%%run("serving_default", ["x"], inputs(1:1), ["y"], pred, st)
  call check(st)
  call tf_to_array(pred(1), prediction, st)
  call check(st)
  call tf_load_saved_model(fresh, trim(dir), st)       ! the export's untrained weights
  call check(st)
  call fresh%%restore_checkpoint("ckpt/trained", st)
  call check(st)
  call fresh%%run("serving_default", ["x"], inputs(1:1), ["y"], pred, st)
  call check(st)
  call tf_to_array(pred(1), restored, st)
  call check(st)
  open(newunit=u, file="out.bin", access="stream", form="unformatted", status="replace")
  write(u) losses, prediction, restored
  close(u)
  call m%%close()
  call fresh%%close()
contains
  subroutine check(st)
    type(tf_status), intent(in) :: st
    if (.not. st%%ok()) then
      print '(a,i0,a)', "error ", st%%code, ": " // st%%message
      error stop 1
    end if
  end subroutine
end program train
""" % {"steps": STEPS, "batches": BATCHES}


def export_trainable_mlp(export_dir, seed: int = 5) -> None:
    """x[?,2] -> 16 tanh -> 1, MSE, Adam: signatures serving_default and train (its loss waits on the update)."""
    rng = np.random.default_rng(seed)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 2], name="x")
        y = bridge.placeholder(bridge.float32, [None, 1], name="y")
        w1 = bridge.Variable(rng.normal(0, 0.7, (2, 16)).astype(np.float32), name="w1")
        b1 = bridge.Variable(np.zeros(16, np.float32), name="b1")
        w2 = bridge.Variable(rng.normal(0, 0.3, (16, 1)).astype(np.float32), name="w2")
        b2 = bridge.Variable(np.zeros(1, np.float32), name="b2")
        hidden = ops.tanh(ops.bias_add(ops.mat_mul(x, w1.value()), b1.value()))
        pred = ops.bias_add(ops.mat_mul(hidden, w2.value()), b2.value(), name="pred")
        loss = ops.mean(ops.square(pred - y), [0, 1], name="loss")
        train_op = AdamOptimizer(0.02).minimize(loss, name="train")
        with bridge.control_dependencies([train_op]):
            trained_loss = ops.identity(loss, name="train_loss")
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, export_dir, {"serving_default": ({"x": x}, {"y": pred}),
                                                   "train": ({"x": x, "y": y}, {"loss": trained_loss})})


def batches(seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, (BATCHES, 32, 2)).astype(np.float32)
    ys = (np.sin(2 * xs[..., :1]) * xs[..., 1:]).astype(np.float32)
    return xs, ys


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("train")
    export_trainable_mlp(folder / "export")
    xs, ys = batches()
    exe = compile_program(TRAIN, folder, "train")
    (folder / "data.bin").write_bytes(xs.tobytes() + ys.tobytes())
    (folder / "ckpt").mkdir()
    printed = run_program(exe, str(folder / "export"), timeout=300)
    raw = (folder / "out.bin").read_bytes()
    return {"folder": folder, "xs": xs, "ys": ys, "printed": printed,
            "losses": np.frombuffer(raw[:4 * STEPS], np.float32),
            "prediction": np.frombuffer(raw[4 * STEPS:4 * STEPS + 128], np.float32).reshape(32, 1),
            "restored": np.frombuffer(raw[4 * STEPS + 128:], np.float32).reshape(32, 1)}


def test_fortran_training_losses_equal_python_bit_for_bit(trained):
    xs, ys = trained["xs"], trained["ys"]
    with bridge.load_saved_model(trained["folder"] / "export") as model:
        train = model.signatures["train"]
        want = np.array([train(x=xs[s % BATCHES], y=ys[s % BATCHES])["loss"] for s in range(STEPS)], np.float32)
        want_prediction = model.signatures["serving_default"](x=xs[0])["y"]
    assert np.isfinite(want).all() and want[-1] < 0.5 * want[0], want   # it learned
    assert trained["losses"].tobytes() == want.tobytes()
    assert trained["prediction"].tobytes() == want_prediction.tobytes()


def test_fortran_checkpoint_restores_the_trained_weights(trained):
    saver_line = next(line for line in trained["printed"].splitlines() if line.startswith("saver "))
    filename_tensor, restore_op = saver_line.split()[1:]
    prefix = trained["folder"] / "ckpt" / "trained"
    assert prefix.with_suffix(".index").exists()
    with bridge.load_saved_model(trained["folder"] / "export") as model:
        untrained = model.signatures["serving_default"](x=trained["xs"][0])["y"]
        g = model.graph
        model.session.run(g.get_operation_by_name(restore_op), {g.get_tensor_by_name(filename_tensor): str(prefix)})
        restored = model.signatures["serving_default"](x=trained["xs"][0])["y"]
    assert restored.tobytes() == trained["prediction"].tobytes()
    assert not np.array_equal(untrained, restored)


def test_fortran_restores_its_checkpoint_into_a_fresh_load(trained):
    assert trained["restored"].tobytes() == trained["prediction"].tobytes()
