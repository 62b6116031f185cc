"""A dynamic output (`double p(?) -> output`, `p[] = A`) reaches TF at memory
speed: 1e7 doubles from Julia, dynamic against static-shape outputs.

Every op computes A = x .+ 1 on a fed vector of 1e7 doubles (80 MB):
- static, in place: `y .= x .+ 1` writes TF's output directly (no Julia array);
- static, same work: `A = x .+ 1; y .= A`, the dynamic op's Julia work with
  the copy into TF's output done by Julia: the anchor;
- dynamic: `p[] = x .+ 1`; the runtime allocates TF's output once Julia's
  value has a shape and copies A into it (one memcpy);
- dynamic, rank 2: `p[] = reshape(x .+ 1, 4000, 2500)`, a column-major
  Matrix written into TF's row-major output in one transposing pass.
So dynamic / same-work is the cost of handing Julia's array over (goal: memory
speed, <= 1.3x); dynamic / in place adds what the dynamic form itself costs,
allocating and filling an 80 MB Julia array, which no hand-over avoids.
TF's kernels run single-threaded (intra_op_parallelism_threads = 1), as the
Julia code does.  MB/s: the output's 80 MB over the time of one run.  The
modes alternate round by round; figures are medians of the rounds, with
their spread, ratios the medians of the paired rounds' ratios.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, alternating_rounds, julia_op, ratio, ratio_line, report, vector_runner  # noqa: E402

import bridge  # noqa: E402

SIZE, CALLS, ROUNDS = 10_000_000, 3, 7
MB = SIZE * 8 / 1e6
ROWS, COLS = 4000, 2500

static = julia_op("JlDynStatic", "JlDynStatic\ndouble x(n)\ndouble y(n) -> output\n",
                  "jl_dyn_static(y, x) = (y .= x .+ 1; nothing)\n")
same_work = julia_op("JlDynSameWork", "JlDynSameWork\ndouble x(n)\ndouble y(n) -> output\n",
                     "function jl_dyn_same_work(y, x)\n    A = x .+ 1\n    y .= A\n    return nothing\nend\n")
dynamic = julia_op("JlDynamic", "JlDynamic\ndouble x(n)\ndouble p(?) -> output\n",
                   "jl_dynamic(p, x) = (p[] = x .+ 1; nothing)\n")
dynamic2 = julia_op("JlDynamic2", "JlDynamic2\ndouble x(n)\ndouble p(?, ?) -> output\n",
                    f"jl_dynamic2(p, x) = (p[] = reshape(x .+ 1, {ROWS}, {COLS}); nothing)\n")

value = bridge.aligned_empty(SIZE)
value[:] = np.arange(SIZE, dtype=np.float64)
plus_one = value + 1


def runner(make, config, check, sessions: list):
    return vector_runner(make, value, config, sessions, check)


def vector(out):
    np.testing.assert_array_equal(out, plus_one)


def matrix(out):  # TF's p[i, j] is Julia's column-major A[i + 1, j + 1]
    assert out.shape == (ROWS, COLS)
    np.testing.assert_array_equal(out, plus_one.reshape((ROWS, COLS), order="F"))


# The first session of a process sizes TF's shared intra-op pool: single-threaded from here on.
pooled = bridge.SessionConfig(intra_op_parallelism_threads=1)
julia_thread = bridge.SessionConfig(intra_op_parallelism_threads=1, julia_thread=True)
modes = [("default executor", pooled), ("on Julia's thread", julia_thread)]
ops = [("static, in place", static.jl_dyn_static, vector),
       ("static, same work", same_work.jl_dyn_same_work, vector),
       ("dynamic", dynamic.jl_dynamic, vector),
       ("dynamic, rank 2", dynamic2.jl_dynamic2, matrix)]
sessions: list = []
runners = {}
for mode, config in modes:
    for name, make, check in ops:
        runners[(mode, name)] = runner(make, config, check, sessions)
# Alternating rounds: noise lands on every op alike.
times = {key: us.map(lambda v: v / 1000) for key, us in alternating_rounds(runners, CALLS, rounds=ROUNDS).items()}
for sess in sessions:
    sess.close()
body = Figure(bridge.julia.eval(f"""
    let x = collect(1.0:{SIZE})
        f(x) = x .+ 1
        f(x)
        [@elapsed(f(x)) * 1e3 for _ in 1:{CALLS * ROUNDS}]
    end"""))
copy = Figure(bridge.julia.eval(f"""
    let x = collect(1.0:{SIZE}), y = similar(x)
        copyto!(y, x)
        [@elapsed(copyto!(y, x)) * 1e3 for _ in 1:{CALLS * ROUNDS}]
    end"""))

rows = [(f"{name} ({mode})", ms, f"ms/run  {MB / ms * 1e3:7.0f} MB/s") for (mode, name), ms in times.items()]
rows.append(("x .+ 1 alone, in Julia (allocates 80 MB)", body, "ms/run"))
rows.append(("copyto! of 80 MB between warm arrays, in Julia", copy, f"ms/run  {MB / copy * 1e3:7.0f} MB/s"))
same_work_ratio = {mode: ratio(times[(mode, "dynamic")], times[(mode, "static, same work")]) for mode, _ in modes}
first = modes[0][0]
report("Dynamic outputs: 1e7 doubles from Julia", rows, f"dynamic / static same work ({first})",
       same_work_ratio[first], "<= 1.3x")
for mode, _ in modes[1:]:
    ratio_line(f"dynamic / static same work ({mode})", same_work_ratio[mode])
for mode, _ in modes:
    ratio_line(f"dynamic / static in place ({mode})", ratio(times[(mode, "dynamic")], times[(mode, "static, in place")]))
    ratio_line(f"dynamic rank 2 / dynamic ({mode})", ratio(times[(mode, "dynamic, rank 2")], times[(mode, "dynamic")]))
