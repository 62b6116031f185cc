"""Matrix products in the reverse mode of `@gradient forwarddiff` (issue 37,
part 3: cost): a product of tracked matrices is one entry of the tape
(julia/ForwardDiffGradients/products.jl), its values and its sweep back by
BLAS, where it was two scalar nodes per multiply-add (TwoLayer's
ForwardDiff.jacobian of two 21 x 21 layers: 47,000 nodes, 7x its
hand-written gradient run).

One op, FdProd, takes every way Julia reaches a product: `a * b`, in-place
`mul!` with and without alpha and beta into an output, a constant matrix
times a tracked one, transposes and adjoints of matrices and vectors
(`transpose(a) * v`, `a' * a`, `x' * s`), and inside ForwardDiff.jacobian
products of dual numbers over tracked numbers, with partials on one side
and on both.  Its gradients by the reverse mode equal those by dual numbers
(TFBridge.ForwardDiffGradients.MODE[] = :forward, which never records a
product) to 1e-12 and central differences of its forward outputs (numpy) to
1e-6, at sizes that take Julia's 2 x 2 and 3 x 3 special cases and
rectangular ones; its second derivatives equal differences of those
gradients; the tape of a 20 x 20 x 20 run holds fewer nodes than one of
its products recorded scalar by scalar would.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import customop, julia, ops
from support.build import op_folder, skip_without_forwarddiff

skip_without_forwarddiff()

SPEC = """FdProd
double a(m, k)
double b(k, n)
double x(k)
double c(m, n) -> output
double y(k) -> output
double j(k, k) -> output
@gradient forwarddiff
"""
JL = """
using LinearAlgebra
import ForwardDiff

function fd_prod(c, y, j, a, b, x)
    m = size(a, 1)
    K = [sin(i + 2l) for i in 1:m, l in 1:m]       # a constant factor
    mul!(c, a, b)                                    # into the output
    mul!(c, K, a * b, 0.5, 2.0)                      # c = 0.5 K a b + 2 c
    s = a' * a
    y .= transpose(a) * (a * x) .+ s * x .+ vec(x' * s)
    # Dual numbers times tracked ones (s * v), partials on both sides (1 x k times k x 1); two partials
    # a pass whatever k (ForwardDiff's default, k, would compile new types at every size).
    f(v) = tanh.(s * v) .+ (reshape(v, 1, :) * reshape(v, :, 1))[1] .* v
    v = collect(x)
    j .= ForwardDiff.jacobian(f, v, ForwardDiff.JacobianConfig(f, v, ForwardDiff.Chunk{2}()))
    return nothing
end
"""


def _forward(a, b, x):
    """FdProd's outputs, by numpy."""
    m = a.shape[0]
    i, l = np.meshgrid(np.arange(1, m + 1), np.arange(1, m + 1), indexing="ij")
    K = np.sin(i + 2 * l)
    c = 0.5 * K @ a @ b + 2 * a @ b
    s = a.T @ a
    y = 3 * s @ x
    t = np.tanh(s @ x)
    j = (1 - t ** 2)[:, None] * s + (x @ x) * np.eye(len(x)) + 2 * np.outer(x, x)
    return c, y, j


@pytest.fixture(scope="module")
def fd_prod(tmp_path_factory):
    folder = op_folder(tmp_path_factory.mktemp("products").resolve(), "FdProd", SPEC, JL)
    return customop.load(folder).fd_prod


@pytest.fixture
def mode():
    """Set TFBridge.ForwardDiffGradients.MODE for the test; back to :auto after."""
    def set_mode(name: str) -> None:
        julia.eval(f"TFBridge.ForwardDiffGradients.MODE[] = :{name}")
    yield set_mode
    set_mode("auto")


def _values(rng, m, k, n):
    return rng.standard_normal((m, k)) / 2, rng.standard_normal((k, n)), rng.standard_normal(k) / 2


def _graph(fd_prod, values, weights):
    g = bridge.Graph()
    with g.as_default():
        inputs = [bridge.constant(v) for v in values]
        outputs = fd_prod(*inputs)
        loss = ops.add_n([ops.sum(ops.reshape(o * bridge.constant(w), [-1]), 0)
                          for o, w in zip(outputs, weights, strict=True)])
        grads = bridge.gradients(loss, inputs)
    return g, inputs, outputs, grads


def _close(got, want, what, rtol):
    assert np.all(np.isfinite(got)), f"{what}: not finite"
    scale = max(np.abs(want).max(initial=0.0), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale, err_msg=what)


SIZES = [(2, 2, 2), (3, 3, 3), (4, 5, 3)]


@pytest.mark.parametrize("m,k,n", SIZES, ids=["2x2", "3x3", "rectangular"])
def test_gradients_through_products_equal_dual_numbers_and_differences(fd_prod, mode, m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    values = _values(rng, m, k, n)
    weights = [rng.standard_normal(s) for s in [(m, n), (k,), (k, k)]]
    g, _, outputs, grads = _graph(fd_prod, values, weights)
    with bridge.Session(g) as sess:
        for got, want, name in zip(sess.run(list(outputs)), _forward(*values), "cyj", strict=True):
            _close(got, want, f"output {name}", 1e-12)
        mode("reverse")
        reverse = sess.run(grads)
        mode("forward")
        dual = sess.run(grads)

    def loss(a, b, x):
        return sum(float(np.sum(o * w)) for o, w in zip(_forward(a, b, x), weights, strict=True))
    h = 1e-6
    for i, (name, r, d) in enumerate(zip("abx", reverse, dual, strict=True)):
        assert np.abs(r).max() > 1e-3, f"gradient of {name} vanishes: the check would test nothing"
        _close(r, d, f"gradient of {name}: reverse mode against dual numbers", 1e-12)
        numeric = np.zeros_like(values[i])
        for idx in np.ndindex(values[i].shape):
            plus, minus = [v.copy() for v in values], [v.copy() for v in values]
            plus[i][idx] += h
            minus[i][idx] -= h
            numeric[idx] = (loss(*plus) - loss(*minus)) / (2 * h)
        _close(r, numeric, f"gradient of {name} against central differences", 1e-6)


def test_second_derivatives_through_products_equal_differences_of_the_gradients(fd_prod, mode):
    """Hessian-vector products (FdProdGradGrad: the tape's values are dual
    numbers moving along the direction, and so are a product's) against
    central differences of the first-order gradients along the direction,
    Richardson-extrapolated (exact to about 1e-10 here)."""
    rng = np.random.default_rng(7)
    values = _values(rng, 4, 5, 3)
    weights = [rng.standard_normal(s) for s in [(4, 3), (5,), (5, 5)]]
    direction = [rng.standard_normal(v.shape) for v in values]
    g, inputs, _, grads = _graph(fd_prod, values, weights)
    with g.as_default():
        along = ops.add_n([ops.sum(ops.reshape(gr * bridge.constant(d), [-1]), 0)
                           for gr, d in zip(grads, direction, strict=True)])
        hv = bridge.gradients(along, inputs)
        assert "FdProdGradGrad" in {op.type for op in g.get_operations()}
    mode("reverse")
    with bridge.Session(g) as sess:
        got = sess.run(hv)

        def central(h):
            def moved(step):
                return dict(zip(inputs, [v + step * d for v, d in zip(values, direction, strict=True)], strict=True))
            plus, minus = sess.run(grads, moved(h)), sess.run(grads, moved(-h))
            return [(p - q) / (2 * h) for p, q in zip(plus, minus, strict=True)]
        coarse, fine = central(2e-4), central(1e-4)
    for name, r, c, f in zip("abx", got, coarse, fine, strict=True):
        assert np.abs(r).max() > 1e-3, f"second derivative along {name} vanishes"
        _close(r, (4 * f - c) / 3, f"Hessian-vector product, {name}, against differences of the gradients", 1e-8)


def test_a_product_is_one_entry_of_the_tape(fd_prod, mode):
    """At m = k = n = 20 the forward function makes three 20 x 20 x 20
    products (a * b, K (a b), a' a): scalar by scalar each would record
    2 x 8,000 nodes, 48,000 in all; recorded as products the whole tape is
    a few thousand (the products' elements, the leaves, the elementwise work)."""
    rng = np.random.default_rng(11)
    values = _values(rng, 20, 20, 20)
    weights = [rng.standard_normal(s) for s in [(20, 20), (20,), (20, 20)]]
    g, _, _, grads = _graph(fd_prod, values, weights)
    with bridge.Session(g) as sess:
        mode("reverse")
        sess.run(grads)
    nodes = julia.eval('TFBridge.ForwardDiffGradients.TAPE_SIZES["FdProd"]')
    assert 820 < nodes < 12_000, nodes   # 820: the leaves (a, b and x's elements) alone
