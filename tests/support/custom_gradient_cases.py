"""Models with custom gradients, written once against a small neutral API, so
that stock TensorFlow (tests/oracle/custom_gradients.py) and the bridge
(tests/grad/test_custom_gradient.py) build the same graphs.

Each case is ``model(api, x) -> loss``: ``x`` is a float64 placeholder fed
``X`` (below), ``loss`` a scalar.  Both sides compute the loss, its gradient
with respect to ``x`` and to every Variable the model made (sorted by name),
and the gradient of the sum of the first-order gradient (second order).
"""
from __future__ import annotations

import numpy as np

X = np.array([0.3, -1.2, 2.5, 100.0])


def log1pexp(api, x):
    @api.custom_gradient
    def f(x):
        e = api.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))
        return api.log1p(e), grad
    return api.sum(f(x))


def clip_backward(api, x):
    @api.custom_gradient
    def clip_gradients(y):
        return y, lambda dy: api.clip_by_norm(dy, 0.5)
    return api.sum(api.square(clip_gradients(api.sin(x))))


def straight_through(api, x):
    @api.custom_gradient
    def round_ste(y):
        return api.round(y), lambda dy: dy
    return api.sum(api.square(round_ste(x * 1.7)) * x)


def two_inputs_two_outputs(api, x):
    @api.custom_gradient
    def f(a, b):
        def grad(dp, ds):
            return dp * b * 2.0 + ds, dp * a * 3.0 + ds
        return (a * b, a + b), grad
    p, s = f(api.sin(x), api.cos(x))
    return api.sum(p * s)


def with_variable(api, x):
    v = api.variable(np.array([1.5, -0.5, 2.0, 0.25]), "v")

    @api.custom_gradient
    def scaled(z):
        out = z * v

        def grad(dz, variables=None):
            return dz * v * 2.0, [dz * z * 3.0]
        return out, grad
    return api.sum(api.square(scaled(x)))


def nested(api, x):
    @api.custom_gradient
    def inner(y):
        return api.tanh(y), lambda dy: dy * 0.5

    @api.custom_gradient
    def outer(y):
        z = inner(y) * y

        def grad(dz):
            return dz * api.cos(y)
        return z, grad
    return api.sum(outer(x) + inner(x) * x)


def second_order_through_grad_fn(api, x):
    @api.custom_gradient
    def cube(y):
        return y * y * y, lambda dy: dy * 3.0 * y * y
    return api.sum(cube(api.sin(x)))


def inside_while_loop(api, x):
    @api.custom_gradient
    def damp(y):
        return y * 0.9, lambda dy: dy * 0.5

    def body(i, y):
        return i + 1, damp(api.sin(y))
    _, y = api.while_loop(lambda i, y: i < 3, body, [api.constant(0), x])
    return api.sum(y)


def inside_cond(api, x):
    @api.custom_gradient
    def f(y):
        return api.exp(y), lambda dy: dy * 2.0

    y = api.cond(api.sum(x) > 0, lambda: f(x), lambda: x * 3.0)
    return api.sum(y)


CASES = {name: fn for name, fn in globals().items()
         if callable(fn) and not name.startswith("_") and fn.__module__ == __name__}
