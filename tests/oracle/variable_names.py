"""Oracle: TF1's names of variables, their slots, averages and checkpoint keys.

A ``tf.compat.v1`` graph: the variables of ``batch_normalization``, a resource variable
``dense/w`` (get_variable), Adam minimizing a loss with the global step, an
ExponentialMovingAverage of ``dense/w``; one checkpoint saved by
``tf.compat.v1.train.Saver``.

Request: None.  Response::

    {"variables": [(v.name, v.op.name), ...],      # global_variables(), in order
     "slots": {"m": name, "v": name},               # Adam's slots of dense/w (v.name)
     "average": v.name, "average_name": str,        # the EMA's variable, average_name(w)
     "to_restore": [key, ...],                      # sorted keys of variables_to_restore()
     "checkpoint_keys": [key, ...]}                 # tf.train.list_variables of the save
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import _common


def handle(request: Any, out_dir: Path) -> dict:
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        # The variables of TF1's batch_normalization layer (tf_keras, not installed), by name.
        with v1.variable_scope("batch_normalization"):
            gamma = v1.get_variable("gamma", initializer=np.ones(3, np.float32), use_resource=True)
            beta = v1.get_variable("beta", initializer=np.zeros(3, np.float32), use_resource=True)
            for stat in ("moving_mean", "moving_variance"):
                v1.get_variable(stat, initializer=np.zeros(3, np.float32), use_resource=True, trainable=False)
        y = x * gamma + beta
        with v1.variable_scope("dense"):
            w = v1.get_variable("w", initializer=np.ones((3, 1), np.float32), use_resource=True)
        loss = tf.reduce_sum(tf.matmul(y, w))
        step = v1.train.get_or_create_global_step()
        opt = v1.train.AdamOptimizer(0.1)
        opt.minimize(loss, global_step=step)
        ema = v1.train.ExponentialMovingAverage(0.9)
        ema.apply([w])
        to_restore = sorted(ema.variables_to_restore())
        saver = v1.train.Saver()
        init = v1.global_variables_initializer()
    with v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        sess.run(init)
        prefix = saver.save(sess, str(out_dir / "model.ckpt"))
    return {"variables": [(v.name, v.op.name) for v in graph.get_collection("variables")],
            "slots": {"m": opt.get_slot(w, "m").name, "v": opt.get_slot(w, "v").name},
            "average": ema.average(w).name, "average_name": ema.average_name(w),
            "to_restore": to_restore,
            "checkpoint_keys": [k for k, _ in tf.train.list_variables(prefix)]}


if __name__ == "__main__":
    _common.main(handle)
