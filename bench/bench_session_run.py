"""Session.run overhead: one Identity on 10 doubles, bridge vs tf.compat.v1.Session (the bridge's
make_callable function printed beside it).  Stock TF runs in a process of its own whose rounds
alternate with the bridge's; medians of the rounds, with their spread."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import AnchorProcess, alternating_rounds, ratio, report  # noqa: E402

import bridge  # noqa: E402

CALLS = 1000

g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [10], name="x")
    y = g.create_op("Identity", [x], attrs={"T": bridge.float64}, name="y").output(0)
sess = bridge.Session(g)
value = np.arange(10.0)
step = sess.make_callable(y, [x])

with AnchorProcess('''
import numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float64, [10], name="x")
y = tf.identity(x, name="y")
sess = tf.compat.v1.Session()
value = np.arange(10.0)
ANCHOR_FNS = {"run": lambda: sess.run(y, {x: value})}
''') as anchor:
    times = alternating_rounds({"ours": lambda: sess.run(y, {x: value}), "callable": lambda: step(value),
                                "tf": anchor.mode("run", CALLS)}, CALLS)

report("Session.run of one Identity on 10 doubles",
       [("bridge.Session.run", times["ours"], "us/run"),
        ("bridge.Session.make_callable's function", times["callable"], "us/run"),
        ("tf.compat.v1.Session.run (anchor)", times["tf"], "us/run")],
       "bridge / TensorFlow", ratio(times["ours"], times["tf"]), "<= 0.5x")
