"""tf_tensor, tf_model and tf_trainer clean up after themselves: a program
that never calls delete or close leaks nothing.  1,000 steps of a loop that
makes a zero-copy input, runs a model into an output and allocates a 1 MiB
tensor, all left to go out of scope, end with no TF_Tensor alive, every
borrowed Fortran array given back by TensorFlow (its deallocator called) and
the process's resident memory where it was (1 GiB more without the final
procedures); 20 models and trainers loaded and dropped likewise leave none.
Assignment shares a handle and counts it (reference counting): deleting the
original leaves the copy usable, self-assignment and array assignment keep
the count right, and a model closed while a copy or a trainer still holds it
stays loaded for them."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import ops
from support.fortran import compile_program, run_program

LOOPS = 1000

PROGRAM = """
program handles
  use tf_bridge
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  implicit none
  type(tf_model) :: m, copy
  type(tf_status) :: st
  character(len=1024) :: dir
  integer :: i
  integer(int64) :: rss0
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  call check(st, "load")
  call one_step(m)                        ! TensorFlow's allocators warm up
  rss0 = rss_kib()
  do i = 1, @LOOPS@
    call one_step(m)
  end do
  print '(a,i0)', "rss_growth_kib ", rss_kib() - rss0
  call counts("after_steps")
  do i = 1, 20
    call load_and_drop(trim(dir))
  end do
  call counts("after_loads")
  call sharing()
  call counts("after_sharing")
  copy = m
  call m%close()
  call still_runs(copy, "copy_after_close")
  call counts("copy_holds")
  call trainer_holds(copy, trim(dir))
  call copy%close()
  call counts("all_closed")
contains
  ! Makes and runs tensors, deletes none of them.
  subroutine one_step(m)
    type(tf_model), intent(in) :: m
    type(tf_tensor) :: x(1), y(1), big
    real(c_float), target :: xs(3, 4)
    real(c_float) :: ys(2, 4)
    real(c_double), pointer :: p(:,:)
    xs = 1
    call tf_tensor_from(x(1), xs, st)                 ! zero-copy: TensorFlow borrows xs
    call check(st, "from")
    call m%run("serving_default", ["x"], x, ["y"], y, st)
    call check(st, "run")
    call tf_to_array(y(1), ys, st)
    call tf_allocate(big, p, [512, 256], st)          ! 1 MiB
    call check(st, "allocate")
    p = 1
    call tf_tensor_from(x(1), xs, st)                 ! made again into the same variable
  end subroutine

  subroutine load_and_drop(dir)
    character(*), intent(in) :: dir
    type(tf_model) :: m
    type(tf_trainer) :: tr
    call tf_load_saved_model(m, dir, st)
    call check(st, "load again")
    call tf_trainer_create(tr, m, "serving_default", "mse", tf_adam(), st, output="y")
    call check(st, "trainer")
  end subroutine

  subroutine sharing()
    type(tf_tensor) :: a, b, many(3)
    real(c_float), target :: v(5)
    real(c_float) :: back(5)
    v = [1, 2, 3, 4, 5]
    call tf_tensor_from(a, v, st, copy=.true.)
    b = a
    call counts("shared")
    call a%delete()
    call tf_to_array(b, back, st)
    call check(st, "read the copy")
    print '(a,l1)', "copy_survives_delete ", all(back == v)
    b = b
    many = b
    call b%delete()
    call many(1)%delete()
    call tf_to_array(many(3), back, st)
    call check(st, "read an element")
    print '(a,l1)', "element_survives ", all(back == v)
    call counts("elements")
  end subroutine

  subroutine still_runs(m, what)
    type(tf_model), intent(in) :: m
    character(*), intent(in) :: what
    type(tf_tensor) :: x(1), y(1)
    real(c_float), target :: xs(3, 4)
    xs = 1
    call tf_tensor_from(x(1), xs, st)
    call m%run("serving_default", ["x"], x, ["y"], y, st)
    print '(a,1x,l1)', what, st%ok()
  end subroutine

  ! A trainer keeps its model: closing every tf_model leaves it loaded for the trainer.
  subroutine trainer_holds(m, dir)
    type(tf_model), intent(inout) :: m
    character(*), intent(in) :: dir
    type(tf_model) :: own
    type(tf_trainer) :: tr, other
    type(tf_tensor) :: x(1), t
    real(c_float), target :: xs(3, 4), ts(2, 4)
    call tf_load_saved_model(own, dir, st)
    call tf_trainer_create(tr, own, "serving_default", "mse", tf_sgd(0.1d0), st, output="y")
    call check(st, "trainer")
    call own%close()
    other = tr
    call tr%delete()
    call counts("trainer_holds")
    xs = 1
    ts = 0
    call tf_tensor_from(x(1), xs, st)
    call tf_tensor_from(t, ts, st)
    call other%step(["x"], x, st, target=t)
    print '(a,1x,l1)', "trainer_steps_after_close", st%ok()
  end subroutine

  subroutine counts(what)
    character(*), intent(in) :: what
    print '(a,4(1x,i0))', what, tf_live_objects(TF_LIVE_TENSORS), tf_live_objects(TF_LIVE_MODELS), &
         tf_live_objects(TF_LIVE_TRAINERS), tf_live_objects(TF_LIVE_BORROWED)
  end subroutine

  integer(int64) function rss_kib()
    character(len=256) :: line
    integer :: u, ios
    rss_kib = -1
    open(newunit=u, file="/proc/self/status", status="old", action="read")
    do
      read(u, '(a)', iostat=ios) line
      if (ios /= 0) exit
      if (line(1:6) == "VmRSS:") read(line(7:), *) rss_kib
    end do
    close(u)
  end function

  subroutine check(st, what)
    type(tf_status), intent(in) :: st
    character(*), intent(in) :: what
    if (.not. st%ok()) then
      print '(a)', "error in " // what // ": " // st%message
      error stop 1
    end if
  end subroutine
end program handles
""".replace("@LOOPS@", str(LOOPS))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict[str, list[str]]:
    """y = tanh(x w + b) exported by the bridge, and the program's lines (name -> values)."""
    folder = tmp_path_factory.mktemp("handles")
    rng = np.random.default_rng(4)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 3], name="x")
        w = bridge.Variable(rng.normal(0, 0.5, (3, 2)).astype(np.float32), name="w")
        b = bridge.Variable(np.zeros(2, np.float32), name="b")
        y = ops.tanh(ops.bias_add(ops.mat_mul(x, w.value()), b.value()), name="y")
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, folder / "export", {"serving_default": ({"x": x}, {"y": y})})
    exe = compile_program(PROGRAM, folder, "handles")
    printed = run_program(exe, str(folder / "export"), timeout=600)
    return {line.split()[0]: line.split()[1:] for line in printed.splitlines() if line.strip()}


def _counts(report, when) -> dict[str, int]:
    return dict(zip(["tensors", "models", "trainers", "borrowed"], map(int, report[when]), strict=True))


def test_a_loop_that_deletes_nothing_leaks_no_tensor_and_no_memory(report):
    assert _counts(report, "after_steps") == {"tensors": 0, "models": 1, "trainers": 0, "borrowed": 0}
    growth = int(report["rss_growth_kib"][0])
    assert 0 <= growth < 64 * 1024, f"{LOOPS} steps grew the resident memory by {growth} KiB"


def test_models_and_trainers_dropped_unclosed_leave_nothing(report):
    assert _counts(report, "after_loads") == {"tensors": 0, "models": 1, "trainers": 0, "borrowed": 0}


def test_assignment_shares_a_tensor_and_counts_it(report):
    assert _counts(report, "shared") == {"tensors": 1, "models": 1, "trainers": 0, "borrowed": 0}
    assert report["copy_survives_delete"] == ["T"]
    assert report["element_survives"] == ["T"]
    assert _counts(report, "elements")["tensors"] == 1
    assert _counts(report, "after_sharing")["tensors"] == 0


def test_a_model_closed_stays_loaded_for_its_copies_and_trainers(report):
    assert report["copy_after_close"] == ["T"]
    assert _counts(report, "copy_holds")["models"] == 1
    assert _counts(report, "trainer_holds") == {"tensors": 0, "models": 2, "trainers": 1, "borrowed": 0}
    assert report["trainer_steps_after_close"] == ["T"]
    assert _counts(report, "all_closed") == {"tensors": 0, "models": 0, "trainers": 0, "borrowed": 0}
