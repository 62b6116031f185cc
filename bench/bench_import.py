"""Time to `import bridge` and have a ready Session, vs `import tensorflow`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report, run_anchor  # noqa: E402

REPO = str(Path(__file__).resolve().parent.parent)


def best_of(code: str, n: int = 3) -> float:
    return min(run_anchor(code)["s"] for _ in range(n))


ours = best_of(f'''
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
''')
anchor = best_of('''
import json, time
t0 = time.perf_counter()
import tensorflow
print(json.dumps({"s": time.perf_counter() - t0}))
''')
report("Start-up", [("import bridge + ready Session + first run", ours, "s"),
                    ("import tensorflow (anchor)", anchor, "s")],
       "bridge / TensorFlow", ours / anchor, "<= 0.2x")
