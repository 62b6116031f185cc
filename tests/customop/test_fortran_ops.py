"""Fortran subroutines as TensorFlow ops (docs/guides/fortran-ops.md; issue #29 part 2).

One op folder, built once for the module (with run-time checks:
TFBRIDGE_FORTRAN_DEBUG=1), covers every dtype a Fortran op takes, named
dimensions (a 2-D input whose reversed dimensions Fortran indexes), a '?'
axis, an expression-sized output, attributes (an int one sizing an output),
the gradient op, `error stop` and a bounds-check failure.  Small scaffolded
folders check `init --fortran`, `stub`, and bad Fortran (a BuildError with
gfortran's file and line).  No Julia runs here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop
from bridge.customop import fortran
from support import REPO, TESTS
from support.cli import tfbridge
from support.docs import block
from support.threads import run_threads_for

pytestmark = pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran is not installed")

SPEC = """
FortranMix
double x(m, n)
double w(n)
double s()
int32 idx(?)
bool mask(n)
float f(p)
complex128 z(q)
double y(m, n) -> output
double r(m) -> output
int64 c(k) -> output
float g(p) -> output
complex128 zz(q) -> output
double rr(m*n+1) -> output
@attr double alpha = 2.0
@attr int64 k = 3
@attr bool flag = true
"""

# Arrays arrive with reversed dimensions: TF's x[i, j] of shape (m, n) is x(j+1, i+1) of x(n, m).
SOURCE = """
subroutine fortran_mix(m, n, p, q, idx_0, y, r, c, g, zz, rr, x, w, s, idx, mask, f, z, alpha, k, flag)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: m, n, idx_0, p, q
  real(c_double), value :: alpha
  integer(c_int64_t), value :: k
  logical(c_bool), value :: flag
  real(c_double), intent(out) :: y(n, m), r(m)
  integer(c_int64_t), intent(out) :: c(k)
  real(c_float), intent(out) :: g(p)
  complex(c_double_complex), intent(out) :: zz(q)
  real(c_double), intent(out) :: rr(m*n+1)
  real(c_double), intent(in) :: x(n, m), w(n)
  real(c_double), value :: s
  integer(c_int32_t), intent(in) :: idx(idx_0)
  logical(c_bool), intent(in) :: mask(n)
  real(c_float), intent(in) :: f(p)
  complex(c_double_complex), intent(in) :: z(q)
  integer(c_int64_t) :: i, t
  real(c_double) :: sgn
  if (s < -100) error stop "s must be at least -100"
  sgn = merge(1d0, -1d0, logical(flag))
  do i = 1, m
    r(i) = sum(x(:, i) * w)
    y(:, i) = sgn * (alpha * x(:, i) * w + s) * merge(1d0, 0d0, logical(mask))
  end do
  do t = 1, k
    c(t) = sum(int(idx, c_int64_t)) * t
  end do
  g = f * f
  zz = z * z
  rr(1:m*n) = reshape(x, [m*n])
  rr(m*n+1) = s
  if (s > 100) then
    i = m + 1
    r(i) = 0   ! out of bounds: the debug build's check fails the op
  end if
end subroutine fortran_mix

subroutine fortran_mix_grad(m, n, p, q, idx_0, grad_x, grad_w, grad_s, grad_f, grad_z, &
                            grad_y, grad_r, grad_g, grad_zz, grad_rr, y, r, c, g, zz, rr, &
                            x, w, s, idx, mask, f, z, alpha, k, flag)
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int64_t), value :: m, n, idx_0, p, q
  real(c_double), value :: alpha
  integer(c_int64_t), value :: k
  logical(c_bool), value :: flag
  real(c_double), intent(inout) :: grad_x(n, m), grad_w(n), grad_s
  real(c_float), intent(inout) :: grad_f(p)
  complex(c_double_complex), intent(inout) :: grad_z(q)
  real(c_double), intent(in) :: grad_y(n, m), grad_r(m), grad_rr(m*n+1)
  real(c_float), intent(in) :: grad_g(p)
  complex(c_double_complex), intent(in) :: grad_zz(q)
  real(c_double), intent(in) :: y(n, m), r(m), rr(m*n+1), x(n, m), w(n)
  integer(c_int64_t), intent(in) :: c(k)
  real(c_float), intent(in) :: g(p), f(p)
  complex(c_double_complex), intent(in) :: zz(q), z(q)
  real(c_double), value :: s
  integer(c_int32_t), intent(in) :: idx(idx_0)
  logical(c_bool), intent(in) :: mask(n)
  integer(c_int64_t) :: i
  real(c_double) :: sgn, mk(n)
  sgn = merge(1d0, -1d0, logical(flag))
  mk = merge(1d0, 0d0, logical(mask))
  do i = 1, m
    grad_x(:, i) = grad_x(:, i) + sgn * alpha * w * mk * grad_y(:, i) + grad_r(i) * w
    grad_w = grad_w + sgn * alpha * x(:, i) * mk * grad_y(:, i) + grad_r(i) * x(:, i)
    grad_s = grad_s + sgn * sum(mk * grad_y(:, i))
  end do
  grad_x = grad_x + reshape(grad_rr(1:m*n), [n, m])
  grad_s = grad_s + grad_rr(m*n+1)
  grad_f = grad_f + 2 * f * grad_g
  grad_z = grad_z + grad_zz * conjg(2 * z)
end subroutine fortran_mix_grad
"""


def _reference(x, w, s, idx, mask, f, z, alpha=2.0, k=3, flag=True):
    sgn = 1.0 if flag else -1.0
    y = sgn * (alpha * x * w + s) * mask.astype(float)
    return [y, x @ w, idx.astype(np.int64).sum() * np.arange(1, k + 1), f * f, z * z,
            np.concatenate([x.ravel(), [s]])]


def _inputs(rng, m=3, n=4, p=5, q=2):
    return [rng.standard_normal((m, n)), rng.standard_normal(n), float(rng.standard_normal()),
            rng.integers(-3, 4, size=rng.integers(0, 6)).astype(np.int32), rng.random(n) < 0.7,
            rng.standard_normal(p).astype(np.float32),
            (rng.standard_normal(q) + 1j * rng.standard_normal(q))]


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fortranops") / "fortran_mix"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(SPEC)
    (folder / "fortran_mix.f90").write_text(SOURCE)
    saved = os.environ.get(fortran.DEBUG_VARIABLE)
    os.environ[fortran.DEBUG_VARIABLE] = "1"   # -fcheck=all: the bounds test needs it
    try:
        module = customop.load(folder)
    finally:
        os.environ.pop(fortran.DEBUG_VARIABLE) if saved is None else os.environ.__setitem__(fortran.DEBUG_VARIABLE, saved)
    return module


def _graph(mix, **attrs):
    g = bridge.Graph()
    with g.as_default():
        ph = [bridge.placeholder(dt, None, name=nm) for dt, nm in
              [(bridge.float64, "x"), (bridge.float64, "w"), (bridge.float64, "s"), (bridge.int32, "idx"),
               (bridge.bool, "mask"), (bridge.float32, "f"), (bridge.complex128, "z")]]
        outs = mix.fortran_mix(*ph, **attrs)
    return g, ph, list(outs)


def test_forward_matches_numpy_with_named_dims_attrs_and_every_dtype(mix):
    rng = np.random.default_rng(1)
    for attrs in ({}, {"alpha": -0.5, "k": 5, "flag": False}):
        g, ph, outs = _graph(mix, **attrs)
        with bridge.Session(g) as sess:
            for m, n in [(3, 4), (1, 7), (5, 2), (0, 3)]:
                values = _inputs(rng, m, n)
                got = sess.run(outs, dict(zip(ph, values, strict=True)))
                want = _reference(*values, **attrs)
                for name, a, b in zip(["y", "r", "c", "g", "zz", "rr"], got, want, strict=True):
                    assert a.shape == b.shape, (name, a.shape, b.shape)
                    assert a.dtype == np.asarray(b).dtype, (name, a.dtype)
                    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12, err_msg=name)


def test_loading_and_running_a_fortran_op_starts_no_julia(mix):
    """The module's ops load and run without Julia: its kernels call the Fortran directly.
    In a fresh process, as other tests of this one start Julia."""
    folder = Path(mix.LIBRARY_PATH).parents[2]
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import bridge
        from bridge import customop
        import importlib.util
        sys.path.insert(0, {str(TESTS)!r})
        spec = importlib.util.spec_from_file_location("this_test", {__file__!r})  # this module's helpers
        t = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(t)
        module = customop.load({str(folder)!r})
        g, ph, outs = t._graph(module)
        with bridge.Session(g) as sess:
            sess.run(outs[1], dict(zip(ph, t._inputs(np.random.default_rng(9)), strict=True)))
        from bridge.julia import host
        assert not host.is_initialized(), "Julia was started"
        print("no julia")
    """)
    env = dict(os.environ, **{fortran.DEBUG_VARIABLE: "1"})  # the build the fixture made: a cache hit
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=REPO)
    assert proc.returncode == 0 and "no julia" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_named_dimension_mismatch_is_invalid_argument(mix):
    rng = np.random.default_rng(2)
    g, ph, outs = _graph(mix)
    values = _inputs(rng)
    values[1] = np.ones(5)                         # w(n) with n = 4 from x
    with bridge.Session(g) as sess:
        with pytest.raises(bridge.errors.InvalidArgumentError, match=r"input 'w' must have shape \(n\) with n = 4"):
            sess.run(outs[0], dict(zip(ph, values, strict=True)))


def test_gradients_match_numpy(mix):
    rng = np.random.default_rng(3)
    x, w, s, idx, mask, f, z = values = _inputs(rng)
    wy, wr, wg, wrr = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal(5), rng.standard_normal(13)
    wz = rng.standard_normal(2) + 1j * rng.standard_normal(2)
    g, ph, (y, r, c, gg, zz, rr) = _graph(mix, alpha=1.5)
    with g.as_default():
        loss = (bridge.ops.sum(y * wy, [0, 1]) + bridge.ops.sum(r * wr, 0) + bridge.ops.sum(rr * wrr, 0)
                + bridge.ops.cast(bridge.ops.sum(gg * wg.astype(np.float32), 0), DstT=bridge.float64)
                + bridge.ops.real(bridge.ops.sum(zz * wz, 0), Tout=bridge.float64))
        grads = bridge.gradients(loss, [ph[0], ph[1], ph[2], ph[5], ph[6]])
    with bridge.Session(g) as sess:
        gx, gw, gs, gf, gz = sess.run(grads, dict(zip(ph, values, strict=True)))
    mk = mask.astype(float)
    np.testing.assert_allclose(gx, 1.5 * w * mk * wy + np.outer(wr, w) + wrr[:12].reshape(3, 4), rtol=1e-12)
    np.testing.assert_allclose(gw, (1.5 * x * mk * wy).sum(0) + wr @ x, rtol=1e-12)
    np.testing.assert_allclose(gs, (mk * wy).sum() + wrr[12], rtol=1e-12)
    np.testing.assert_allclose(gf, 2 * f * wg, rtol=1e-5)
    # TF's convention for a holomorphic f: grad_z = grad_zz * conj(f'(z)); d real(wz*zz) -> grad_zz = conj(wz)
    np.testing.assert_allclose(gz, np.conj(wz) * np.conj(2 * z), rtol=1e-12)


def test_gradcheck_passes(mix):
    rng = np.random.default_rng(4)
    x, w, s, idx, mask, f, z = _inputs(rng)

    def op(x, w, s, z):
        return mix.fortran_mix(x, w, s, idx, mask, f, z, alpha=0.7)
    result = bridge.gradcheck(op, [x, w, np.float64(s), z])
    assert result.passed, result


def test_error_stop_is_a_tf_error_and_the_session_goes_on(mix):
    rng = np.random.default_rng(5)
    g, ph, outs = _graph(mix)
    values = _inputs(rng)
    with bridge.Session(g) as sess:
        values[2] = -200.0
        with pytest.raises(bridge.errors.InvalidArgumentError,
                           match=r"FortranMix: Fortran subroutine fortran_mix failed: ERROR STOP s must be at least -100"):
            sess.run(outs[0], dict(zip(ph, values, strict=True)))
        values[2] = 1.0
        np.testing.assert_allclose(sess.run(outs[1], dict(zip(ph, values, strict=True))), values[0] @ values[1])


def test_bounds_check_failure_is_a_tf_error_naming_file_and_line(mix):
    rng = np.random.default_rng(6)
    g, ph, outs = _graph(mix)
    values = _inputs(rng)
    values[2] = 200.0
    line = SOURCE.splitlines().index("    r(i) = 0   ! out of bounds: the debug build's check fails the op") + 1
    with bridge.Session(g) as sess:
        with pytest.raises(bridge.errors.InternalError,
                           match=rf"At line {line} of file .*fortran_mix.f90: Fortran runtime error: "
                                 r"Index '4' of dimension 1 of array 'r' above upper bound of 3"):
            sess.run(outs[1], dict(zip(ph, values, strict=True)))
        values[2] = 0.5
        assert sess.run(outs[1], dict(zip(ph, values, strict=True))).shape == (3,)


@pytest.mark.parametrize("seconds", [3, pytest.param(10, marks=pytest.mark.slow)])
def test_eight_threads_at_once_give_right_results(mix, seconds):
    """8 threads run the op (and its gradient) in one session for 3 s each
    (10 s in `make test`; `make test-quick` skips that one), every result checked."""
    g, ph, (y, r, c, gg, zz, rr) = _graph(mix)
    with g.as_default():
        gx, = bridge.gradients(bridge.ops.sum(r, 0), ph[0])
    with bridge.Session(g) as sess:
        def step(t, rng):
            m, n = int(rng.integers(1, 40)), int(rng.integers(1, 40))
            values = _inputs(rng, m, n)
            got_y, got_r, got_gx = sess.run([y, r, gx], dict(zip(ph, values, strict=True)))
            want = _reference(*values)
            where = f"thread {t}, m={m}, n={n}"
            np.testing.assert_allclose(got_y, want[0], rtol=1e-12, err_msg=where)
            # r = x @ w: each element to 1e-12 of the sum of its terms' sizes (a relative
            # tolerance fails an element that cancels to near zero, by rounding alone).
            error, bound = np.abs(got_r - want[1]), 1e-12 * (np.abs(values[0]) @ np.abs(values[1]))
            assert got_r.shape == (m,) and np.all(error <= bound), f"{where}: r off by {error.max()} (bound {bound})"
            np.testing.assert_allclose(got_gx, np.broadcast_to(values[1], (m, n)), rtol=1e-12, err_msg=where)
        run_threads_for(step, 8, seconds, seed=100)



def test_init_fortran_scaffolds_a_working_op_and_stub_prints_its_subroutines(tmp_path):
    done = tfbridge("customop", "init", "FtTwice", "fttwice", "--fortran", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "fttwice"
    assert sorted(p.name for p in folder.iterdir()) == ["custom_op.txt", "ft_twice.f90"]
    # The spec's comment speaks of Fortran: no Julia function, no string type or attribute.
    spec = (folder / "custom_op.txt").read_text()
    assert "julia" not in spec.lower() and "string" not in spec, spec
    assert spec.splitlines()[0] == "# custom_op.txt: the spec of the TensorFlow op FtTwice, computed by Fortran."
    assert "#   @forward sub          the Fortran subroutine (default: the op name in snake_case)" in spec
    assert "dynamic: the subroutine <forward>_size sets its size" in spec
    stub = tfbridge("customop", "stub", str(folder), cwd=tmp_path)
    assert stub.returncode == 0, stub.stderr
    assert "subroutine ft_twice(n, y, x)" in stub.stdout
    assert "subroutine ft_twice_grad(n, grad_x, grad_y, y, x)" in stub.stdout
    assert "real(c_double), intent(inout) :: grad_x(n)" in stub.stdout
    ops = customop.load(folder)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None])
        y = ops.ft_twice(x)
        dx, = bridge.gradients(bridge.ops.sum(y, 0), x)
    with bridge.Session(g) as sess:
        got_y, got_dx = sess.run([y, dx], {x: [1.0, -2.5]})
    np.testing.assert_array_equal(got_y, [2.0, -5.0])
    np.testing.assert_array_equal(got_dx, [2.0, 2.0])


def _scaffold(tmp_path: Path, name: str, edit) -> Path:
    folder = tmp_path / name
    customop.init(name, folder, fortran_op=True)
    source = folder / fortran.source_file_name(customop.parse_file(folder / "custom_op.txt"))
    source.write_text(edit(source.read_text()))
    return folder


def test_fortran_compile_error_is_a_build_error_with_file_and_line(tmp_path):
    folder = _scaffold(tmp_path, "FtBad", lambda text: text.replace("y = 2 * x", "y = 2 * undeclared_q"))
    line = (folder / "ft_bad.f90").read_text().splitlines().index("  y = 2 * undeclared_q") + 1
    with pytest.raises(customop.BuildError) as raised:
        customop.build(folder, progress=lambda _: None)
    # The message, the line its "(1)" points at (gfortran quotes none for the op's own file, which
    # the generated code includes) and a marker under column 22, where undeclared_q starts.
    assert (f"  ft_bad.f90:{line}:22: Error: Symbol 'undeclared_q' at (1) has no IMPLICIT type\n"
            f"  {line:>5} |   y = 2 * undeclared_q\n"
            f"        | {' ' * 21}1\n") in str(raised.value), str(raised.value)


def test_a_subroutine_that_does_not_match_the_spec_is_a_build_error(tmp_path):
    folder = _scaffold(tmp_path, "FtKind", lambda text: text.replace("real(c_double), intent(in) :: x(n)\n  y = 2",
                                                                     "real(c_float), intent(in) :: x(n)\n  y = 2"))
    with pytest.raises(customop.BuildError, match=r"do not match the spec(.|\n)*ft_kind.f90:\d+:\d+: Warning: "
                                                  r"Type mismatch in argument 'x' \(REAL\(8\)/REAL\(4\)\)"):
        customop.build(folder, progress=lambda _: None)


@pytest.mark.parametrize("line, message", [
    ("string t(n)", r"custom_op.txt:4: a Fortran op cannot take string arguments \('t'\)"),
    ("double o(2*k) -> output", r"custom_op.txt:4: dimension '2\*k' of output 'o' uses 'k', which only "
                                r"ft_refused_size knows"),
    ("double q(?, q_0)", r"custom_op.txt:4: 'q_0' clashes with the name the generated code gives a dimension "
                         r"or the shape of 'q' \(line 4\)"),
    ("@attr string mode", r"custom_op.txt:4: a Fortran op cannot take string attributes"),
    ("double c_v(n)", r"custom_op.txt:4: 'c_v' cannot name an argument of a Fortran subroutine"),
    ("double v(ft_refused)", r"custom_op.txt:4: 'ft_refused' cannot name an argument of a Fortran subroutine"),
])
def test_what_fortran_cannot_take_is_a_spec_error_naming_the_line(tmp_path, line, message):
    folder = tmp_path / "ftref"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(f"FtRefused\ndouble x(n)\ndouble y(n) -> output\n{line}\n")
    (folder / "ft_refused.f90").write_text("")
    with pytest.raises(customop.SpecError, match=message):
        customop.build(folder, progress=lambda _: None)


def test_readme_fortran_example_runs(tmp_path):
    """docs/guides/fortran-ops.md: its spec and subroutines build, and the op and
    its gradient agree with numpy."""
    spec = block("docs/guides/fortran-ops.md", "", "Scale\n")
    source = block("docs/guides/fortran-ops.md", "fortran", "subroutine scale(")
    folder = tmp_path / "scale"
    folder.mkdir()
    (folder / "custom_op.txt").write_text(spec)
    (folder / "scale.f90").write_text(source)
    ops = customop.load(folder)
    rng = np.random.default_rng(7)
    x, w, gy = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((3, 4))
    g = bridge.Graph()
    with g.as_default():
        px, pw = bridge.placeholder(bridge.float64, None), bridge.placeholder(bridge.float64, None)
        y = ops.scale(px, pw, alpha=1.5)
        gx, gw = bridge.gradients(bridge.ops.sum(y * gy, [0, 1]), [px, pw])
    with bridge.Session(g) as sess:
        got = sess.run([y, gx, gw], {px: x, pw: w})
    np.testing.assert_allclose(got[0], 1.5 * w * x, rtol=1e-15)
    np.testing.assert_allclose(got[1], 1.5 * w * gy, rtol=1e-15)
    np.testing.assert_allclose(got[2], (1.5 * x * gy).sum(0), rtol=1e-14)
    assert bridge.gradcheck(lambda a, b: ops.scale(a, b), [x, w]).passed


def test_language_directive_and_folder_detection(tmp_path):
    spec = customop.parse("FtLang\ndouble x(n)\ndouble y(n) -> output\n@language fortran\n")
    assert spec.language == "fortran" and spec.language_line == 4
    with pytest.raises(customop.SpecError, match=r"custom_op.txt:4: @language expects one of julia, fortran, got 'cobol'"):
        customop.parse("FtLang\ndouble x(n)\ndouble y(n) -> output\n@language cobol\n")
    with pytest.raises(customop.SpecError, match=r":5: @language given twice \(first on line 4\)"):
        customop.parse("FtLang\ndouble x(n)\ndouble y(n) -> output\n@language julia\n@language fortran\n")
    plain = customop.parse("FtLang\ndouble x(n)\ndouble y(n) -> output\n")
    assert fortran.resolve_language(plain, tmp_path).language == ""        # no .f90: a Julia op
    (tmp_path / "ft_lang.f90").write_text("")
    assert fortran.resolve_language(plain, tmp_path).language == "fortran"
    (tmp_path / "ft_lang.jl").write_text("")                               # both files: Julia, unless @language
    assert fortran.resolve_language(plain, tmp_path).language == ""


def test_recycled_output_buffers_never_back_two_live_tensors(mix):
    """Small outputs come from per-size free lists (docs/internals/kernels-cpp.md,
    "Output buffers"): a buffer goes back to its list only when TF frees its
    tensor.  Results of 300 runs of sizes that share lists, all kept alive
    while later runs reuse freed buffers, each still hold their own values."""
    rng = np.random.default_rng(11)
    g, ph, outs = _graph(mix)
    kept = []
    with bridge.Session(g) as sess:
        for i in range(300):
            m, n = int(rng.integers(1, 9)), int(rng.integers(1, 9))
            values = _inputs(rng, m, n)
            got = sess.run([outs[0], outs[5]], dict(zip(ph, values, strict=True)))
            if i % 3:
                kept.append((values, got))  # the others are dropped at once: their buffers are reused
    for values, (y, rr) in kept:
        want = _reference(*values)
        np.testing.assert_array_equal(y, want[0])
        np.testing.assert_array_equal(rr, want[5])
