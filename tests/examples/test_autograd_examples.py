"""The examples' ops with their gradients from ForwardDiff (issue 37):
TwoLayerAuto (examples/twolayer/forwarddiff) and DiffusionSolve1DAuto
(examples/inverse_diffusion/forwarddiff) run the same forward functions as
TwoLayer and DiffusionSolve1D with `@gradient forwarddiff` in place of the
hand-written backward functions.  Their gradients equal the hand-written ones
to 1e-12 and pass the gradient test; their second derivatives (which the
hand-written ops do not have) match differences of the hand-written gradients.
The whole inverse problem with either gradient is in test_inverse_diffusion.py.
"""
from __future__ import annotations


import numpy as np
import pytest

import bridge
from bridge import ops
from support import REPO
from support.build import skip_without_forwarddiff

skip_without_forwarddiff()

EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def twolayer():
    return (bridge.customop.load(EXAMPLES / "twolayer").two_layer,
            bridge.customop.load(EXAMPLES / "twolayer" / "forwarddiff").two_layer_auto)


@pytest.fixture(scope="module")
def diffusion():
    return (bridge.customop.load(EXAMPLES / "inverse_diffusion").diffusion_solve1d,
            bridge.customop.load(EXAMPLES / "inverse_diffusion" / "forwarddiff").diffusion_solve1d_auto)


def _twolayer_inputs(rng, n=10, h=12, m=8):
    return [rng.standard_normal(n), rng.standard_normal((h, n)) / 3, rng.standard_normal(h),
            rng.standard_normal((m, h)) / 3, rng.standard_normal(m)]


def _diffusion_inputs(rng, cells=40):
    return [0.5 + rng.random(cells), rng.standard_normal(cells - 1)]


def _gradients(op, values, weights):
    """The gradients of sum(weights * op(values)) by every input, through the op's gradient op."""
    g = bridge.Graph()
    with g.as_default():
        inputs = [bridge.constant(v) for v in values]
        grads = bridge.gradients(op(*inputs), inputs, grad_ys=[bridge.constant(weights)])
    with bridge.Session(g) as sess:
        return sess.run(grads)


def _assert_same(got, want, what):
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape, what
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(np.abs(b).max(), 1.0), err_msg=f"{what} {k}")


def test_twolayer_gradient_from_forwarddiff_is_the_hand_written_one(twolayer):
    hand, auto = twolayer
    rng = np.random.default_rng(0)
    values = _twolayer_inputs(rng)
    weights = rng.standard_normal(8 * 10)
    _assert_same(_gradients(auto, values, weights), _gradients(hand, values, weights), "TwoLayer")


def test_diffusion_gradient_from_forwarddiff_is_the_adjoint(diffusion):
    hand, auto = diffusion
    rng = np.random.default_rng(1)
    values = _diffusion_inputs(rng)
    weights = rng.standard_normal(39)
    _assert_same(_gradients(auto, values, weights), _gradients(hand, values, weights), "DiffusionSolve1D")


@pytest.mark.parametrize("example", ["twolayer", "diffusion"])
def test_forwarddiff_gradients_pass_the_gradient_test(twolayer, diffusion, example):
    rng = np.random.default_rng(2)
    auto = (twolayer if example == "twolayer" else diffusion)[1]
    values = _twolayer_inputs(rng) if example == "twolayer" else _diffusion_inputs(rng)
    result = bridge.gradcheck(auto, values)
    assert result.passed and 1.8 < result.slope_first < 2.3, str(result)


def test_diffusion_second_derivative_matches_differences_of_the_adjoint(diffusion):
    """d/dkappa of (dL/dkappa . v) through DiffusionSolve1DAutoGradGrad against
    central differences of the hand-written adjoint gradient."""
    hand, auto = diffusion
    rng = np.random.default_rng(3)
    kappa, f = _diffusion_inputs(rng, cells=12)
    weights, v = rng.standard_normal(11), rng.standard_normal(12)
    g = bridge.Graph()
    with g.as_default():
        k_in, f_in = bridge.constant(kappa), bridge.constant(f)
        grad_kappa, _ = bridge.gradients(auto(k_in, f_in), [k_in, f_in], grad_ys=[bridge.constant(weights)])
        hvp, = bridge.gradients(ops.sum(grad_kappa * bridge.constant(v), 0), k_in)
    with bridge.Session(g) as sess:
        got = sess.run(hvp)

    def adjoint(step):
        return _gradients(hand, [kappa + step * v, f], weights)[0]
    h = 1e-4
    coarse = (adjoint(2 * h) - adjoint(-2 * h)) / (4 * h)
    fine = (adjoint(h) - adjoint(-h)) / (2 * h)
    want = (4 * fine - coarse) / 3   # Richardson: the differences' error falls as h^4
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7 * np.abs(want).max())


def test_both_run_in_reverse_mode(twolayer, diffusion):
    """Nothing in either forward function (TwoLayer's own ForwardDiff.jacobian
    included) keeps the reverse mode from recording it: neither op fell back
    to dual numbers, at load or at a gradient."""
    from bridge import julia
    # Other modules of this process may load ops that fall back on purpose (test_forwarddiff's FdProbe).
    forward_only = julia.eval('join(sort(collect(TFBridge.ForwardDiffGradients.FORWARD_ONLY)), ",")').split(",")
    assert {"TwoLayerAuto", "DiffusionSolve1DAuto"}.isdisjoint(forward_only), forward_only
