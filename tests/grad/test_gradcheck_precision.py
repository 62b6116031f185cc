"""bridge.gradcheck on float32 and float16 (issue 36, item 2): a correct
gradient is never called wrong, at any precision, and wrong ones (off by 2,
off by 1%, NaN) still fail.

Random functions from a fixed seed: a family (sin, exp, tanh, x^2, x^3, log,
softplus, sigmoid, sqrt, sin*exp) of a*x + b at random points in [0.3, 1.7].
Each family and variant (the bridge's own gradient, or a custom gradient
off by a factor) is one graph, built once per dtype and fed (x, a, b) per
case, so hundreds of checks take seconds.  Evaluated at its own precision
(an existing graph is never promoted), and through a function, which
gradcheck evaluates in float64.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.grad.gradient_check import default_steps, gradcheck

# name -> (f, f'), f' for the custom gradients.
FAMILIES = {
    "sin": (ops.sin, ops.cos),
    "exp": (ops.exp, ops.exp),
    "tanh": (ops.tanh, lambda z: 1.0 - ops.tanh(z) * ops.tanh(z)),
    "square": (lambda z: z * z, lambda z: 2.0 * z),
    "cube": (lambda z: z * z * z, lambda z: 3.0 * z * z),
    "log": (ops.log, lambda z: 1.0 / z),
    "softplus": (ops.softplus, ops.sigmoid),
    "sigmoid": (ops.sigmoid, lambda z: ops.sigmoid(z) * (1.0 - ops.sigmoid(z))),
    "sqrt": (ops.sqrt, lambda z: 0.5 / ops.sqrt(z)),
    "sin_exp": (lambda z: ops.sin(z) * ops.exp(z), lambda z: (ops.cos(z) + ops.sin(z)) * ops.exp(z)),
}
RIGHT, TWICE, ONE_PERCENT, NAN = "right", "off by 2", "off by 1%", "NaN"
FACTORS = {TWICE: 2.0, ONE_PERCENT: 1.01, NAN: float("nan")}
POINTS = 8  # per family, dtype and variant: 10 * 8 = 80 functions per dtype and variant


def _applied(family: str, variant: str, z):
    """f(z) with the bridge's gradient (RIGHT) or a custom one off by FACTORS[variant]."""
    f, df = FAMILIES[family]
    if variant == RIGHT:
        return f(z)

    @bridge.custom_gradient
    def wrong(u):
        return f(u), lambda dy: dy * df(u) * FACTORS[variant]
    return wrong(z)


def _cases(rng: np.random.Generator):
    """(family, n, x0, a, b, seed) for POINTS points of each family: a*x + b stays in [0.3, 2.0]."""
    for family in FAMILIES:
        for i in range(POINTS):
            n = (1, 3, 8)[i % 3]
            yield family, n, rng.uniform(0.3, 1.7, n), rng.uniform(0.5, 1.0), rng.uniform(0.0, 0.3), \
                int(rng.integers(1 << 30))


def _native(dtype: str, variant: str) -> collections.Counter:
    """Verdicts at ``dtype``'s own precision: one graph per family (and n), fed per case."""
    verdicts: collections.Counter = collections.Counter()
    graphs: dict = {}
    for family, n, x0, a, b, seed in _cases(np.random.default_rng(36)):
        if (family, n) not in graphs:
            g = bridge.Graph()
            with g.as_default():
                x = bridge.placeholder(dtype, [n], name="x")
                scale = bridge.placeholder(dtype, [], name="a")
                shift = bridge.placeholder(dtype, [], name="b")
                y = _applied(family, variant, x * scale + shift)
            graphs[family, n] = (x, scale, shift, y, bridge.Session(g))
        x, scale, shift, y, sess = graphs[family, n]
        result = gradcheck(y, x0.astype(dtype), x=x, feed_dict={scale: a, shift: b}, session=sess, seed=seed)
        assert result.dtype == dtype
        verdicts[result.verdict] += 1
        if variant == ONE_PERCENT and result.verdict == "PASS":
            # A 1% error passes only where the test said it could not see one that small.
            assert result.resolution > 0.01 and "this test cannot see an error in g v" in result.message, \
                (dtype, family, str(result))
    for *_, sess in graphs.values():
        sess.close()
    return verdicts


@pytest.fixture(scope="module")
def native() -> dict:
    return {(dtype, variant): _native(dtype, variant)
            for dtype in ("float32", "float16") for variant in (RIGHT, TWICE, ONE_PERCENT, NAN)}


def test_correct_low_precision_gradients_are_never_called_wrong(native) -> None:
    """160 correct functions evaluated in float32 and float16 themselves: no FAIL.
    Where float16 leaves too few steps above roundoff the verdict is CANNOT TEST."""
    for dtype in ("float32", "float16"):
        verdicts = native[dtype, RIGHT]
        assert sum(verdicts.values()) == len(FAMILIES) * POINTS
        assert verdicts["FAIL"] == 0, (dtype, verdicts)
        assert set(verdicts) <= {"PASS", "CANNOT TEST"}, (dtype, verdicts)
    # Not vacuous: float32 tests nearly all of them, float16 a good part.
    assert native["float32", RIGHT]["PASS"] >= 0.9 * len(FAMILIES) * POINTS, native["float32", RIGHT]
    assert native["float16", RIGHT]["PASS"] >= 0.2 * len(FAMILIES) * POINTS, native["float16", RIGHT]


def test_wrong_low_precision_gradients_still_fail(native) -> None:
    total = len(FAMILIES) * POINTS
    assert native["float32", TWICE] == {"FAIL": total}
    assert native["float32", NAN] == {"FAIL": total}
    assert native["float16", NAN] == {"FAIL": total}
    # float16 sees a gradient off by 2 nearly always, and never passes it.
    assert native["float16", TWICE]["PASS"] == 0 and native["float16", TWICE]["FAIL"] >= 0.8 * total
    # 1% is float32's to see (the few it passes say they could not); float16 cannot see it often.
    assert native["float32", ONE_PERCENT]["FAIL"] >= 0.9 * total, native["float32", ONE_PERCENT]


def test_functions_are_evaluated_in_float64_where_they_accept_it() -> None:
    """The default: a float32 or float16 x0 of a function is evaluated in
    float64, so every correct function passes and every wrong one fails."""
    rng = np.random.default_rng(37)
    verdicts: collections.Counter = collections.Counter()
    for i, (family, n, x0, a, b, seed) in enumerate(_cases(rng)):
        dtype = ("float32", "float16")[i % 2]
        for variant in (RIGHT, TWICE, ONE_PERCENT, NAN):
            result = gradcheck(lambda x: _applied(family, variant, x * a + b), x0.astype(dtype), seed=seed)
            verdicts[variant, result.verdict] += 1
            assert result.dtype == "float64"
            assert f"evaluated in float64: x0 is {dtype}, and f accepts float64" in result.message
    total = len(FAMILIES) * POINTS
    assert verdicts == {(RIGHT, "PASS"): total, (TWICE, "FAIL"): total, (ONE_PERCENT, "FAIL"): total,
                        (NAN, "FAIL"): total}, verdicts


def test_softplus_in_float32_passes_and_promote_false_tests_float32_itself() -> None:
    """The issue's case: softplus at float32 failed with 'only one step rose above roundoff'."""
    x0 = np.array([0.3, 0.9, 1.4, 1.7], dtype=np.float32)
    promoted = gradcheck(ops.softplus, x0)
    assert promoted.verdict == "PASS" and promoted.dtype == "float64"
    assert list(promoted.steps) == list(default_steps("float64"))
    own = gradcheck(ops.softplus, x0, promote=False)
    assert own.verdict == "PASS" and own.dtype == "float32", str(own)
    assert list(own.steps) == list(default_steps("float32"))
    assert own.slope_first == pytest.approx(2.0, abs=0.15)
    assert "evaluated in" not in own.message


def test_default_steps_follow_the_precision() -> None:
    assert default_steps("float64") == (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
    assert default_steps("float64", 2) == tuple(10.0 ** -(k / 2) for k in range(2, 8))
    for dtype, order, first, last in (("float32", 1, -0.75, -3.5), ("float32", 2, -0.25, -2.5),
                                      ("float16", 1, -0.25, -1.5), ("float16", 2, -0.25, -1.25)):
        steps = default_steps(dtype, order)
        np.testing.assert_allclose(np.log10(steps), np.arange(first, last - 0.01, -0.25), err_msg=dtype)


def test_a_constant_in_float16_is_constant_and_tiny_moves_cannot_be_tested() -> None:
    result = gradcheck(lambda x: ops.stop_gradient(x) * 0.0 + 2.0, np.ones(3, np.float16), promote=False)
    assert result.verdict == "CONSTANT" and not result.passed
    # x^2 along a direction of 1e-3: f moves by less than float16 resolves.
    result = gradcheck(lambda x: x * x, np.ones(3, np.float16), promote=False, direction=np.full(3, 1e-3))
    assert result.verdict in ("CONSTANT", "CANNOT TEST") and not result.passed, str(result)
