"""The TwoLayer Jacobian three ways: ForwardDiff in Julia, the analytic
Jacobian in Julia, and TensorFlow's gradients row by row.

examples/twolayer's op computes dy/dx of y = W2*tanh(W1*x + b1) + b2 with
`ForwardDiff.jacobian` where Julia finds ForwardDiff, else analytically.  This
benchmark builds one op (BenchTwoLayerJac, under build/bench/) whose Julia
file includes the example's two_layer.jl and picks the method with a bool
attribute, so both time the example's own functions; the anchor is the
Jacobian the example's run.py builds from TensorFlow ops: one
`bridge.gradients` of y[i] per row, fetched as a list.  All three run in one
default Session per size, each call a Session.run; rounds alternate between
them; figures are the medians of the rounds, with their spread, and ratios
the medians of the paired rounds' ratios.

Sizes: the example's (n = m = h = 10) and n = m = h = 100.  ForwardDiff comes
from TFBRIDGE_JULIA_DEPOT, which `make bench` sets; without it only the
analytic Jacobian and the anchor are timed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Figure, alternating_rounds, julia_op, ratio, ratio_line, report  # noqa: E402

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

EXAMPLE_JL = REPO / "examples" / "twolayer" / "two_layer.jl"
SPEC = """BenchTwoLayerJac
double x(n)
double w1(h,n)
double b1(h)
double w2(m,h)
double b2(m)
@attr bool forwarddiff = true
double jac(m*n) -> output
"""
JULIA = f"""
include({json.dumps(str(EXAMPLE_JL))})   # network, jacobian_forwarddiff, jacobian_analytic, rowmajor

function bench_two_layer_jac(jac, x, w1, b1, w2, b2, forwarddiff)
    J = forwarddiff ? jacobian_forwarddiff(x, w1, b1, w2, b2) : jacobian_analytic(x, w1, b1, w2, b2)
    jac .= rowmajor(J)
    return nothing
end
"""
# (n = m = h, Session.run calls per round, goal).  At n = 10 the Jacobian is
# about a microsecond of Julia against a Session.run of about 200 us.
SIZES = ((10, 200, "~1x: Session.run's own cost dominates"), (100, 10, "< 1x"))

op = julia_op("BenchTwoLayerJac", SPEC, JULIA).bench_two_layer_jac
have_forwarddiff = bridge.julia.eval("HAVE_FORWARDDIFF")
if not have_forwarddiff:
    print("ForwardDiff not found: " + bridge.julia.eval("two_layer_method()") + "; timing the other two only")


def runners(n: int, sess_list: list) -> dict:
    rng = np.random.default_rng(0)
    values = {"x": rng.standard_normal(n), "w1": rng.standard_normal((n, n)) / np.sqrt(n),
              "b1": rng.standard_normal(n), "w2": rng.standard_normal((n, n)) / np.sqrt(n),
              "b2": rng.standard_normal(n)}
    g = bridge.Graph()
    with g.as_default():
        x, w1, b1, w2, b2 = (bridge.placeholder(bridge.float64, v.shape, name=k) for k, v in values.items())
        jac_fd = op(x, w1, b1, w2, b2, forwarddiff=True)
        jac_analytic = op(x, w1, b1, w2, b2, forwarddiff=False)
        # The anchor, as examples/twolayer/run.py builds it.
        hidden = ops.tanh(ops.mat_mul(w1, ops.reshape(x, [n, 1])) + ops.reshape(b1, [n, 1]))
        y = ops.reshape(ops.mat_mul(w2, hidden), [n]) + b2
        rows = [bridge.gradients(ops.gather_v2(y, i, 0), x)[0] for i in range(n)]
    feeds = {g.get_tensor_by_name(f"{k}:0"): v for k, v in values.items()}
    sess = bridge.Session(g)
    sess_list.append(sess)
    expected = np.stack(sess.run(rows, feeds))
    modes = {"analytic": jac_analytic, "ForwardDiff": jac_fd} if have_forwarddiff else {"analytic": jac_analytic}
    fns = {}
    for name, jac in modes.items():
        got = sess.run(jac, feeds).reshape(n, n)
        assert np.abs(got - expected).max() < 1e-12, f"{name} Jacobian differs from TensorFlow's at n = {n}"
        fns[name] = (lambda j: lambda: sess.run(j, feeds))(jac)
    fns["TF rows"] = lambda: sess.run(rows, feeds)
    return fns


def julia_alone(n: int, reps: int) -> dict:
    """The two Jacobian functions alone, called in Julia (no TF, no bridge), in
    us per call, on arguments of the types the op passes them (read-only
    inputs; matrices as transposes of column-major buffers: Julia's generic
    Matrix * Vector{Dual} is several times slower than the transposed one)."""
    methods = ["ForwardDiff", "analytic"] if have_forwarddiff else ["analytic"]
    calls = {"ForwardDiff": "jacobian_forwarddiff", "analytic": "jacobian_analytic"}
    us = bridge.julia.eval(f"""
        let input(A, name) = TFBridge.tf_view(TFBridge.ReadOnlyArray(ndims(A) == 2 ? copy(transpose(A)) : A, name)),
            x = input(randn({n}), :x), w1 = input(randn({n}, {n}) ./ sqrt({n}), :w1), b1 = input(randn({n}), :b1),
            w2 = input(randn({n}, {n}) ./ sqrt({n}), :w2), b2 = input(randn({n}), :b2)
            rounds(f) = (f(); [@elapsed(for _ in 1:{reps}; f(); end) / {reps} * 1e6 for _ in 1:7])
            [{", ".join(f"rounds(() -> {calls[m]}(x, w1, b1, w2, b2))" for m in methods)}]
        end""")
    return {m: Figure(np.asarray(r, dtype=float)) for m, r in zip(methods, us)}


sessions: list = []
for n, calls, goal in SIZES:
    fns = runners(n, sessions)
    times = alternating_rounds(fns, calls)
    rows = [(f"Julia op, {name} Jacobian" if name != "TF rows" else
             f"TF gradients row by row, {n} rows (anchor)", us, "us/run") for name, us in times.items()]
    alone = julia_alone(n, 20 * calls)
    rows += [(f"{name} Jacobian alone, called in Julia", us, "us/call") for name, us in alone.items()]
    if have_forwarddiff:
        report(f"TwoLayer Jacobian, n = m = h = {n}: one Session.run", rows,
               "ForwardDiff / TF rows", ratio(times["ForwardDiff"], times["TF rows"]), goal)
        ratio_line("ForwardDiff / analytic", ratio(times["ForwardDiff"], times["analytic"]))
        ratio_line("ForwardDiff / analytic, alone in Julia", ratio(alone["ForwardDiff"], alone["analytic"]))
    else:
        report(f"TwoLayer Jacobian, n = m = h = {n}: one Session.run", rows,
               "analytic / TF rows", ratio(times["analytic"], times["TF rows"]), goal)
    if have_forwarddiff:
        ratio_line("analytic / TF rows", ratio(times["analytic"], times["TF rows"]))
for sess in sessions:
    sess.close()
