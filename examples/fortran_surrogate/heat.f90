! A Fortran heat-equation time loop with a learned closure:
!   u_t = D u_xx + s(u)   on [0,1), periodic, explicit Euler,
! where s is a neural network trained with the bridge (run.py) and called
! through the tf_bridge module at every step.  The same loop with the exact
! closure s(u) = u - u**3 runs beside it, as the reference.
!   usage: heat MODEL_DIR STEPS
program heat
  use tf_bridge
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  implicit none
  integer, parameter :: n = 64
  real(c_float), parameter :: d = 0.01, pi = 3.14159265
  type(tf_model) :: closure
  type(tf_status) :: st
  type(tf_tensor) :: input(1), output(1)
  real(c_float), target :: u(1, n)        ! (1,n) in Fortran is TensorFlow's [n,1]: no copy
  real(c_float) :: s(1, n), exact(n), dx, dt
  character(len=1024) :: dir, arg
  integer :: steps, step, i, unit
  integer(int64) :: t0, t1, rate

  call get_command_argument(1, dir)
  call get_command_argument(2, arg)
  read(arg, *) steps
  call tf_load_saved_model(closure, trim(dir), st)
  call check(st)

  dx = 1.0 / n
  dt = 0.2 * dx**2 / d
  do i = 1, n
    u(1, i) = 0.8 * sin(2 * pi * (i - 1) * dx) + 0.3 * cos(6 * pi * (i - 1) * dx)
  end do
  exact = u(1, :)

  call system_clock(t0, rate)
  do step = 1, steps
    call tf_tensor_from(input(1), u, st)
    call check(st)
    call closure%run("serving_default", ["u"], input, ["s"], output, st)
    call check(st)
    call tf_to_array(output(1), s, st)
    call check(st)
    u(1, :) = u(1, :) + dt * (d * laplacian(u(1, :)) + s(1, :))
    exact = exact + dt * (d * laplacian(exact) + exact - exact**3)
  end do
  call system_clock(t1)

  print '(a,i0,a,f8.4)', "steps ", steps, "  time ", steps * dt
  print '(a,es10.3)', "max |u_surrogate - u_exact| ", maxval(abs(u(1, :) - exact))
  print '(a,es10.3)', "max |u_exact| ", maxval(abs(exact))
  print '(a,f10.2)', "us per closure call ", real(t1 - t0) / rate / steps * 1e6
  open(newunit=unit, file="u_final.bin", access="stream", form="unformatted", status="replace")
  write(unit) u(1, :), exact
  close(unit)
  call input(1)%delete()
  call output(1)%delete()
  call closure%close()
contains
  function laplacian(v) result(lap)
    real(c_float), intent(in) :: v(:)
    real(c_float) :: lap(size(v))
    lap = (cshift(v, 1) - 2 * v + cshift(v, -1)) / dx**2
  end function

  subroutine check(st)
    type(tf_status), intent(in) :: st
    if (.not. st%ok()) then
      print '(a)', "heat: " // st%message
      error stop 1
    end if
  end subroutine
end program heat
