"""Oracle: ``tf.compat.v1.train.SyncReplicasOptimizer`` with
``variable_averages`` on stock TensorFlow's own servers, for
tests/distribute/test_sync_recovery.py.

The cluster (one ps, two workers, ``tf.compat.v1.train.Server`` processes
started by distributed_training.py's ``start_cluster``, killed when this
process is done) and between-graph training: one client thread per worker,
each with its own graph, as tests/distribute/test_train.py's
``worker_graph``: variables ``w`` (3x2), ``b`` (2) and an int64
``global_step`` on the ps (``replica_device_setter``), the loss
``mean((x @ w + b - y)^2)``, ``GradientDescentOptimizer(learning_rate)``
wrapped in ``SyncReplicasOptimizer(opt, 2, 2,
variable_averages=ExponentialMovingAverage(decay, num_updates=global_step),
variables_to_average=[w, b])``.  The set-up of TF's hook by hand: the chief
initializes, runs ``chief_init_op`` and ``get_init_tokens_op(0)`` and starts
``get_chief_queue_runner()``; the other waits for the variables and runs
``local_step_init_op``.  Request::

    {"learning_rate": float, "decay": float, "init": {"w": array, "b": array},
     "batches": [[(x, y) per worker] per step]}

Response: ``{"losses": [[loss per step] per worker], "final": {"w", "b",
"w_average", "b_average": array}, "global_step": int}``.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

RUN_TIMEOUT_MS = 60_000


def train(request: dict, out_dir: Path) -> dict:
    import numpy as np
    import tensorflow as tf
    from distributed_training import start_cluster

    v1 = tf.compat.v1
    workers = 2
    cluster, procs = start_cluster(workers, out_dir)
    spec = tf.train.ClusterSpec(cluster)
    options = v1.RunOptions(timeout_in_ms=RUN_TIMEOUT_MS)
    built, losses, errors, sessions = {}, {0: [], 1: []}, [], {}
    try:
        for task in range(workers):
            g = tf.Graph()
            with g.as_default(), v1.device(v1.train.replica_device_setter(
                    cluster=spec, worker_device=f"/job:worker/task:{task}")):
                w = v1.Variable(request["init"]["w"], name="w", use_resource=True)
                b = v1.Variable(request["init"]["b"], name="b", use_resource=True)
                step = v1.Variable(np.int64(0), name="global_step", trainable=False, use_resource=True)
                x = v1.placeholder(tf.float64, [None, 3], name="x")
                y = v1.placeholder(tf.float64, [None, 2], name="y")
                out = tf.raw_ops.AddV2(x=tf.raw_ops.MatMul(a=x, b=w.value()), y=b.value())
                diff = tf.raw_ops.Sub(x=out, y=y)
                loss = tf.raw_ops.Mean(input=tf.raw_ops.Mul(x=diff, y=diff), axis=[0, 1])
                ema = v1.train.ExponentialMovingAverage(request["decay"], num_updates=step)
                opt = v1.train.SyncReplicasOptimizer(v1.train.GradientDescentOptimizer(request["learning_rate"]),
                                                     replicas_to_aggregate=2, total_num_replicas=2,
                                                     variable_averages=ema, variables_to_average=[w, b])
                train_op = opt.minimize(loss, global_step=step)
                init = v1.global_variables_initializer()
                uninitialized = v1.report_uninitialized_variables(v1.global_variables())
                tokens = opt.get_init_tokens_op(0) if task == 0 else None
                reads = [w.value(), b.value(), ema.average(w).value(), ema.average(b).value(), step.value()]
            built[task] = (g, x, y, loss, train_op, opt, init, uninitialized, tokens, reads)

        def work(task):
            g, x, y, loss, train_op, opt, init, uninitialized, tokens, _ = built[task]
            config = v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
            sess = sessions[task] = v1.Session(f"grpc://{cluster['worker'][task]}", graph=g, config=config)
            try:
                if task == 0:
                    sess.run(init)
                    sess.run(opt.chief_init_op)
                    sess.run(tokens)
                    opt.get_chief_queue_runner().create_threads(sess, daemon=True, start=True)
                else:
                    deadline = time.monotonic() + 120
                    while len(missing := sess.run(uninitialized)):
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"the chief never initialized the variables: {missing}")
                        time.sleep(0.1)
                    sess.run(opt.local_step_init_op)
                for s, batch in enumerate(request["batches"]):
                    xv, yv = batch[task]
                    losses[task].append(float(sess.run([loss, train_op], {x: xv, y: yv}, options=options)[0]))
            except BaseException as exc:  # noqa: BLE001 - raised below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(task,)) for task in (1, 0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        if errors:
            raise errors[0]
        values = sessions[0].run(built[0][9], options=options)
    finally:
        for sess in sessions.values():
            sess.close()
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)
    final = dict(zip(["w", "b", "w_average", "b_average"], values[:4], strict=True))
    return {"losses": [losses[0], losses[1]], "final": final, "global_step": int(values[4])}


if __name__ == "__main__":
    import _common

    _common.main(train)
