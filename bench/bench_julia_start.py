"""How long a fresh process waits for Julia: bridge.julia.init(), and the first
result of an already-built Julia op, against Julia's own start
(`julia --startup-file=no -e 0`), measured in the same run.

Each figure is a fresh process (what a user, a gradient test or a
distributed worker pays), modes alternating round by round, the best round
of each kept.  The op is a small template op built once before timing
(build/bench), so the figures leave its compile out but include everything
after: starting Julia, loading the op's library, including its Julia file,
the first run.

``--quick``: two rounds (a check that it runs).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO  # noqa: E402  (also puts tests/ on sys.path)

ROUNDS = 2 if "--quick" in sys.argv else 7

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


def _python(code: str) -> float:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"a timed process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["s"]


def _julia() -> float:
    from bridge.julia import buildtools
    executable = buildtools.julia_config().executable
    t0 = time.perf_counter()
    subprocess.run([executable, "--startup-file=no", "-e", "0"], check=True, timeout=120)
    return time.perf_counter() - t0


def main() -> None:
    import bridge
    from build_support import op_folder
    folder = op_folder(REPO / "build" / "bench", "start_twice", SPEC, SOURCE)
    bridge.customop.build(folder)  # built (or found) before any timing; this process starts no Julia
    first = FIRST_RESULT.format(repo=str(REPO), folder=str(folder))
    modes = {"julia --startup-file=no -e 0 (anchor)": _julia,
             "bridge.julia.init() in a fresh process": lambda: _python(INIT),
             "first result of a built Julia op, fresh process": lambda: _python(first)}
    best = dict.fromkeys(modes, float("inf"))
    for mode in modes.values():
        mode()  # warm-up: caches, page cache
    for _ in range(ROUNDS):
        for name, mode in modes.items():
            best[name] = min(best[name], mode())
    anchor = best["julia --startup-file=no -e 0 (anchor)"]
    init = best["bridge.julia.init() in a fresh process"]
    first_s = best["first result of a built Julia op, fresh process"]
    print("Julia's start, fresh processes (best of %d rounds)" % ROUNDS)
    for name, value in best.items():
        print(f"  {name:<52s} {value:8.3f} s")
    print(f"  {'init / julia -e 0':<52s} {init / anchor:8.2f}x   (goal: <= 3x)")
    print(f"  {'first result of a built op':<52s} {first_s:8.3f} s   (goal: <= 2 s on a quiet machine)")


if __name__ == "__main__":
    main()
