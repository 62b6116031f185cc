"""Complex Julia ops (complex64, complex128): values, shapes and gradients.

Julia receives ComplexF32 / ComplexF64 arrays over TF's buffers (the same
layout: two floats per element), and the gradient function follows
TensorFlow's convention for complex values, which stock TF fixes here
(tests/oracle/complex_gradients.py): the same functions written in TF ops,
differentiated by tf.gradients with complex grad_ys, agree to 1e-12.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, julia
from support.build import op_folder


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("complexops")


def _complex(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


# --- the functions of tests/oracle/complex_gradients.py, as a Julia op ---------------

CFUN_SPEC = """
CFun
complex128 z(n)
complex64 w(m, k)
double s(n)
complex128 y(n) -> output
complex64 v(m, k) -> output
complex128 r(n) -> output
"""

# TF's convention: for y = f(z), grad_z = conj(df/dz) * grad_y + (df/dconj(z)) * conj(grad_y);
# holomorphic f: grad_y * conj(f'(z)).  A real input gets the real part.
CFUN_JL = """
function c_fun(y, v, r, z, w, s)
    y .= z .^ 2 .* exp.(z) .+ s
    v .= sin.(w)
    r .= z .* conj.(z) .* z
    return nothing
end

function c_fun_grad(grad_z, grad_w, grad_s, grad_y, grad_v, grad_r, y, v, r, z, w, s)
    grad_z .= grad_y .* conj.((2 .* z .+ z .^ 2) .* exp.(z)) .+
              2 .* abs2.(z) .* grad_r .+ z .^ 2 .* conj.(grad_r)
    grad_w .= grad_v .* conj.(cos.(w))
    grad_s .= real.(grad_y)
    return nothing
end
"""


@pytest.fixture(scope="module")
def cfun(root):
    return customop.load(op_folder(root, "CFun", CFUN_SPEC, CFUN_JL)).c_fun


def _cfun_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"z": _complex(rng, 5), "w": _complex(rng, (2, 3), np.complex64), "s": rng.standard_normal(5),
            "grad_ys": [_complex(rng, 5), _complex(rng, (2, 3), np.complex64), _complex(rng, 5)]}


def test_values_and_gradients_are_stock_tensorflows(cfun, oracle):
    request = _cfun_inputs()
    want = oracle("complex_gradients", request)
    g = bridge.Graph()
    with g.as_default():
        z = bridge.placeholder(bridge.complex128, [None], name="z")
        w = bridge.placeholder(bridge.complex64, [None, None], name="w")
        s = bridge.placeholder(bridge.float64, [None], name="s")
        y, v, r = cfun(z, w, s)
        grads = bridge.gradients([y, v, r], [z, w, s], grad_ys=[bridge.constant(gy) for gy in request["grad_ys"]])
    feed = {z: request["z"], w: request["w"], s: request["s"]}
    calls = julia.entry_calls()
    modes = (None, bridge.SessionConfig(julia_thread=True), bridge.SessionConfig(inline_small_graphs=0))
    for config in modes:
        with bridge.Session(g, config=config) as sess:
            got = dict(zip(["y", "v", "r", "grad_z", "grad_w", "grad_s"], sess.run([y, v, r] + grads, feed),
                           strict=True))
        for name, value in got.items():
            expected = want[name]
            assert value.dtype == expected.dtype and value.shape == expected.shape, (name, value.dtype)
            tol = 1e-12 if value.dtype in (np.complex128, np.float64) else 1e-5
            np.testing.assert_allclose(value, expected, rtol=tol, atol=tol, err_msg=f"{name}, {config}")
    assert julia.entry_calls() - calls == 2 * len(modes)  # CFun and CFunGrad took their compiled entries


def test_gradcheck_passes_the_right_gradient_and_fails_a_wrong_convention(cfun, root):
    inputs = _cfun_inputs(1)
    x0 = [inputs["z"], inputs["w"], inputs["s"]]
    result = bridge.gradcheck(cfun, x0, names=["z", "w", "s"])
    assert result.verdict == "PASS", str(result)
    # f'(z) instead of conj(f'(z)): right for real z only, so the complex direction catches it.
    wrong = CFUN_JL.replace("grad_y .* conj.((2 .* z .+ z .^ 2) .* exp.(z))", "grad_y .* (2 .* z .+ z .^ 2) .* exp.(z)")
    wrong = wrong.replace("c_fun", "c_fun_wrong")
    bad = customop.load(op_folder(root, "CFunWrong", CFUN_SPEC.replace("CFun", "CFunWrong"), wrong)).c_fun_wrong
    result = bridge.gradcheck(bad, x0, names=["z", "w", "s"])
    assert result.verdict == "FAIL", str(result)
    # The imaginary part of a complex output counts too: a gradient ignoring it fails.
    imag_blind = CFUN_JL.replace("grad_w .= grad_v .* conj.(cos.(w))", "grad_w .= real.(grad_v) .* conj.(cos.(w))")
    imag_blind = imag_blind.replace("c_fun", "c_fun_blind")
    blind = customop.load(op_folder(root, "CFunBlind", CFUN_SPEC.replace("CFun", "CFunBlind"),
                                    imag_blind)).c_fun_blind
    result = bridge.gradcheck(lambda z, w, s: blind(z, w, s)[1], x0, names=["z", "w", "s"])
    assert result.verdict == "FAIL", str(result)


CLI_SPEC = """
CCli
complex128 z(n)
double s(n)
complex128 y(n) -> output
complex128 r(n) -> output
"""

CLI_JL = """
c_cli(y, r, z, s) = (y .= z .^ 2 .* exp.(z) .+ s; r .= z .* conj.(z) .* z; nothing)
function c_cli_grad(grad_z, grad_s, grad_y, grad_r, y, r, z, s)
    grad_z .= grad_y .* conj.((2 .* z .+ z .^ 2) .* exp.(z)) .+ 2 .* abs2.(z) .* grad_r .+ z .^ 2 .* conj.(grad_r)
    grad_s .= real.(grad_y)
    return nothing
end
"""


def test_tfbridge_gradtest_samples_complex_inputs(root):
    # complex128 only: a float32 (complex64) input leaves gradcheck too few steps above its roundoff.
    folder = op_folder(root, "CCli", CLI_SPEC, CLI_JL)
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "gradtest", str(folder)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "PASS" in proc.stdout
    script = next(folder.glob("build/*/gradtest.py")).read_text()
    assert "(rng.standard_normal((6,)) + 1j * rng.standard_normal((6,))).astype(np.complex128)" in script
    # Without the conj of TF's convention the same test fails.
    (folder / "c_cli.jl").write_text(CLI_JL.replace("grad_y .* conj.((2 .* z .+ z .^ 2) .* exp.(z))",
                                                    "grad_y .* (2 .* z .+ z .^ 2) .* exp.(z)"))
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "gradtest", str(folder)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "FAIL" in proc.stdout, proc.stdout + proc.stderr[-3000:]


# --- ranks, scalars, dynamic outputs, bridge.julia.call ---------------------------------

SHAPES_SPEC = """
CShapes
complex128 a()
complex64 b(p, q, t)
complex128 c(m, n)
complex128 a2() -> output
complex64 b2(p, q, t) -> output
complex128 d(?) -> output
complex64 e(?, ?) -> output
"""

SHAPES_JL = """
function c_shapes(a2, b2, d, e, a, b, c)
    a2[] = a[] * im
    for I in CartesianIndices(b)   # TF index order: b[i, j, k] is TF's b[i-1, j-1, k-1]
        b2[I] = conj(b[I]) + (100 * I[1] + 10 * I[2] + I[3]) * im
    end
    d[] = [a[], 2 * a[], c[1, 2]]
    e[] = c                          # a complex128 view assigned to a complex64 output: converted
    return nothing
end
"""


def test_ranks_scalars_and_dynamic_outputs(root):
    op = customop.load(op_folder(root, "CShapes", SHAPES_SPEC, SHAPES_JL)).c_shapes
    rng = np.random.default_rng(2)
    a, b, c = _complex(rng, ()), _complex(rng, (2, 3, 4), np.complex64), _complex(rng, (2, 3))
    g = bridge.Graph()
    with g.as_default():
        outs = op(a, b, c)
    i, j, k = np.meshgrid(np.arange(1, 3), np.arange(1, 4), np.arange(1, 5), indexing="ij")
    for config in (None, bridge.SessionConfig(julia_thread=True)):
        with bridge.Session(g, config=config) as sess:
            a2, b2, d, e = sess.run(list(outs))
        assert a2.shape == () and a2.dtype == np.complex128 and a2 == a * 1j
        assert b2.dtype == np.complex64
        np.testing.assert_array_equal(b2, np.conj(b) + ((100 * i + 10 * j + k) * 1j).astype(np.complex64))
        np.testing.assert_array_equal(d, [a, 2 * a, c[0, 1]])
        assert e.dtype == np.complex64
        np.testing.assert_array_equal(e, c.astype(np.complex64))


def test_bridge_julia_call_passes_complex_arrays_zero_copy():
    julia.eval("c_double!(x) = (x .*= 2im; x)")
    x = np.array([[1 + 2j, 3j], [4, 5 - 1j]])
    out = julia.call("c_double!", x)
    np.testing.assert_array_equal(x, np.array([[1 + 2j, 3j], [4, 5 - 1j]]) * 2j)  # written in place
    np.testing.assert_array_equal(out, x)
    for dtype, name in ((np.complex64, "ComplexF32"), (np.complex128, "ComplexF64")):
        assert str(julia.call("eltype", np.zeros(2, dtype))) == julia.eval(f"string({name})")
        assert julia.call("identity", np.array([1 + 2j, -3j], dtype)).dtype == dtype
