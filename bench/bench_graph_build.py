"""Time to `import bridge` and build a 1,000-op graph with bridge.ops, vs stock
TensorFlow (`import tensorflow` + tf.raw_ops in a tf.compat.v1 graph).

Both run in fresh interpreters and time themselves from before their first
import to the last op; the graph is 250 x (MatMul, a Python-constant AddV2
input converted to a Const, AddV2, Tanh) on a Placeholder, as tf.raw_ops and
as the generated functions build it.  Both then run the graph once on the
same input, outside the timing, to check they built the same thing.  The two
sides alternate for BENCH_ROUNDS rounds (5 by default); each figure is the
median of its rounds, with their spread.
"""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import os  # noqa: E402

from _common import Figure, ratio, report, run_anchor  # noqa: E402

REPO = str(Path(__file__).resolve().parent.parent)
STEPS = 250  # 4 ops each

OURS = f'''
import json, sys, time
CACHE = None
if CACHE:
    import os
    os.environ["TFBRIDGE_CACHE_DIR"] = CACHE
sys.path.insert(0, {REPO!r})
t0 = time.perf_counter()
import bridge
t1 = time.perf_counter()
import bridge.ops as ops   # loads TensorFlow's libraries, then the generated module
t2 = time.perf_counter()
import numpy as np
g = bridge.Graph()
with g.as_default():
    x = ops.placeholder(dtype=bridge.float32, shape=[4, 4], name="x")
    w = bridge.constant(np.full((4, 4), 0.25, np.float32), name="w")
    y = x
    for _ in range({STEPS}):
        y = ops.tanh(ops.add_v2(ops.mat_mul(y, w), 0.5))
t3 = time.perf_counter()
n = len(g.get_operations())
with bridge.Session(g) as s:
    value = float(s.run(y, {{x: np.eye(4, dtype=np.float32)}}).sum())
print(json.dumps({{"total": t3 - t0, "import": t1 - t0, "ops": t2 - t1, "build": t3 - t2, "n": n, "value": value}}))
'''

ANCHOR = f'''
import json, time
t0 = time.perf_counter()
import tensorflow as tf
t1 = time.perf_counter()
import numpy as np
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [4, 4], name="x")
    w = tf.constant(np.full((4, 4), 0.25, np.float32), name="w")
    y = x
    for _ in range({STEPS}):
        y = tf.raw_ops.Tanh(x=tf.raw_ops.AddV2(x=tf.raw_ops.MatMul(a=y, b=w), y=0.5))
t2 = time.perf_counter()
n = len(g.get_operations())
with tf.compat.v1.Session(graph=g) as s:
    value = float(s.run(y, {{x: np.eye(4, dtype=np.float32)}}).sum())
print(json.dumps({{"total": t2 - t0, "import": t1 - t0, "build": t2 - t1, "n": n, "value": value}}))
'''


ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def medians(results: list[dict]) -> dict:
    """Each timed field as a Figure of the rounds; the others from the last round."""
    out = dict(results[-1])
    for key in ("total", "import", "ops", "build"):
        if key in out:
            out[key] = Figure([r[key] for r in results])
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:  # the first import ever: generates bridge.ops
        cold = run_anchor(OURS.replace("CACHE = None", f"CACHE = {cache!r}"))
    run_anchor(OURS)  # make sure the user's cache holds the module
    rounds: dict[str, list[dict]] = {"ours": [], "anchor": []}
    for _ in range(ROUNDS):
        rounds["ours"].append(run_anchor(OURS))
        rounds["anchor"].append(run_anchor(ANCHOR))
    ours, anchor = medians(rounds["ours"]), medians(rounds["anchor"])
    if ours["n"] != anchor["n"] or abs(ours["value"] - anchor["value"]) > 1e-3 * abs(anchor["value"]):
        raise SystemExit(f"the two graphs differ: {json.dumps(ours)} vs {json.dumps(anchor)}")
    report(f"Import + build a {ours['n']}-op graph (medians of {ROUNDS} alternating rounds, fresh interpreters)", [
        ("bridge: import bridge", ours["import"], "s"),
        ("bridge: import bridge.ops (TF libs + module)", ours["ops"], "s"),
        ("bridge: build the graph", ours["build"], "s"),
        ("bridge: total", ours["total"], "s"),
        ("bridge: total, first import ever (generates ops)", cold["total"], "s"),
        ("TensorFlow: import tensorflow", anchor["import"], "s"),
        ("TensorFlow: build the graph", anchor["build"], "s"),
        ("TensorFlow: total (anchor)", anchor["total"], "s"),
        ("graph build alone, bridge / TensorFlow", ratio(ours["build"], anchor["build"]), "x"),
    ], "bridge / TensorFlow (total)", ratio(ours["total"], anchor["total"]), "<= 0.5x")


if __name__ == "__main__":
    main()
