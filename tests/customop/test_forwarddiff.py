"""`@gradient forwarddiff` (issue 37, part 1): an op's gradient op, and that
gradient op's gradient op, computed by ForwardDiff from the forward function.

Three ops, each built once for the module:
- FdMix: every kind of argument at once (float64, float32, complex128 and
  complex64 inputs and outputs, named dimensions, a rank-3 input, an int32 input and an
  int64 output, a string input, a dynamic output sized by the int input, a
  double attribute), against its gradient and second derivatives worked out
  by hand, also with empty inputs;
- FdRosen: the Rosenbrock function of x, for Hessians, Hessian-vector
  products and ScipyOptimizer's Newton-CG against the analytic second
  derivative, in every mode Julia ops run in, and under deadlines (an int
  input makes each forward pass spin);
- FdProbe: forward functions that cannot take dual numbers, refused at load.

The gradients run in reverse mode (a tape of the forward function's scalar
operations) unless the op needs dual numbers; the `ad` fixture runs the
tests of values in both (TFBridge.ForwardDiffGradients.MODE).

Before this issue an op had to bring its backward function: `@gradient` was
an unknown directive, and a Julia op's gradient op had no gradient at all.
ForwardDiff comes from the depot TFBRIDGE_JULIA_DEPOT names (`make test`
sets it); without one the module is skipped.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop, julia, ops
from bridge.customop.environment import how_to_add
from bridge.framework.errors import CancelledError, DeadlineExceededError, InvalidArgumentError
from support import REPO
from support.build import op_folder, skip_without_forwarddiff

skip_without_forwarddiff()

MIX_SPEC = """FdMix
double x(n)
double w(m, n)
complex128 z(m)
float s(m)
double a(m, n, q)
complex64 zc(m)
int32 k()
string tag()
double y(m) -> output
complex128 v(m) -> output
float t(m) -> output
complex64 vc(m) -> output
int64 c() -> output
double p(?) -> output
@attr double alpha = 0.5
@gradient forwarddiff
"""
MIX_JL = """
function fd_mix(y, v, t, vc, c, p, x, w, z, s, a, zc, k, tag, alpha)
    u = w * x
    extra = zeros(eltype(a), size(a, 1))
    for i in axes(a, 1), j in axes(a, 2), l in axes(a, 3)
        extra[i] += a[i, j, l]^2 * l
    end
    y .= alpha .* sin.(u) .+ s .* u .^ 2 .+ extra
    v .= z .* abs2.(z) .+ y .* conj.(z)
    t .= s .^ 3 .* k[] .+ Float32(alpha) .* sum(x)
    vc .= zc .* zc
    c[] = length(tag) + k[]
    p[] = x[1:k[]] .* alpha
    return nothing
end
"""
ROSEN_SPEC = """FdRosen
double x(n)
int64 spin()
double f() -> output
@gradient forwarddiff
"""
# `spin` milliseconds of work per call, which never asks whether the run was
# abandoned: only the gradient's passes do.
ROSEN_JL = """
const FD_ROSEN_CALLS = Threads.Atomic{Int}(0)
function fd_rosen(f, x, spin)
    Threads.atomic_add!(FD_ROSEN_CALLS, 1)
    t0 = time()
    while time() - t0 < spin[] / 1000
    end
    total = zero(eltype(x))
    for i in 1:length(x) - 1
        total += 100 * (x[i + 1] - x[i]^2)^2 + (1 - x[i])^2
    end
    f[] = total
    return nothing
end
"""
PROBE_SPEC = """FdProbe
double x(n)
double y(?) -> output
@forward FdProbeJl.f
@gradient forwarddiff
"""


def _probe_module(*lines: str) -> str:
    return "module FdProbeJl\n" + "\n".join(lines) + "\nend\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("forwarddiff").resolve()
    folders = {"mix": op_folder(root, "FdMix", MIX_SPEC, MIX_JL),
               "rosen": op_folder(root, "FdRosen", ROSEN_SPEC, ROSEN_JL),
               "probe": op_folder(root, "FdProbe", PROBE_SPEC, _probe_module("f(y, x) = (y[] = 2 .* x; nothing)"))}
    with pytest.warns(customop.DynamicOutputWarning):  # FdProbe's y(?): announced by the build, as for any op
        modules = {name: customop.load(folder) for name, folder in folders.items()}
    return folders, modules


@pytest.fixture(params=["reverse", "forward"])
def ad(request, built):
    """Every gradient of the test by the reverse mode (the default), or by dual numbers."""
    julia.eval(f"TFBridge.ForwardDiffGradients.MODE[] = :{request.param}")
    yield request.param
    julia.eval("TFBridge.ForwardDiffGradients.MODE[] = :auto")


def test_the_ops_forward_functions_run_in_reverse_mode_by_default(built):
    """Their check at load found nothing the reverse mode cannot record."""
    assert julia.eval("TFBridge.ForwardDiffGradients.MODE[] === :auto") is True
    assert julia.eval('join(sort(collect(TFBridge.ForwardDiffGradients.FORWARD_ONLY)), ",")') == ""


# ---------------------------------------------------------------- FdMix: every kind of argument

def _mix_values(rng, m=3, n=4, q=2, k=2):
    return {"x": rng.standard_normal(n), "w": rng.standard_normal((m, n)),
            "z": rng.standard_normal(m) + 1j * rng.standard_normal(m),
            "s": rng.standard_normal(m).astype(np.float32), "a": rng.standard_normal((m, n, q)),
            "zc": (rng.standard_normal(m) + 1j * rng.standard_normal(m)).astype(np.complex64),
            "k": np.int32(k), "tag": "abc"}


def _mix_weights(rng, m, k):
    return {"y": rng.standard_normal(m), "v": rng.standard_normal(m) + 1j * rng.standard_normal(m),
            "t": rng.standard_normal(m).astype(np.float32), "p": rng.standard_normal(k),
            "vc": (rng.standard_normal(m) + 1j * rng.standard_normal(m)).astype(np.complex64)}


ALPHA = 0.5


def _mix_forward(x, w, z, s, a, k):
    s = s.astype(np.float64)
    u = w @ x
    weights = np.arange(1, a.shape[2] + 1)
    y = ALPHA * np.sin(u) + s * u ** 2 + (a ** 2 * weights).sum(axis=(1, 2))
    return y, z * np.abs(z) ** 2 + y * np.conj(z)


def _mix_gradient(values, gy, gv, gt, gp, gvc):
    """dL/d(x, w, z, s, a, zc) for L = gy.y + re(conj(gv).v) + gt.t + gp.p + re(conj(gvc).vc), by
    hand (a complex gradient as TensorFlow has it: dL/d(re z) + i dL/d(im z))."""
    x, w, z, a, k = values["x"], values["w"], values["z"], values["a"], int(values["k"])
    s = values["s"].astype(np.float64)
    u = w @ x
    y, _ = _mix_forward(x, w, z, values["s"], a, k)
    gyt = gy + np.real(np.conj(gv) * np.conj(z))              # y also feeds v
    gu = gyt * (ALPHA * np.cos(u) + 2 * s * u)
    gx = w.T @ gu + ALPHA * np.sum(gt.astype(np.float64))
    gx[:k] += ALPHA * gp
    weights = np.arange(1, a.shape[2] + 1)
    d_re = 2 * np.abs(z) ** 2 + z ** 2 + y                      # dv/d(re z)
    d_im = 1j * (2 * np.abs(z) ** 2 - z ** 2 - y)               # dv/d(im z)
    gz = np.real(np.conj(gv) * d_re) + 1j * np.real(np.conj(gv) * d_im)
    gs = gyt * u ** 2 + gt.astype(np.float64) * 3 * s ** 2 * k
    ga = gyt[:, None, None] * 2 * a * weights
    gzc = np.conj(2 * values["zc"].astype(np.complex128)) * gvc   # vc = zc^2, holomorphic
    return {"x": gx, "w": np.outer(gu, x), "z": gz, "s": gs, "a": ga, "zc": gzc}


FLOATS = ["x", "w", "z", "s", "a", "zc"]
SINGLE = {"s": 1e-5, "zc": 1e-5}   # float32 and complex64 inputs: relative tolerances of their gradients


def _mix_graph(mix, values, weights):
    """The inputs as constants, the weighted loss, its gradients and outputs."""
    g = bridge.Graph()
    with g.as_default():
        inputs = {name: bridge.constant(values[name]) for name in FLOATS + ["k"]}
        y, v, t, vc, c, p = mix(inputs["x"], inputs["w"], inputs["z"], inputs["s"], inputs["a"], inputs["zc"],
                                inputs["k"], bridge.constant(values["tag"]), alpha=ALPHA)
        loss = (ops.sum(y * bridge.constant(weights["y"]), 0)
                + ops.sum(ops.real(ops.conj(bridge.constant(weights["v"])) * v, Tout=bridge.float64), 0)
                + ops.cast(ops.sum(t * bridge.constant(weights["t"]), 0), DstT=bridge.float64)
                + ops.sum(p * bridge.constant(weights["p"]), 0)
                + ops.cast(ops.sum(ops.real(ops.conj(bridge.constant(weights["vc"])) * vc), 0), DstT=bridge.float64))
        grads = bridge.gradients(loss, [inputs[name] for name in FLOATS])
    return g, inputs, loss, grads, (y, v, t, vc, c, p)


def _close(got, want, name, rtol=1e-12):
    scale = max(np.abs(want).max(initial=0.0), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale, err_msg=name)


@pytest.mark.parametrize("sizes", [dict(m=3, n=4, q=2, k=2), dict(m=3, n=0, q=2, k=0), dict(m=0, n=4, q=3, k=4)],
                         ids=["sizes", "empty-n", "empty-m"])
def test_every_kind_of_argument_gets_its_gradient_and_the_others_none(built, ad, sizes):
    mix = built[1]["mix"].fd_mix
    rng = np.random.default_rng(1)
    values = _mix_values(rng, **sizes)
    weights = _mix_weights(rng, sizes["m"], sizes["k"])
    g, inputs, _, grads, outs = _mix_graph(mix, values, weights)
    with g.as_default():
        none = bridge.gradients(ops.sum(outs[0], 0), [inputs["k"]])   # the int32 input: no gradient
    assert none == [None]
    with bridge.Session(g) as sess:
        got = dict(zip(FLOATS, sess.run(grads), strict=True))
        y, v, t, vc, c, p = sess.run(list(outs))
    want = _mix_gradient(values, weights["y"], weights["v"], weights["t"], weights["p"], weights["vc"])
    for name in FLOATS:
        assert got[name].shape == values[name].shape and got[name].dtype == values[name].dtype, name
        _close(got[name], want[name], name, rtol=SINGLE.get(name, 1e-12))
    np.testing.assert_allclose(vc, values["zc"] ** 2, rtol=1e-6)
    assert c == 3 + sizes["k"] and p.shape == (sizes["k"],)
    np.testing.assert_allclose(y, _mix_forward(values["x"], values["w"], values["z"], values["s"], values["a"],
                                               sizes["k"])[0], rtol=1e-5)


def _real_dot(a: bridge.Output, b: np.ndarray) -> bridge.Output:
    """sum(re(conj(a) * b)): the real inner product, for real and complex tensors alike."""
    if a.dtype.is_complex:
        part = bridge.float32 if a.dtype == bridge.complex64 else bridge.float64
        return ops.cast(ops.sum(ops.reshape(ops.real(ops.conj(a) * bridge.constant(b), Tout=part), [-1]), 0),
                        DstT=bridge.float64)
    return ops.cast(ops.sum(ops.reshape(a * bridge.constant(b), [-1]), 0), DstT=bridge.float64)


def test_second_derivatives_of_every_float_input_match_the_hand_worked_ones(built, ad):
    """The Hessian-vector product of the loss along a direction of every float
    input (complex ones as two real parts) through FdMixGradGrad, against
    central differences of the hand-worked gradient (Richardson-extrapolated:
    exact to ~1e-11)."""
    mix = built[1]["mix"].fd_mix
    rng = np.random.default_rng(2)
    values, weights = _mix_values(rng), _mix_weights(rng, 3, 2)
    direction = {name: (rng.standard_normal(values[name].shape)
                        + (1j * rng.standard_normal(values[name].shape) if name in ("z", "zc") else 0)).astype(values[name].dtype)
                 for name in FLOATS}
    g, inputs, _, grads, _ = _mix_graph(mix, values, weights)
    with g.as_default():
        along = ops.add_n([_real_dot(gr, direction[name]) for gr, name in zip(grads, FLOATS, strict=True)])
        hv = bridge.gradients(along, [inputs[name] for name in FLOATS])
        assert {op.type for op in g.get_operations()} >= {"FdMixGrad", "FdMixGradGrad"}
    with bridge.Session(g) as sess:
        got = dict(zip(FLOATS, sess.run(hv), strict=True))

    def central(h):
        def moved(step):  # in 64 bits: a float32 step would round the move
            return {**values, **{n: values[n].astype(np.complex128 if n in ("z", "zc") else np.float64)
                                 + step * direction[n].astype(np.complex128 if n in ("z", "zc") else np.float64)
                                 for n in FLOATS}}
        weights_now = [weights[k] for k in ("y", "v", "t", "p", "vc")]
        plus, minus = _mix_gradient(moved(h), *weights_now), _mix_gradient(moved(-h), *weights_now)
        return {n: (plus[n] - minus[n]) / (2 * h) for n in FLOATS}
    coarse, fine = central(2e-4), central(1e-4)
    for name in FLOATS:
        want = (4 * fine[name] - coarse[name]) / 3
        _close(got[name], want, name, rtol=SINGLE.get(name, 1e-9))


def test_a_hessian_through_the_op_is_the_analytic_one(built, ad):
    mix = built[1]["mix"].fd_mix
    rng = np.random.default_rng(3)
    values, weights = _mix_values(rng), _mix_weights(rng, 3, 2)
    g, inputs, loss, _, _ = _mix_graph(mix, values, weights)
    with g.as_default():
        hessian = bridge.hessian(loss, inputs["x"])
    with bridge.Session(g) as sess:
        got = sess.run(hessian)
    x, w, z, s = values["x"], values["w"], values["z"], values["s"].astype(np.float64)
    u = w @ x
    gyt = weights["y"] + np.real(np.conj(weights["v"]) * np.conj(z))
    want = w.T @ np.diag(gyt * (2 * s - ALPHA * np.sin(u))) @ w
    _close(got, want, "hessian", rtol=1e-12)


# ---------------------------------------------------------------- FdRosen: second order, modes, deadlines

def _rosen(x):
    return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


def _rosen_gradient(x):
    g = np.zeros_like(x)
    g[:-1] += -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return g


def _rosen_hessian(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        h[i + 1, i + 1] += 200
        h[i, i + 1] -= 400 * x[i]
        h[i + 1, i] -= 400 * x[i]
    return h


MODES = ["posted", "synchronous", "julia_thread"]


class _Mode:
    """A session in one of the modes Julia ops run in (as tests/julia/test_interrupts.py makes them)."""

    def __init__(self, graph, mode):
        self.saved = os.environ.get("TFBRIDGE_JULIA_ASYNC")
        if mode == "synchronous":  # read as the session makes its kernels
            os.environ["TFBRIDGE_JULIA_ASYNC"] = "0"
        self.session = bridge.Session(graph, config=bridge.SessionConfig(julia_thread=True)
                                      if mode == "julia_thread" else None)

    def __enter__(self):
        return self.session

    def __exit__(self, *exc):
        self.session.close()
        if self.saved is None:
            os.environ.pop("TFBRIDGE_JULIA_ASYNC", None)
        else:
            os.environ["TFBRIDGE_JULIA_ASYNC"] = self.saved


def _rosen_graph(rosen, n):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [n], name="x")
        spin = bridge.placeholder(bridge.int64, [], name="spin")
        f = rosen(x, spin)
        grad, = bridge.gradients(f, x)
        hessian = bridge.hessian(f, x)
        vector = bridge.placeholder(bridge.float64, [n], name="vector")
        hvp, = bridge.gradients(ops.sum(grad * vector, 0), x)
    return g, x, spin, vector, f, grad, hessian, hvp


@pytest.mark.parametrize("mode", MODES)
def test_hessian_and_hessian_vector_products_are_the_analytic_ones_in_every_mode(built, ad, mode):
    rosen = built[1]["rosen"].fd_rosen
    g, x, spin, vector, f, grad, hessian, hvp = _rosen_graph(rosen, 5)
    rng = np.random.default_rng(4)
    x0, v0 = rng.standard_normal(5), rng.standard_normal(5)
    with _Mode(g, mode) as sess:
        got_f, got_g, got_h, got_hv = sess.run([f, grad, hessian, hvp], {x: x0, spin: 0, vector: v0})
    assert got_f == pytest.approx(_rosen(x0), rel=1e-14)
    _close(got_g, _rosen_gradient(x0), "gradient")
    _close(got_h, _rosen_hessian(x0), "hessian")
    _close(got_hv, _rosen_hessian(x0) @ v0, "hessian-vector product")


def test_the_hessian_at_the_minimum_where_every_first_order_adjoint_vanishes(built, ad):
    """At Rosenbrock's minimum (x = 1) every first-order adjoint of the tape is
    zero while its moves along the direction are not: the sweep of second
    order must not skip a node whose adjoint is a dual number of value zero
    (ForwardDiff's iszero looks at the value alone; the sweep skipped those,
    and the Hessian came out all zeros)."""
    rosen = built[1]["rosen"].fd_rosen
    g, x, spin, vector, f, grad, hessian, hvp = _rosen_graph(rosen, 3)
    x0, v0 = np.ones(3), np.array([1.0, -2.0, 0.5])
    with bridge.Session(g) as sess:
        got_g, got_h, got_hv = sess.run([grad, hessian, hvp], {x: x0, spin: 0, vector: v0})
    assert np.all(got_g == 0)
    _close(got_h, _rosen_hessian(x0), "hessian at the minimum")
    _close(got_hv, _rosen_hessian(x0) @ v0, "hessian-vector product at the minimum")


@pytest.mark.parametrize("example", ["rosen", "mix"])
def test_second_order_gradient_test_passes(built, example):
    """bridge.gradcheck(order=2) (issue 37, part 2): the Taylor remainder with
    the Hessian through <Op>GradGrad falls like h^3."""
    if example == "rosen":
        rosen = built[1]["rosen"].fd_rosen
        result = bridge.gradcheck(lambda x: rosen(x, bridge.constant(np.int64(0))),
                                  np.array([-1.2, 1.0, -0.5, 0.8]), order=2)
    else:
        mix = built[1]["mix"].fd_mix
        rng = np.random.default_rng(5)
        values = _mix_values(rng)

        def f(x, w, a):
            y, v, t, vc, c, p = mix(x, w, bridge.constant(values["z"]), bridge.constant(values["s"]), a,
                                    bridge.constant(values["zc"]), bridge.constant(values["k"]),
                                    bridge.constant(values["tag"]), alpha=ALPHA)
            return y
        result = bridge.gradcheck(f, [values["x"], values["w"], values["a"]], order=2)
    assert result.passed, str(result)


def test_newton_cg_minimizes_through_the_op(built):
    rosen = built[1]["rosen"].fd_rosen
    g = bridge.Graph()
    with g.as_default():
        x = bridge.Variable(np.array([-1.2, 1.0, -0.5, 0.8]), name="x")
        loss = rosen(x.value(), bridge.constant(np.int64(0)))
        optimizer = bridge.train.ScipyOptimizer(loss, method="Newton-CG", options={"maxiter": 100, "xtol": 1e-12})
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        result = optimizer.minimize(sess)
        found = sess.run(x.value())
    assert result.success, result.message
    assert optimizer.hessp_evaluations > 0
    np.testing.assert_allclose(found, np.ones(4), atol=1e-8)


def test_a_third_order_is_refused_naming_the_op(built):
    rosen = built[1]["rosen"].fd_rosen
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3], name="x")
        grad, = bridge.gradients(rosen(x, bridge.constant(np.int64(0))), x)
        second, = bridge.gradients(ops.sum(grad, 0), x)
        with pytest.raises(LookupError) as info:
            bridge.gradients(ops.sum(second, 0), x)
    assert re.search(r"FdRosenGradGrad \('[^']*FdRosenGradGrad[^']*'\), the second-order gradient op of FdRosen "
                     r"\(@gradient forwarddiff\), has no gradient: derivatives of third order through FdRosen "
                     r"are not available", str(info.value)), str(info.value)


@pytest.mark.serial   # a latency bound: the run ends within 0.5 s of its deadline
@pytest.mark.parametrize("mode", MODES)
def test_a_deadline_stops_the_gradient_between_its_forward_passes(built, mode):
    """By dual numbers, 240 inputs are 30 passes of 8 directions, each
    spinning 0.1 s: the run stops at its 1 s deadline, the gradient at its
    next pass, and the session goes on.  (The reverse mode makes one pass:
    like any Julia op's, it stops where the op's own code asks.)"""
    julia.eval("TFBridge.ForwardDiffGradients.MODE[] = :forward")
    try:
        _deadline(built, mode)
    finally:
        julia.eval("TFBridge.ForwardDiffGradients.MODE[] = :auto")


def _deadline(built, mode):
    rosen = built[1]["rosen"].fd_rosen
    n = 240
    g, x, spin, _, f, grad, _, _ = _rosen_graph(rosen, n)
    x0 = np.linspace(-1, 1, n)
    with _Mode(g, mode) as sess:
        start = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            sess.run(grad, {x: x0, spin: 100}, timeout=1.0)
        assert time.monotonic() - start < 1.5
        calls = julia.eval("Main.FD_ROSEN_CALLS[]")
        time.sleep(0.5)  # at most one pass was still running: it ends, the next one never starts
        stopped = julia.eval("Main.FD_ROSEN_CALLS[]")
        time.sleep(0.5)
        assert julia.eval("Main.FD_ROSEN_CALLS[]") == stopped and stopped <= calls + 1
        _close(sess.run(grad, {x: x0, spin: 0}), _rosen_gradient(x0), "gradient after the deadline")


@pytest.mark.parametrize("mode", MODES)
def test_an_interrupt_cancels_the_gradient_and_stops_its_passes(built, mode):
    """bridge.julia.interrupt() (as Ctrl-C does, docs/internals/interrupts.md) 0.3 s into a gradient by dual
    numbers (30 passes of 0.1 s): the run raises CancelledError, the passes stop long before the 30th,
    and the session's next gradient is right."""
    rosen = built[1]["rosen"].fd_rosen
    n = 240
    g, x, spin, _, f, grad, _, _ = _rosen_graph(rosen, n)
    x0 = np.linspace(-1, 1, n)
    julia.eval("TFBridge.ForwardDiffGradients.MODE[] = :forward")
    try:
        with _Mode(g, mode) as sess:
            before = julia.eval("Main.FD_ROSEN_CALLS[]")
            timer = threading.Timer(0.3, julia.interrupt)
            timer.start()
            with pytest.raises(CancelledError, match="interrupt"):
                sess.run(grad, {x: x0, spin: 100})
            timer.join()
            time.sleep(0.3)   # a pass still running ends; no other starts
            stopped = julia.eval("Main.FD_ROSEN_CALLS[]")
            assert stopped - before < 15, f"{stopped - before} passes ran after the interrupt"
            time.sleep(0.3)
            assert julia.eval("Main.FD_ROSEN_CALLS[]") == stopped
            _close(sess.run(grad, {x: x0, spin: 0}), _rosen_gradient(x0), "gradient after the interrupt")
    finally:
        julia.eval("TFBridge.ForwardDiffGradients.MODE[] = :auto")


# ---------------------------------------------------------------- refused at load

def _probe(built, *definitions: str) -> Path:
    folder = built[0]["probe"]
    source = folder / "fd_probe.jl"
    source.write_text(_probe_module(*definitions))
    return source


def _refusal(built, source: Path, line: int, text: str, why: str, fix: str) -> str:
    spec = built[0]["probe"] / "custom_op.txt"
    return (f"op FdProbe: {spec}:5: @gradient forwarddiff runs the forward function FdProbeJl.f on ForwardDiff's "
            f"dual numbers, which it cannot take: {source}:{line}, in {text}: {why}. Two fixes: {fix}, or write the "
            "backward function FdProbeJl.f_grad in the op's file and replace '@gradient forwarddiff' with it "
            "(docs/guides/julia-ops.md, \"Gradients from ForwardDiff\")")


def test_a_parameter_annotated_float64_is_refused_at_load_naming_line_and_fixes(built):
    source = _probe(built, "f(y, x::AbstractVector{Float64}) = (y[] = 2 .* x; nothing)")
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(built[0]["probe"])
    spec = built[0]["probe"] / "custom_op.txt"
    assert str(info.value) == (
        f"op FdProbe: {spec}:5: @gradient forwarddiff runs the forward function FdProbeJl.f on ForwardDiff's dual "
        f"numbers, which it cannot take: its method at {source}:2 declares x::AbstractArray{{Float64,1}}. Two fixes: "
        "loosen the annotation so that any number type passes (AbstractVector{<:Real}, AbstractArray, or no "
        "annotation), or write the backward function FdProbeJl.f_grad in the op's file and replace "
        "'@gradient forwarddiff' with it (docs/guides/julia-ops.md, \"Gradients from ForwardDiff\")")


def test_an_annotation_in_a_function_it_calls_is_refused_naming_both_lines(built):
    source = _probe(built, "helper(k::Vector{Float64}) = 2 .* k",
                    "function f(y, x)",
                    "    y[] = helper(collect(x))",
                    "end")
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(built[0]["probe"])
    assert str(info.value) == _refusal(
        built, source, 4, "f, `y[] = helper(collect(x))`",
        f"helper(::Array{{Dual{{Float64}},1}}) has no method: helper at {source}:2 declares k::Array{{Float64,1}}",
        "loosen the annotation so that any number type passes (AbstractVector{<:Real}, AbstractArray, or no "
        "annotation)")


def test_a_ccall_is_refused_at_load(built):
    source = _probe(built, "f(y, x) = (y[] = [ccall(:sin, Cdouble, (Cdouble,), v) for v in x]; nothing)")
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(built[0]["probe"])
    assert str(info.value) == _refusal(
        built, source, 2, "f, `f(y, x) = (y[] = [ccall(:sin, Cdouble, (Cdouble,), v) for v in x]; nothing)`",
        "it passes a dual number to C through `ccall`, which takes plain numbers (Float64(::Dual{Float64}) has "
        "no method)", "do that computation in Julia code that takes any number type")


@pytest.mark.parametrize("store", ["buf[i] = 2 * x[i]", "buf .= 2 .* x"])
def test_a_float64_buffer_is_refused_at_load(built, store):
    lines = ["function f(y, x)", "    buf = zeros(length(x))"]
    lines += ["    for i in eachindex(x)", f"        {store}", "    end"] if "[i]" in store else [f"    {store}"]
    source = _probe(built, *lines, "    y[] = buf", "end")
    with pytest.raises(customop.JuliaFunctionError) as info:
        customop.load(built[0]["probe"])
    line = 5 if "[i]" in store else 4
    assert str(info.value) == _refusal(
        built, source, line, f"f, `{store}`",
        "it stores dual numbers into an array of type Array{Float64,1}, allocated with a fixed element type "
        "(zeros(n), Vector{Float64}(undef, n)), which cannot hold them (Float64(::Dual{Float64}) has no method)",
        "allocate it with the inputs' element type (similar(x), zeros(eltype(x), n))")


def test_a_generic_forward_loads_and_its_gradient_runs(built):
    _probe(built, "function f(y, x)", "    buf = similar(x, length(x))", "    buf .= 2 .* x .^ 2",
           "    y[] = buf", "end")
    probe = customop.load(built[0]["probe"]).fd_probe
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(np.array([1.0, -2.0, 3.0]))
        grad, = bridge.gradients(ops.sum(probe(x), 0), x)
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(grad), [4.0, -8.0, 12.0])


def test_a_dynamic_output_whose_size_changes_on_dual_numbers_fails_naming_it(built):
    _probe(built, "f(y, x) = (y[] = eltype(x) === Float64 ? x .* 1 : x[1:1]; nothing)")
    probe = customop.load(built[0]["probe"]).fd_probe
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(np.array([1.0, 2.0]))
        grad, = bridge.gradients(ops.sum(probe(x), 0), x)
    with bridge.Session(g) as sess:
        with pytest.raises(InvalidArgumentError) as info:
            sess.run(grad)
    assert ("DimensionMismatch(\"@gradient forwarddiff: FdProbe's forward function FdProbeJl.f gave its dynamic "
            "output 'y' the size (1,) on dual numbers but (2,) on the op's inputs: the size of a dynamic output must "
            "not depend on the values of the differentiable inputs (write the backward function instead)\")"
            ) in str(info.value)


def test_a_forward_function_computing_on_another_task_gets_its_gradient_by_dual_numbers(built):
    """The reverse mode records on the task running the op, which a spawned
    task is not: the op's gradients fall back to dual numbers, for good."""
    _probe(built, "function f(y, x)", "    t = Threads.@spawn 3 .* x .^ 2", "    y[] = fetch(t)", "end")
    probe = customop.load(built[0]["probe"]).fd_probe
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(np.array([1.0, -2.0, 3.0]))
        grad, = bridge.gradients(ops.sum(probe(x), 0), x)
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(grad), [6.0, -12.0, 18.0])
        assert julia.eval('"FdProbe" in TFBridge.ForwardDiffGradients.FORWARD_ONLY') is True
        np.testing.assert_array_equal(sess.run(grad), [6.0, -12.0, 18.0])


def test_without_forwarddiff_the_op_is_refused_at_load_saying_how_to_install_it(built, tmp_path):
    """A fresh process whose Julia sees no ForwardDiff (an empty depot, no
    TFBRIDGE_JULIA_DEPOT) loads the built FdRosen: refused before any of the
    op's Julia code runs."""
    folder = built[0]["rosen"]
    depot = tmp_path / "empty-depot"
    depot.mkdir()
    code = textwrap.dedent(f"""
        import json
        from bridge import customop, julia
        try:
            customop.load({str(folder)!r})
        except customop.JuliaPackageError as exc:
            ran = julia.eval("isdefined(Main, :FD_ROSEN_CALLS)")
            print(json.dumps({{"message": str(exc), "packages": exc.packages, "ran": ran}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TFBRIDGE_JULIA", "JULIA_"))}
    env.update(PYTHONPATH=str(REPO), JULIA_DEPOT_PATH=str(depot))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["packages"] == ["ForwardDiff"] and got["ran"] is False
    head = (f"op FdRosen ({folder}): '@gradient forwarddiff' ({folder / 'custom_op.txt'}:5) differentiates the op "
            "with the Julia package ForwardDiff, which Julia cannot load: no environment on the load path lists it\n"
            f"(load path: @, @v#.#, @stdlib; depots: {depot}")
    assert got["message"].startswith(head), got["message"]
    assert got["message"].endswith(how_to_add(folder, ["ForwardDiff"])), got["message"]
