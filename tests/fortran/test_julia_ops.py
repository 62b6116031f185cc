"""A model containing a Julia op runs from Fortran: tf_load_julia_op loads the
op's library (TF_LoadLibrary) and includes its Julia file, Julia starts in
the Fortran process (TensorFlow's libraries are opened RTLD_LOCAL, so the two
LLVMs stay apart), and the outputs equal the Python bridge's bit for bit.
Without the Julia file included, the run fails with a status naming the
missing Julia function, and a Julia file that throws gives a status quoting
Julia's error: no crash either way."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import customop, ops
from support.fortran import compile_program, run_program

PROGRAM = """
program julia_model
  use tf_bridge
  use, intrinsic :: iso_c_binding
  implicit none
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1)
  real(c_double), target :: xs(5)
  real(c_double) :: ys(5)
  character(len=1024) :: library, julia_file, dir, mode
  integer :: u
  call get_command_argument(1, library)
  call get_command_argument(2, julia_file)
  call get_command_argument(3, dir)
  call get_command_argument(4, mode)
  if (mode == "no_julia_file") then
    call tf_load_library(trim(library), st)
  else
    call tf_load_julia_op(trim(library), trim(julia_file), st)
  end if
  print '(a,i0,a)', "@@load|", st%code, "|" // st%message
  call tf_load_saved_model(m, trim(dir), st)
  if (.not. st%ok()) then
    print '(a,i0,a)', "@@model|", st%code, "|" // st%message
    stop
  end if
  open(newunit=u, file="x.bin", access="stream", form="unformatted", status="old")
  read(u) xs
  close(u)
  call tf_tensor_from(x(1), xs, st)
  call m%run("serving_default", ["x"], x, ["y"], y, st)
  print '(a,i0,a)', "@@run|", st%code, "|" // st%message
  if (st%ok()) then
    call tf_to_array(y(1), ys, st)
    open(newunit=u, file="y.bin", access="stream", form="unformatted", status="replace")
    write(u) ys
    close(u)
  end if
  call m%close()
end program julia_model
"""


def _reports(out: str) -> dict[str, tuple[int, str]]:
    cases = {}
    for chunk in out.split("@@")[1:]:
        name, _, rest = chunk.partition("|")
        code, _, message = rest.partition("|")
        cases[name] = (int(code), message.strip())
    return cases


@pytest.fixture(scope="module")
def julia_model(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("julia_op")
    # An op name of its own: other tests of the same process load ops named Twice.
    customop.init("FortranTwice", folder / "fortran_twice")
    module = customop.load(folder / "fortran_twice")
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = ops.add(ops.tanh(module.fortran_twice(x)), ops.sin(x), name="y")
    xs = np.random.default_rng(4).normal(0, 1, 5)
    with bridge.Session(g) as sess:
        want = sess.run(y, {x: xs})
        bridge.saved_model.save(sess, folder / "export", ({"x": x}, {"y": y}))
    exe = compile_program(PROGRAM, folder, "julia_model")
    (folder / "x.bin").write_bytes(xs.tobytes())
    return {"folder": folder, "exe": exe, "library": str(module.LIBRARY_PATH),
            "julia_file": str(folder / "fortran_twice" / "fortran_twice.jl"), "export": str(folder / "export"), "want": want}


def _run(model: dict, julia_file: str, mode: str = "") -> dict[str, tuple[int, str]]:
    out = run_program(model["exe"], model["library"], julia_file, model["export"], mode, timeout=300)
    return _reports(out)


def test_fortran_runs_a_model_with_a_julia_op_bit_for_bit(julia_model):
    (julia_model["folder"] / "y.bin").unlink(missing_ok=True)
    reports = _run(julia_model, julia_model["julia_file"])
    assert reports["load"] == (0, "") and reports["run"] == (0, ""), reports
    got = np.frombuffer((julia_model["folder"] / "y.bin").read_bytes(), np.float64)
    assert got.tobytes() == julia_model["want"].tobytes()


def test_fortran_julia_op_without_its_julia_file_is_a_status(julia_model):
    reports = _run(julia_model, julia_model["julia_file"], "no_julia_file")
    code, message = reports["run"]
    assert code != 0 and "twice" in message and "not defined" in message, reports


def test_fortran_julia_file_that_throws_is_a_status(julia_model, tmp_path):
    bad = tmp_path / "bad.jl"
    bad.write_text('error("this op file is broken on purpose")\n')
    reports = _run(julia_model, str(bad))
    code, message = reports["load"]
    assert code != 0 and "tf_load_julia_op(" in message and "broken on purpose" in message, reports
