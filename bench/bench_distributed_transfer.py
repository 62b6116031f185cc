"""Moving tensors between two tasks of a loopback cluster (gRPC), against a
local memcpy (a numpy copy of the same bytes) measured in the same run.

Two `tfbridge server` processes (workers 0 and 1) on 127.0.0.1.  A variable
of 10 MB or 100 MB lives on worker 1; worker 0 slices one element of it, so
the whole tensor crosses from worker 1 to worker 0 in each run (Grappler
cannot fold the slice: the variable's value is unknown).  The same graph
with the slice on worker 1 (no transfer) is the run's fixed cost, which is
subtracted: MB/s = size / (time across - time on one task).
"""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import per_call_us, report  # noqa: E402  (also puts tests/ on sys.path)

import bridge  # noqa: E402
from bridge import distribute  # noqa: E402
from support.cluster import local_cluster  # noqa: E402

SIZES_MB = [10, 100]


def memcpy_us(nbytes: int) -> float:
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    return per_call_us(lambda: np.copyto(dst, src), 10 if nbytes > 50e6 else 50)


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
                t_across = per_call_us(lambda: sess.run(across), calls, repeats=3)
                t_same = per_call_us(lambda: sess.run(same), calls, repeats=3)
            t_copy = memcpy_us(nbytes)
            transfer = max(t_across - t_same, 1e-3)
            mbps = mb / (transfer / 1e6)
            copy_mbps = mb / (t_copy / 1e6)
            rows += [(f"{mb:>3d} MB worker 1 -> worker 0, one run", t_across, "us"),
                     (f"{mb:>3d} MB the same run on one task (subtracted)", t_same, "us"),
                     (f"{mb:>3d} MB transfer", mbps, "MB/s"),
                     (f"{mb:>3d} MB numpy copy in this process (anchor)", copy_mbps, "MB/s")]
            ratios.append(mbps / copy_mbps)
    report("Tensors between two loopback tasks (gRPC) vs a local memcpy", rows,
           "transfer MB/s / memcpy MB/s (100 MB)", ratios[-1], "report only: gRPC copies and serializes")
    print(f"  {'transfer MB/s / memcpy MB/s (10 MB)':<48s} {ratios[0]:12.3f}x")


if __name__ == "__main__":
    main()
