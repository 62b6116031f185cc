"""bridge.train.train_loop: steps of a train op, losses, callback, progress bar or log lines.

The train op is plain gradient descent built from the graph's own ops
(AssignSubVariableOp of lr * gradient), checked against the same iteration
in numpy.
"""
from __future__ import annotations

import itertools
import logging
import re

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.train import train_loop
from support import REPO

RNG = np.random.default_rng(1717)
XS = RNG.normal(size=(40, 3))
YS = XS @ np.array([1.0, -2.0, 0.5]) + 0.25
LR = 0.125  # exact in float32, which TF's optimizers make a float learning rate


def gd_model(make_train_op=None):
    """Least squares on fed data; train_op = w.assign_sub(LR * dloss/dw), or
    what ``make_train_op(loss)`` builds."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None, 3], name="x")
        y = bridge.placeholder(bridge.float64, [None], name="y")
        w = bridge.Variable(np.zeros(3), name="w")
        pred = ops.reshape(ops.mat_mul(x, ops.reshape(w.value(), [3, 1])), [-1])
        loss = ops.mean(ops.square(pred - y), 0)
        if make_train_op is None:
            (grad,) = bridge.gradients(loss, [w])
            train_op = w.assign_sub(LR * grad)
        else:
            train_op = make_train_op(loss)
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    return sess, x, y, w, loss, train_op


def numpy_gd(steps, xs=XS, ys=YS):
    """The losses (before each update) and final w of the same descent."""
    w = np.zeros(3)
    losses = []
    for _ in range(steps):
        r = xs @ w - ys
        losses.append(np.mean(r * r))
        w = w - LR * (2.0 / len(ys)) * (xs.T @ r)
    return losses, w


def counter_model():
    g = bridge.Graph()
    with g.as_default():
        step = bridge.placeholder(bridge.float64, [], name="step")
        c = bridge.Variable(0.0, dtype=bridge.float64, name="counter")
        train_op = c.assign_add(step)
        fetched = step * 2.0
        init = bridge.global_variables_initializer()
    sess = bridge.Session(g)
    sess.run(init)
    return sess, step, c, train_op, fetched


def test_losses_are_gradient_descents():
    sess, x, y, w, loss, train_op = gd_model()
    losses = train_loop(sess, train_op, 30, loss=loss, feed_dict={x: XS, y: YS}, progress=False)
    ref_losses, ref_w = numpy_gd(30)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-12)
    np.testing.assert_allclose(sess.run(w.value()), ref_w, rtol=1e-12)
    assert all(b < a for a, b in itertools.pairwise(losses))


def test_without_loss_the_list_holds_none():
    sess, step, c, train_op, _ = counter_model()
    assert train_loop(sess, train_op, 5, feed_dict={step: 1.0}, progress=False) == [None] * 5
    assert sess.run(c.value()) == 5.0
    assert train_loop(sess, train_op, 0, feed_dict={step: 1.0}, progress=False) == []


def test_feed_dict_callable_gets_the_step():
    sess, step, c, train_op, fetched = counter_model()
    seen = []

    def feed(i):
        seen.append(i)
        return {step: float(i)}

    losses = train_loop(sess, train_op, 8, loss=fetched, feed_dict=feed, progress=False)
    assert seen == list(range(8))
    assert losses == [2.0 * i for i in range(8)]
    assert sess.run(c.value()) == sum(range(8))


def test_feed_dict_callable_minibatches():
    sess, x, y, w, loss, train_op = gd_model()
    batches = [slice(0, 20), slice(20, 40)]
    losses = train_loop(sess, train_op, 6, loss=loss, progress=False,
                        feed_dict=lambda i: {x: XS[batches[i % 2]], y: YS[batches[i % 2]]})
    wv = np.zeros(3)
    for i in range(6):
        xs, ys = XS[batches[i % 2]], YS[batches[i % 2]]
        r = xs @ wv - ys
        assert losses[i] == pytest.approx(np.mean(r * r), rel=1e-12)
        wv = wv - LR * (2.0 / len(ys)) * (xs.T @ r)
    np.testing.assert_allclose(sess.run(w.value()), wv, rtol=1e-12)


def test_callback_sees_each_step_and_can_stop():
    sess, x, y, w, loss, train_op = gd_model()
    calls = []

    def callback(step, value):
        calls.append((step, value))
        return step == 4

    losses = train_loop(sess, train_op, 50, loss=loss, feed_dict={x: XS, y: YS}, callback=callback,
                        progress=False)
    assert len(losses) == 5
    assert calls == list(enumerate(losses))
    np.testing.assert_allclose(sess.run(w.value()), numpy_gd(5)[1], rtol=1e-12)


def test_log_lines_when_not_a_terminal(caplog, capsys):
    sess, x, y, w, loss, train_op = gd_model()
    with caplog.at_level(logging.INFO, logger="bridge.train"):
        losses = train_loop(sess, train_op, 50, loss=loss, feed_dict={x: XS, y: YS})  # progress=None: auto
    lines = [r.getMessage() for r in caplog.records if r.name == "bridge.train"]
    # About ten lines: every 5 steps, and the end.
    assert [int(re.search(r"step (\d+)/50", m).group(1)) for m in lines] == list(range(5, 50, 5)) + [50]
    assert lines[-1].startswith("done: step 50/50 loss ")
    assert float(re.search(r"loss (\S+)", lines[-1]).group(1)) == pytest.approx(losses[-1], rel=1e-5)
    assert all(re.search(r"\(\d+(\.\d+)? steps/s\)$", m) for m in lines)
    assert "step/s" not in capsys.readouterr().err  # no bar


def test_log_every(caplog):
    sess, step, c, train_op, fetched = counter_model()
    with caplog.at_level(logging.INFO, logger="bridge.train"):
        train_loop(sess, train_op, 45, loss=fetched, feed_dict={step: 1.0}, log_every=20, progress=False)
        train_loop(sess, train_op, 7, feed_dict={step: 1.0}, log_every=0, progress=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "bridge.train"]
    assert [m.split(" (")[0] for m in lines] == [
        "step 20/45 loss 2", "step 40/45 loss 2", "done: step 45/45 loss 2", "done: step 7/7"]


def test_progress_bar_on_stderr(capsys, caplog):
    sess, x, y, w, loss, train_op = gd_model()
    with caplog.at_level(logging.INFO, logger="bridge.train"):
        losses = train_loop(sess, train_op, 40, loss=loss, feed_dict={x: XS, y: YS}, progress=True)
    err = capsys.readouterr().err
    assert "40/40" in err
    assert "step/s" in err
    assert f"loss={losses[-1]:.6g}" in err
    assert not [r for r in caplog.records if r.name == "bridge.train"]  # the bar, not log lines


def test_keyboard_interrupt_closes_the_bar_and_reraises(capsys, caplog):
    sess, step, c, train_op, fetched = counter_model()

    def interrupt(i, value):
        if i == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_loop(sess, train_op, 100, loss=fetched, feed_dict={step: 1.0}, callback=interrupt, progress=True)
    err = capsys.readouterr().err
    assert "interrupted" in err and "4/100" in err
    assert sess.run(c.value()) == 4.0
    with caplog.at_level(logging.INFO, logger="bridge.train"), pytest.raises(KeyboardInterrupt):
        train_loop(sess, train_op, 100, loss=fetched, feed_dict={step: 1.0}, callback=interrupt, progress=False)
    assert caplog.records[-1].getMessage().startswith("interrupted: step 4/100 loss 2")


def test_bad_arguments():
    sess, step, c, train_op, fetched = counter_model()
    with pytest.raises(ValueError, match="steps"):
        train_loop(sess, train_op, -1)
    with pytest.raises(ValueError, match="log_every"):
        train_loop(sess, train_op, 1, log_every=-2)
    with pytest.raises(TypeError, match="feed_dict"):
        train_loop(sess, train_op, 1, feed_dict=[1, 2])
    with pytest.raises(TypeError, match=r"feed_dict\(0\) returned list, not a dict"):
        train_loop(sess, train_op, 1, feed_dict=lambda k: [step, 1.0], progress=False)


def test_with_gradient_descent_optimizer():
    sess, x, y, w, loss, train_op = gd_model(lambda loss: bridge.train.GradientDescentOptimizer(LR).minimize(loss))
    losses = train_loop(sess, train_op, 20, loss=loss, feed_dict={x: XS, y: YS}, progress=False)
    ref_losses, ref_w = numpy_gd(20)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-12)
    np.testing.assert_allclose(sess.run(w.value()), ref_w, rtol=1e-12)


def test_a_plain_script_shows_progress_without_logging_set_up():
    """No logging configured, stderr a pipe: the lines go to stderr (they went nowhere before)."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path
    code = textwrap.dedent("""
        import numpy as np, bridge
        from bridge import ops
        from bridge.train import train_loop
        g = bridge.Graph()
        with g.as_default():
            w = bridge.Variable(np.ones(2), name="w")
            loss = ops.sum(ops.square(w.value()), 0)
            (grad,) = bridge.gradients(loss, [w])
            train_op = w.assign_sub(0.25 * grad)
            init = bridge.global_variables_initializer()
        sess = bridge.Session(g)
        sess.run(init)
        train_loop(sess, train_op, 20, loss=loss)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("train_loop: ")]
    assert [l.split(" (")[0] for l in lines][-1] == "train_loop: done: step 20/20 loss 7.27596e-12"  # 2 * 0.25**19
    assert len(lines) == 10 and proc.stdout == ""


def test_hooks_are_set_up_before_the_first_step_and_ended_after_the_last():
    """hooks=: after_create_session (TF's) once the session is ready, the
    bridge's first_step giving the step to start at, end after the last step."""
    sess, x, y, w, loss, train_op = gd_model()
    calls = []

    class Hook:
        def after_create_session(self, session, coord):
            calls.append(("after_create_session", session is sess, coord))

        def first_step(self, session, step):
            calls.append(("first_step", step))
            return 2

        def end(self, session):
            calls.append(("end", session.run(w.value())))

    seen = []
    losses = train_loop(sess, train_op, 5, loss=loss, feed_dict={x: XS, y: YS}, progress=False, hooks=[Hook()],
                        callback=lambda step, value: seen.append(step))
    want, w_final = numpy_gd(3)
    assert seen == [2, 3, 4] and len(losses) == 3
    np.testing.assert_allclose(losses, want, rtol=1e-12)
    assert calls[:2] == [("after_create_session", True, None), ("first_step", 0)]
    assert [c[0] for c in calls] == ["after_create_session", "first_step", "end"]
    np.testing.assert_allclose(calls[2][1], w_final, rtol=1e-12)


def _events(folder):
    """The events of the one event file in ``folder``, parsed by TensorBoard's own protos."""
    from tensorboard.compat.proto import event_pb2

    from bridge.summary import records

    (path,) = folder.glob("events.out.tfevents.*")
    return [event_pb2.Event.FromString(r) for r in records.unframe(path.read_bytes())]


def test_summary_dir_logs_loss_learning_rate_step_time_and_the_graphs_summaries(tmp_path):
    """train_loop(summary_dir=): the graph, then at steps 4, 9, 14, 19 (every 5,
    the last included) the loss that step computed, the optimizer's decayed
    learning rate of that step, a positive step time and the graph's own
    histogram summary, all fetched in that step's run."""
    def make_train_op(loss):
        step = bridge.train.get_or_create_global_step()
        lr = bridge.train.exponential_decay(LR, step, 4, 0.5)
        bridge.summary.histogram("loss_hist", loss)
        return bridge.train.GradientDescentOptimizer(lr).minimize(loss, global_step=step)

    sess, x, y, w, loss, train_op = gd_model(make_train_op)
    losses = train_loop(sess, train_op, 20, loss=loss, feed_dict={x: XS, y: YS}, progress=False,
                        summary_dir=tmp_path / "run", summary_every=5)
    events = _events(tmp_path / "run")
    assert events[0].file_version == "brain.Event:2" and events[1].graph_def
    by_tag: dict = {}
    for e in events[2:]:
        for v in e.summary.value:
            by_tag.setdefault(v.tag, []).append((e.step, v))
    assert sorted(by_tag) == ["loss_hist", "train/learning_rate", "train/loss", "train/step_time"]
    steps = [4, 9, 14, 19]
    assert [(s, v.simple_value) for s, v in by_tag["train/loss"]] == [(s, np.float32(losses[s])) for s in steps]
    # The rate the step used: global_step = s before its update; decayed continuously.
    assert [(s, v.simple_value) for s, v in by_tag["train/learning_rate"]] == [
        (s, np.float32(LR * 0.5 ** (s / 4))) for s in steps]
    assert [s for s, _ in by_tag["train/step_time"]] == steps
    assert all(0 < v.simple_value < 10 for _, v in by_tag["train/step_time"])
    assert [(s, v.histo.num, np.float32(v.histo.min)) for s, v in by_tag["loss_hist"]] == [
        (s, 1, np.float32(losses[s])) for s in steps]


def test_summary_dir_writes_nothing_on_a_worker_that_is_not_the_chief(tmp_path):
    sess, x, y, w, loss, train_op = gd_model()
    train_loop(sess, train_op, 3, loss=loss, feed_dict={x: XS, y: YS}, progress=False, is_chief=False,
               summary_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="summary_every and hparams need a summary_dir"):
        train_loop(sess, train_op, 1, summary_every=2)
    with pytest.raises(ValueError, match="summary_every must be a positive int"):
        train_loop(sess, train_op, 1, summary_dir=tmp_path / "x", summary_every=0)
