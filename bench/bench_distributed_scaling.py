"""Data-parallel scaling of a Julia-op-heavy training step: 2 workers against
1 worker, throughput in shards per second (goal: at least 1.8x).

The op is bench/heat_steps (custom_op.txt): explicit steps of the 1-D heat
equation in Julia, a fixed amount of arithmetic standing in for a solver;
its gradient is as costly.  The step count is calibrated so that one shard
(the op and its gradient) takes about SHARD_SECONDS on one worker.

A loopback cluster: one ps and two workers, each worker a `tfbridge server
--ops bench/heat_steps` (Julia starts there; this client only declares the
op and never starts Julia).  A step: a parameter vector on the ps; each tower
(one per worker used, on /job:worker/task:i) runs the op on theta + its own
shard's source, a squared misfit, the op's gradient (colocated); the
gradients averaged on the ps, one GradientDescent apply.  With 1 worker a
step handles one shard, with 2 workers two shards at once: weak scaling,
what adding a machine to data-parallel training buys.  The two modes
alternate round by round on the same cluster (BENCH_ROUNDS, 5 by default);
each figure is the median of its rounds, with their spread.

Each worker's Julia start (as its `tfbridge server` ready line reports it)
is printed: it is part of the user's wait before the first step.

The throughput ratio needs two free cores.  What does not: whether the two
workers' Julia ops overlap at all.  A second op (tests/support/build.py's
``busy_op``) spins for a given wall time; one such 0.3 s op per worker in one
step against one on one worker: 1.0x means the workers run their Julia
calls fully in parallel, 2.0x that they took turns.  And the machine's own
ceiling, measured in the same rounds: the throughput of two plain CPU-bound
Python processes against one (2.0x on two free cores; less when other
processes share them).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the bridge loads TensorFlow

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, ratio, report  # noqa: E402  (also puts tests/ on sys.path)

import bridge  # noqa: E402
from bridge import customop, distribute, ops  # noqa: E402
from support.build import busy_op, op_folder  # noqa: E402
from support.cluster import local_cluster  # noqa: E402
from _common import REPO  # noqa: E402

OP = Path(__file__).resolve().parent / "heat_steps"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
STEPS_PER_ROUND = 3
SHARD_SECONDS = 0.2
N = 20000
SPIN_SECONDS = 0.3


def build(heat_steps, workers: int):
    """(graph, init, train op, feeds, steps placeholders) of a step over ``workers`` towers."""
    g = bridge.Graph()
    with g.as_default():
        with bridge.device("/job:ps/task:0"):
            theta = bridge.Variable(np.zeros(N), name="theta")
        opt = bridge.train.GradientDescentOptimizer(0.1)
        grads, feeds, steps = [], {}, []
        for i in range(workers):
            with bridge.device(f"/job:worker/task:{i}"), g.name_scope(f"tower_{i}"):
                source = bridge.placeholder(bridge.float64, [N], name="source")
                target = bridge.placeholder(bridge.float64, [N], name="target")
                count = bridge.placeholder(bridge.int64, [], name="steps")
                u = heat_steps(ops.add_v2(theta.value(), source), count)
                loss = ops.mean(ops.square(ops.sub(u, target)), [0])
                (grad, _), = opt.compute_gradients(loss, [theta], colocate_gradients_with_ops=True)
            grads.append(grad)
            rng = np.random.default_rng(i)
            feeds[source], feeds[target] = rng.standard_normal(N), rng.standard_normal(N)
            steps.append(count)
        with bridge.device("/job:ps/task:0"):
            averaged = ops.mul(ops.add_n(grads), bridge.constant(1.0 / workers, bridge.float64))
            train = opt.apply_gradients([(averaged, theta)])
        init = bridge.global_variables_initializer()
    return g, init, train, feeds, steps


PROBE = "import time\nt0 = time.perf_counter()\ns = 0\nfor i in range(3_000_000):\n    s += i\n" \
        "print(time.perf_counter() - t0)"


def cpu_probe(processes: int) -> float:
    """Wall time of ``processes`` CPU-bound Python loops run at once (the slowest one's own time)."""
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, text=True)
             for _ in range(processes)]
    return max(float(p.communicate(timeout=300)[0]) for p in procs)


def spin_step_seconds(spin, cluster, rounds: int = 3) -> dict[int, Figure]:
    """One step of ``workers`` SPIN_SECONDS Julia spins, one per worker, for 1
    and 2 workers in alternating rounds."""
    runs, sessions = {}, []
    try:
        for workers in (1, 2):
            g = bridge.Graph()
            with g.as_default():
                x = bridge.placeholder(bridge.float64, [3], name="x")
                seconds = bridge.placeholder(bridge.float64, [], name="seconds")
                outs = []
                for i in range(workers):
                    with bridge.device(f"/job:worker/task:{i}"):
                        outs.append(spin(x, seconds))
            sess = distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=60)
            sessions.append(sess)
            feed = {x: np.ones(3), seconds: SPIN_SECONDS}
            sess.run(outs, feed)
            runs[workers] = (sess, outs, feed)
        took: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(rounds):
            for workers, (sess, outs, feed) in runs.items():
                t0 = time.perf_counter()
                sess.run(outs, feed)
                took[workers].append(time.perf_counter() - t0)
    finally:
        for sess in sessions:
            sess.close()
    return {workers: Figure(values) for workers, values in took.items()}


def main() -> None:
    heat_steps = customop.declare(OP).heat_steps  # built here; no Julia in this process
    spin_folder = op_folder(REPO / "build" / "bench", "DistSpin", *busy_op("DistSpin"))
    spin = customop.declare(spin_folder).dist_spin
    ops_of = {("worker", 0): [OP, spin_folder], ("worker", 1): [OP, spin_folder]}
    with tempfile.TemporaryDirectory() as tmp, \
            local_cluster({"ps": 1, "worker": 2}, Path(tmp), ops=ops_of, ready_timeout=600) as cluster:
        starts = []
        for i in range(2):
            line = cluster.server("worker", i).ready_line or ""
            m = re.search(r"Julia started in ([\d.]+) s, ops loaded in ([\d.]+) s", line)
            starts.append((float(m[1]), float(m[2])) if m else (float("nan"), float("nan")))
        sessions, runs = {}, {}
        for workers in (1, 2):
            g, init, train, feeds, steps = build(heat_steps, workers)
            sess = distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=120)
            sessions[workers] = sess
            sess.run(init)
            runs[workers] = (sess, train, feeds, steps)

        def step(workers: int, count: int) -> None:
            sess, train, feeds, steps = runs[workers]
            sess.run(train, {**feeds, **{s: count for s in steps}})

        # Calibrate: the heat steps that make one shard take about SHARD_SECONDS on one worker
        # (the best of three runs: other tenants of the machine slow some down).
        count = 2000
        step(1, count)
        for _ in range(2):  # twice: the first guess from a short run misjudges the run's fixed cost
            took = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                step(1, count)
                took = min(took, time.perf_counter() - t0)
            count = max(1, int(count * SHARD_SECONDS / took))
        for workers in (1, 2):
            step(workers, count)  # warm-up at the final size
        step_s: dict[int, list[float]] = {1: [], 2: []}
        probe_s: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(ROUNDS):
            for workers in (1, 2):
                t0 = time.perf_counter()
                for _ in range(STEPS_PER_ROUND):
                    step(workers, count)
                step_s[workers].append((time.perf_counter() - t0) / STEPS_PER_ROUND)
                probe_s[workers].append(cpu_probe(workers))
        for sess in sessions.values():
            sess.close()
        best = {workers: Figure(values) for workers, values in step_s.items()}
        probe = {workers: Figure(values) for workers, values in probe_s.items()}
        spins = spin_step_seconds(spin, cluster)
    from bridge.julia import host

    if host.is_initialized():
        raise RuntimeError("the client started Julia: the op must run on the workers only")
    one, two = best[1].map(lambda t: 1 / t), best[2].map(lambda t: 2 / t)
    cores = os.cpu_count()
    rows = [(f"worker {i}: Julia start (tfbridge server ready line)", s, "s") for i, (s, _) in enumerate(starts)]
    rows += [(f"worker {i}: op folder loaded after Julia started", o, "s") for i, (_, o) in enumerate(starts)]
    rows += [(f"heat steps per shard ({N} points, op + gradient)", count, ""),
             ("1 worker: step (one shard)", best[1].map(lambda t: t * 1e3), "ms"),
             ("2 workers: step (two shards, one per worker)", best[2].map(lambda t: t * 1e3), "ms"),
             ("1 worker: throughput (anchor)", one, "shards/s"),
             ("2 workers: throughput", two, "shards/s")]
    rows += [("the machine's ceiling: 2 CPU-bound processes' throughput / 1's",
              ratio(probe[1], probe[2]).map(lambda r: 2 * r), "x"),
             (f"1 worker: one {SPIN_SECONDS:g} s Julia spin", spins[1].map(lambda t: t * 1e3), "ms"),
             (f"2 workers: one {SPIN_SECONDS:g} s Julia spin each, one step", spins[2].map(lambda t: t * 1e3), "ms"),
             ("overlap: 2-worker spin step / 1-worker (1.0 = fully parallel)", ratio(spins[2], spins[1]), "x")]
    report(f"Data-parallel scaling of a Julia-op-heavy step (this machine has {cores} cores, shared by the two "
           f"workers' solvers and everything else running; the load at the end)", rows,
           "2 workers / 1 worker throughput", ratio(two, one), f">= 1.8x, with {cores} cores free")


if __name__ == "__main__":
    main()
