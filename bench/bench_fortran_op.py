"""Per-op cost of a Fortran op: a chain of 100 ops computing tanh on 10 doubles.

A Fortran op's kernel calls its subroutine directly on the thread TensorFlow
runs it on (no Julia, no hand-over), so its cost should be a native op's:
compared, in the same run, with the same chain of native Tanh ops, both in
TF's default executor and in the inline executor, alternating rounds
(medians of the rounds, with their spread; ratios the medians of the paired
rounds' ratios, and also in process CPU time).  Also 1e6 doubles per op (where the element work
dominates: gfortran's scalar tanh against Eigen's vectorised approximation).
Goal: <= 1.2x the native chain.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, alternating_rounds, checked_runner, ratio, ratio_line, report  # noqa: E402
from support.build import op_chain  # noqa: E402  (tests/, put on sys.path by _common)

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

CHAIN, SIZE, CALLS = 100, 10, 100
SPEC = "FtTanh\ndouble x(n)\ndouble y(n) -> output\n@language fortran\n"
SOURCE = """
subroutine ft_tanh(n, y, x)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: n
  real(c_double), intent(out) :: y(n)
  real(c_double), intent(in) :: x(n)
  y = tanh(x)
end subroutine ft_tanh

subroutine ft_tanh_grad(n, grad_x, grad_y, y, x)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: n
  real(c_double), intent(inout) :: grad_x(n)
  real(c_double), intent(in) :: grad_y(n), y(n), x(n)
  grad_x = grad_x + grad_y * (1 - y * y)
end subroutine ft_tanh_grad
"""


def fortran_op():
    folder = REPO / "build" / "bench" / "FtTanh"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "custom_op.txt").write_text(SPEC)
    (folder / "ft_tanh.f90").write_text(SOURCE)
    return bridge.customop.load(folder)


def per_op_us(size: int, calls: int, rounds: int | None = None) -> dict:
    value = np.linspace(-1, 1, size)
    expected = value
    for _ in range(CHAIN):
        expected = np.tanh(expected)

    def check(out):
        np.testing.assert_allclose(out, expected, rtol=1e-12)
    sessions: list = []
    runners = {}
    for label, config in [("default executor", bridge.SessionConfig(disable_meta_optimizer=True)),
                          ("inline executor", bridge.SessionConfig(inter_op_parallelism_threads=-1,
                                                                   disable_meta_optimizer=True))]:
        for kind, make in [("native Tanh", ops.tanh), ("Fortran op", ft.ft_tanh)]:
            g, x, y = op_chain(make, CHAIN, [size])
            runners[f"{kind}, {label}"] = checked_runner(g, x, y, value, config, sessions, check)
    # Grappler would fuse the native chain into one kernel: both run as written.
    results = {k: v.map(lambda us: us / CHAIN) for k, v in alternating_rounds(runners, calls, rounds=rounds).items()}
    for sess in sessions:
        sess.close()
    return results


ft = fortran_op()
small = per_op_us(SIZE, CALLS)
large = per_op_us(1_000_000, 2, rounds=7)
rows = ([(f"{k}, {SIZE} doubles", v, "us/op") for k, v in small.items()]
        + [(f"{k}, 1e6 doubles", v, "us/op") for k, v in large.items()])
default_ratio = ratio(small["Fortran op, default executor"], small["native Tanh, default executor"])
report(f"Fortran tanh op vs native Tanh, chains of {CHAIN} ops (medians of alternating rounds)", rows,
       f"Fortran op / native Tanh, {SIZE} doubles, default", default_ratio, "<= 1.2")
ratio_line("the same in process CPU time", ratio(small["Fortran op, default executor"].cpu,
                                                 small["native Tanh, default executor"].cpu))
# The inline executor runs every kernel in the caller's thread: there the
# native chain also reuses its input's buffer (TF forwards it), which a Fortran
# op cannot (Fortran assumes its arguments do not alias).
ratio_line("Fortran op / native Tanh, inline executor",
           ratio(small["Fortran op, inline executor"], small["native Tanh, inline executor"]))
ratio_line("Fortran op / native Tanh, 1e6 doubles, default",
           ratio(large["Fortran op, default executor"], large["native Tanh, default executor"]),
           "   (libm's scalar tanh against Eigen's vectorised one)")
