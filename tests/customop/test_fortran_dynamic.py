"""Fortran ops with dynamic outputs (docs/guides/fortran-ops.md; issue #29 part 2).

An output whose size nothing in the spec determines (a ``?``, or a name no
input or int attribute sets) is sized by the op's size subroutine
``<forward>_size``, which the kernel calls first; it then allocates the
outputs and calls the forward subroutine with the sizes as dimensions.  One
op, built once for the module with run-time checks (TFBRIDGE_FORTRAN_DEBUG=1,
so a size that disagrees with what the subroutines write is a bounds error),
covers a free name shared by two outputs, a ``?`` axis, a 2-D ``?`` output
beside an attribute-sized axis, the gradient op, empty outputs, the size
subroutine's errors and concurrent calls.  A scaffolded folder checks that
``customop stub`` writes the size subroutine and that such a spec builds.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop
from bridge.customop import fortran
from support.docs import block
from support.cli import tfbridge
from support.threads import run_threads_for

pytestmark = pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran is not installed")

# y repeats x[i] r[i] times, src holds each element's index in x, pos the positive x's, and
# win the windows of w consecutive elements of y.
SPEC = """
FtRepeat
double x(n)
int64 r(n)
double y(total) -> output
int64 src(total) -> output
double pos(?) -> output
double win(?, w) -> output
@attr int64 w = 2
@language fortran
"""

SOURCE = """
subroutine ft_repeat_size(n, total, pos_0, win_0, x, r, w)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: n, w
  integer(c_int64_t), intent(out) :: total, pos_0, win_0
  real(c_double), intent(in) :: x(n)
  integer(c_int64_t), intent(in) :: r(n)
  if (any(r > 2_c_int64_t**62)) error stop "a repeat count above 2**62"
  if (n > 0) then
    if (x(1) == 12345d0) return   ! leaves the sizes unset: the op fails
  end if
  if (any(r < 0)) then
    total = minval(r)             ! a negative count is a negative size: the op fails
  else
    total = sum(r)
  end if
  pos_0 = count(x > 0)
  win_0 = max(total - w + 1, 0_c_int64_t)
end subroutine ft_repeat_size

subroutine ft_repeat(n, total, pos_0, win_0, y, src, pos, win, x, r, w)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: n, total, pos_0, win_0, w
  real(c_double), intent(out) :: y(total), pos(pos_0), win(w, win_0)
  integer(c_int64_t), intent(out) :: src(total)
  real(c_double), intent(in) :: x(n)
  integer(c_int64_t), intent(in) :: r(n)
  integer(c_int64_t) :: i, j, t
  j = 0
  do i = 1, n
    do t = 1, r(i)
      j = j + 1
      y(j) = x(i)
      src(j) = i - 1
    end do
  end do
  pos = pack(x, x > 0)
  do i = 1, win_0
    win(:, i) = y(i:i + w - 1)
  end do
end subroutine ft_repeat

subroutine ft_repeat_grad(n, total, pos_0, win_0, grad_x, grad_y, grad_pos, grad_win, y, src, pos, win, &
                          x, r, w)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: n, total, pos_0, win_0, w
  real(c_double), intent(inout) :: grad_x(n)
  real(c_double), intent(in) :: grad_y(total), grad_pos(pos_0), grad_win(w, win_0)
  real(c_double), intent(in) :: y(total), pos(pos_0), win(w, win_0), x(n)
  integer(c_int64_t), intent(in) :: src(total), r(n)
  integer(c_int64_t) :: i, j, t
  do j = 1, total
    grad_x(src(j) + 1) = grad_x(src(j) + 1) + grad_y(j)
  end do
  do i = 1, win_0
    do t = 1, w
      grad_x(src(i + t - 1) + 1) = grad_x(src(i + t - 1) + 1) + grad_win(t, i)
    end do
  end do
  j = 0
  do i = 1, n
    if (x(i) > 0) then
      j = j + 1
      grad_x(i) = grad_x(i) + grad_pos(j)
    end if
  end do
end subroutine ft_repeat_grad
"""


def _reference(x, r, w=2):
    y = np.repeat(x, r)
    src = np.repeat(np.arange(len(x), dtype=np.int64), r)
    win = (np.lib.stride_tricks.sliding_window_view(y, w) if len(y) >= w else np.zeros((0, w)))
    return [y, src, x[x > 0], win]


def _reference_grad(x, r, gy, gpos, gwin, w=2):
    src = np.repeat(np.arange(len(x)), r)
    g = np.zeros_like(x)
    np.add.at(g, src, gy)
    for i in range(gwin.shape[0]):
        np.add.at(g, src[i:i + w], gwin[i])
    g[x > 0] += gpos
    return g


def _inputs(rng, n=None):
    n = int(rng.integers(0, 8)) if n is None else n
    x = rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)   # away from 0: the positive ones stay so
    return x, rng.integers(0, 4, n).astype(np.int64)


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fortrandyn") / "ft_repeat"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(SPEC)
    (folder / "ft_repeat.f90").write_text(SOURCE)
    saved = os.environ.get(fortran.DEBUG_VARIABLE)
    os.environ[fortran.DEBUG_VARIABLE] = "1"   # bounds checks: a wrong size fails loudly
    try:
        return customop.load(folder)
    finally:
        os.environ.pop(fortran.DEBUG_VARIABLE) if saved is None else os.environ.__setitem__(fortran.DEBUG_VARIABLE, saved)


def _graph(ops, **attrs):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        r = bridge.placeholder(bridge.int64, [None], name="r")
        outs = list(ops.ft_repeat(x, r, **attrs))
    return g, [x, r], outs


def test_forward_matches_numpy_with_sizes_the_input_values_set(ops):
    rng = np.random.default_rng(1)
    for attrs in ({}, {"w": 3}):
        g, ph, outs = _graph(ops, **attrs)
        assert [tuple(o.shape) for o in outs] == [(None,), (None,), (None,), (None, attrs.get("w", 2))]
        sizes = set()
        with bridge.Session(g) as sess:
            for _ in range(25):
                x, r = _inputs(rng)
                got = sess.run(outs, {ph[0]: x, ph[1]: r})
                for name, a, b in zip(["y", "src", "pos", "win"], got, _reference(x, r, **attrs), strict=True):
                    assert a.shape == b.shape and a.dtype == b.dtype, (name, a.shape, b.shape, a.dtype)
                    np.testing.assert_array_equal(a, b, err_msg=name)
                sizes.add(got[0].shape[0])
        assert len(sizes) > 5, sizes   # the outputs' sizes did follow the inputs' values


def test_empty_outputs(ops):
    g, ph, outs = _graph(ops, w=3)
    with g.as_default():
        gx, = bridge.gradients(bridge.ops.sum(outs[0], 0) + bridge.ops.sum(outs[3], [0, 1]), ph[0])
    with bridge.Session(g) as sess:
        for x, r in [(np.zeros(0), np.zeros(0, np.int64)),            # no input at all
                     (np.array([-1.5, -2.0]), np.array([0, 0])),      # every output empty
                     (np.array([1.5, -2.0]), np.array([1, 1]))]:       # fewer than w elements: no window
            y, src, pos, win, g_x = sess.run(outs + [gx], {ph[0]: x, ph[1]: r})
            assert y.shape == src.shape == (int(r.sum()),)
            assert pos.shape == (int((x > 0).sum()),) and win.shape == (0, 3)
            np.testing.assert_array_equal(g_x, np.repeat(1.0, len(x)) * r)


def test_gradients_match_numpy(ops):
    rng = np.random.default_rng(3)
    g, ph, (y, src, pos, win) = _graph(ops)
    with g.as_default():
        wy = bridge.placeholder(bridge.float64, [None], name="wy")
        wpos = bridge.placeholder(bridge.float64, [None], name="wpos")
        wwin = bridge.placeholder(bridge.float64, [None, 2], name="wwin")
        loss = bridge.ops.sum(y * wy, 0) + bridge.ops.sum(pos * wpos, 0) + bridge.ops.sum(win * wwin, [0, 1])
        gx, = bridge.gradients(loss, ph[0])
    checked = 0
    with bridge.Session(g) as sess:
        for _ in range(20):
            x, r = _inputs(rng)
            y_, pos_, win_ = _reference(x, r)[0], x[x > 0], _reference(x, r)[3]
            gy, gpos, gwin = (rng.standard_normal(a.shape) for a in (y_, pos_, win_))
            got = sess.run(gx, {ph[0]: x, ph[1]: r, wy: gy, wpos: gpos, wwin: gwin})
            np.testing.assert_allclose(got, _reference_grad(x, r, gy, gpos, gwin), rtol=1e-13, atol=1e-14)
            checked += bool(win_.size)
    assert checked > 5


def test_gradcheck_passes(ops):
    rng = np.random.default_rng(4)
    x, r = _inputs(rng, n=6)
    r[:2] = [2, 3]
    result = bridge.gradcheck(lambda x: [o for o in ops.ft_repeat(x, r)], x)
    assert result.passed, result


def test_size_subroutine_errors_are_tf_errors_naming_op_and_output(ops):
    g, ph, outs = _graph(ops)
    with bridge.Session(g) as sess:
        with pytest.raises(bridge.errors.InvalidArgumentError,
                           match=r"FtRepeat: Fortran subroutine ft_repeat_size failed: ERROR STOP a repeat count "
                                 r"above 2\*\*62"):
            sess.run(outs[0], {ph[0]: [1.0, 2.0], ph[1]: [1, 2**62 + 1]})
        with pytest.raises(bridge.errors.ResourceExhaustedError,   # too large for TF's allocator
                           match=r"OOM when allocating tensor with shape\[100000000000000000\]"):
            sess.run(outs[0], {ph[0]: [1.0], ph[1]: [10**17]})
        with pytest.raises(bridge.errors.InvalidArgumentError,
                           match=r"FtRepeat: Fortran subroutine ft_repeat_size set total = -3, a negative size, "
                                 r"for dimension 0 of output 'y', dimension 0 of output 'src'"):
            sess.run(outs[2], {ph[0]: [1.0, 2.0], ph[1]: [-3, 2]})
        with pytest.raises(bridge.errors.InvalidArgumentError,
                           match=r"FtRepeat: Fortran subroutine ft_repeat_size did not set total, the size of "
                                 r"dimension 0 of output 'y', dimension 0 of output 'src'"):
            sess.run(outs[0], {ph[0]: [12345.0], ph[1]: [1]})
        got = sess.run(outs, {ph[0]: [1.0, -2.0], ph[1]: [2, 1]})     # the session goes on
        np.testing.assert_array_equal(got[0], [1.0, 1.0, -2.0])


@pytest.mark.parametrize("seconds", [3, pytest.param(10, marks=pytest.mark.slow)])
def test_eight_threads_at_once_each_get_their_own_sizes(ops, seconds):
    """8 threads run the op and its gradient in one session, each with inputs of its own
    sizes, for 3 s (10 s in `make test`); every result is checked."""
    g, ph, (y, src, pos, win) = _graph(ops)
    with g.as_default():
        gx, = bridge.gradients(bridge.ops.sum(y, 0) + bridge.ops.sum(pos, 0), ph[0])
    with bridge.Session(g) as sess:
        def step(t, rng):
            x, r = _inputs(rng, n=int(rng.integers(0, 60)))
            got_y, got_pos, got_win, got_gx = sess.run([y, pos, win, gx], {ph[0]: x, ph[1]: r})
            want = _reference(x, r)
            where = f"thread {t}, n={len(x)}, r={r.tolist()}"
            np.testing.assert_array_equal(got_y, want[0], err_msg=where)
            np.testing.assert_array_equal(got_pos, want[2], err_msg=where)
            np.testing.assert_array_equal(got_win, want[3], err_msg=where)
            np.testing.assert_array_equal(got_gx, r + (x > 0), err_msg=where)
        run_threads_for(step, 8, seconds, seed=200)



def test_a_dynamic_output_builds_and_stub_writes_its_size_subroutine(tmp_path):
    """The SpecError Fortran ops gave dynamic outputs is gone: `customop stub` writes the
    size subroutine, and the stub's file builds and fails at run time naming what to set."""
    folder = tmp_path / "ftdyn"
    customop.init("FtDyn", folder, fortran_op=True)
    spec_file = folder / "custom_op.txt"
    spec_file.write_text(spec_file.read_text().replace("double y(n) -> output",
                                                       "double y(n) -> output\ndouble o(?, 3) -> output"))
    stub = tfbridge("customop", "stub", str(folder), cwd=tmp_path)
    assert stub.returncode == 0, stub.stderr
    assert "subroutine ft_dyn_size(n, o_0, x)" in stub.stdout
    assert "integer(c_int64_t), intent(out) :: o_0" in stub.stdout
    assert "subroutine ft_dyn(n, o_0, y, o, x)" in stub.stdout
    assert "real(c_double), intent(out) :: o(3, o_0)" in stub.stdout
    assert "subroutine ft_dyn_grad(n, o_0, grad_x, grad_y, grad_o, y, o, x)" in stub.stdout
    (folder / "ft_dyn.f90").write_text(stub.stdout)
    with warnings.catch_warnings(record=True) as announced:
        warnings.simplefilter("always")
        ops = customop.load(folder)
    # Julia's note on '?' outputs ("assign o[] = A in Julia") is not for a Fortran op.
    assert not [w for w in announced if issubclass(w.category, customop.DynamicOutputWarning)]
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y, o = ops.ft_dyn(x)
    with bridge.Session(g) as sess:
        with pytest.raises(bridge.errors.InvalidArgumentError,
                           match=r"FtDyn: Fortran subroutine ft_dyn_size failed: ERROR STOP ft_dyn_size: set the "
                                 r"sizes \(o_0\)"):
            sess.run(o, {x: [1.0]})


def test_a_size_inside_an_expression_is_a_spec_error_naming_the_line(tmp_path):
    folder = tmp_path / "ftexpr"
    folder.mkdir()
    (folder / "custom_op.txt").write_text("FtExpr\ndouble x(n)\ndouble y(2*k) -> output\n@language fortran\n")
    with pytest.raises(customop.SpecError, match=r"custom_op.txt:3: dimension '2\*k' of output 'y' uses 'k', "
                                                 r"which only ft_expr_size knows"):
        customop.build(folder, progress=lambda _: None)


def test_readme_dynamic_output_example_runs(tmp_path):
    """docs/guides/fortran-ops.md: the Positives spec and subroutines build, and the op
    and its gradient agree with numpy, an empty output included."""
    folder = tmp_path / "positives"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(block("docs/guides/fortran-ops.md", "", "Positives\n"))
    (folder / "positives.f90").write_text(block("docs/guides/fortran-ops.md", "fortran", "positives_size"))
    ops = customop.load(folder)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None])
        y = ops.positives(x)
        gx, = bridge.gradients(bridge.ops.sum(y * y, 0), x)
    with bridge.Session(g) as sess:
        for value in ([1.5, -2.0, 0.0, 3.0], [-1.0], []):
            value = np.array(value)
            got_y, got_gx = sess.run([y, gx], {x: value})
            np.testing.assert_array_equal(got_y, value[value > 0])
            np.testing.assert_array_equal(got_gx, np.where(value > 0, 2 * value, 0.0))
    assert bridge.gradcheck(lambda a: ops.positives(a), np.array([1.0, -1.5, 2.0, 0.7])).passed
