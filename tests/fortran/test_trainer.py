"""tf_trainer: training an inference SavedModel from Fortran, no train
signature baked in by Python.  On an MLP the bridge exported (signatures
serving_default x -> y and evaluate x, y -> loss), 50 Fortran steps with a
learning rate set at every step equal the Python bridge's AdamOptimizer (and
GradientDescentOptimizer) bit for bit: every loss, and every variable of the
checkpoint the trainer saves, the optimizer's slots and beta powers included,
restored by bridge.train.Saver into the graph Python trained (and read by
stock TensorFlow's tf.train.load_checkpoint).  The loss is
built ("mse" of the output y against a fed target) or a signature's output
("loss" of evaluate).  A stock TensorFlow TF1 SavedModel trains with SGD as
numpy's arithmetic says; beside an Adam the export already holds, the
checkpoint's names are those TF gives a second Adam; a TF2 export, bad
arguments and bad feeds are statuses naming what is wrong."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.train import AdamOptimizer, GradientDescentOptimizer, Saver
from support.docs import block
from support.fortran import compile_program, run_program

STEPS = 50
BATCHES = 4
#: The learning rate of each step (float64; both sides feed it as float32).
RATES = 0.02 * 0.97 ** np.arange(STEPS)

PROGRAM = """
program trainer
  use tf_bridge
  use, intrinsic :: iso_c_binding
  implicit none
  character(len=1024) :: dir, mode, opt_name, loss_mode
  call get_command_argument(1, dir)
  call get_command_argument(2, mode)
  select case (mode)
  case ("train")
    call get_command_argument(3, opt_name)
    call get_command_argument(4, loss_mode)
    call train(trim(dir), trim(opt_name), trim(loss_mode))
  case ("stock")
    call stock(trim(dir))
  case ("errors")
    call errors(trim(dir))
  end select
contains
  ! STEPS steps on data.bin's batches with rates.bin's learning rates; the
  ! losses to losses.bin, the checkpoint to ckpt/<opt>_<loss>.
  subroutine train(dir, opt_name, loss_mode)
    character(*), intent(in) :: dir, opt_name, loss_mode
    type(tf_model) :: m
    type(tf_trainer) :: tr
    type(tf_optimizer) :: opt
    type(tf_status) :: st
    type(tf_tensor) :: x(2), target
    real(c_float), target :: xs(2, 32, @BATCHES@), ys(1, 32, @BATCHES@)
    real(c_double) :: rates(@STEPS@), losses(@STEPS@)
    integer :: step, b, u, i
    open(newunit=u, file="data.bin", access="stream", form="unformatted", status="old")
    read(u) xs, ys, rates
    close(u)
    call tf_load_saved_model(m, dir, st)
    call check(st)
    opt = tf_sgd(rates(1))
    if (opt_name == "adam") opt = tf_adam(rates(1))
    if (loss_mode == "mse") then
      call tf_trainer_create(tr, m, "serving_default", "mse", opt, st, output="y")
    else
      call tf_trainer_create(tr, m, "evaluate", "loss", opt, st)
    end if
    call check(st)
    call m%close()                                ! the trainer holds the model
    print '(a,*(1x,a))', "variables", (trim(tr%variables(i)), i = 1, size(tr%variables))
    print '(a,*(1x,a))', "keys", (trim(tr%keys(i)), i = 1, size(tr%keys))
    do step = 1, @STEPS@
      b = mod(step - 1, @BATCHES@) + 1
      call tr%set_learning_rate(rates(step))
      call tf_tensor_from(x(1), xs(:, :, b), st)
      call check(st)
      call tf_tensor_from(x(2), ys(:, :, b), st)
      call check(st)
      if (loss_mode == "mse") then
        call tr%step(["x"], x(1:1), st, target=x(2), loss=losses(step))
      else
        call tr%step(["x", "y"], x, st, loss=losses(step))
      end if
      call check(st)
    end do
    open(newunit=u, file="losses.bin", access="stream", form="unformatted", status="replace")
    write(u) losses
    close(u)
    call tr%save_checkpoint("ckpt/" // opt_name // "_" // loss_mode, st)
    call check(st)
  end subroutine

  ! The stock TF1 model (predict: y = x W + bias): 3 SGD steps of mse, then predict probe.bin.
  subroutine stock(dir)
    character(*), intent(in) :: dir
    type(tf_model) :: m
    type(tf_trainer) :: tr
    type(tf_status) :: st
    type(tf_tensor) :: x(1), t, y(1)
    real(c_float), target :: xs(3, 4), ts(2, 4), probe(3, 4), ys(2, 4)
    real(c_double) :: loss
    integer :: step, u, i
    open(newunit=u, file="stock.bin", access="stream", form="unformatted", status="old")
    read(u) xs, ts, probe
    close(u)
    call tf_load_saved_model(m, dir, st)
    call check(st)
    call tf_trainer_create(tr, m, "predict", "mse", tf_sgd(0.1d0), st, output="y")
    call check(st)
    print '(a,*(1x,a))', "variables", (trim(tr%variables(i)), i = 1, size(tr%variables))
    call tf_tensor_from(x(1), xs, st)
    call tf_tensor_from(t, ts, st)
    do step = 1, 3
      call tr%step(["x"], x, st, target=t, loss=loss)
      call check(st)
      print '(a,es24.16)', "loss", loss
    end do
    call tf_tensor_from(x(1), probe, st)
    call m%run("predict", ["x"], x, ["y"], y, st)
    call check(st)
    call tf_to_array(y(1), ys, st)
    open(newunit=u, file="stock_out.bin", access="stream", form="unformatted", status="replace")
    write(u) ys
    close(u)
  end subroutine

  subroutine errors(dir)
    character(*), intent(in) :: dir
    type(tf_model) :: m, tf2, closed
    type(tf_trainer) :: tr, never
    type(tf_status) :: st
    type(tf_tensor) :: x(1), t, wrong
    real(c_float), target :: xs(2, 3), ts(1, 3), bad(3, 1)
    character(len=1024) :: tf2_dir
    real(c_double) :: losses(3)
    integer :: i
    call get_command_argument(3, tf2_dir)
    xs = 1; ts = 0; bad = 0
    call tf_load_saved_model(m, dir, st)
    call check(st)
    call tf_trainer_create(tr, closed, "serving_default", "mse", tf_adam(), st, output="y")
    call report("not_loaded", st)
    call tf_trainer_create(tr, m, "serving", "mse", tf_adam(), st, output="y")
    call report("no_signature", st)
    call tf_trainer_create(tr, m, "serving_default", "mse", tf_adam(), st, output="z")
    call report("no_output", st)
    call tf_trainer_create(tr, m, "serving_default", "huber", tf_adam(), st, output="y")
    call report("unknown_loss", st)
    call tf_trainer_create(tr, m, "serving_default", "y", tf_adam(), st)
    call report("loss_not_scalar", st)
    call tf_trainer_create(tr, m, "serving_default", "mse", tf_optimizer("lbfgs"), st, output="y")
    call report("unknown_optimizer", st)
    call tf_trainer_create(tr, m, "serving_default", "mse", tf_adam(), st, output="y", variables=["w9"])
    call report("unknown_variable", st)
    call tr%step(["x"], x, st, target=t)
    call report("step_unmade", st)
    call never%save_checkpoint("ckpt/never", st)
    call report("save_unmade", st)
    call tf_load_saved_model(tf2, trim(tf2_dir), st)
    call check(st)
    call tf_trainer_create(tr, tf2, "serving_default", "mse", tf_adam(), st, output="y")
    call report("tf2_export", st)
    call tf_trainer_create(tr, m, "serving_default", "mse", tf_adam(), st, output="y", variables=["w1"])
    call report("made", st)
    print '(a,*(1x,a))', "only", (trim(tr%variables(i)), i = 1, size(tr%variables))
    call tf_tensor_from(x(1), xs, st)
    call tf_tensor_from(t, ts, st)
    call tf_tensor_from(wrong, bad, st)
    call tr%step(["x"], x, st)
    call report("no_target", st)
    call tr%step(["x"], x, st, target=wrong)
    call report("target_shape", st)
    call tr%step(["q"], x, st, target=t)
    call report("unknown_input", st)
    call tr%step(["x"], x, st, target=t)
    call report("stepped", st)
    call tr%save_checkpoint("/nonexistent/dir/ckpt", st)
    call report("checkpoint_folder", st)
    ! A checkpoint taken, two steps, the checkpoint restored: the next step is the first one again.
    call tr%save_checkpoint("ckpt/roundtrip", st)
    call check(st)
    call tr%step(["x"], x, st, target=t, loss=losses(1))
    call tr%step(["x"], x, st, target=t, loss=losses(2))
    call tr%restore_checkpoint("ckpt/roundtrip", st)
    call report("restored", st)
    call tr%step(["x"], x, st, target=t, loss=losses(3))
    print '(a,3(1x,z16))', "roundtrip", losses
    call tf_trainer_create(tr, m, "evaluate", "loss", tf_sgd(0.1d0), st)
    call check(st)
    call tr%step(["x", "y"], [x(1), x(1)], st, target=t)
    call report("target_for_a_signature_loss", st)
    call tf_load_saved_model(m, dir // "_with_adam", st)     ! its graph has an Adam's variables already
    call check(st)
    call tf_trainer_create(tr, m, "serving_default", "mse", tf_adam(), st, output="y")
    call check(st)
    print '(a,*(1x,a))', "keys_beside_adam", (trim(tr%keys(i)), i = 1, size(tr%keys))
    print '(a)', "@@done"
  end subroutine

  subroutine report(name, st)
    character(*), intent(in) :: name
    type(tf_status), intent(in) :: st
    print '(a,i0,a)', "@@" // name // "|", st%code, "|" // st%message
  end subroutine

  subroutine check(st)
    type(tf_status), intent(in) :: st
    if (.not. st%ok()) then
      print '(a,i0,a)', "error ", st%code, ": " // st%message
      error stop 1
    end if
  end subroutine
end program trainer
""".replace("@STEPS@", str(STEPS)).replace("@BATCHES@", str(BATCHES))


def mlp(seed: int = 5):
    """x[?,2] -> 16 tanh -> 1 and its mse loss against y, in a new graph: (graph, x, y, pred, loss)."""
    rng = np.random.default_rng(seed)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 2], name="x")
        y = bridge.placeholder(bridge.float32, [None, 1], name="y")
        w1 = bridge.Variable(rng.normal(0, 0.7, (2, 16)).astype(np.float32), name="w1")
        b1 = bridge.Variable(rng.normal(0, 0.1, 16).astype(np.float32), name="b1")
        w2 = bridge.Variable(rng.normal(0, 0.3, (16, 1)).astype(np.float32), name="w2")
        b2 = bridge.Variable(np.zeros(1, np.float32), name="b2")
        hidden = ops.tanh(ops.bias_add(ops.mat_mul(x, w1.value()), b1.value()))
        pred = ops.bias_add(ops.mat_mul(hidden, w2.value()), b2.value(), name="pred")
        loss = ops.mean(ops.square(pred - y), [0, 1], name="loss")
    return g, x, y, pred, loss


def batches(seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, (BATCHES, 32, 2)).astype(np.float32)
    ys = (np.sin(2 * xs[..., :1]) * xs[..., 1:]).astype(np.float32)
    return xs, ys


def python_training(optimizer) -> dict:
    """The Python bridge's STEPS steps: the losses, and every variable's value after them."""
    g, x, y, _, loss = mlp()
    xs, ys = batches()
    with g.as_default():
        rate = bridge.placeholder(bridge.float32, [], name="rate")
        train = optimizer(rate).minimize(loss)
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        losses = [sess.run([train, loss], {x: xs[s % BATCHES], y: ys[s % BATCHES], rate: np.float32(RATES[s])})[1]
                  for s in range(STEPS)]
        values = {v.op.name: sess.run(v.value()) for v in bridge.global_variables(g)}
    return {"graph": g, "losses": np.array(losses, np.float32), "values": values}


def restored(graph, prefix: Path) -> dict:
    """Every variable of the graph Python trained, as bridge.train.Saver restores it from prefix."""
    with graph.as_default():
        saver = Saver()
    with bridge.Session(graph) as sess:
        saver.restore(sess, str(prefix))
        return {v.op.name: sess.run(v.value()) for v in bridge.global_variables(graph)}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The exported MLP, the data, and the trainer program compiled once."""
    folder = tmp_path_factory.mktemp("trainer")
    g, x, y, pred, loss = mlp()
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, folder / "export", {"serving_default": ({"x": x}, {"y": pred}),
                                                          "evaluate": ({"x": x, "y": y}, {"loss": loss})})
    g, x, y, pred, loss = mlp()
    with g.as_default():
        AdamOptimizer(0.1).minimize(loss)
    twice, _, _, _, twice_loss = mlp()
    with twice.as_default():
        AdamOptimizer(0.1).minimize(twice_loss)
        before = {v.op.name for v in bridge.global_variables(twice)}
        AdamOptimizer(0.1).minimize(twice_loss)      # what Python names a second Adam's variables
        second = sorted({v.op.name for v in bridge.global_variables(twice)} - before)
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, folder / "export_with_adam", {"serving_default": ({"x": x}, {"y": pred})})
    xs, ys = batches()
    # Fortran reads xs(2,32,B), ys(1,32,B): numpy's C order, dimensions reversed.
    (folder / "data.bin").write_bytes(xs.tobytes() + ys.tobytes() + RATES.astype(np.float64).tobytes())
    (folder / "ckpt").mkdir()
    return {"folder": folder, "exe": compile_program(PROGRAM, folder, "trainer"), "second_adam": second}


@pytest.fixture(scope="module")
def python_adam() -> dict:
    return python_training(AdamOptimizer)


def _fortran_training(built: dict, optimizer: str, loss: str) -> dict:
    printed = run_program(built["exe"], str(built["folder"] / "export"), "train", optimizer, loss, timeout=300)
    lines = dict(line.split(" ", 1) for line in printed.splitlines() if " " in line)
    return {"losses": np.frombuffer((built["folder"] / "losses.bin").read_bytes(), np.float64),
            "variables": lines["variables"].split(), "keys": lines["keys"].split(),
            "prefix": built["folder"] / "ckpt" / f"{optimizer}_{loss}"}


@pytest.mark.parametrize("loss", ["mse", "loss"])
def test_fortran_adam_equals_the_python_bridges_bit_for_bit(built, python_adam, loss, oracle):
    got = _fortran_training(built, "adam", loss)
    want = python_adam["losses"]
    assert np.isfinite(want).all() and want[-1] < 0.5 * want[0], want      # it learned
    # The losses are float32 in the graph; the trainer returns them as real(c_double).
    assert got["losses"].astype(np.float32).tobytes() == want.tobytes()
    assert np.array_equal(got["losses"], want.astype(np.float64))
    assert got["variables"] == ["b1", "b2", "w1", "w2"]
    assert sorted(got["keys"]) == sorted(python_adam["values"])
    assert sorted(got["keys"]) == ["b1", "b1/Adam", "b1/Adam_1", "b2", "b2/Adam", "b2/Adam_1", "beta1_power",
                                   "beta2_power", "w1", "w1/Adam", "w1/Adam_1", "w2", "w2/Adam", "w2/Adam_1"]
    values = restored(python_adam["graph"], got["prefix"])
    for name, value in python_adam["values"].items():
        assert values[name].dtype == value.dtype and values[name].tobytes() == value.tobytes(), name
    if loss == "mse":     # stock TensorFlow reads the checkpoint too
        files = {p.name: p.read_bytes() for p in got["prefix"].parent.glob(got["prefix"].name + ".*")}
        stock = oracle("checkpoints", {"mode": "read", "files": files, "prefix": got["prefix"].name})
        assert sorted(stock["values"]) == sorted(python_adam["values"])
        for name, value in python_adam["values"].items():
            assert np.asarray(stock["values"][name]).tobytes() == value.tobytes(), name


def test_fortran_sgd_equals_the_python_bridges_bit_for_bit(built):
    want = python_training(GradientDescentOptimizer)
    got = _fortran_training(built, "sgd", "mse")
    assert np.isfinite(want["losses"]).all() and want["losses"][-1] < want["losses"][0]
    assert got["losses"].astype(np.float32).tobytes() == want["losses"].tobytes()
    assert sorted(got["keys"]) == sorted(want["values"]) == ["b1", "b2", "w1", "w2"]
    values = restored(want["graph"], got["prefix"])
    for name, value in want["values"].items():
        assert values[name].tobytes() == value.tobytes(), name


def test_a_stock_tensorflow_tf1_model_trains_as_numpy_says(built, oracle_models, tmp_path):
    model = oracle_models["models"]["saved_model"]
    w = model["variables"]["W_read:0"].astype(np.float64)
    b = model["variables"]["bias_read:0"].astype(np.float64)
    rng = np.random.default_rng(3)
    xs, ts, probe = (rng.normal(size=s).astype(np.float32) for s in ((4, 3), (4, 2), (4, 3)))
    exe = built["exe"]
    (exe.parent / "stock.bin").write_bytes(xs.tobytes() + ts.tobytes() + probe.tobytes())
    printed = run_program(exe, model["path"], "stock")
    assert "variables W bias" in printed.splitlines()      # not factor: the loss does not read it
    losses = [float(line.split()[1]) for line in printed.splitlines() if line.startswith("loss")]
    want_losses = []
    x = xs.astype(np.float64)
    for _ in range(3):
        err = x @ w + b - ts
        want_losses.append(np.mean(err ** 2))
        grad = 2 * err / err.size
        w, b = w - 0.1 * x.T @ grad, b - 0.1 * grad.sum(0)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert losses[2] < losses[0]
    out = np.frombuffer((exe.parent / "stock_out.bin").read_bytes(), np.float32).reshape(4, 2)
    np.testing.assert_allclose(out, probe @ w + b, rtol=1e-5, atol=1e-6)


EXPECTED = {
    "not_loaded": (9, "tf_trainer_create('serving_default', 'mse'): the model is not loaded (or was closed)"),
    "no_signature": (5, "tf_trainer_create('serving', 'mse'): {export} has no signature 'serving'"),
    "no_output": (3, "tf_trainer_create('serving_default', 'mse'): the signature has no output 'z'"),
    "unknown_loss": (3, "tf_trainer_create('serving_default', 'huber'): a loss built from the output 'y' is "
                        "one of: 'mse' (mean squared error against the target each step feeds)"),
    "loss_not_scalar": (3, "tf_trainer_create('serving_default', 'y'): the output 'y' has the shape [?,1]; "
                           "a loss is a scalar"),
    "unknown_optimizer": (3, "tf_trainer_create('serving_default', 'mse'): unknown optimizer 'lbfgs'; "
                             "tf_sgd(...) and tf_adam(...) make the known ones"),
    "unknown_variable": (3, "tf_trainer_create('serving_default', 'mse'): the loss reads no variable 'w9'; "
                            "it reads: 'b1' 'b2' 'w1' 'w2'"),
    "step_unmade": (9, "step: the trainer is not made (tf_trainer_create) or deleted"),
    "save_unmade": (9, "save_checkpoint('ckpt/never'): the trainer is not made (tf_trainer_create) or deleted"),
    "tf2_export": (12, "tf_trainer_create('serving_default', 'mse'): {tf2} reads its variables inside function "
                       "calls (a TF2 export: tf.saved_model.save, Keras); tf_trainer trains graphs that read them "
                       "directly (TF1 exports, bridge.saved_model.save), as TensorFlow's C++ gradients cannot go "
                       "into a function call"),
    "made": (0, ""),
    "no_target": (3, "step('serving_default'): the loss 'mse' of 'y' needs a target (target=)"),
    "target_shape": (3, "step('serving_default'): 'target' has the shape [?,1] (TensorFlow's order, ? any "
                        "size); it cannot be fed [1,3]; a Fortran array has its dimensions reversed in TensorFlow "
                        "unless transpose=.true."),
    "unknown_input": (3, "step('serving_default'): the signature has no input 'q'; its inputs are 'x'"),
    "stepped": (0, ""),
    "restored": (0, ""),
    "target_for_a_signature_loss": (3, "step('evaluate'): the loss 'loss' is an output of the signature: it "
                                       "takes no target"),
}


def test_trainer_errors_are_statuses_naming_what_is_wrong(built, oracle):
    tf2 = oracle("make_tf2_models")["models"]["module"]["path"]
    out = run_program(built["exe"], str(built["folder"] / "export"), "errors", tf2)
    cases = {}
    for chunk in out.split("@@")[1:]:
        name, _, rest = chunk.partition("|")
        code, _, message = rest.partition("|")
        cases[name.strip()] = (int(code) if code else -1, message.splitlines()[0].strip() if message else "")
    assert "done" in cases, out
    for name, (code, message) in EXPECTED.items():
        want = message.format(export=built["folder"] / "export", tf2=tf2)
        assert cases[name] == (code, want), name
    code, message = cases["checkpoint_folder"]
    assert code == 5 and message.startswith("save_checkpoint('/nonexistent/dir/ckpt'): run on "), message
    assert "only w1" in out.splitlines()
    first, second, again = next(line for line in out.splitlines() if line.startswith("roundtrip")).split()[1:]
    assert again == first != second          # the bits of the losses: restored weights and Adam state
    # Its keys do not collide with the Adam the graph holds: TF's names for a second Adam.
    keys = next(line for line in out.splitlines() if line.startswith("keys_beside_adam")).split()[1:]
    assert sorted(set(keys) - {"w1", "b1", "w2", "b2"}) == built["second_adam"]


def test_the_readme_training_example_runs(built, python_adam, tmp_path):
    """docs/guides/fortran.md, "Training from Fortran": its program, as written, trains the export and
    saves a checkpoint bridge.train.Saver restores into the graph Python trained."""
    exe = compile_program(block("docs/guides/fortran.md", "fortran", "program online_training"), tmp_path,
                          "online_training")
    printed = run_program(exe, str(built["folder"] / "export"), timeout=300)
    loss = float(printed.split()[-1])
    assert 0 <= loss < 0.01, printed
    values = restored(python_adam["graph"], tmp_path / "trained")
    assert set(values) == set(python_adam["values"])
    power = np.float32(0.9)
    for _ in range(300):                     # 0.9 to start with, times 0.9 after each step, in float32
        power = np.float32(power * np.float32(0.9))
    assert values["beta1_power"] == power
