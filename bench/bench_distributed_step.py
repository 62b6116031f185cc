"""One synchronous data-parallel training step over a loopback cluster (1 ps,
2 workers): the bridge (its client, `tfbridge server` processes) against
stock TensorFlow's distributed runtime (a tf.compat.v1 client,
`tf.compat.v1.train.Server` processes), same graph, same cluster shape
(goal: at most 1.0x).

The graph is tests/support/sync_mlp.py's (and tests/oracle/distributed_training.py's
for stock TF): an MLP's variables on the ps, one tower per worker fed its own
batch of 16, the towers' gradients averaged on the ps, one GradientDescent
apply; a step is one ``run([loss, train], feed)``.  Both clusters run at once
(six server processes); stock TF's client is a child process that times a
round when told to, so the modes alternate round by round (noise from other
tenants lands on both); each figure is the median of its rounds, with their
spread, and the ratio the median of the paired rounds' ratios.  Before timing, both
sides train CHECK steps from the same values: their losses must agree to
1e-12.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the bridge loads TensorFlow

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Figure, ratio, report  # noqa: E402  (also puts tests/ on sys.path)

from bridge import distribute  # noqa: E402
from support.cluster import local_cluster  # noqa: E402
from support.sync_mlp import build, feed_of, make_case  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
CALLS = 100
CHECK = 5
CASE = ("GradientDescent", 0.1)

# Stock TF's side: a child process (TensorFlow never shares a process with the bridge).
ANCHOR = textwrap.dedent(f"""
    import json, pickle, sys, time
    from pathlib import Path
    sys.path.insert(0, {str(REPO / "tests" / "oracle")!r})
    import tensorflow as tf
    import distributed_training as dt

    case = pickle.loads(Path(sys.argv[1]).read_bytes())
    cluster, procs = dt.start_cluster(2, Path(sys.argv[2]))
    try:
        graph, init, loss, train, feeds, _ = dt.build(tf, 2, case)
        sess = tf.compat.v1.Session("grpc://" + cluster["worker"][0], graph=graph)
        sess.run(init)
        feed = lambda batch: {{t: v for (x, y), (xv, yv) in zip(feeds, batch) for t, v in ((x, xv), (y, yv))}}
        losses = [float(sess.run([loss, train], feed(b))[0]) for b in case["batches"]]
        print(json.dumps({{"losses": losses}}), flush=True)
        fixed = feed(case["batches"][-1])
        for line in sys.stdin:
            calls = int(line)
            if calls == 0:
                break
            t0 = time.perf_counter()
            for _ in range(calls):
                sess.run([loss, train], fixed)
            print(json.dumps({{"seconds": (time.perf_counter() - t0) / calls}}), flush=True)
        sess.close()
    finally:
        for p in procs:
            p.kill()
""")


class Anchor:
    """Stock TF's client process: trains the check steps at start, then times a round per request."""

    def __init__(self, case: dict, tmp: Path):
        import pickle

        (tmp / "case.pkl").write_bytes(pickle.dumps(case))
        (tmp / "tf").mkdir()
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}
        self.proc = subprocess.Popen([sys.executable, "-c", ANCHOR, str(tmp / "case.pkl"), str(tmp / "tf")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.losses = self._answer()["losses"]

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"stock TF's client failed:\n{self.proc.stderr.read()[-3000:]}")
        return json.loads(line)

    def round(self, calls: int) -> float:
        self.proc.stdin.write(f"{calls}\n")
        self.proc.stdin.flush()
        return self._answer()["seconds"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("0\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()  # its servers are its children: killed by its finally, or orphaned here
                self.proc.wait()


def main() -> None:
    case = make_case(*CASE, workers=2, steps=CHECK)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        anchor = Anchor(case, tmp)
        try:
            with local_cluster({"ps": 1, "worker": 2}, tmp) as cluster:
                g, init, loss, train, feeds, _ = build(case, 2)
                with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=60) as sess:
                    sess.run(init)
                    losses = [float(sess.run([loss, train], feed_of(feeds, b))[0]) for b in case["batches"]]
                    np.testing.assert_allclose(losses, anchor.losses, rtol=1e-12, atol=0)
                    fixed = feed_of(feeds, case["batches"][-1])
                    for _ in range(10):  # warm-up, as the anchor's check steps were
                        sess.run([loss, train], fixed)
                    rounds: dict[str, list[float]] = {"bridge": [], "tf": []}
                    for _ in range(ROUNDS):
                        t0 = time.perf_counter()
                        for _ in range(CALLS):
                            sess.run([loss, train], fixed)
                        rounds["bridge"].append((time.perf_counter() - t0) / CALLS * 1e6)
                        rounds["tf"].append(anchor.round(CALLS) * 1e6)
        finally:
            anchor.close()
    ours, theirs = Figure(rounds["bridge"]), Figure(rounds["tf"])
    report("Sync data-parallel training step, loopback cluster (1 ps, 2 workers; 2-core machine)",
           [("bridge: distribute.Session + tfbridge servers", ours, "us/step"),
            ("stock TF: tf.compat.v1 Session + train.Server (anchor)", theirs, "us/step"),
            (f"losses of the first {CHECK} steps agree to 1e-12", CHECK, "steps")],
           "bridge / stock TF", ratio(ours, theirs), "<= 1.0x")


if __name__ == "__main__":
    main()
