"""Time of one training step on a large embedding table: the bridge's sparse
update (IndexedSlices, issue #28) against stock TensorFlow's same step (goal:
at most 1.0x) and against the bridge's dense path (printed).

The model: a float32 table of 1,000,000 x 64 (256 MB), 512 ids looked up by
``embedding_lookup`` (fed every step; repeats included), loss
``mean(square(rows))``.  Three ways to take a step:

- ``sparse``: ``opt.minimize(loss)``: the table's gradient is IndexedSlices
  of 512 rows, applied by the optimizer's sparse path;
- ``tf``: stock TensorFlow's ``tf.compat.v1`` optimizer on the same graph
  (TF's own sparse path);
- ``dense``: the bridge with the gradient densified first
  (``bridge.convert_to_tensor``: a 256 MB UnsortedSegmentSum), applied by
  the dense kernel (ResourceApplyAdam): what every step cost before
  IndexedSlices.

Optimizers: Adam (what the issue asks about; TF's sparse Adam, which the
bridge follows for equal values, still multiplies all of ``m`` and ``v`` by
the betas and rewrites the whole table each step) and, for comparison,
GradientDescent (one ResourceScatterAdd of 512 rows) and Adagrad
(ResourceSparseApplyAdagrad).

Each (optimizer, way) runs in its own fresh interpreter (TensorFlow never
shares a process with the bridge), which builds the model, checks it (the
loss after CHECK_STEPS steps must agree with TF's), then times steps: the
median of REPEATS bursts' means over CALLS steps.  The ways alternate for
BENCH_ROUNDS rounds (3 by default); each figure is the median of its rounds,
with their spread, and each ratio the median of the paired rounds' ratios.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, load_average, ratio, ratio_line, run_anchor  # noqa: E402

REPO = str(Path(__file__).resolve().parent.parent)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
ROWS, DIM, IDS = 1_000_000, 64, 512
CALLS = {"Adam": 3, "GradientDescent": 20, "Adagrad": 20}
DENSE_CALLS = 3
REPEATS = 3
CHECK_STEPS = 3
OPTIMIZERS = {"Adam": 0.01, "GradientDescent": 0.5, "Adagrad": 0.1}

COMMON = f'''
import json, time
import numpy as np
rng = np.random.default_rng(0)
TABLE = (0.1 * rng.standard_normal(({ROWS}, {DIM}))).astype(np.float32)
IDS = rng.integers(0, {ROWS}, {IDS}).astype(np.int32)
IDS[:16] = IDS[16:32]  # some rows twice

def measure(sess, init, init_feed, train, loss, feed, calls):
    sess.run(init, init_feed)
    for _ in range({CHECK_STEPS}):
        sess.run(train, feed)
    check = float(sess.run(loss, feed))
    took = []
    for _ in range({REPEATS}):
        t0 = time.perf_counter()
        for _ in range(calls):
            sess.run(train, feed)
        took.append((time.perf_counter() - t0) / calls)
    return {{"seconds": sorted(took)[len(took) // 2], "loss": check}}
'''


def ours(optimizer: str, dense: bool) -> str:
    calls = DENSE_CALLS if dense else CALLS[optimizer]
    return COMMON + f'''
import sys
sys.path.insert(0, {REPO!r})
import bridge
from bridge import ops
g = bridge.Graph()
with g.as_default():
    start = bridge.placeholder(bridge.float32, [{ROWS}, {DIM}], name="start")
    table = bridge.Variable(start, name="table")
    ids = bridge.placeholder(bridge.int32, [{IDS}], name="ids")
    loss = ops.mean(ops.square(bridge.nn.embedding_lookup(table, ids)), [0, 1])
    opt = bridge.train.{optimizer}Optimizer({OPTIMIZERS[optimizer]})
    if {dense!r}:
        grads = [(bridge.convert_to_tensor(gr), v) for gr, v in opt.compute_gradients(loss)]
        train = opt.apply_gradients(grads)
    else:
        train = opt.minimize(loss)
    init = bridge.global_variables_initializer()
with bridge.Session(g) as sess:
    out = measure(sess, init, {{start: TABLE}}, train, loss, {{ids: IDS}}, {calls})
print(json.dumps(out))
'''


def anchor(optimizer: str) -> str:
    return COMMON + f'''
import tensorflow as tf
v1 = tf.compat.v1
g = tf.Graph()
with g.as_default():
    start = v1.placeholder(tf.float32, [{ROWS}, {DIM}], name="start")
    table = v1.Variable(start, name="table", use_resource=True)
    ids = v1.placeholder(tf.int32, [{IDS}], name="ids")
    loss = tf.raw_ops.Mean(input=tf.raw_ops.Square(x=v1.nn.embedding_lookup(table, ids)), axis=[0, 1])
    train = v1.train.{optimizer}Optimizer({OPTIMIZERS[optimizer]}).minimize(loss)
    init = v1.global_variables_initializer()
with v1.Session(graph=g) as sess:
    out = measure(sess, init, {{start: TABLE}}, train, loss, {{ids: IDS}}, {CALLS[optimizer]})
print(json.dumps(out))
'''


def main() -> None:
    wanted = [o for o in os.environ.get("BENCH_OPTIMIZERS", ",".join(OPTIMIZERS)).split(",") if o]
    rounds: dict = {}
    for _ in range(ROUNDS):  # alternate the ways
        for opt in wanted:
            for way, code in (("sparse", ours(opt, False)), ("tf", anchor(opt)), ("dense", ours(opt, True))):
                rounds.setdefault((opt, way), []).append(run_anchor(code, timeout=1800))
    best = {key: dict(results[-1], seconds=Figure(r["seconds"] * 1e3 for r in results))
            for key, results in rounds.items()}  # milliseconds
    print(f"Training step on a {ROWS:,} x {DIM} float32 embedding table, {IDS} ids looked up "
          f"(medians of {ROUNDS} alternating rounds, each the median of {REPEATS} bursts; fresh interpreters)"
          f"   ({load_average()})")
    for opt in wanted:
        sparse, tf, dense = best[(opt, "sparse")], best[(opt, "tf")], best[(opt, "dense")]
        for other in (tf, dense):
            if abs(sparse["loss"] - other["loss"]) > 1e-5 * abs(tf["loss"]):
                raise SystemExit(f"{opt}: the losses after {CHECK_STEPS} steps differ: "
                                 f"{json.dumps(sparse)} vs {json.dumps(other)}")
        print(f"  {opt}")
        ratio_line("  bridge, IndexedSlices (sparse path)", sparse["seconds"], digits=2, unit=" ms/step")
        ratio_line("  tf.compat.v1.train, same graph", tf["seconds"], digits=2, unit=" ms/step")
        ratio_line("  bridge, gradient densified (dense path)", dense["seconds"], digits=2, unit=" ms/step")
        ratio_line("  bridge / TensorFlow", ratio(sparse["seconds"], tf["seconds"]), "   (goal: <= 1.0x)")
        ratio_line("  dense path / sparse path", ratio(dense["seconds"], sparse["seconds"]),
                   "   (speed-up of the sparse path)", digits=1)


if __name__ == "__main__":
    main()
