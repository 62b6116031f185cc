"""Moving tensors between two tasks of a loopback cluster (gRPC), against a
local memcpy (a numpy copy of the same bytes) measured in the same run.

Two `tfbridge server` processes (workers 0 and 1) on 127.0.0.1.  A variable
of 10 MB or 100 MB lives on worker 1; worker 0 slices one element of it, so
the whole tensor crosses from worker 1 to worker 0 in each run (Grappler
cannot fold the slice: the variable's value is unknown).  The same graph
with the slice on worker 1 (no transfer) is the run's fixed cost, which is
subtracted: MB/s = size / (time across - time on one task).  The three
(across, on one task, the memcpy) alternate round by round; figures are
medians of the rounds, with their spread.
"""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import alternating_rounds, difference, ratio, ratio_line, report  # noqa: E402  (puts tests/ on sys.path)

import bridge  # noqa: E402
from bridge import distribute  # noqa: E402
from support.cluster import local_cluster  # noqa: E402

SIZES_MB = [10, 100]


def main() -> None:
    rows = []
    ratios = []
    with tempfile.TemporaryDirectory() as tmp, local_cluster({"worker": 2}, Path(tmp)) as cluster:
        for mb in SIZES_MB:
            nbytes = mb * 2 ** 20
            g = bridge.Graph()
            with g.as_default():
                with bridge.device("/job:worker/task:1"):
                    v = bridge.Variable(bridge.ops.fill([nbytes // 8], bridge.constant(1.0, bridge.float64)),
                                        name=f"v{mb}")
                    same = v.value()[0:1]
                with bridge.device("/job:worker/task:0"):
                    across = bridge.ops.identity(v.value())[0:1]
            with distribute.Session(cluster.spec, ("worker", 0), graph=g, timeout=120) as sess:
                sess.run(v.initializer)
                assert sess.run(across)[0] == 1.0
                calls = 5 if mb >= 100 else 20
                src = np.ones(nbytes // 8)
                dst = np.empty_like(src)
                times = alternating_rounds({"across": lambda: sess.run(across), "same": lambda: sess.run(same),
                                            "copy": lambda: np.copyto(dst, src)}, calls, rounds=7)
            t_across, t_same, t_copy = times["across"], times["same"], times["copy"]
            mbps = difference(t_across, t_same).map(lambda us: mb / (max(us, 1e-3) / 1e6))
            copy_mbps = t_copy.map(lambda us: mb / (us / 1e6))
            rows += [(f"{mb:>3d} MB worker 1 -> worker 0, one run", t_across, "us"),
                     (f"{mb:>3d} MB the same run on one task (subtracted)", t_same, "us"),
                     (f"{mb:>3d} MB transfer", mbps, "MB/s"),
                     (f"{mb:>3d} MB numpy copy in this process (anchor)", copy_mbps, "MB/s")]
            ratios.append(ratio(mbps, copy_mbps))
    report("Tensors between two loopback tasks (gRPC) vs a local memcpy", rows,
           "transfer MB/s / memcpy MB/s (100 MB)", ratios[-1], "report only: gRPC copies and serializes")
    ratio_line("transfer MB/s / memcpy MB/s (10 MB)", ratios[0])


if __name__ == "__main__":
    main()
