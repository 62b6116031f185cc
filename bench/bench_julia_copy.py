"""A Julia op adds no copy: `y .= x` on 1e7 doubles vs the native Neg op.

Both read the fed array in place (zero-copy feed) and write one freshly
allocated 80 MB output (zero-copy fetch); the Julia op's only extra cost
should be its call overhead.  TF's kernels run single-threaded here
(intra_op_parallelism_threads = 1), as the Julia body does: otherwise Neg
would split its loop over TF's intra-op threads and the ratio would measure
parallelism, not copies.  The Julia body alone, timed in Julia on arrays it
reuses, shows what the op costs without the bridge.  The four modes
alternate round by round; figures are medians of the rounds, with their
spread, and ratios medians of the paired rounds' ratios.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, alternating_rounds, julia_op, ratio, ratio_line, report, vector_runner  # noqa: E402

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

SIZE, CALLS = 10_000_000, 20

jl = julia_op("JlCopy", "JlCopy\ndouble x(n)\ndouble y(n) -> output\n",
              "jl_copy(y, x) = (y .= x; nothing)\njl_copy_grad(gx, gy, y, x) = (gx .= gy; nothing)\n")

value = bridge.aligned_empty(SIZE)
value[:] = np.arange(SIZE, dtype=np.float64)


def runner(make, config, check, sessions: list):
    return vector_runner(make, value, config, sessions, check)


def same(out):
    np.testing.assert_array_equal(out, value)


def negated(out):
    np.testing.assert_array_equal(out, -value)


# The first session of a process sizes TF's shared intra-op pool: single-threaded from here on.
pooled = bridge.SessionConfig(intra_op_parallelism_threads=1)
inline_native = bridge.SessionConfig(intra_op_parallelism_threads=1, inter_op_parallelism_threads=-1)
julia_thread = bridge.SessionConfig(intra_op_parallelism_threads=1, julia_thread=True)
modes = [("default executor", pooled, pooled), ("inline on Julia's thread", inline_native, julia_thread)]
sessions: list = []
runners = {}
for label, native_config, julia_config in modes:
    runners[f"native Neg, 1e7 doubles ({label})"] = runner(ops.neg, native_config, negated, sessions)
    runners[f"Julia y .= x, 1e7 doubles ({label})"] = runner(jl.jl_copy, julia_config, same, sessions)
# Alternating rounds: noise lands on every mode alike.
times = {name: us.map(lambda v: v / 1000) for name, us in alternating_rounds(runners, CALLS // 4, rounds=9).items()}
for sess in sessions:
    sess.close()
rows = [(name, ms, "ms/run") for name, ms in times.items()]
ratios = [ratio(rows[1][1], rows[0][1]), ratio(rows[3][1], rows[2][1])]
body = Figure(bridge.julia.eval(f"""
    let x = collect(1.0:{SIZE}), y = similar(x)
        jl_copy(y, x)
        [@elapsed(jl_copy(y, x)) * 1e3 for _ in 1:{CALLS}]
    end"""))
rows.append(("jl_copy alone, called in Julia (no TF, no bridge)", body, "ms/run"))
report("Zero-copy: a Julia op on 80 MB", rows, "Julia / native (default executor)", ratios[0], "<= 1.2x")
ratio_line("Julia / native (inline on Julia thread)", ratios[1])
ratio_line("Julia op / its body alone (default executor)", ratio(rows[1][1], float(body)))
