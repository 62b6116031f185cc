"""The real TensorBoard reads what the bridge writes: every scalar,
histogram, image, audio clip, text, graph (a Julia op's node with its spec)
and hparams value comes back through TensorBoard's HTTP data API as written,
and a writer killed with SIGKILL leaves files TensorBoard still reads.

One TensorBoard (tests/support/tensorboard.py: on 127.0.0.1, a port it picks,
without TensorFlow in its process, stopped by its process group) serves the
module's logdir: an hparams experiment at the root, two runs of a sweep
trained by ``train_loop(summary_dir=, hparams=)``, and a run whose writer
was killed.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2

import bridge
from bridge import customop, ops, summary
from bridge.summary import hparams as hp
from bridge.summary import records
from bridge.train import train_loop
from support import REPO
from support.tensorboard import tensorboard

RATES = (0.125, 0.0625)
STEPS = 12
RNG = np.random.default_rng(11)
XS = RNG.normal(size=(30, 3))
YS = XS @ np.array([1.0, -2.0, 0.5])
CLIP = np.sin(np.linspace(0.0, 60.0, 400)).reshape(1, 400, 1).astype(np.float32)
LR, OPTIMIZER = hp.HParam("learning_rate", hp.RealInterval(0.0, 1.0)), hp.HParam("optimizer", hp.Discrete(["sgd"]))


def _figure(k: int):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=40)
    ax.plot(np.arange(5), np.arange(5) * k)
    return fig


def _train(run_dir, rate: float, twice) -> list:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None, 3], name="x")
        y = bridge.placeholder(bridge.float64, [None], name="y")
        w = bridge.Variable(np.zeros(3), name="w")
        pred = ops.reshape(ops.mat_mul(x, ops.reshape(twice(w.value()), [3, 1])), [-1])
        loss = ops.mean(ops.square(pred - y), 0)
        summary.histogram("residuals", pred - y)
        summary.image("fit", _figure(int(rate * 16)))
        summary.audio("clip", CLIP, 8000.0)
        summary.text("note", bridge.constant(f"learning rate **{rate}**".encode()))
        train_op = bridge.train.GradientDescentOptimizer(rate).minimize(loss)
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as sess:
        sess.run(init)
        return train_loop(sess, train_op, STEPS, loss=loss, feed_dict={x: XS, y: YS}, progress=False,
                          summary_dir=run_dir, summary_every=4, hparams={LR: rate, OPTIMIZER: "sgd"})


_KILLED_WRITER = """
import os, signal, sys
from bridge import summary
writer = summary.FileWriter(sys.argv[1], flush_secs=1e9)
for step in range(3):
    writer.add_scalar("loss", 1.0 / (step + 1), step)
writer.flush()
writer.add_scalar("loss", 99.0, 3)   # not flushed: may be lost, never half-written
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, twice_folder):
    twice = customop.load(twice_folder).twice
    root = tmp_path_factory.mktemp("logdir")
    with summary.FileWriter(root) as writer:
        writer.add_summary(hp.hparams_config_pb([LR, OPTIMIZER], [hp.Metric("train/loss")]))
    losses = {f"lr={rate}": _train(root / f"lr={rate}", rate, twice) for rate in RATES}
    killed = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(root / "killed")], capture_output=True,
                            text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return root, losses


@pytest.fixture(scope="module")
def board(logdir):
    with tensorboard(logdir[0]) as tb:
        tb.wait_for(lambda: set(tb.get("/data/runs")) >= {".", "killed", *(f"lr={r}" for r in RATES)})
        yield tb


def _written(run_dir) -> dict:
    """tag -> [(step, Summary.Value)] of every event file of ``run_dir``, parsed by TensorBoard's protos."""
    out: dict = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for record in records.unframe(path.read_bytes()):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((event.step, value))
    return out


@pytest.mark.parametrize("rate", RATES)
def test_every_scalar_comes_back_as_written(board, logdir, rate):
    run = f"lr={rate}"
    written = _written(logdir[0] / run)
    expected_loss = [(s, np.float32(logdir[1][run][s])) for s in (3, 7, 11)]
    for tag in ("train/loss", "train/learning_rate", "train/step_time"):
        got = board.wait_for(lambda: len(points := board.get("/data/plugin/scalars/scalars", run=run, tag=tag)) == 3
                             and points)
        assert [(step, np.float32(value)) for _, step, value in got] == [
            (step, np.float32(v.simple_value)) for step, v in written[tag]], tag
    assert [(s, np.float32(v.simple_value)) for s, v in written["train/loss"]] == expected_loss
    assert {np.float32(v.simple_value) for _, v in written["train/learning_rate"]} == {np.float32(rate)}


def test_histograms_images_audio_and_text_come_back_as_written(board, logdir):
    run = f"lr={RATES[0]}"
    written = _written(logdir[0] / run)
    histograms = board.wait_for(lambda: len(h := board.get("/data/plugin/histograms/histograms", run=run,
                                                            tag="residuals")) == 3 and h)
    for (_, step, buckets), (w_step, value) in zip(histograms, written["residuals"], strict=True):
        assert step == w_step
        assert sum(count for _, _, count in buckets) == value.histo.num == len(XS)
        assert buckets[0][0] == pytest.approx(value.histo.min) and buckets[-1][1] == pytest.approx(value.histo.max)
    for plugin, tag, field, single in (("images", "fit/image/0", "image", "individualImage"),
                                       ("audio", "clip/audio/0", "audio", "individualAudio")):
        listed = board.wait_for(lambda: len(found := board.get(f"/data/plugin/{plugin}/{plugin}", run=run, tag=tag,
                                                                 sample=0)) == 3 and found)
        for entry, (step, value) in zip(listed, written[tag], strict=True):
            assert entry["step"] == step
            data = board.get(f"/data/plugin/{plugin}/{single}?" + entry["query"].split("?")[-1])
            encoded = (value.image.encoded_image_string if field == "image" else value.audio.encoded_audio_string)
            assert data == encoded and len(data) > 100, (plugin, step)
    texts = board.wait_for(lambda: len(t := board.get("/data/plugin/text/text", run=run, tag="note")) == 3 and t)
    assert [t["text"] for t in texts] == [f"<p>learning rate <strong>{RATES[0]}</strong></p>"] * 3


def test_the_graph_shows_the_julia_ops_spec_on_its_node(board):
    graph = board.wait_for(lambda: board.get("/data/plugin/graphs/graph", run=f"lr={RATES[1]}"))
    from google.protobuf import text_format
    from tensorboard.compat.proto import graph_pb2

    parsed = text_format.Parse(graph.decode(), graph_pb2.GraphDef())
    (node,) = [n for n in parsed.node if n.op == "Twice"]
    attrs = {k: v.s.decode() for k, v in node.attr.items() if k.startswith("_tfbridge_")}
    assert attrs["_tfbridge_language"] == "julia" and attrs["_tfbridge_function"] == "twice"
    folder = Path(attrs["_tfbridge_folder"])
    assert folder.name == "Twice" and attrs["_tfbridge_file"] == str(folder / "twice.jl")
    assert attrs["_tfbridge_spec"] == (folder / "custom_op.txt").read_text()
    grads = [n for n in parsed.node if n.op == "TwiceGrad"]
    assert grads and grads[0].attr["_tfbridge_function"].s.decode() == "twice_grad"


def test_the_hparams_dashboard_compares_the_runs(board, logdir):
    experiment = board.wait_for(lambda: board.post("/data/plugin/hparams/experiment", {"experimentName": ""}))
    assert [h["name"] for h in experiment["hparamInfos"]] == ["learning_rate", "optimizer"]
    assert experiment["hparamInfos"][0]["domainInterval"] == {"minValue": 0.0, "maxValue": 1.0}
    assert [m["name"]["tag"] for m in experiment["metricInfos"]] == ["train/loss"]
    request = {"experimentName": "", "startIndex": 0, "sliceSize": 10,
               "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
               "colParams": [{"hparam": "learning_rate"}, {"hparam": "optimizer"},
                             {"metric": {"tag": "train/loss", "group": ""}}]}
    groups = board.wait_for(lambda: len((g := board.post("/data/plugin/hparams/session_groups", request))
                                        ["sessionGroups"]) == 2 and g)["sessionGroups"]
    seen = {}
    for group in groups:
        (session,) = group["sessions"]
        seen[session["name"]] = (group["hparams"], session["status"], group["metricValues"][0]["value"],
                                 group["metricValues"][0]["trainingStep"])
    assert seen == {f"lr={rate}": ({"learning_rate": rate, "optimizer": "sgd"}, "STATUS_SUCCESS",
                                   float(np.float32(logdir[1][f"lr={rate}"][-1])), STEPS - 1) for rate in RATES}


def test_a_writer_killed_with_sigkill_leaves_what_it_flushed(board):
    points = board.wait_for(lambda: len(p := board.get("/data/plugin/scalars/scalars", run="killed", tag="loss")) >= 3
                            and p)
    assert [(step, value) for _, step, value in points][:3] == [(0, 1.0), (1, 0.5), (2, float(np.float32(1 / 3)))]
    assert len(points) in (3, 4)   # the unflushed fourth may be lost, never half-written
