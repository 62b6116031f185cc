"""bridge.custom_gradient: TF's @tf.custom_gradient in graph mode, checked against
stock TF (tests/oracle/custom_gradients.py) on the models of
tests/support/custom_gradient_cases.py: values, first- and second-order gradients,
with variables, nested, inside while_loop and cond."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import bridge
from bridge import ops
import support.custom_gradient_cases as cases


def _api() -> SimpleNamespace:
    variables: list = []

    def variable(value, name):
        v = bridge.Variable(value, name=name)
        variables.append(v)
        return v

    def clip_by_norm(t, clip_norm):
        from bridge.train import clip_by_norm as clip
        return clip(t, clip_norm)

    return SimpleNamespace(
        custom_gradient=bridge.custom_gradient, exp=ops.exp, log1p=ops.log1p, sin=ops.sin, cos=ops.cos,
        tanh=ops.tanh, square=ops.square, round=ops.round, sum=lambda t: ops.sum(ops.reshape(t, [-1]), 0),
        clip_by_norm=clip_by_norm, constant=bridge.constant, variable=variable, variables=variables,
        while_loop=bridge.while_loop, cond=bridge.cond)


def _run(name: str) -> dict:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [len(cases.X)], name="x")
        api = _api()
        loss = cases.CASES[name](api, x)
        xs = [x] + sorted(api.variables, key=lambda v: v.name)
        grads = bridge.gradients(loss, xs)
        total = ops.add_n([api.sum(gr) for gr in grads if gr is not None])
        second = bridge.gradients(total, xs)
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        feed = {x: cases.X}
        return {"loss": float(sess.run(loss, feed)), "grads": sess.run(grads, feed),
                "second": [None if s is None else sess.run(s, feed) for s in second]}


@pytest.fixture(scope="module")
def golden(oracle) -> dict:
    source = Path(cases.__file__).read_text()  # in the request: an edited case is asked again
    return oracle("custom_gradients", {"cases": sorted(cases.CASES), "source": source})["cases"]


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_custom_gradient_matches_tensorflow(name, golden):
    want = golden[name]
    assert "error" not in want, want.get("error")
    got = _run(name)
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-14)
    assert len(got["grads"]) == len(want["grads"])
    for g, w in zip(got["grads"], want["grads"], strict=True):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    for g, w in zip(got["second"], want["second"], strict=True):
        if w is None:  # TF: not connected; the bridge may say None or zeros
            assert g is None or not np.any(g), g
        else:
            assert g is not None
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_the_function_ops_get_no_gradient():
    """Backpropagation never enters the decorated function: an op there with no
    gradient at all (here a Julia-free stand-in, StopGradient's absence) does
    not matter, only grad_fn's numbers do."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3], name="x")

        @bridge.custom_gradient
        def f(y):
            hidden = ops.round(y * 7.0)  # Round: TF gives it no gradient
            return hidden, lambda dy: dy * 42.0
        dx, = bridge.gradients(ops.sum(f(x), 0), x)
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(dx, {x: np.ones(3)}), np.full(3, 42.0))


def test_variables_need_the_variables_argument():
    g = bridge.Graph()
    with g.as_default():
        v = bridge.Variable(np.ones(3), name="v")

        @bridge.custom_gradient
        def f(y):
            return y * v, lambda dy: dy
        with pytest.raises(TypeError, match="must accept the keyword argument 'variables'.*v"):
            f(bridge.placeholder(bridge.float64, [3]))


def test_wrong_number_of_gradients_is_named():
    g = bridge.Graph()
    with g.as_default():
        a = bridge.placeholder(bridge.float64, [3])

        @bridge.custom_gradient
        def f(y, z):
            return y * z, lambda dy: dy
        out = f(a, a)
        with pytest.raises(ValueError, match="f's grad_fn returned 1 gradients for 2 inputs"):
            bridge.gradients(ops.sum(out, 0), a)


def test_keyword_arguments_are_refused_as_in_tf():
    @bridge.custom_gradient
    def f(y, scale=2.0):
        return y * scale, lambda dy: dy
    g = bridge.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="keyword arguments"):
            f(bridge.placeholder(bridge.float64, [3]), scale=3.0)
