"""Time of one training step (Adam): bridge.train vs stock TensorFlow's
tf.compat.v1.train in a graph-mode Session (goal: at most 1.0x).

Two models, the same graph on both sides (raw ops, the same initial values
and batches, the batch fed through feed_dict at every step):

- the MLP of tests/train/test_optimizers.py in float64 (8 inputs, 16 tanh
  units, 1 output, mean squared error, 64 samples);
- a small CNN in float32: Conv2D 3x3x1x8 + BiasAdd + Relu, a dense layer to
  10 classes, softmax cross-entropy, on a 28x28x1 batch of 32.

Each side runs in its own fresh interpreter (TensorFlow never shares a
process with the bridge; neither side here loads Julia), which builds the
model, checks it (the loss after CHECK_STEPS steps from the initial values
must agree between the sides), then times steps: the median of REPEATS
bursts' means over CALLS steps.  The sides alternate for BENCH_ROUNDS rounds
(3 by default), so noise from other tenants lands on both; each figure is
the median of its rounds, with their spread, and the ratio the median of
the paired rounds' ratios.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, load_average, ratio, ratio_line, run_anchor  # noqa: E402

REPO = str(Path(__file__).resolve().parent.parent)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CALLS = {"mlp": 200, "cnn": 20}
REPEATS = 5
CHECK_STEPS = 5

# Initial values and batches, from the same seed on both sides.
DATA = '''
import numpy as np
rng = np.random.default_rng(0)
MLP = {"x": rng.standard_normal((64, 8)), "y": rng.standard_normal((64, 1)),
       "w1": rng.standard_normal((8, 16)) / np.sqrt(8.0), "b1": np.zeros(16),
       "w2": rng.standard_normal((16, 1)) / 4.0, "b2": np.zeros(1)}
CNN = {"x": rng.standard_normal((32, 28, 28, 1)).astype(np.float32),
       "labels": np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)],
       "k": (rng.standard_normal((3, 3, 1, 8)) / 3).astype(np.float32), "kb": np.zeros(8, np.float32),
       "w": (rng.standard_normal((28 * 28 * 8, 10)) / 80).astype(np.float32), "wb": np.zeros(10, np.float32)}
'''

TIMING = f'''
import json, time

def measure(name, sess, init, train, loss, feed):
    sess.run(init)
    for _ in range({CHECK_STEPS}):
        sess.run(train, feed)
    check = float(sess.run(loss, feed))
    took = []
    for _ in range({REPEATS}):
        t0 = time.perf_counter()
        for _ in range(CALLS[name]):
            sess.run(train, feed)
        took.append((time.perf_counter() - t0) / CALLS[name])
    return {{"seconds": sorted(took)[len(took) // 2], "loss": check}}

CALLS = {CALLS!r}
'''

OURS = DATA + TIMING + f'''
import sys
sys.path.insert(0, {REPO!r})
import bridge
from bridge import ops

def mlp():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [64, 8], name="x")
        y = bridge.placeholder(bridge.float64, [64, 1], name="y")
        w1, b1, w2, b2 = (bridge.Variable(MLP[n], name=n) for n in ("w1", "b1", "w2", "b2"))
        h = ops.tanh(ops.add_v2(ops.mat_mul(x, w1.value()), b1.value()))
        pred = ops.add_v2(ops.mat_mul(h, w2.value()), b2.value())
        loss = ops.mean(ops.square(ops.sub(pred, y)), [0, 1])
        train = bridge.train.AdamOptimizer(0.01).minimize(loss)
        init = bridge.global_variables_initializer()
    return g, init, train, loss, {{x: MLP["x"], y: MLP["y"]}}

def cnn():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [32, 28, 28, 1], name="x")
        labels = bridge.placeholder(bridge.float32, [32, 10], name="labels")
        k, kb, w, wb = (bridge.Variable(CNN[n], name=n) for n in ("k", "kb", "w", "wb"))
        h = ops.relu(ops.bias_add(ops.conv2d(x, k.value(), strides=[1, 1, 1, 1], padding="SAME"), kb.value()))
        logits = ops.bias_add(ops.mat_mul(ops.reshape(h, [32, -1]), w.value()), wb.value())
        loss = ops.mean(ops.softmax_cross_entropy_with_logits(logits, labels).loss, [0])
        train = bridge.train.AdamOptimizer(0.001).minimize(loss)
        init = bridge.global_variables_initializer()
    return g, init, train, loss, {{x: CNN["x"], labels: CNN["labels"]}}

out = {{}}
for name, build in (("mlp", mlp), ("cnn", cnn)):
    g, init, train, loss, feed = build()
    with bridge.Session(g) as sess:
        out[name] = measure(name, sess, init, train, loss, feed)
print(json.dumps(out))
'''

ANCHOR = DATA + TIMING + '''
import tensorflow as tf
raw, v1 = tf.raw_ops, tf.compat.v1

def variables(values, names):
    return [v1.Variable(values[n], name=n, use_resource=True) for n in names]

def mlp():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float64, [64, 8], name="x")
        y = v1.placeholder(tf.float64, [64, 1], name="y")
        w1, b1, w2, b2 = variables(MLP, ("w1", "b1", "w2", "b2"))
        h = raw.Tanh(x=raw.AddV2(x=raw.MatMul(a=x, b=w1.value()), y=b1.value()))
        pred = raw.AddV2(x=raw.MatMul(a=h, b=w2.value()), y=b2.value())
        loss = raw.Mean(input=raw.Square(x=raw.Sub(x=pred, y=y)), axis=[0, 1])
        train = v1.train.AdamOptimizer(0.01).minimize(loss)
        init = v1.global_variables_initializer()
    return g, init, train, loss, {x: MLP["x"], y: MLP["y"]}

def cnn():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [32, 28, 28, 1], name="x")
        labels = v1.placeholder(tf.float32, [32, 10], name="labels")
        k, kb, w, wb = variables(CNN, ("k", "kb", "w", "wb"))
        h = raw.Relu(features=raw.BiasAdd(value=raw.Conv2D(input=x, filter=k.value(), strides=[1, 1, 1, 1],
                                                             padding="SAME"), bias=kb.value()))
        logits = raw.BiasAdd(value=raw.MatMul(a=raw.Reshape(tensor=h, shape=[32, -1]), b=w.value()),
                             bias=wb.value())
        loss = raw.Mean(input=raw.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels).loss, axis=[0])
        train = v1.train.AdamOptimizer(0.001).minimize(loss)
        init = v1.global_variables_initializer()
    return g, init, train, loss, {x: CNN["x"], labels: CNN["labels"]}

out = {}
for name, build in (("mlp", mlp), ("cnn", cnn)):
    g, init, train, loss, feed = build()
    with v1.Session(graph=g) as sess:
        out[name] = measure(name, sess, init, train, loss, feed)
print(json.dumps(out))
'''

TITLES = {"mlp": "Adam step, float64 MLP 8-16-1 on 64 samples",
          "cnn": "Adam step, float32 CNN (Conv2D 3x3x8, dense 10) on 32x28x28x1"}
TOLERANCE = {"mlp": 1e-10, "cnn": 1e-4}


def main() -> None:
    rounds: dict = {"ours": {}, "tf": {}}
    for _ in range(ROUNDS):  # alternate the two sides
        for side, code in (("ours", OURS), ("tf", ANCHOR)):
            for key, result in run_anchor(code, timeout=1200).items():
                rounds[side].setdefault(key, []).append(result)
    best = {side: {key: dict(results[-1], seconds=Figure(r["seconds"] * 1e6 for r in results))
                   for key, results in cases.items()} for side, cases in rounds.items()}  # microseconds
    print(f"Training step time, bridge.train vs tf.compat.v1.train (medians of {ROUNDS} alternating rounds, "
          f"each the median of {REPEATS} bursts; fresh interpreters, batch fed every step)   ({load_average()})")
    for key, title in TITLES.items():
        ours, tf = best["ours"][key], best["tf"][key]
        if abs(ours["loss"] - tf["loss"]) > TOLERANCE[key] * abs(tf["loss"]):
            raise SystemExit(f"{key}: the losses after {CHECK_STEPS} steps differ: "
                             f"{json.dumps(ours)} vs {json.dumps(tf)}")
        print(f"  {title}")
        ratio_line("  bridge.train.AdamOptimizer", ours["seconds"], digits=1, unit=" us/step")
        ratio_line("  tf.compat.v1.train.AdamOptimizer", tf["seconds"], digits=1, unit=" us/step")
        ratio_line("  bridge / TensorFlow", ratio(ours["seconds"], tf["seconds"]), "   (goal: <= 1.0x)")


if __name__ == "__main__":
    main()
