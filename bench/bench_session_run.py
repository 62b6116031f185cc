"""Session.run overhead: one Identity on 10 doubles, bridge vs tf.compat.v1.Session (the bridge's
make_callable function printed beside it)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ANCHOR_TIMER, per_call_us, report, run_anchor  # noqa: E402

import bridge  # noqa: E402

CALLS = 3000

g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [10], name="x")
    y = g.create_op("Identity", [x], attrs={"T": bridge.float64}, name="y").output(0)
sess = bridge.Session(g)
value = np.arange(10.0)
ours = per_call_us(lambda: sess.run(y, {x: value}), CALLS)
step = sess.make_callable(y, [x])
callable_us = per_call_us(lambda: step(value), CALLS)

anchor = run_anchor(ANCHOR_TIMER + f'''
import json, numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float64, [10], name="x")
y = tf.identity(x, name="y")
sess = tf.compat.v1.Session()
value = np.arange(10.0)
print(json.dumps({{"us": per_call_us(lambda: sess.run(y, {{x: value}}), {CALLS})}}))
''')["us"]

report("Session.run of one Identity on 10 doubles",
       [("bridge.Session.run", ours, "us/run"), ("bridge.Session.make_callable's function", callable_us, "us/run"),
        ("tf.compat.v1.Session.run (anchor)", anchor, "us/run")],
       "bridge / TensorFlow", ours / anchor, "<= 0.5x")
