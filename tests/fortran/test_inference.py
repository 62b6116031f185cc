"""The tf_bridge Fortran module runs models without Python: an MLP exported by
the bridge, stock TensorFlow's TF1 SavedModel, TF2 SavedModel and TF2 CNN
SavedModel (NHWC images with transpose=.true.), and stock TF's CNN GraphDef,
each output equal bit for bit to what stock TensorFlow computes from the same
files (through the oracle: the same kernels of the same library, so nothing
to round) and to what the Python bridge computes; docs/guides/fortran.md's Fortran
example runs as written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import ops
from support.fortran import compile_program, read_array, run_program, write_array
from support.docs import block

CHECK = """
contains
  subroutine check(st)
    type(tf_status), intent(in) :: st
    if (.not. st%ok()) then
      print '(a,i0,a)', "error ", st%code, ": " // st%message
      error stop 1
    end if
  end subroutine
"""


def _float32_bits(values) -> bytes:
    """The bytes of stock TF's float32 values (a float64 answer would be a different computation)."""
    values = np.asarray(values)
    assert values.dtype == np.float32, values.dtype
    return np.ascontiguousarray(values).tobytes()


def _program(name: str, body: str) -> str:
    return (f"program {name}\n  use tf_bridge\n  use, intrinsic :: iso_c_binding\n  implicit none\n"
            + body + CHECK + f"end program {name}\n")


@pytest.fixture(scope="module")
def mlp_export(tmp_path_factory) -> dict:
    rng = np.random.default_rng(29)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 4], name="x")
        w1 = bridge.Variable(rng.normal(0, 0.5, (4, 8)).astype(np.float32), name="w1")
        b1 = bridge.Variable(rng.normal(0, 0.1, 8).astype(np.float32), name="b1")
        w2 = bridge.Variable(rng.normal(0, 0.5, (8, 3)).astype(np.float32), name="w2")
        b2 = bridge.Variable(rng.normal(0, 0.1, 3).astype(np.float32), name="b2")
        step = bridge.Variable(np.int64(1234), name="global_step", trainable=False)
        hidden = ops.tanh(ops.bias_add(ops.mat_mul(x, w1.value()), b1.value()))
        logits = ops.bias_add(ops.mat_mul(hidden, w2.value()), b2.value(), name="logits")
        probs = ops.softmax(logits, name="probs")
        label = ops.arg_max(logits, 1, name="label")
    export_dir = tmp_path_factory.mktemp("mlp") / "export"
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, export_dir, {
            "serving_default": ({"x": x}, {"probs": probs, "logits": logits}),
            "classify": ({"x": x}, {"label": label, "step": step.value()})})
    return {"dir": export_dir, "x": rng.normal(0, 1, (5, 4)).astype(np.float32)}


MLP = _program("mlp", """
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(2), c(2)
  real(c_float), target :: xs(4,5)
  real(c_float) :: probs(3,5), logits(3,5)
  integer(c_int64_t) :: label(5), step
  character(len=1024) :: dir
  integer :: i, u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  call check(st)
  do i = 1, size(m%signatures)
    print '(a)', "signature " // trim(m%signatures(i)%name)
  end do
  open(newunit=u, file="x.bin", access="stream", form="unformatted", status="old")
  read(u) xs
  close(u)
  call tf_tensor_from(x(1), xs, st)          ! zero-copy: TF sees [5,4]
  call check(st)
  call m%run("serving_default", ["x"], x, ["probs ", "logits"], y, st)
  call check(st)
  call tf_to_array(y(1), probs, st)
  call check(st)
  call tf_to_array(y(2), logits, st)
  call check(st)
  call m%run("classify", ["x"], x, ["label", "step "], c, st)
  call check(st)
  call tf_to_array(c(1), label, st)
  call check(st)
  call tf_to_array(c(2), step, st)
  call check(st)
  open(newunit=u, file="out.bin", access="stream", form="unformatted", status="replace")
  write(u) probs, logits, label, step
  close(u)
  call x(1)%delete()
  do i = 1, 2
    call y(i)%delete()
    call c(i)%delete()
  end do
  call m%close()
""")


def test_fortran_runs_the_bridge_mlp_bit_for_bit(mlp_export, tmp_path, oracle):
    exe = compile_program(MLP, tmp_path, "mlp")
    write_array(tmp_path / "x.bin", mlp_export["x"])
    printed = run_program(exe, str(mlp_export["dir"]))
    assert sorted(printed.split()) == ["classify", "serving_default", "signature", "signature"]
    raw = (tmp_path / "out.bin").read_bytes()
    probs = np.frombuffer(raw[:60], np.float32).reshape(5, 3)
    logits = np.frombuffer(raw[60:120], np.float32).reshape(5, 3)
    label = np.frombuffer(raw[120:160], np.int64)
    step = np.frombuffer(raw[160:168], np.int64)[0]
    with bridge.load_saved_model(mlp_export["dir"]) as model:
        want = model.signatures["serving_default"](x=mlp_export["x"])
        classified = model.signatures["classify"](x=mlp_export["x"])
    assert probs.tobytes() == want["probs"].tobytes()
    assert logits.tobytes() == want["logits"].tobytes()
    np.testing.assert_array_equal(label, classified["label"], strict=True)
    assert step == classified["step"] == 1234
    # Stock TF serving the same folder (tf.compat.v1's loader, in a Session) gives the same bits.
    folder = mlp_export["dir"]
    served = oracle("serve_saved_model", {
        "files": {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()},
        "tags": ["serve"], "feeds": {"serving_default": {"x": mlp_export["x"]}, "classify": {"x": mlp_export["x"]}}})
    assert served["tf1_error"] is None, served["tf1_error"]
    tf1 = served["tf1"]
    assert probs.tobytes() == tf1["serving_default"]["probs"].tobytes()
    assert logits.tobytes() == tf1["serving_default"]["logits"].tobytes()
    np.testing.assert_array_equal(label, tf1["classify"]["label"], strict=True)
    assert step == tf1["classify"]["step"]
    assert np.isfinite(probs).all() and abs(probs.sum() - 5) < 1e-5


STOCK_TF1 = _program("stock1", """
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1)
  real(c_float), target :: xs(3,4), a(3)
  real(c_float) :: ys(2,4), b(3)
  character(len=1024) :: dir
  integer :: u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st, tags=["serve"])
  call check(st)
  open(newunit=u, file="in.bin", access="stream", form="unformatted", status="old")
  read(u) xs, a
  close(u)
  call tf_tensor_from(x(1), xs, st)
  call check(st)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call check(st)
  call tf_to_array(y(1), ys, st)
  call check(st)
  call tf_tensor_from(x(1), a, st, copy=.true.)
  call check(st)
  call m%run("double", ["a"], x, ["b"], y, st)
  call check(st)
  call tf_to_array(y(1), b, st)
  call check(st)
  open(newunit=u, file="out.bin", access="stream", form="unformatted", status="replace")
  write(u) ys, b
  close(u)
  call m%close()
""")


def test_fortran_runs_stock_tf1_saved_model_bit_for_bit(oracle_models, tmp_path):
    model = oracle_models["models"]["saved_model"]
    sigs = model["signatures"]
    x = sigs["predict"]["feeds"]["x:0"]
    a = sigs["double"]["feeds"]["a:0"]
    exe = compile_program(STOCK_TF1, tmp_path, "stock1")
    (tmp_path / "in.bin").write_bytes(x.tobytes() + a.tobytes())
    run_program(exe, model["path"])
    raw = (tmp_path / "out.bin").read_bytes()
    y = np.frombuffer(raw[:32], np.float32).reshape(4, 2)
    b = np.frombuffer(raw[32:], np.float32)
    with bridge.load_saved_model(model["path"]) as loaded:
        want_y = loaded.signatures["predict"](x=x)["y"]
        want_b = loaded.signatures["double"](a=a)["b"]
    assert y.tobytes() == want_y.tobytes()
    assert b.tobytes() == want_b.tobytes()
    assert y.tobytes() == _float32_bits(sigs["predict"]["expected"]["y:0"])   # stock TF's
    assert b.tobytes() == _float32_bits(sigs["double"]["expected"]["b:0"])


STOCK_TF2 = _program("stock2", """
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(2)
  real(c_float), target :: xs(3,4)
  real(c_float) :: ys(2,4)
  integer(c_int64_t), target :: n(5)
  integer(c_int64_t) :: label(4), total, cumsum(5)
  character(len=1024) :: dir
  integer :: u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  call check(st)
  open(newunit=u, file="in.bin", access="stream", form="unformatted", status="old")
  read(u) xs, n
  close(u)
  call tf_tensor_from(x(1), xs, st)
  call check(st)
  call m%run("serving_default", ["x"], x, ["y    ", "label"], y, st)
  call check(st)
  call tf_to_array(y(1), ys, st)
  call check(st)
  call tf_to_array(y(2), label, st)
  call check(st)
  call tf_tensor_from(x(1), n, st)
  call check(st)
  call m%run("ints", ["n"], x, ["total ", "cumsum"], y, st)
  call check(st)
  call tf_to_array(y(1), total, st)
  call check(st)
  call tf_to_array(y(2), cumsum, st)
  call check(st)
  open(newunit=u, file="out.bin", access="stream", form="unformatted", status="replace")
  write(u) ys, label, total, cumsum
  close(u)
  call m%close()
""")


@pytest.fixture(scope="module")
def tf2_models(oracle):
    return oracle("make_tf2_models")


def test_fortran_runs_stock_tf2_saved_model_bit_for_bit(tf2_models, tmp_path):
    model = tf2_models["models"]["module"]
    x = model["signatures"]["serving_default"]["feeds"]["x"].astype(np.float32)
    n = np.array([3, -1, 2**40, 7, 0], dtype=np.int64)
    exe = compile_program(STOCK_TF2, tmp_path, "stock2")
    (tmp_path / "in.bin").write_bytes(x.tobytes() + n.tobytes())
    run_program(exe, model["path"])
    raw = (tmp_path / "out.bin").read_bytes()
    y = np.frombuffer(raw[:32], np.float32).reshape(4, 2)
    label = np.frombuffer(raw[32:64], np.int64)
    total = np.frombuffer(raw[64:72], np.int64)[0]
    cumsum = np.frombuffer(raw[72:112], np.int64)
    with bridge.load_saved_model(model["path"]) as loaded:
        want = loaded.signatures["serving_default"](x=x)
        ints = loaded.signatures["ints"](n=n)
    assert y.tobytes() == want["y"].tobytes()
    np.testing.assert_array_equal(label, want["label"], strict=True)
    # ints(n) = {"total": sum(n) + count, a variable; "cumsum"}: count from stock TF's answer for its own n.
    stock_ints = model["signatures"]["ints"]
    count = stock_ints["expected"]["total"] - stock_ints["feeds"]["n"].sum()
    assert total == ints["total"] == n.sum() + count
    np.testing.assert_array_equal(cumsum, np.cumsum(n), strict=True)
    stock = model["signatures"]["serving_default"]["expected"]   # stock TF's, for the same x
    assert y.tobytes() == _float32_bits(stock["y"])
    np.testing.assert_array_equal(label, stock["label"], strict=True)


CNN = _program("cnn", """
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1)
  real(c_float), target :: image(2,8,8,1)
  real(c_float) :: logits(2,3)
  character(len=1024) :: path
  integer :: u
  call get_command_argument(1, path)
  call tf_load_graph_def(m, trim(path), st)
  call check(st)
  open(newunit=u, file="image.bin", access="stream", form="unformatted", status="old")
  read(u) image
  close(u)
  call tf_tensor_from(x(1), image, st, transpose=.true.)   ! TF's [2,8,8,1], same indices
  call check(st)
  call m%run_tensors(["image:0"], x, ["logits:0"], y, st)
  call check(st)
  call tf_to_array(y(1), logits, st, transpose=.true.)
  call check(st)
  open(newunit=u, file="out.bin", access="stream", form="unformatted", status="replace")
  write(u) logits
  close(u)
  call m%close()
""")


def test_fortran_runs_stock_cnn_graph_def_transposed_bit_for_bit(oracle_models, tmp_path):
    model = oracle_models["models"]["conv"]
    image = model["feeds"]["image:0"]
    exe = compile_program(CNN, tmp_path, "cnn")
    write_array(tmp_path / "image.bin", image, order="F")   # a Fortran array of the same shape
    run_program(exe, model["path"])
    logits = read_array(tmp_path / "out.bin", np.float32, (2, 3), order="F")
    g = bridge.Graph()
    g.import_graph_def(Path(model["path"]).read_bytes())
    with bridge.Session(g) as sess:
        want = sess.run(g.get_tensor_by_name("logits:0"), {g.get_tensor_by_name("image:0"): image})
    assert logits.tobytes() == np.ascontiguousarray(want).tobytes()
    assert logits.tobytes() == _float32_bits(model["expected"]["logits:0"])   # stock TF's


def test_readme_fortran_example_runs_as_written(oracle_models, tmp_path):
    model = oracle_models["models"]["saved_model"]
    exe = compile_program(block("docs/guides/fortran.md", "fortran", "program predict"), tmp_path, "predict")
    printed = run_program(exe, model["path"])
    got = np.array([float(v) for v in printed.split()], np.float32).reshape(4, 2)
    with bridge.load_saved_model(model["path"]) as loaded:
        want = loaded.signatures["predict"](x=np.ones((4, 3), np.float32))["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


CNN_TF2 = _program("cnn2", """
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(2)
  real(c_float), target :: image(3,8,8,2)
  real(c_float) :: logits(3,3)
  integer(c_int64_t) :: label(3)
  character(len=1024) :: dir
  integer :: u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  call check(st)
  open(newunit=u, file="image.bin", access="stream", form="unformatted", status="old")
  read(u) image
  close(u)
  call tf_tensor_from(x(1), image, st, transpose=.true.)   ! NHWC, the Fortran indices
  call check(st)
  call m%run("serving_default", ["image"], x, ["logits", "label "], y, st)
  call check(st)
  call tf_to_array(y(1), logits, st, transpose=.true.)
  call check(st)
  call tf_to_array(y(2), label, st)
  call check(st)
  open(newunit=u, file="out.bin", access="stream", form="unformatted", status="replace")
  write(u) logits, label
  close(u)
  call m%close()
""")


def test_fortran_runs_stock_tf2_cnn_saved_model_bit_for_bit(oracle, tmp_path):
    cnn = oracle("fortran_cnn")
    exe = compile_program(CNN_TF2, tmp_path, "cnn2")
    write_array(tmp_path / "image.bin", cnn["image"], order="F")
    run_program(exe, cnn["path"])
    raw = (tmp_path / "out.bin").read_bytes()
    logits = np.frombuffer(raw[:36], np.float32).reshape((3, 3), order="F")
    label = np.frombuffer(raw[36:], np.int64)
    with bridge.load_saved_model(cnn["path"]) as loaded:
        want = loaded.signatures["serving_default"](image=cnn["image"])
    assert logits.tobytes(order="C") == np.ascontiguousarray(want["logits"]).tobytes()
    np.testing.assert_array_equal(label, want["label"], strict=True)
    assert logits.tobytes(order="C") == _float32_bits(cnn["logits"])   # stock TF's
    np.testing.assert_array_equal(label, cnn["label"], strict=True)
