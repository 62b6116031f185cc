"""Oracle: synchronous data-parallel training on stock TensorFlow's own
distributed runtime (``tf.compat.v1.train.Server`` processes, a tf.compat.v1
client), for tests/distribute/test_stock_tf.py.

The cluster is one ps and ``workers`` workers on loopback ports picked here.
Each server is a child process running this script with ``--serve CLUSTER
JOB TASK`` (stock TF only, no Julia); this process is the client, and kills
every server when it is done, pass or fail (a server also ends when this
process does).

The model (in-graph replication, as TF1's multi-tower examples): the MLP of
train_steps.py (8 -> 16 tanh -> 1, float64, raw ops) with its variables on
``/job:ps/task:0``; one tower per worker under ``/job:worker/task:i``, fed
its own batch; each tower's gradients by ``compute_gradients(...,
colocate_gradients_with_ops=True)``; on the ps the gradients averaged
(``AddN`` times ``1/workers``), one ``apply_gradients`` and the loss
averaged the same way.  Request: the cases, trained one after the other on
one cluster (each graph's init overwrites the ps's variables)::

    {"workers": 2,
     "cases": [{"learning_rate": float, "optimizer": "GradientDescent" | "Adam",
                "init": {"w1": ..., "b1": ..., "w2": ..., "b2": ...},
                "batches": [[(x, y) per worker] per step]}, ...]}

Response: ``{"results": [{"losses": array (steps,), "final": {name: array},
"devices": {op name: device}} per case]}``.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

NAMES = ("w1", "b1", "w2", "b2")


def serve(cluster_file: str, job: str, task: int) -> None:
    """One stock-TF server: print a ready line, serve until killed or until
    the process that started it ends (a client killed at its time limit
    leaves no server behind)."""
    import tensorflow as tf

    parent = os.getppid()
    cluster = tf.train.ClusterSpec(json.loads(Path(cluster_file).read_text()))
    server = tf.compat.v1.train.Server(cluster, job_name=job, task_index=task)
    print(f"ready {server.target}", flush=True)
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)  # a started gRPC server cannot be stopped in its process: end the process


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(workers: int, out_dir: Path, timeout: float = 60.0):
    """(cluster dict, processes): one stock-TF server process per task, each ready."""
    cluster = {"ps": [f"localhost:{_free_port()}"], "worker": [f"localhost:{_free_port()}" for _ in range(workers)]}
    path = out_dir / "cluster.json"
    path.write_text(json.dumps(cluster))
    procs = []
    for job, tasks in cluster.items():
        for i in range(len(tasks)):
            procs.append(subprocess.Popen([sys.executable, __file__, "--serve", str(path), job, str(i)],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    deadline = time.monotonic() + timeout
    for p in procs:
        line = p.stdout.readline()  # a server that dies gives EOF
        if not line.startswith("ready") or time.monotonic() > deadline:
            raise RuntimeError(f"a stock TensorFlow server did not start (exit {p.poll()})")
    return cluster, procs


def build(tf, workers: int, request: dict):
    """The graph of a case (see the module docstring); returns (graph, init, loss, train, feeds, variables)."""
    v1, raw = tf.compat.v1, tf.raw_ops
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            variables = [v1.Variable(request["init"][n], name=n, use_resource=True) for n in NAMES]
        w1, b1, w2, b2 = variables
        if request["optimizer"] == "Adam":
            opt = v1.train.AdamOptimizer(request["learning_rate"])
        else:
            opt = v1.train.GradientDescentOptimizer(request["learning_rate"])
        tower_grads, tower_losses, feeds = [], [], []
        for i in range(workers):
            with tf.device(f"/job:worker/task:{i}"), tf.name_scope(f"tower_{i}"):
                x = v1.placeholder(tf.float64, request["batches"][0][i][0].shape, name="x")
                y = v1.placeholder(tf.float64, request["batches"][0][i][1].shape, name="y")
                h = raw.Tanh(x=raw.AddV2(x=raw.MatMul(a=x, b=w1.value()), y=b1.value()))
                pred = raw.AddV2(x=raw.MatMul(a=h, b=w2.value()), y=b2.value())
                loss = raw.Mean(input=raw.Square(x=raw.Sub(x=pred, y=y)), axis=[0, 1])
                grads = opt.compute_gradients(loss, variables, colocate_gradients_with_ops=True)
            tower_grads.append([g for g, _ in grads])
            tower_losses.append(loss)
            feeds.append((x, y))
        with tf.device("/job:ps/task:0"), tf.name_scope("average"):
            scale = tf.constant(1.0 / workers, tf.float64)
            averaged = [raw.Mul(x=raw.AddN(inputs=list(gs)), y=scale) for gs in zip(*tower_grads, strict=True)]
            mean_loss = raw.Mul(x=raw.AddN(inputs=tower_losses), y=scale)
            train = opt.apply_gradients(list(zip(averaged, variables, strict=True)))
        init = v1.global_variables_initializer()
    return graph, init, mean_loss, train, feeds, variables


def train(request: dict, out_dir: Path) -> dict:
    import numpy as np
    import tensorflow as tf

    cluster, procs = start_cluster(request["workers"], out_dir)
    results = []
    try:
        for case in request["cases"]:
            graph, init, loss, train_op, feeds, variables = build(tf, request["workers"], case)
            losses = []
            with tf.compat.v1.Session(f"grpc://{cluster['worker'][0]}", graph=graph) as sess:
                sess.run(init)
                for batch in case["batches"]:
                    feed = {t: v for (x, y), (xv, yv) in zip(feeds, batch, strict=True) for t, v in ((x, xv), (y, yv))}
                    losses.append(sess.run([loss, train_op], feed)[0])
                final = dict(zip(NAMES, sess.run([v.value() for v in variables]), strict=True))
            results.append({"losses": np.array(losses), "final": final,
                            "devices": {op.name: op.device for op in graph.get_operations()}})
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)
    return {"results": results}


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        import _common

        _common.main(train)
