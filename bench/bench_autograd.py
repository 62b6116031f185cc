"""Gradients from ForwardDiff (`@gradient forwarddiff`, issue 37) against
hand-written backward functions, in the same run.

Two ops of the examples, each beside its twin whose spec says `@gradient
forwarddiff` (the same forward function; examples/*/forwarddiff):
TwoLayer / TwoLayerAuto (a Jacobian by ForwardDiff.jacobian, so the
gradient differentiates through nested dual numbers) and DiffusionSolve1D /
DiffusionSolve1DAuto (a tridiagonal solve; the hand-written gradient is the
adjoint method, one more solve).  Sizes: about 10, 100, 1,000 and 10,000
differentiable input elements (TwoLayer: n = h = m = k, 2k^2 + 3k elements;
DiffusionSolve1D: 2m + 1).

Per op and size, for each gradient:
- gradient run: one Session.run of y = op(inputs) and the gradients of
  sum(w * y) by every input (the forward op, the gradient op and TF's
  own work): what a training step pays;
- backward alone: the gradient op's Julia function called directly, in
  Julia, on the arguments the kernel passes (two_layer_grad, or
  TFBridge.ForwardDiffGradients.TwoLayerAutoGrad);
and the ForwardDiff twin both ways: reverse mode (the default) and dual
numbers (TFBridge.ForwardDiffGradients.MODE[] = :forward; only where a call
takes under a second: their cost grows with the square of the size).

Rounds alternate between the variants, so a burst of load from the
machine's other tenants lands on every variant alike; each figure is the
median of the rounds with their spread (min-max).  The ratio is the
median of ForwardDiff's over the median of the hand-written one; on a
shared machine the ratio of the fastest rounds (the least disturbed:
other tenants only ever add time) follows it in brackets.  Goal: at
most 3x the hand-written backward up to 1,000 input elements (gradient run),
checked on the median of the paired rounds' ratios, on a line of the form
`make bench-check` reads (bench/_common.py's ratio_line).
ForwardDiff comes from TFBRIDGE_JULIA_DEPOT, which `make bench` sets.

    python bench/bench_autograd.py            # every size
    python bench/bench_autograd.py --quick    # 10 and 100 elements
    python bench/bench_autograd.py --op TwoLayer
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Figure, ratio_line  # noqa: E402
from _common import ratio as paired_ratio  # noqa: E402

import bridge  # noqa: E402
from bridge import julia, ops  # noqa: E402

EXAMPLES = REPO / "examples"
ROUNDS = 9
ROUND_SECONDS = 0.2      # calls per round: enough for about this long
FORWARD_MODE_LIMIT = 1.0  # seconds per call beyond which dual numbers are not timed


def twolayer_values(rng, k):
    return [rng.standard_normal(k), rng.standard_normal((k, k)) / np.sqrt(k), rng.standard_normal(k),
            rng.standard_normal((k, k)) / np.sqrt(k), rng.standard_normal(k)], rng.standard_normal(k * k)


def diffusion_values(rng, m):
    return [0.5 + rng.random(m + 1), rng.standard_normal(m)], rng.standard_normal(m)


CASES = {
    # name: (hand-written op folder and function, twin's, sizes (k or m), values, elements, Julia functions)
    "TwoLayer": (EXAMPLES / "twolayer", "two_layer", EXAMPLES / "twolayer" / "forwarddiff", "two_layer_auto",
                 [2, 6, 21, 69], twolayer_values, lambda k: 2 * k * k + 3 * k, ("two_layer_grad", "TwoLayerAutoGrad")),
    "DiffusionSolve1D": (EXAMPLES / "inverse_diffusion", "diffusion_solve1d", EXAMPLES / "inverse_diffusion" / "forwarddiff",
                         "diffusion_solve1d_auto", [5, 50, 499, 5000], diffusion_values, lambda m: 2 * m + 1,
                         ("diffusion_solve1d_grad", "DiffusionSolve1DAutoGrad")),
}


def set_mode(mode: str) -> None:
    julia.eval(f"TFBridge.ForwardDiffGradients.MODE[] = :{mode}")


def calibrate(setup, fn) -> tuple[int, float]:
    """Calls per round for about ROUND_SECONDS, and the seconds of one call."""
    setup()
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(ROUND_SECONDS / once)), once


def alternating(fns: dict, calls: dict) -> dict:
    """Per variant (setup, run), the seconds per call of each of ROUNDS rounds, the variants alternating; the
    setup (the gradients' mode) runs before each round, untimed."""
    samples = {name: [] for name in fns}
    for _ in range(ROUNDS):
        for name, (setup, fn) in fns.items():
            setup()
            n = calls[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
    set_mode("auto")
    return samples


def gradient_runs(hand, auto, values, weights, with_dual: bool):
    """Session.run of the gradients by every input, for the hand-written op and the twin (reverse mode, and dual
    numbers if ``with_dual``), checked against each other; the forward op's output."""
    g = bridge.Graph()
    with g.as_default():
        inputs = [bridge.placeholder(bridge.float64, v.shape) for v in values]
        w = bridge.constant(weights)
        outputs = {"hand-written": hand(*inputs), "forwarddiff": auto(*inputs)}
        grads = {name: bridge.gradients(ops.sum(y * w, 0), inputs) for name, y in outputs.items()}
    feeds = dict(zip(inputs, values))
    sess = bridge.Session(g)
    forward, want = sess.run([outputs["hand-written"], grads["hand-written"]], feeds)
    for mode in ("reverse", "forward") if with_dual else ("reverse",):
        set_mode(mode)
        got = sess.run(grads["forwarddiff"], feeds)
        for a, b in zip(got, want):
            assert np.abs(a - b).max() <= 1e-10 * max(np.abs(b).max(), 1.0), f"{mode} mode's gradient differs"
    set_mode("auto")

    def run(name, mode):
        return (lambda: set_mode(mode)), (lambda: sess.run(grads[name], feeds))
    fns = {"hand-written": run("hand-written", "auto"), "reverse": run("forwarddiff", "reverse")}
    if with_dual:
        fns["dual numbers"] = run("forwarddiff", "forward")
    return sess, forward, fns


# The backward functions alone, in Julia, on the arguments the kernels pass
# (read-only inputs, a matrix as the transpose of its row-major buffer;
# gradients to fill), in alternating rounds: seconds per call, a column per
# variant.
BACKWARD_ALONE = """
function tfbridge_bench_input(A::AbstractArray)
    ndims(A) == 2 && return TFBridge.tf_view(TFBridge.ReadOnlyArray(Matrix(transpose(A)), :x))
    return TFBridge.ReadOnlyArray(collect(A), :x)
end

function tfbridge_bench_backward(hand::String, auto::String, forward_mode::Bool, rounds::Int, seconds::Float64,
                                 y, gy, xs...)
    FD = TFBridge.ForwardDiffGradients
    ins = map(tfbridge_bench_input, xs)
    y, gy = tfbridge_bench_input(y), tfbridge_bench_input(gy)
    grads = map(x -> TFBridge.tf_view(zeros(eltype(x), reverse(size(x))...)), ins)
    h, a = getfield(Main, Symbol(hand)), getfield(FD, Symbol(auto))
    fs = Any[() -> h(grads..., gy, y, ins...), () -> (FD.MODE[] = :reverse; a(grads..., gy, y, ins...))]
    forward_mode && push!(fs, () -> (FD.MODE[] = :forward; a(grads..., gy, y, ins...)))
    foreach(f -> f(), fs)
    calls = [max(1, round(Int, seconds / max(@elapsed(f()), 1e-7))) for f in fs]
    table = zeros(rounds, length(fs))
    for r in 1:rounds, (i, f) in enumerate(fs)
        n = calls[i]
        table[r, i] = @elapsed(for _ in 1:n; f(); end) / n
    end
    FD.MODE[] = :auto
    return table
end
"""


def julia_samples(values, weights, forward, functions, forward_mode: bool) -> dict:
    """The backward functions alone, called in Julia, alternating rounds: seconds per call per round."""
    table = np.atleast_2d(julia.call("tfbridge_bench_backward", functions[0], functions[1], forward_mode, ROUNDS,
                                     ROUND_SECONDS, forward, weights, *values))
    names = ["hand-written", "reverse"] + (["dual numbers"] if forward_mode else [])
    return {name: list(table[:, i]) for i, name in enumerate(names)}


def summary(seconds: list) -> str:
    us = [s * 1e6 for s in seconds]
    return f"{statistics.median(us):11.1f} us  [{min(us):.1f} - {max(us):.1f}]"


def ratio(samples: dict, name: str) -> float:
    return statistics.median(samples[name]) / statistics.median(samples["hand-written"])


def fastest_ratio(samples: dict, name: str) -> float:
    return min(samples[name]) / min(samples["hand-written"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the two smallest sizes only")
    parser.add_argument("--op", choices=sorted(CASES), action="append", help="only this op (repeatable)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    met = []
    julia.init()
    julia.eval(BACKWARD_ALONE)
    for case, (hand_dir, hand_fn, auto_dir, auto_fn, sizes, make, elements, functions) in CASES.items():
        if args.op and case not in args.op:
            continue
        hand = getattr(bridge.customop.load(hand_dir), hand_fn)
        auto = getattr(bridge.customop.load(auto_dir), auto_fn)
        dual = None  # (elements, seconds per call) of dual numbers at the last size timed
        for size in sizes[:2] if args.quick else sizes:
            values, weights = make(rng, size)
            sess, forward, fns = gradient_runs(hand, auto, values, weights, dual is None or dual[1] * (
                elements(size) / dual[0]) ** 2 <= FORWARD_MODE_LIMIT)
            calls, once = {}, {}
            for name, (setup, fn) in fns.items():
                calls[name], once[name] = calibrate(setup, fn)
            if "dual numbers" in fns:   # their cost grows with the square of the size
                dual = (elements(size), once["dual numbers"])
                if once["dual numbers"] > FORWARD_MODE_LIMIT:
                    del fns["dual numbers"]
            else:
                once["dual numbers"] = dual[1] * (elements(size) / dual[0]) ** 2
            runs = alternating(fns, calls)
            sess.close()
            alone = julia_samples(values, weights, forward, functions, "dual numbers" in fns)
            print(f"{case}, {elements(size)} input elements ({'k' if case == 'TwoLayer' else 'm'} = {size}), "
                  f"{ROUNDS} alternating rounds: median [min - max]")
            for name in ("hand-written", "reverse", "dual numbers"):
                if name not in runs:
                    print(f"  {'ForwardDiff, dual numbers':<28s} not timed: about {once['dual numbers']:.1f} s per "
                          "call (measured, or estimated from the last size: the square of the size)")
                    continue
                label = "hand-written" if name == "hand-written" else f"ForwardDiff, {name}"
                print(f"  {label:<28s} gradient run {summary(runs[name])}   backward alone {summary(alone[name])}"
                      + ("" if name == "hand-written" else
                         f"   ratios {ratio(runs, name):6.2f}x [{fastest_ratio(runs, name):.2f}x] / "
                         f"{ratio(alone, name):6.2f}x [{fastest_ratio(alone, name):.2f}x]"))
            # The goal's line in the form `make bench-check` reads (its median of the paired
            # rounds' ratios; a goal counts on the median), up to 1,000 elements only.
            headline = paired_ratio(Figure(runs["reverse"]), Figure(runs["hand-written"]))
            if elements(size) <= 1000:
                met.append(float(headline) <= 3.0)
            ratio_line(f"ForwardDiff / hand-written gradient run, {elements(size)} el.", headline,
                       "   (goal: <= 3x)" if elements(size) <= 1000 else "   (no goal beyond 1,000 elements)")
    print(f"goal met at {sum(met)} of {len(met)} sizes up to 1,000 elements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
