"""A Julia op adds no copy: `y .= x` on 1e7 doubles vs the native Neg op.

Both read the fed array in place (zero-copy feed) and write one freshly
allocated 80 MB output (zero-copy fetch); the Julia op's only extra cost
should be its call overhead.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import julia_op, per_call_us, report  # noqa: E402

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

SIZE, CALLS = 10_000_000, 20

jl = julia_op("JlCopy", "JlCopy\ndouble x(n)\ndouble y(n) -> output\n",
              "jl_copy(y, x) = (y .= x; nothing)\njl_copy_grad(gx, gy, y, x) = (gx .= gy; nothing)\n")

value = bridge.aligned_empty(SIZE)
value[:] = np.arange(SIZE, dtype=np.float64)


def time_op(make, config, check) -> float:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [SIZE], name="x")
        y = make(x)
    with bridge.Session(g, config=config) as sess:
        out = sess.run(y, {x: value})
        check(out)
        return per_call_us(lambda: sess.run(y, {x: value}), CALLS) / 1000


def same(out):
    np.testing.assert_array_equal(out, value)


def negated(out):
    np.testing.assert_array_equal(out, -value)


rows, ratios = [], []
for label, config in [("default executor", None), ("inline on Julia's thread", bridge.SessionConfig(julia_thread=True))]:
    native = time_op(ops.neg, None if config is None else bridge.SessionConfig(inter_op_parallelism_threads=-1),
                     negated)
    julia = time_op(jl.jl_copy, config, same)
    rows += [(f"native Neg, 1e7 doubles ({label})", native, "ms/run"),
             (f"Julia y .= x, 1e7 doubles ({label})", julia, "ms/run")]
    ratios.append(julia / native)
report("Zero-copy: a Julia op on 80 MB", rows, "Julia / native (default executor)", ratios[0], "<= 1.2x")
print(f"  {'Julia / native (inline on Julia thread)':<48s} {ratios[1]:12.3f}x")
