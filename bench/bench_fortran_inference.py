"""A small MLP (16x8 -> 32 tanh -> 32 tanh -> 4) called from a Fortran loop
through the tf_bridge module, against the same call from Python
(bridge.load_saved_model's signature: Session.run with feeds and fetches) and
against the same MLP written with Fortran's matmul.  The Fortran program
times both of its modes in alternating rounds and prints each round; the
Python side times as many rounds between its launches; each figure is the
median of all the rounds, with their spread."""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, ratio, ratio_line, report, time_round  # noqa: E402

import bridge  # noqa: E402
from bridge import fortran, ops  # noqa: E402

CALLS = 2000
LAUNCHES = 3
SIZES = (8, 32, 32, 4)
BATCH = 16

PROGRAM = """
program bench
  use tf_bridge
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  implicit none
  integer, parameter :: calls = %(calls)d, rounds = 7
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1)
  real(c_float), target :: xs(8,%(batch)d)
  real(c_float) :: ys(4,%(batch)d), native(4,%(batch)d)
  real(c_float) :: w1(32,8), b1(32), w2(32,32), b2(32), w3(4,32), b3(4)
  integer(int64) :: t0, t1, rate
  real(8) :: us_tf, us_native
  character(len=1024) :: dir
  integer :: i, r, u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  if (.not. st%%ok()) error stop "load"
  open(newunit=u, file="weights.bin", access="stream", form="unformatted", status="old")
  read(u) xs, w1, b1, w2, b2, w3, b3
  close(u)
  call tf_tensor_from(x(1), xs, st)
  call system_clock(count_rate=rate)
  do r = 1, rounds
    call system_clock(t0)
    do i = 1, calls
      call m%%run("serving_default", ["x"], x, ["y"], y, st)
      call tf_to_array(y(1), ys, st)
    end do
    call system_clock(t1)
    us_tf = real(t1 - t0, 8) / rate / calls * 1d6
    call system_clock(t0)
    do i = 1, calls
      call mlp(xs, native)
    end do
    call system_clock(t1)
    us_native = real(t1 - t0, 8) / rate / calls * 1d6
    print '(a,i0,1x,f12.3,1x,f12.4)', "round", r, us_tf, us_native
  end do
  if (.not. st%%ok()) error stop "run"
  print '(a,es12.4)', "maxdiff ", maxval(abs(ys - native))
contains
  subroutine mlp(x, out)
    real(c_float), intent(in) :: x(:,:)
    real(c_float), intent(out) :: out(:,:)
    real(c_float) :: h1(32, size(x, 2)), h2(32, size(x, 2))
    integer :: j
    h1 = matmul(w1, x)
    do j = 1, size(x, 2)
      h1(:, j) = tanh(h1(:, j) + b1)
    end do
    h2 = matmul(w2, h1)
    do j = 1, size(x, 2)
      h2(:, j) = tanh(h2(:, j) + b2)
    end do
    out = matmul(w3, h2)
    do j = 1, size(x, 2)
      out(:, j) = out(:, j) + b3
    end do
  end subroutine
end program bench
""" % {"calls": CALLS, "batch": BATCH}


def export(folder: Path) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    weights = []
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, SIZES[0]], name="x")
        h = x
        for i, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
            w = rng.normal(0, 1 / np.sqrt(n_in), (n_in, n_out)).astype(np.float32)
            b = rng.normal(0, 0.1, n_out).astype(np.float32)
            weights += [w, b]
            h = ops.bias_add(ops.mat_mul(h, bridge.Variable(w, name=f"w{i}").value()),
                             bridge.Variable(b, name=f"b{i}").value())
            if i < len(SIZES) - 2:
                h = ops.tanh(h)
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, folder / "export", ({"x": x}, {"y": h}))
    return rng.normal(0, 1, (BATCH, SIZES[0])).astype(np.float32), weights


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        xs, weights = export(folder)
        # C-order bytes of a (n_in, n_out) matrix are Fortran's (n_out, n_in): W^T, as matmul(w, x) wants
        (folder / "weights.bin").write_bytes(xs.tobytes() + b"".join(w.tobytes() for w in weights))
        (folder / "bench.f90").write_text(PROGRAM)
        subprocess.run([fortran.fortran_compiler(), "-O2", "-o", str(folder / "bench"), str(folder / "bench.f90"),
                        *fortran.flags().split()], check=True, timeout=600, cwd=folder)
        model = bridge.load_saved_model(folder / "export")
        signature = model.signatures["serving_default"]
        rounds: dict[str, list[float]] = {"fortran": [], "native": [], "python": []}
        for _ in range(LAUNCHES):
            done = subprocess.run([str(folder / "bench"), str(folder / "export")], capture_output=True, text=True,
                                  timeout=600, cwd=folder, env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
            if done.returncode:
                raise RuntimeError(done.stdout + done.stderr[-3000:])
            lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
            maxdiff = [float(parts[1]) for parts in lines if parts[0] == "maxdiff"]
            assert maxdiff and maxdiff[0] < 1e-4, done.stdout   # the native MLP computes what TF does
            for parts in lines:
                if parts[0].startswith("round"):
                    rounds["fortran"].append(float(parts[-2]))
                    rounds["native"].append(float(parts[-1]))
            # The Python side's rounds, between the Fortran program's launches (never at once).
            signature(x=xs)
            for _ in range(7):
                rounds["python"].append(time_round(lambda: signature(x=xs), CALLS)[0])
        model.close()
    best = {mode: Figure(values) for mode, values in rounds.items()}
    report(f"MLP {'x'.join(map(str, SIZES))} on a batch of {BATCH} (float32), per call",
           [("Fortran loop, tf_bridge (run + tf_to_array)", best["fortran"], "us/call"),
            ("Python, bridge signature (Session.run)", best["python"], "us/call"),
            ("Fortran loop, native matmul MLP", best["native"], "us/call")],
           "tf_bridge from Fortran / Python Session.run", ratio(best["fortran"], best["python"]), "< 1x")
    ratio_line("tf_bridge from Fortran / native Fortran MLP", ratio(best["fortran"], best["native"]))


if __name__ == "__main__":
    main()
