"""Time to `import bridge` and have a ready Session, vs `import tensorflow`:
fresh interpreters, the two alternating for BENCH_ROUNDS rounds (5 by
default); medians of the rounds, with their spread."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ratio, report, run_anchor, timed_rounds  # noqa: E402

REPO = str(Path(__file__).resolve().parent.parent)


OURS = f'''
import json, sys, time
sys.path.insert(0, {REPO!r})
t0 = time.perf_counter()
import bridge
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [], name="x")
s = bridge.Session(g)
y = g.create_op("Identity", [x], attrs={{"T": bridge.float64}}).output(0)
s.run(y, {{x: 1.0}})
print(json.dumps({{"s": time.perf_counter() - t0}}))
'''
ANCHOR = '''
import json, time
t0 = time.perf_counter()
import tensorflow
print(json.dumps({"s": time.perf_counter() - t0}))
'''
times = timed_rounds({"ours": lambda: run_anchor(OURS)["s"], "anchor": lambda: run_anchor(ANCHOR)["s"]},
                     rounds=int(__import__("os").environ.get("BENCH_ROUNDS", "5")))
ours, anchor = times["ours"], times["anchor"]
report("Start-up", [("import bridge + ready Session + first run", ours, "s"),
                    ("import tensorflow (anchor)", anchor, "s")],
       "bridge / TensorFlow", ratio(ours, anchor), "<= 0.2x")
