"""Every error path of the tf_bridge Fortran module returns a status with TF's
code and a message naming what failed (the model, signature, key, dtype or
shape), and the program goes on: no crash, no stop, also with every gfortran
run-time check on (the module and the program built with -fcheck=all: an
array comparison of two ranks, which `.or.` does not guard in Fortran,
stopped the program there)."""
from __future__ import annotations

import pytest

from support.fortran import compile_program, run_program

ERRORS = """
program errors
  use tf_bridge
  use, intrinsic :: iso_c_binding
  implicit none
  type(tf_model) :: m, g, closed
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1), empty(1)
  real(c_float), target :: xs(3,4), square(4,4), row(3), cube(3,4,2), bad_image(8,8,2)
  real(c_double), target :: xd(3,4)
  real(c_float) :: ys(2,4), wrong_ys(4,2)
  real(c_double) :: yd(2,4)
  real(c_float), pointer :: p3(:,:,:)
  character(len=1024) :: saved, graph_def, garbage
  integer :: u
  call get_command_argument(1, saved)
  call get_command_argument(2, graph_def)
  call get_command_argument(3, garbage)
  xs = 1; xd = 1; square = 1; row = 1; cube = 1; bad_image = 1

  call tf_load_saved_model(m, "/nonexistent/model", st)
  call report("missing_model", st)
  call tf_load_graph_def(g, "/nonexistent/graph.pb", st)
  call report("missing_graph_def", st)
  open(newunit=u, file=trim(garbage), access="stream", form="unformatted", status="replace")
  write(u) "this is not a GraphDef"
  close(u)
  call tf_load_graph_def(g, trim(garbage), st)
  call report("bad_graph_def", st)
  call tf_load_library("/nonexistent/libop.so", st)
  call report("missing_library", st)

  call tf_load_saved_model(m, trim(saved), st)
  call report("loaded", st)
  call tf_tensor_from(x(1), xs, st)
  call m%run("predikt", ["x"], x, ["y"], y, st)
  call report("wrong_signature", st)
  call m%run("predict", ["q"], x, ["y"], y, st)
  call report("unknown_input", st)
  call m%run("predict", [character(len=1) ::], empty(1:0), ["y"], y, st)
  call report("missing_input", st)
  call m%run("predict", ["x"], x, ["z"], y, st)
  call report("unknown_output", st)
  call m%run("predict", ["x"], empty, ["y"], y, st)
  call report("empty_input", st)
  call tf_tensor_from(x(1), xd, st)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("wrong_dtype", st)
  call tf_tensor_from(x(1), row, st)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("wrong_rank", st)
  call tf_tensor_from(x(1), cube, st)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("wrong_rank_3", st)
  call tf_tensor_from(x(1), row, st)
  call m%run_tensors(["x:0"], x, ["y:0"], y, st)
  call report("tensor_wrong_rank", st)
  call tf_tensor_from(x(1), cube, st)
  call m%run_tensors(["x:0"], x, ["y:0"], y, st)
  call report("tensor_wrong_rank_3", st)
  call tf_tensor_from(x(1), square, st)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("wrong_shape", st)
  call tf_tensor_from(x(1), xs, st, transpose=.true.)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("transposed_shape", st)
  call tf_tensor_from(x(1), xs, st)
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("good_run", st)
  call tf_to_array(y(1), yd, st)
  call report("to_array_dtype", st)
  call tf_to_array(y(1), wrong_ys, st)
  call report("to_array_shape", st)
  call tf_view(y(1), p3, st)
  call report("view_rank", st)
  call tf_to_array(y(1), ys, st)
  call report("to_array_good", st)
  call tf_to_array(empty(1), ys, st)
  call report("to_array_empty", st)
  call m%run_tensors(["nope:0"], x, ["y:0"], y, st)
  call report("unknown_tensor", st)
  call m%run_tensors(["x:0"], x, ["y:7"], y, st)
  call report("unknown_output_index", st)
  call m%run_tensors(["x:0"], x, ["y:0"], y, st, targets=["no_such_op"])
  call report("unknown_target", st)
  call m%save_checkpoint("/nonexistent/dir/ckpt", st)
  call report("checkpoint_folder", st)

  call tf_load_graph_def(g, trim(graph_def), st)
  call report("graph_loaded", st)
  call g%save_checkpoint("ckpt", st)
  call report("no_saver", st)
  call g%run("serving_default", ["x"], x, ["y"], y, st)
  call report("graph_def_signature", st)
  call tf_tensor_from(x(1), bad_image, st)
  call g%run_tensors(["image:0"], x, ["logits:0"], y, st)
  call report("graph_shape_check", st)
  call closed%run_tensors(["x:0"], x, ["y:0"], y, st)
  call report("not_loaded", st)
  call m%close()
  call m%run("predict", ["x"], x, ["y"], y, st)
  call report("closed", st)
  print '(a)', "@@done"
contains
  subroutine report(name, st)
    character(*), intent(in) :: name
    type(tf_status), intent(in) :: st
    print '(a,i0,a)', "@@" // name // "|", st%code, "|" // st%message
  end subroutine
end program errors
"""

# case -> (TF code, words its message must hold)
EXPECTED = {
    "missing_model": (5, ["tf_load_saved_model('/nonexistent/model')", "Could not find SavedModel"]),
    "missing_graph_def": (5, ["tf_load_graph_def('/nonexistent/graph.pb')"]),
    "bad_graph_def": (3, ["tf_load_graph_def(", "garbage.pb"]),
    "missing_library": (5, ["tf_load_library('/nonexistent/libop.so')"]),
    "loaded": (0, []),
    "wrong_signature": (5, ["no signature 'predikt'", "'predict'", "'double'"]),
    "unknown_input": (3, ["run('predict')", "no input 'q'", "its inputs are 'x'"]),
    "missing_input": (3, ["the input 'x' is missing"]),
    "unknown_output": (3, ["no output 'z'", "its outputs are 'y'"]),
    "empty_input": (9, ["the input 'x' is an empty tensor"]),
    "wrong_dtype": (3, ["the input 'x' must be float32", "not float64"]),
    "wrong_rank": (3, ["must have the shape [?,3]", "not [3]", "reversed"]),
    "wrong_rank_3": (3, ["must have the shape [?,3]", "not [2,4,3]"]),
    "tensor_wrong_rank": (3, ["'x:0' has the shape [?,3]", "cannot be fed [3]"]),
    "tensor_wrong_rank_3": (3, ["'x:0' has the shape [?,3]", "cannot be fed [2,4,3]"]),
    "wrong_shape": (3, ["must have the shape [?,3]", "not [4,4]"]),
    "transposed_shape": (3, ["must have the shape [?,3]", "not [3,4]"]),
    "good_run": (0, []),
    "to_array_dtype": (3, ["tf_to_array", "float32", "float64"]),
    "to_array_shape": (3, ["tf_to_array", "[4,2]", "means [2,4]"]),
    "view_rank": (3, ["tf_view", "rank 2", "pointer has rank 3"]),
    "to_array_good": (0, []),
    "to_array_empty": (9, ["tf_to_array: the tensor is empty"]),
    "unknown_tensor": (5, ["no operation 'nope'"]),
    "unknown_output_index": (5, ["operation 'y' has no output y:7"]),
    "unknown_target": (5, ["no operation 'no_such_op' (a target)"]),
    # TensorFlow's own error, from TF_SessionRun (the SaveV2 kernel)
    "checkpoint_folder": (5, ["save_checkpoint('/nonexistent/dir/ckpt')", "No such file or directory"]),
    "graph_loaded": (0, []),
    "no_saver": (9, ["save_checkpoint('ckpt')", "has no Saver"]),
    "graph_def_signature": (5, ["no signature 'serving_default'"]),
    # a wrong rank fed to Conv2D aborts TensorFlow: tf_bridge checks feeds against the graph first
    "graph_shape_check": (3, ["'image:0' has the shape [?,8,8,1]", "cannot be fed [2,8,8]"]),
    "not_loaded": (9, ["the model is not loaded"]),
    "closed": (9, ["the model is not loaded (or was closed)"]),
}


@pytest.fixture(scope="module")
def reports(oracle_models, tmp_path_factory) -> dict[str, tuple[int, str]]:
    folder = tmp_path_factory.mktemp("errors")
    exe = compile_program(ERRORS, folder, "errors", checked=True)
    out = run_program(exe, oracle_models["models"]["saved_model"]["path"],
                      oracle_models["models"]["conv"]["path"], str(folder / "garbage.pb"))
    cases = {}
    for chunk in out.split("@@")[1:]:
        name, _, rest = chunk.partition("|")
        code, _, message = rest.partition("|")
        cases[name.strip()] = (int(code) if code else -1, message.strip())
    assert "done" in cases, out
    return cases


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fortran_error_path_returns_a_status_naming_it(reports, case):
    code, words = EXPECTED[case]
    got_code, message = reports[case]
    assert got_code == code, f"{case}: code {got_code}, message {message!r}"
    for word in words:
        assert word in message, f"{case}: {word!r} not in {message!r}"
    if code == 0:
        assert message == ""


NO_TF = """
program no_tf
  use tf_bridge
  implicit none
  type(tf_model) :: m
  type(tf_status) :: st
  call tf_load_saved_model(m, "anything", st)
  print '(a,i0,a)', "@@", st%code, "|" // st%message
  call m%close()
end program no_tf
"""


def test_fortran_without_tensorflows_library_is_a_status(tmp_path):
    exe = compile_program(NO_TF, tmp_path, "no_tf")
    out = run_program(exe, env={"TFBRIDGE_LIBTENSORFLOW": str(tmp_path / "nowhere")})
    code, _, message = out.split("@@", 1)[1].partition("|")
    assert int(code) == 9, out
    assert "cannot load TensorFlow's libtensorflow_framework.so.2 from " + str(tmp_path / "nowhere") in message
    assert "TFBRIDGE_LIBTENSORFLOW" in message
