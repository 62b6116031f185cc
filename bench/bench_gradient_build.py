"""Time to build gradient graphs: bridge.gradients vs stock TensorFlow's
tf.gradients in a tf.compat.v1 graph (goal: at most 1.0x).

Three cases, the same graphs on both sides (raw ops, the same weights):

- the gradient of a 50-layer MLP (tanh(y @ W + b), 64 wide) w.r.t. its 100
  weights and biases;
- the gradient of a small CNN (two Conv2D + BiasAdd + Relu + MaxPool blocks,
  a dense layer, softmax cross-entropy) w.r.t. its 6 weights and biases;
- the CNN's Hessian-vector product: the gradient of sum(grad . v), built
  after the first gradient (both calls timed), which needs the gradients of
  Conv2DBackpropInput/Filter, MaxPoolGrad, ReluGrad and BiasAddGrad.

Each side runs in its own fresh interpreter (TensorFlow never shares a
process with the bridge), which builds the forward graph anew before every
timed call and reports the median of its REPEATS calls; the two sides
alternate for ROUNDS rounds (BENCH_ROUNDS, 3 by default), so that noise from
other tenants of the machine lands on both, and each figure is the median of
the rounds, printed with their spread; the ratio is the median of the
paired rounds' ratios.  Each side then runs its gradients
once on the same input, and the sums must agree, so that both built the
same thing.  A case the bridge cannot differentiate yet is reported as such
(with the error), not as a crash.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, load_average, ratio, ratio_line, run_anchor  # noqa: E402

REPO = str(Path(__file__).resolve().parent.parent)
ROUNDS = int(__import__("os").environ.get("BENCH_ROUNDS", "3"))
REPEATS = {"mlp": 5, "cnn": 7, "hvp": 5}

# Weights and inputs, from the same seed on both sides.
DATA = '''
import numpy as np
rng = np.random.default_rng(0)
LAYERS, WIDTH = 50, 64
MLP_W = [(rng.standard_normal((WIDTH, WIDTH)) / 8).astype(np.float32) for _ in range(LAYERS)]
MLP_B = [(rng.standard_normal(WIDTH) / 10).astype(np.float32) for _ in range(LAYERS)]
MLP_X = rng.standard_normal((4, WIDTH)).astype(np.float32)
CNN_SHAPES = [(3, 3, 1, 8), (8,), (3, 3, 8, 16), (16,), (7 * 7 * 16, 10), (10,)]
CNN_P = [(rng.standard_normal(s) / 5).astype(np.float32) for s in CNN_SHAPES]
CNN_V = [rng.standard_normal(s).astype(np.float32) for s in CNN_SHAPES]
CNN_X = rng.standard_normal((8, 28, 28, 1)).astype(np.float32)
CNN_LABELS = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8)]
'''

TIMING = '''
import json, time, traceback

def timed(build, differentiate, repeats):
    took, out = [], None
    for _ in range(repeats):
        g, feed, loss, params = build()
        t0 = time.perf_counter()
        grads = differentiate(g, loss, params)
        took.append(time.perf_counter() - t0)
        out = (g, feed, grads, sum(1 for _ in g.get_operations()))
    return sorted(took)[len(took) // 2], out

def case(name, build, differentiate, repeats, run):
    try:
        seconds, (g, feed, grads, n_ops) = timed(build, differentiate, repeats)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).strip()[:400]}"}
    return {"seconds": seconds, "ops": n_ops, "sum": run(g, feed, grads)}
'''

OURS = DATA + TIMING + f'''
import sys
sys.path.insert(0, {REPO!r})
import bridge
from bridge import ops

def mlp():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, WIDTH], name="x")
        params, y = [], x
        for w, b in zip(MLP_W, MLP_B):
            w, b = bridge.constant(w), bridge.constant(b)
            params += [w, b]
            y = ops.tanh(ops.add_v2(ops.mat_mul(y, w), b))
        loss = ops.sum(ops.mul(y, y), [0, 1])
    return g, {{x: MLP_X}}, loss, params

def cnn():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [8, 28, 28, 1], name="x")
        params = [bridge.constant(p) for p in CNN_P]
        y = x
        for w, b in (params[0:2], params[2:4]):
            y = ops.relu(ops.bias_add(ops.conv2d(y, w, strides=[1, 1, 1, 1], padding="SAME"), b))
            y = ops.max_pool(y, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        logits = ops.bias_add(ops.mat_mul(ops.reshape(y, [8, -1]), params[4]), params[5])
        loss = ops.sum(ops.softmax_cross_entropy_with_logits(logits, bridge.constant(CNN_LABELS)).loss, [0])
    return g, {{x: CNN_X}}, loss, params

def first(g, loss, params):
    with g.as_default():
        return bridge.gradients(loss, params)

def hvp(g, loss, params):
    with g.as_default():
        grads = bridge.gradients(loss, params)
        dots = [ops.sum(ops.mul(gr, bridge.constant(v)), list(range(len(v.shape)))) for gr, v in zip(grads, CNN_V)]
        return bridge.gradients(ops.add_n(dots), params)

def run(g, feed, grads):
    with bridge.Session(g) as s:
        return float(sum(float(v.astype("float64").sum()) for v in s.run(grads, feed)))

print(json.dumps({{"mlp": case("mlp", mlp, first, {REPEATS["mlp"]}, run),
                  "cnn": case("cnn", cnn, first, {REPEATS["cnn"]}, run),
                  "hvp": case("hvp", cnn, hvp, {REPEATS["hvp"]}, run)}}))
'''

ANCHOR = DATA + TIMING + f'''
import tensorflow as tf
raw = tf.raw_ops

def mlp():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, WIDTH], name="x")
        params, y = [], x
        for w, b in zip(MLP_W, MLP_B):
            w, b = tf.constant(w), tf.constant(b)
            params += [w, b]
            y = raw.Tanh(x=raw.AddV2(x=raw.MatMul(a=y, b=w), y=b))
        loss = raw.Sum(input=raw.Mul(x=y, y=y), axis=[0, 1])
    return g, {{x: MLP_X}}, loss, params

def cnn():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 28, 28, 1], name="x")
        params = [tf.constant(p) for p in CNN_P]
        y = x
        for w, b in (params[0:2], params[2:4]):
            y = raw.Relu(features=raw.BiasAdd(value=raw.Conv2D(input=y, filter=w, strides=[1, 1, 1, 1],
                                                                 padding="SAME"), bias=b))
            y = raw.MaxPool(input=y, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        logits = raw.BiasAdd(value=raw.MatMul(a=raw.Reshape(tensor=y, shape=[8, -1]), b=params[4]), bias=params[5])
        loss = raw.Sum(input=raw.SoftmaxCrossEntropyWithLogits(features=logits,
                                                               labels=tf.constant(CNN_LABELS)).loss, axis=[0])
    return g, {{x: CNN_X}}, loss, params

def first(g, loss, params):
    with g.as_default():
        return tf.compat.v1.gradients(loss, params)

def hvp(g, loss, params):
    with g.as_default():
        grads = tf.compat.v1.gradients(loss, params)
        dots = [raw.Sum(input=raw.Mul(x=gr, y=tf.constant(v)), axis=list(range(len(v.shape))))
                for gr, v in zip(grads, CNN_V)]
        return tf.compat.v1.gradients(raw.AddN(inputs=dots), params)

def run(g, feed, grads):
    with tf.compat.v1.Session(graph=g) as s:
        return float(sum(float(v.astype("float64").sum()) for v in s.run(grads, feed)))

print(json.dumps({{"mlp": case("mlp", mlp, first, {REPEATS["mlp"]}, run),
                  "cnn": case("cnn", cnn, first, {REPEATS["cnn"]}, run),
                  "hvp": case("hvp", cnn, hvp, {REPEATS["hvp"]}, run)}}))
'''

TITLES = {"mlp": "gradient of a 50-layer MLP (100 params)",
          "cnn": "gradient of a small CNN (6 params)",
          "hvp": "Hessian-vector product of the CNN"}


def main() -> None:
    rounds: dict = {"ours": {}, "tf": {}}
    for _ in range(ROUNDS):  # alternate the two sides
        for side, code in (("ours", OURS), ("tf", ANCHOR)):
            for key, result in run_anchor(code, timeout=1200).items():
                rounds[side].setdefault(key, []).append(result)
    best: dict = {"ours": {}, "tf": {}}
    for side, cases in rounds.items():
        for key, results in cases.items():
            errors = [r for r in results if "error" in r]
            best[side][key] = errors[0] if errors else dict(results[-1], seconds=Figure(
                [r["seconds"] for r in results]))
    print(f"Gradient graph build, bridge.gradients vs tf.gradients (medians of {ROUNDS} alternating rounds, "
          f"each the median of its calls; fresh interpreters)   ({load_average()})")
    failed = []
    for key, title in TITLES.items():
        ours, tf = best["ours"][key], best["tf"][key]
        if "error" in tf:
            raise SystemExit(f"stock TF failed on {key}: {tf['error']}")
        if "error" in ours:
            print(f"  {title}: the bridge cannot build it yet -- {ours['error']}")
            ratio_line("  TensorFlow", tf["seconds"].map(lambda t: t * 1e3), digits=2, unit=" ms")
            failed.append(key)
            continue
        if abs(ours["sum"] - tf["sum"]) > 1e-3 * max(1.0, abs(tf["sum"])):
            raise SystemExit(f"{key}: the two gradients differ: {json.dumps(ours)} vs {json.dumps(tf)}")
        print(f"  {title}")
        ratio_line("  bridge.gradients", ours["seconds"].map(lambda t: t * 1e3), f"   ({ours['ops']} ops in the graph)",
                   digits=2, unit=" ms")
        ratio_line("  tf.gradients", tf["seconds"].map(lambda t: t * 1e3), f"   ({tf['ops']} ops in the graph)",
                   digits=2, unit=" ms")
        ratio_line("  bridge / TensorFlow", ratio(ours["seconds"], tf["seconds"]), "   (goal: <= 1.0x)")
    if failed:
        print(f"  not measured (the bridge failed): {', '.join(failed)}")


if __name__ == "__main__":
    main()
