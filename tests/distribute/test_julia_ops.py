"""A Julia op on a remote worker: the client only declares it (no Julia in
the client), `tfbridge server --ops` loads it on the workers, the op runs
there (it reports the server's PID) and its Julia gradient flows back; a
worker without the op library is an error naming the op type, the task and
``--ops``."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from support.build import op_folder, toolchain_missing
from support.cluster import REPO, child_env, local_cluster

SPEC = "PidTwice\ndouble x(n)\ndouble y(n) -> output\nint64 pid() -> output\n"
JULIA = """
pid_twice(y, pid, x) = (y .= 2 .* x; pid[] = getpid(); nothing)
pid_twice_grad(grad_x, grad_y, y, pid, x) = (grad_x .+= 2 .* grad_y; nothing)
"""

CLIENT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import bridge
    from bridge import customop, distribute

    folder, cluster_file, device, task = sys.argv[1:5]
    ops = customop.declare(folder)
    cluster = distribute.ClusterSpec.from_json(cluster_file)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        with bridge.device(device):
            y, pid = ops.pid_twice(x)
        loss = bridge.ops.sum(y * y, [0])
        dx, = bridge.gradients(loss, [x], colocate_gradients_with_ops=True)
    grad_devices = sorted({op.device for op in g.get_operations() if op.type == "PidTwiceGrad"})
    out = {"grad_devices": grad_devices}
    with distribute.Session(cluster, ("worker", int(task)), graph=g, timeout=60) as sess:
        try:
            yv, pv, gv = sess.run([y, pid, dx], {x: np.array([1.0, -2.0, 3.0])})
            out.update(y=yv.tolist(), pid=int(pv), dx=gv.tolist())
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
    from bridge.julia import host
    out["client_julia_started"] = host.is_initialized()
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def pid_op(tmp_path_factory):
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    from bridge import customop

    folder = op_folder(tmp_path_factory.mktemp("ops"), "PidTwice", SPEC, JULIA)
    customop.build(folder)  # here, so that the servers' loads find it built
    return folder


def _client(tmp_path, folder, cluster, device, task=0) -> dict:
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    done = subprocess.run([sys.executable, str(script), str(folder), str(cluster.path), device, str(task)],
                          capture_output=True, text=True, timeout=180, env=child_env(), cwd=str(REPO))
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line is not None, done.stderr
    return json.loads(line[len("RESULT "):])


def test_julia_op_runs_on_a_remote_worker_and_its_gradient_flows_back(tmp_path, pid_op):
    ops = {("worker", 0): [pid_op], ("worker", 1): [pid_op]}
    with local_cluster({"worker": 3}, tmp_path, ops=ops, ready_timeout=180) as cluster:
        out = _client(tmp_path, pid_op, cluster, "/job:worker/task:1")
        assert "error" not in out, out["error"]
        assert out["y"] == [2.0, -4.0, 6.0]
        assert out["dx"] == [8.0, -16.0, 24.0]          # d/dx sum((2x)^2) = 8x, through PidTwiceGrad in Julia
        assert out["pid"] == cluster.server("worker", 1).pid  # computed in worker 1's server
        assert out["grad_devices"] == ["/job:worker/task:1"]
        assert out["client_julia_started"] is False       # declare() registers the op without Julia

        # Worker 2 started without the library: the error names the op type, the task and --ops.
        out = _client(tmp_path, pid_op, cluster, "/job:worker/task:2")
        error = out.get("error", "")
        assert error.startswith("NotFoundError: op type 'PidTwice' is not registered on task /job:worker/task:2"), out
        # The fix names the op folder itself, not its build folder (<op>/build/<key>/, which holds a copy
        # of custom_op.txt): following it must load the op.
        assert re.search(r"--ops (\S+)`", error).group(1) == str(pid_op), error
        assert out["client_julia_started"] is False

        # A server that runs Julia stops cleanly on SIGTERM too.
        server = cluster.server("worker", 1)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0, server.stderr()
