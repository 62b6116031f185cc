"""Julia ops in parallel: independent Julia ops of a graph, and Julia ops of
other sessions, run at the same time on Julia's threads (one per CPU).

- two independent ~200 ms Julia ops in one graph, against one of them
  (goal <= 1.3x on a 2-core machine);
- N independent ops for N = 1 .. CPUs + 1, against one (ideal: N / CPUs,
  rounded up);
- how much a 1 ms Julia op in another session is delayed while a 5 s Julia
  op runs (goal <= 50 ms).

Every op computes for its time without allocating or yielding, as a numeric
solver does.  The one-op anchor and the N-op runs alternate round by round
(ROUNDS); figures are medians of the rounds, with their spread, and ratios
the medians of the paired rounds' ratios.  The delay is the worst of up to
200 short runs during the long op (a worst case, not a median).
"""
import math
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import julia_op, load_average, ratio, ratio_line, timed_rounds  # noqa: E402
from support.build import busy_op  # noqa: E402  (tests/, on the path _common sets up)

import bridge  # noqa: E402
from bridge import julia  # noqa: E402

LONG_OP, SHORT_OP, ROUNDS = 0.2, 0.001, 5
CPUS = os.cpu_count() or 1

work = julia_op("JlParallelWork", *busy_op("JlParallelWork"))


def session_of(n):
    """A session on n independent Julia ops, and a function running it once (seconds)."""
    g = bridge.Graph()
    with g.as_default():
        s = bridge.placeholder(bridge.float64, [], name="s")
        xs = [bridge.placeholder(bridge.float64, [None], name=f"x{k}") for k in range(n)]
        ys = [work.jl_parallel_work(x, s) for x in xs]
    sess = bridge.Session(g, config=bridge.SessionConfig(inline_small_graphs=0))

    def run(seconds):
        feeds = {s: seconds, **{x: np.full(2, float(k)) for k, x in enumerate(xs)}}
        start = time.perf_counter()
        outs = sess.run(ys, feeds)
        elapsed = time.perf_counter() - start
        assert all(np.array_equal(out, [float(k), float(k)]) for k, out in enumerate(outs))
        return elapsed

    run(0.001)  # compiled and warm
    return sess, run


threads = julia.eval("Threads.nthreads()")
print(f"Julia ops in parallel ({CPUS} CPUs, {threads} Julia threads; medians of {ROUNDS} alternating rounds)"
      f"   ({load_average()})")
runs = {n: session_of(n) for n in range(1, CPUS + 2)}
took = timed_rounds({n: (lambda run=run: run(LONG_OP)) for n, (_, run) in runs.items()}, rounds=ROUNDS,
                    warmup=False)
one = took[1]
ratio_line(f"one {LONG_OP * 1e3:.0f} ms Julia op (anchor)", one.map(lambda t: t * 1e3), digits=1, unit=" ms")
for n in range(2, CPUS + 2):
    ideal = math.ceil(n / threads)
    goal = "   (goal: <= 1.3x)" if n == 2 and threads >= 2 else ""
    ratio_line(f"{n} independent ops / one (ideal {ideal}x)", ratio(took[n], one), goal)

# A short op in another session, while a long one runs.
_, short = runs[1]
alone = timed_rounds({"short": lambda: short(SHORT_OP)}, rounds=15)["short"]
long_sess, long_run = session_of(1)
running = threading.Event()
finished = threading.Event()


def long_op():
    running.set()
    long_run(5.0)
    finished.set()


thread = threading.Thread(target=long_op, daemon=True)
thread.start()
running.wait()
time.sleep(0.3)
during = []
while not finished.is_set() and len(during) < 200:
    during.append(short(SHORT_OP))
thread.join()
ratio_line("1 ms op in another session, alone", alone.map(lambda t: t * 1e3), digits=2, unit=" ms")
print(f"  {'the same during a 5 s op, worst of ' + str(len(during)):<48s} {max(during) * 1e3:12.2f} ms")
print(f"  {'delay by the 5 s op (worst - median alone)':<48s} {(max(during) - float(alone)) * 1e3:12.2f} ms"
      "   (goal: <= 50 ms)")
for sess, _ in list(runs.values()) + [(long_sess, None)]:
    sess.close()
