"""Per-op cost of a Julia op: a chain of 100 ops computing tanh on 10 doubles.

Compared, in the same run, with the same chain of native Tanh ops and (in a
separate process, stock TensorFlow) with tf.numpy_function(np.tanh).
Two modes for the Julia op:
- direct: Session(julia_thread=True) runs the graph on Julia's thread, so
  each kernel calls Julia directly;
- handed over: TF's default executor runs kernels on its pool threads, and
  each hands its call to Julia's thread and waits.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ANCHOR_TIMER, julia_op, per_call_us, report, run_anchor  # noqa: E402

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

CHAIN, SIZE, CALLS = 100, 10, 300

jl = julia_op("JlTanh", "JlTanh\ndouble x(n)\ndouble y(n) -> output\n",
              "jl_tanh(y, x) = (y .= tanh.(x); nothing)\njl_tanh_grad(gx, gy, y, x) = (gx .= gy .* (1 .- y .^ 2); nothing)\n")


def chain(make):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [SIZE], name="x")
        y = x
        for _ in range(CHAIN):
            y = make(y)
    return g, x, y


def per_op_us(graph_x_y, config) -> float:
    g, x, y = graph_x_y
    value = np.linspace(-1, 1, SIZE)
    with bridge.Session(g, config=config) as sess:
        expected = value.copy()
        for _ in range(CHAIN):
            expected = np.tanh(expected)
        np.testing.assert_allclose(sess.run(y, {x: value}), expected, rtol=1e-12)
        return per_call_us(lambda: sess.run(y, {x: value}), CALLS) / CHAIN


native_graph, julia_graph = chain(ops.tanh), chain(jl.jl_tanh)
inline = bridge.SessionConfig(julia_thread=True)
inline_native = bridge.SessionConfig(inter_op_parallelism_threads=-1)
results = {
    "native Tanh, default executor": per_op_us(native_graph, None),
    "native Tanh, inline executor": per_op_us(native_graph, inline_native),
    "Julia op, direct on Julia's thread (inline)": per_op_us(julia_graph, inline),
    "Julia op, handed over from TF's pool threads": per_op_us(julia_graph, None),
}
numpy_function = run_anchor(ANCHOR_TIMER + f'''
import json, numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float64, [{SIZE}])
y = x
for _ in range({CHAIN}):
    y = tf.numpy_function(np.tanh, [y], tf.float64)
sess = tf.compat.v1.Session()
value = np.linspace(-1, 1, {SIZE})
print(json.dumps({{"us": per_call_us(lambda: sess.run(y, {{x: value}}), {CALLS} // 10) / {CHAIN}}}))
''')["us"]
results["tf.numpy_function(np.tanh), stock TF (anchor)"] = numpy_function

rows = [(k, v, "us/op") for k, v in results.items()]
direct = results["Julia op, direct on Julia's thread (inline)"]
handed = results["Julia op, handed over from TF's pool threads"]
report("Chain of 100 ops, tanh on 10 doubles", rows,
       "Julia direct / native (same inline executor)", direct / results["native Tanh, inline executor"],
       "<= 2x")
print(f"  {'Julia direct / native (default executor)':<48s} {direct / results['native Tanh, default executor']:12.3f}x")
print(f"  {'Julia direct / tf.numpy_function':<48s} {direct / numpy_function:12.3f}x   (goal: < 1x)")
print(f"  {'Julia handed over / tf.numpy_function':<48s} {handed / numpy_function:12.3f}x   (goal: < 1x)")
