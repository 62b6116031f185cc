"""One Julia op per run, by size: a session whose graph is one `y .= 2 .* x`
Julia op fed from Python, against the native `Mul` by 2, from 10 to 1,000,000
doubles, in TF's default executor and on Julia's thread
(`Session(julia_thread=True)`).  Goal: at most 10 us over native at every size
in the default executor (the median of the paired rounds' differences).

The default executor runs a graph this small in the thread calling
Session.run (the bridge's inline_small_graphs): the Julia kernel hands its
call to Julia's thread, and Julia's thread runs the rest of the step.  The
calling thread used to go back into TensorFlow and sleep until then, so every
call that outlasted its way back there paid for a wake-up (50-100 us on
the 2-core VMs measured): 22 us over native at 10-1,000 doubles, 80-140 us at
10,000-60,000, until at 100,000 the native Mul too split its work over TF's
threads and paid for wake-ups of its own.  The kernel now looks for the end of
the step before it returns (kernels_cpp/include/tfjl/kernel.h, ComputeAsync).
The last columns count how often the calling thread slept per run (its
voluntary context switches), the mechanism behind that bump.  Each size also
prints what a bare hand-over to Julia's thread costs on the machine at that
moment (the native Mul run on Julia's thread against the same in the
caller's): a Julia op in the default executor pays one per run, and on a
machine whose cores are shared with other work it is mostly the time Julia's
thread waits to be scheduled.
"""
import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (Figure, alternating_rounds, difference, julia_op, load_average, ratio,  # noqa: E402
                     ratio_line, report, vector_runner)

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

SIZES = [10, 100, 1_000, 10_000, 30_000, 60_000, 100_000, 1_000_000]
GOAL_US = 10.0
QUICK = "--quick" in sys.argv

jl = julia_op("JlTwice", "JlTwice\ndouble x(n)\ndouble y(n) -> output\n",
              "jl_twice(y, x) = (y .= 2 .* x; nothing)\njl_twice_grad(gx, gy, y, x) = (gx .= 2 .* gy; nothing)\n")


def native_mul(x):
    return ops.mul(x, bridge.constant(2.0, dtype=bridge.float64))


def sleeps_per_run(fn, runs: int) -> float:
    """Voluntary context switches of this (the calling) thread per call of fn."""
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    for _ in range(runs):
        fn()
    return (resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before) / runs


MODES = {"native Mul, default": (native_mul, bridge.SessionConfig()),
         "Julia op, default": (jl.jl_twice, bridge.SessionConfig()),
         "native Mul, julia_thread": (native_mul, bridge.SessionConfig(julia_thread=True)),
         "Julia op, julia_thread": (jl.jl_twice, bridge.SessionConfig(julia_thread=True))}

results: dict[int, dict[str, Figure]] = {}
sleeps: dict[int, dict[str, float]] = {}
for n in (SIZES[:1] + SIZES[3:4] if QUICK else SIZES):
    value = bridge.aligned_empty(n)  # aligned: fed without a copy
    value[:] = np.arange(n, dtype=np.float64)

    def doubled(out, value=value):
        np.testing.assert_array_equal(out, 2 * value)
    sessions: list = []
    runners = {name: vector_runner(make, value, config, sessions, doubled) for name, (make, config) in MODES.items()}
    # About 10 ms a round whatever the size.
    calls = max(10, min(400, int(10_000 / (10 + n / 2000))))
    results[n] = alternating_rounds(runners, calls, rounds=3 if QUICK else None)
    sleeps[n] = {name: sleeps_per_run(fn, calls) for name, fn in runners.items()}
    for sess in sessions:
        sess.close()

print(f"One Julia op per run (y .= 2 .* x) against native Mul, us per Session.run, medians of alternating rounds "
      f"[min-max]   ({load_average()})")
header = "".join(f"{name:>27s}" for name in MODES)
print(f"  {'doubles':>9s}{header}   calling thread's sleeps per run (same order)")
for n, figs in results.items():
    cells = "".join(f"{float(f):9.1f} [{f.lo:6.1f}-{f.hi:6.1f}]" for f in figs.values())
    slept = " ".join(f"{s:4.2f}" for s in sleeps[n].values())
    print(f"  {n:>9,d}{cells}   {slept}")
print("  extra over native, same executor (median of paired rounds [min-max]); process CPU time per run beside it:")
worst = None
for n, figs in results.items():
    extra = difference(figs["Julia op, default"], figs["native Mul, default"])
    extra_jt = difference(figs["Julia op, julia_thread"], figs["native Mul, julia_thread"])
    cpu = difference(figs["Julia op, default"].cpu, figs["native Mul, default"].cpu)
    # What one hand-over to Julia's thread and back costs by itself on this machine now: the
    # native graph run on Julia's thread against the same graph in the caller's.  A Julia op
    # in the default executor pays one such hand-over per run (Julia 1.5: only Julia's threads
    # may call Julia); on a machine whose cores are shared, it is the time the other thread
    # waits to be scheduled, which no code of the bridge's can remove.
    handover = difference(figs["native Mul, julia_thread"], figs["native Mul, default"])
    ratio_line(f"{n:,d} doubles: Julia - native, default executor", extra, f"   (goal: <= {GOAL_US:g} us)",
               digits=1, unit=" us")
    ratio_line(f"{n:,d} doubles: Julia - native, julia_thread", extra_jt, digits=1, unit=" us")
    ratio_line(f"{n:,d} doubles: CPU, Julia - native, default", cpu, digits=1, unit=" us")
    ratio_line(f"{n:,d} doubles: a bare hand-over to Julia's thread", handover, digits=1,
               unit=" us")
    if worst is None or float(extra) > float(worst[1]):
        worst = (n, extra)
n, extra = worst
rows = [(f"{name}, {n:,d} doubles", fig, "us/run") for name, fig in results[n].items()]
report(f"The size where the Julia op costs most over native ({n:,d} doubles)", rows,
       "Julia - native Mul, default executor, worst size", extra, f"<= {GOAL_US:g} us", unit=" us")
ratio_line("Julia / native Mul there", ratio(results[n]["Julia op, default"], results[n]["native Mul, default"]))
