"""How long a fresh process waits for Julia: bridge.julia.init(), the first
result of an already-built Julia op, and of the TwoLayer example's op, whose
Jacobian is ForwardDiff's, each with Julia's system image holding TFBridge
(bridge/julia/sysimage.py, built by `make setup`) and without it
(TFBRIDGE_JULIA_SYSIMAGE=0: TFBridge.jl included at the start), and TwoLayer's
also from the image built for it, holding ForwardDiff and the code a run of
the op compiled (bridge/julia/opimage.py, `tfbridge julia build-image --ops
examples/twolayer`, where built), against Julia's own start
(`julia --startup-file=no -e 0`), measured in the same run.

Each figure is a fresh process (what a user, a gradient test or a
distributed worker pays), modes alternating round by round (BENCH_ROUNDS,
7 by default); each figure is the median of its rounds, with their spread,
and each ratio the median of the paired rounds' ratios.  The CPU time of
each fresh process (its user + system time, children included) is printed
too: on a shared machine it is less inflated by the other tenants than the
wall time.  The ops are built once before timing (the start_twice
template op under build/bench, and examples/twolayer), so the figures leave
their compile out but include everything after: starting Julia, loading the
op's library, including its Julia file (ForwardDiff's `import` for
TwoLayer, its precompiled files already made), the first run.

``--quick``: two rounds (a check that it runs).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Figure, check_goal, load_average, ratio  # noqa: E402  (also puts tests/ on sys.path)

ROUNDS = 2 if "--quick" in sys.argv else int(os.environ.get("BENCH_ROUNDS", "7"))
TWOLAYER = REPO / "examples" / "twolayer"

SPEC = "StartTwice\ndouble x(n)\ndouble y(n) -> output\n"
SOURCE = "start_twice(y, x) = (y .= 2 .* x; nothing)\nstart_twice_grad(gx, gy, y, x) = (gx .= 2 .* gy; nothing)\n"

INIT = f"""
import json, sys, time
sys.path.insert(0, {str(REPO)!r})
t0 = time.perf_counter()
import bridge.julia
bridge.julia.init()
print(json.dumps({{"s": time.perf_counter() - t0}}))
"""

FIRST_RESULT = """
import json, sys, time
sys.path.insert(0, {repo!r})
t0 = time.perf_counter()
import numpy as np
import bridge
op = bridge.customop.load({folder!r})
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [3], name="x")
    y = op.start_twice(x)
with bridge.Session(g) as sess:
    out = sess.run(y, {{x: np.arange(3.0)}})
assert out.tolist() == [0.0, 2.0, 4.0], out
print(json.dumps({{"s": time.perf_counter() - t0}}))
"""

TWOLAYER_RESULT = """
import json, sys, time
sys.path.insert(0, {repo!r})
t0 = time.perf_counter()
import numpy as np
import bridge
op = bridge.customop.load({folder!r})
n = 10
rng = np.random.default_rng(0)
values = [rng.standard_normal(n), rng.standard_normal((n, n)), rng.standard_normal(n),
          rng.standard_normal((n, n)), rng.standard_normal(n)]
g = bridge.Graph()
with g.as_default():
    jac = op.two_layer(*(bridge.constant(v, bridge.float64) for v in values))
with bridge.Session(g) as sess:
    out = sess.run(jac).reshape(n, n)
s = time.perf_counter() - t0
x, w1, b1, w2, b2 = values
assert np.allclose(out, w2 @ np.diag(1 - np.tanh(w1 @ x + b1) ** 2) @ w1, atol=1e-12)
method = bridge.julia.eval("two_layer_method()")
assert method == "ForwardDiff.jacobian", method
print(json.dumps({{"s": s, "image": bridge.julia.image()}}))
"""

WITHOUT_IMAGE = {"TFBRIDGE_JULIA_SYSIMAGE": "0"}
OP_IMAGE_MODE = "first result of TwoLayer (ForwardDiff), its op image"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _python(code: str, env: dict[str, str] | None = None, image: Path | None = None) -> float:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode:
        raise RuntimeError(f"a timed process failed:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if image is not None and report.get("image") != str(image):
        raise RuntimeError(f"the process started from {report.get('image')}, not {image}:\n{proc.stderr[-3000:]}")
    return report["s"]


def _julia() -> float:
    from bridge.julia import buildtools
    executable = buildtools.julia_config().executable
    t0 = time.perf_counter()
    subprocess.run([executable, "--startup-file=no", "-e", "0"], check=True, timeout=120)
    return time.perf_counter() - t0


def main() -> None:
    import bridge
    from bridge.julia import opimage, sysimage
    from support.build import op_folder
    folder = op_folder(REPO / "build" / "bench", "start_twice", SPEC, SOURCE)
    bridge.customop.build(folder)  # built (or found) before any timing; this process starts no Julia
    bridge.customop.build(TWOLAYER)
    image = sysimage.current_image()
    op_image = opimage.find_built([TWOLAYER])
    first = FIRST_RESULT.format(repo=str(REPO), folder=str(folder))
    twolayer = TWOLAYER_RESULT.format(repo=str(REPO), folder=str(TWOLAYER))
    anchor_name = "julia --startup-file=no -e 0 (anchor)"
    modes = {anchor_name: _julia}
    # "image": TFBridge's only, named so that TwoLayer's own image is not chosen.
    for label, env in (("image", {"TFBRIDGE_JULIA_SYSIMAGE": str(image)}), ("no image", WITHOUT_IMAGE)):
        if label == "image" and image is None:
            continue
        modes[f"init(), {label}"] = lambda env=env: _python(INIT, env)
        modes[f"first result of a built op, {label}"] = lambda env=env: _python(first, env)
        modes[f"first result of TwoLayer (ForwardDiff), {label}"] = lambda env=env: _python(twolayer, env)
    if op_image is not None:
        modes[OP_IMAGE_MODE] = lambda: _python(twolayer, image=op_image)
    for mode in modes.values():
        mode()  # warm-up: caches, page cache, ForwardDiff's precompiled files
    walls: dict[str, list[float]] = {name: [] for name in modes}
    cpus: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(ROUNDS):
        for name, mode in modes.items():
            before = _children_cpu()
            walls[name].append(mode())
            cpus[name].append(_children_cpu() - before)
    best = {name: Figure(walls[name], Figure(cpus[name])) for name in modes}
    anchor = best[anchor_name]
    print(f"Julia's start, fresh processes (medians of {ROUNDS} alternating rounds [min-max]; "
          f"CPU: the process's user + system time)   ({load_average()})")
    if image is None:
        print(f"  (no system image with TFBridge for these sources: `make julia-image` builds it; "
              f"it would be {sysimage.image_path()})")
    for name, value in best.items():
        print(f"  {name:<52s} {value:8.3f} s [{value.spread(3)}]   CPU {value.cpu:6.3f} s")

    def line(label: str, value: Figure, unit: str, note: str) -> None:
        print(f"  {label:<52s} {value:8.{2 if unit == 'x' else 3}f}{unit if unit == 'x' else ' s'}   {note}"
              f"   {value.describe(3, unit if unit == 'x' else ' s')}")
        if note.startswith("(goal: "):
            check_goal(label, value, note[len("(goal: "):note.index(")")], "x" if unit == "x" else "s")
    # The goals hold for what the set-up gives: Julia's image with TFBridge (make setup) and,
    # for TwoLayer, its op image (make demo); the other modes are printed for comparison only,
    # without a goal, so that `make bench-check` checks only the figures a user gets.
    for label in ("image", "no image"):
        if f"init(), {label}" not in best:
            continue
        goal = "(goal: <= 3x)" if label == "image" else "(no goal: without make julia-image's image)"
        line(f"init / julia -e 0, {label}", ratio(best[f"init(), {label}"], anchor), "x", goal)
        print(f"  {'  the same in CPU time':<52s} {ratio(best[f'init(), {label}'].cpu, anchor.cpu):8.2f}x")
    if op_image is None:
        print(f"  (no system image for examples/twolayer: `tfbridge julia build-image --ops {TWOLAYER}` builds it;"
              " `make demo` does)")
    for label in ("image", "no image"):
        if f"init(), {label}" not in best:
            continue
        line(f"first result of a built op, {label}", best[f"first result of a built op, {label}"], "s",
             "(goal: <= 2 s)" if label == "image" else "(no goal)")
        line(f"first result of TwoLayer (ForwardDiff), {label}",
             best[f"first result of TwoLayer (ForwardDiff), {label}"], "s", "(no goal: TFBridge's image only)"
             if label == "image" else "(no goal)")
    # What `make demo` gives: TwoLayer's op image where it could be built, else TFBridge's image.
    demo = OP_IMAGE_MODE if OP_IMAGE_MODE in best else "first result of TwoLayer (ForwardDiff), image"
    if demo in best:
        before = best.get("first result of TwoLayer (ForwardDiff), image")
        beside = (f"(TFBridge's image only: {float(before):.3f} s, {float(ratio(best[demo], before)):.2f}x)"
                  if before and demo == OP_IMAGE_MODE else "(no op image: TFBridge's image only)")
        line("first result of TwoLayer after make demo", best[demo], "s", "(goal: <= 5 s) " + beside)


if __name__ == "__main__":
    main()
