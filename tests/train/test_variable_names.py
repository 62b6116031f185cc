"""Variables are named as TF1 names them: ``v.name`` is ``"<op>:0"``, ``v.op.name`` the op's name,
and what is keyed or named after a variable (checkpoint keys, Adam's slots, the moving
averages and their restore map) uses the op's name, as stock TF1 does on the same graph
(tests/oracle/variable_names.py)."""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import layers
from support.oracle import run_oracle


@pytest.fixture(scope="module")
def want() -> dict:
    return run_oracle("variable_names")


def test_names_slots_averages_and_checkpoint_keys_are_tf1s(want: dict, tmp_path) -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 3], name="x")
        y = layers.batch_normalization(x, training=True)
        with bridge.name_scope("dense"):
            w = bridge.Variable(np.ones((3, 1), np.float32), name="w")
        loss = bridge.reduce_sum(bridge.matmul(y, w))
        step = bridge.train.get_or_create_global_step()
        opt = bridge.train.AdamOptimizer(0.1)
        opt.minimize(loss, global_step=step)
        ema = bridge.train.ExponentialMovingAverage(0.9)
        ema.apply([w])
        to_restore = sorted(ema.variables_to_restore())
        saver = bridge.train.Saver()
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        prefix = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert sorted((v.name, v.op.name) for v in bridge.global_variables(g)) == sorted(map(tuple, want["variables"]))
    assert {"m": opt.get_slot(w, "m").name, "v": opt.get_slot(w, "v").name} == want["slots"]
    assert ema.average(w).name == want["average"]
    assert ema.average_name(w) == want["average_name"]
    assert to_restore == want["to_restore"]
    assert [k for k, _ in bridge.train.list_variables(prefix)] == want["checkpoint_keys"]


def test_the_issues_example() -> None:
    g = bridge.Graph()
    with g.as_default():
        layers.batch_normalization(bridge.placeholder(bridge.float32, [None, 2]), training=True)
    (mean,) = [v for v in bridge.global_variables(g) if v.op.name.endswith("moving_mean")]
    assert (mean.name, mean.op.name) == ("batch_normalization/moving_mean:0", "batch_normalization/moving_mean")
    assert repr(mean) == "<bridge.Variable 'batch_normalization/moving_mean:0' dtype=float32 shape=Shape([2])>"
