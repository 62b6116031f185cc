"""Feeding and fetching large float64 arrays: no copy, so time stays flat in size.

The anchor is the same bridge run on a 1 MB array: a copy would make 100 MB cost
about 100x more. TensorFlow's own Python session is measured too, for reference.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ANCHOR_TIMER, per_call_us, report, run_anchor  # noqa: E402

import bridge  # noqa: E402

SIZES_MB = [1, 10, 100]

g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    y = g.create_op("Identity", [x], attrs={"T": bridge.float64}, name="y").output(0)
sess = bridge.Session(g)

rows, times = [], {}
for mb in SIZES_MB:
    arr = bridge.aligned_empty((mb * 2 ** 20 // 8,), np.float64)
    arr[:] = 1.0
    out = sess.run(y, {x: arr})
    assert out.ctypes.data == arr.ctypes.data, "the fetch should be the fed buffer itself"
    times[mb] = per_call_us(lambda: sess.run(y, {x: arr}), 200)
    rows.append((f"bridge feed+fetch {mb:>3d} MB", times[mb], "us/run"))

tf_times = run_anchor(ANCHOR_TIMER + f'''
import json, numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float64, [None]); y = tf.identity(x)
sess = tf.compat.v1.Session()
out = {{}}
for mb in {SIZES_MB}:
    arr = np.ones(mb * 2 ** 20 // 8)
    out[mb] = per_call_us(lambda: sess.run(y, {{x: arr}}), 20, repeats=3)
print(json.dumps(out))
''')
for mb in SIZES_MB:
    rows.append((f"tf.compat.v1.Session {mb:>3d} MB (reference)", tf_times[str(mb)], "us/run"))
report("Feeding and fetching float64 arrays through Identity", rows,
       "bridge 100 MB / bridge 1 MB (flat = no copy)", times[100] / times[1], "about 1x")
