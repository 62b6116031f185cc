"""examples/twolayer, the seed example, end to end."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import ops
from support import REPO

EXAMPLE = REPO / "examples" / "twolayer"
N = M = H = 10
# Where this is set (make test sets it to the shared depot), ForwardDiff must be found.
DEPOT = os.environ.get("TFBRIDGE_JULIA_DEPOT", "")


@pytest.fixture(scope="module")
def two_layer():
    return bridge.customop.load(EXAMPLE).two_layer


def _values(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N), rng.standard_normal((H, N)) / 3, rng.standard_normal(H),
            rng.standard_normal((M, H)) / 3, rng.standard_normal(M)]


def test_run_script_matches_tensorflow_gradients(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLE / "run.py")], capture_output=True, text=True,
                          timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("|J_julia - J_tensorflow|"))
    assert float(line.split("=")[1].split()[0]) < 1e-10
    assert "gradcheck PASS" in proc.stdout and proc.stdout.strip().endswith("OK")
    assert "Julia computes the Jacobian with" in proc.stdout
    if DEPOT:
        assert "Julia computes the Jacobian with ForwardDiff.jacobian\n" in proc.stdout, proc.stdout
    else:  # the fallback says why, and how to get ForwardDiff
        assert "ForwardDiff.jacobian\n" in proc.stdout or "TFBRIDGE_JULIA_DEPOT" in proc.stdout, proc.stdout


def test_bridge_jacobian_of_the_network_matches_the_julia_op(two_layer):
    values = _values()
    g = bridge.Graph()
    with g.as_default():
        x, w1, b1, w2, b2 = (bridge.constant(v, bridge.float64) for v in values)
        jac_julia = two_layer(x, w1, b1, w2, b2)
        y = ops.reshape(ops.mat_mul(w2, ops.tanh(ops.mat_mul(w1, ops.reshape(x, [N, 1])) +
                                                   ops.reshape(b1, [H, 1]))), [M]) + b2
        jac_tf = bridge.jacobian(y, x)
    with bridge.Session(g) as sess:
        got, expected = sess.run([jac_julia, jac_tf])
    np.testing.assert_allclose(got.reshape(M, N), expected, rtol=0, atol=1e-12)


def test_the_julia_gradient_of_the_op_passes_gradcheck(two_layer):
    result = bridge.gradcheck(two_layer, _values(2))
    assert result.passed, str(result)
    assert 1.8 < result.slope_first < 2.3


def test_forwarddiff_path_where_installed(two_layer):
    if not bridge.julia.eval('Base.find_package("ForwardDiff") !== nothing'):
        assert not DEPOT, f"TFBRIDGE_JULIA_DEPOT={DEPOT} is set, but Julia does not find ForwardDiff there"
        pytest.skip("ForwardDiff is not installed in this Julia: run through `make test` (which sets "
                    "TFBRIDGE_JULIA_DEPOT to ../shared/julia-depot), or set TFBRIDGE_JULIA_DEPOT to a depot "
                    "holding it, or Pkg.add(\"ForwardDiff\"); the example used the analytic Jacobian, checked "
                    "by the tests above")
    assert bridge.julia.eval("two_layer_method()") == "ForwardDiff.jacobian"
    values = _values(3)
    g = bridge.Graph()
    with g.as_default():
        jac = two_layer(*(bridge.constant(v, bridge.float64) for v in values))
    with bridge.Session(g) as sess:
        got = sess.run(jac).reshape(M, N)
    x, w1, b1, w2, b2 = values
    analytic = w2 @ np.diag(1 - np.tanh(w1 @ x + b1) ** 2) @ w1
    np.testing.assert_allclose(got, analytic, atol=1e-12)
