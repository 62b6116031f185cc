"""Feeding and fetching large float64 arrays: no copy, so time stays flat in size.

The anchor is the same bridge run on a 1 MB array: a copy would make 100 MB cost
about 100x more. TensorFlow's own Python session is measured too, for reference,
in a process of its own whose rounds alternate with the bridge's (medians of
the rounds, with their spread).
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import AnchorProcess, alternating_rounds, ratio, report  # noqa: E402

import bridge  # noqa: E402

SIZES_MB = [1, 10, 100]

g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [None], name="x")
    y = g.create_op("Identity", [x], attrs={"T": bridge.float64}, name="y").output(0)
sess = bridge.Session(g)

runners = {}
for mb in SIZES_MB:
    arr = bridge.aligned_empty((mb * 2 ** 20 // 8,), np.float64)
    arr[:] = 1.0
    out = sess.run(y, {x: arr})
    assert out.ctypes.data == arr.ctypes.data, "the fetch should be the fed buffer itself"
    runners[f"bridge feed+fetch {mb:>3d} MB"] = lambda arr=arr: sess.run(y, {x: arr})

with AnchorProcess(f'''
import numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float64, [None]); y = tf.identity(x)
sess = tf.compat.v1.Session()
arrays = {{mb: np.ones(mb * 2 ** 20 // 8) for mb in {SIZES_MB}}}
ANCHOR_FNS = {{str(mb): (lambda a=a: sess.run(y, {{x: a}})) for mb, a in arrays.items()}}
''') as anchor:
    # TF's Python copies each array: a tenth of the calls.
    for mb in SIZES_MB:
        runners[f"tf.compat.v1.Session {mb:>3d} MB (reference)"] = anchor.mode(str(mb), 20)
    times = alternating_rounds(runners, 200, rounds=9)
rows = [(name, t, "us/run") for name, t in times.items()]
report("Feeding and fetching float64 arrays through Identity", rows,
       "bridge 100 MB / bridge 1 MB (flat = no copy)",
       ratio(times["bridge feed+fetch 100 MB"], times["bridge feed+fetch   1 MB"]), "about 1x")
