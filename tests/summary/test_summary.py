"""bridge.summary: TF1's summary ops and FileWriter, read back by TensorFlow's own event reader."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import summary
from bridge.summary import records
from support.oracle import run_oracle
from support import REPO


def _graph():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [], name="x")
        w = bridge.placeholder(bridge.float32, [6], name="w")
        with bridge.name_scope("outer"):
            loss = summary.scalar("loss", x)
            twice = summary.scalar("loss", x * 2.0)
        hist = summary.histogram("weights", w, family="params")
        merged = summary.merge_all()
    return g, x, w, (loss, twice, hist), merged


def test_crc32c_is_castagnolis():
    assert records.crc32c(b"123456789") == 0xE3069283  # the standard check value
    assert records.crc32c(b"") == 0


def test_tags_follow_tf1s_summary_scope():
    g, _, _, (loss, twice, hist), merged = _graph()
    assert [s.op.name for s in (loss, twice, hist)] == ["outer/loss", "outer/loss_1", "params/weights"]
    assert g.collections[summary.SUMMARIES] == [loss, twice, hist]
    assert merged.op.type == "MergeSummary"
    assert summary.merge_all(graph=bridge.Graph()) is None


def test_event_files_read_back_by_tensorflows_reader(tmp_path):
    g, x, w, _, merged = _graph()
    fed = [(0.25 * step - 1.0, np.linspace(-step, step + 1.0, 6).astype(np.float32)) for step in range(4)]
    with bridge.Session(g) as sess, summary.FileWriter(tmp_path, g) as writer:
        for step, (xv, wv) in enumerate(fed):
            writer.add_summary(sess.run(merged, {x: xv, w: wv}), global_step=10 * step)
    (path,) = tmp_path.glob("events.out.tfevents.*")
    assert path == writer.path
    events = run_oracle("event_files", {"mode": "read", "data": path.read_bytes()})["events"]
    assert events[0]["file_version"] == "brain.Event:2"
    assert "outer/loss" in events[1]["graph_nodes"] and "w" in events[1]["graph_nodes"]
    steps = events[2:]
    assert [e["step"] for e in steps] == [0, 10, 20, 30]
    for event, (xv, wv) in zip(steps, fed, strict=True):
        values = {tag: (kind, v) for tag, kind, v in event["values"]}
        assert set(values) == {"outer/loss", "outer/loss_1", "params/params/weights"}
        assert values["outer/loss"] == ("simple_value", np.float32(xv))
        assert values["outer/loss_1"] == ("simple_value", np.float32(2 * xv))
        kind, histo = values["params/params/weights"]
        assert kind == "histo"
        assert (histo["min"], histo["max"], histo["num"]) == (wv.min(), wv.max(), 6)
        assert histo["sum"] == pytest.approx(float(wv.astype(np.float64).sum()), rel=1e-12, abs=1e-12)
        assert sum(histo["bucket"]) == 6
    assert all(e["wall_time"] > 1.7e9 for e in events)


def test_tf_written_event_files_pass_the_bridges_record_checks(tmp_path):
    scalars = [("a", 0, 1.5), ("b", 1, -2.0), ("a", 2, 3.25)]
    answer = run_oracle("event_files", {"mode": "write", "scalars": scalars})
    frames = records.unframe(answer["data"])
    assert len(frames) == 1 + len(scalars)
    assert b"brain.Event:2" in frames[0]
    # The bridge's framing of the same payloads is byte-identical to TF's.
    assert b"".join(records.frame(f) for f in frames) == answer["data"]
    damaged = bytearray(answer["data"])
    damaged[-1] ^= 0xFF
    with pytest.raises(ValueError, match=f"TFRecord {len(scalars)}: bad data CRC"):
        records.unframe(bytes(damaged))


def test_writer_refuses_what_is_not_a_summary_and_writes_after_close(tmp_path):
    writer = summary.FileWriter(tmp_path)
    with pytest.raises(TypeError, match="serialized Summary .* got float"):
        writer.add_summary(1.5, 0)
    writer.close()
    with pytest.raises(ValueError, match="is closed"):
        writer.add_summary(b"", 0)
    writer.reopen()
    writer.add_summary(b"", 1)
    writer.close()
    assert len(records.unframe(writer.path.read_bytes())) == 2


def test_flushed_events_survive_a_kill(tmp_path):
    code = textwrap.dedent(f"""
        import os, signal
        import bridge
        from bridge import summary
        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder(bridge.float32, [], name="x")
            s = summary.scalar("loss", x)
        sess = bridge.Session(g)
        writer = summary.FileWriter({str(tmp_path)!r}, flush_secs=1e9)
        for step in range(3):
            writer.add_summary(sess.run(s, {{x: float(step)}}), step)
        writer.flush()
        writer.add_summary(sess.run(s, {{x: 99.0}}), 3)   # not flushed: may be lost, never half-written
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == -9, proc.stderr
    (path,) = tmp_path.glob("events.out.tfevents.*")
    events = run_oracle("event_files", {"mode": "read", "data": path.read_bytes()})["events"]
    assert [(e["step"], e["values"]) for e in events[1:4]] == [
        (step, [("loss", "simple_value", float(step))]) for step in range(3)]


def _media_cases():
    rng = np.random.default_rng(7)
    return [
        ("image", "grey", rng.integers(0, 256, (2, 5, 4, 1)).astype(np.uint8), {}),
        ("image", "rgb", rng.uniform(0.0, 1.0, (3, 4, 6, 3)).astype(np.float32), {"max_outputs": 2}),
        ("image", "rgba", rng.uniform(-2.0, 5.0, (1, 3, 3, 4)).astype(np.float64), {"family": "pics"}),
        ("image", "half", rng.uniform(0.0, 1.0, (1, 2, 2, 3)).astype(np.float16), {"max_outputs": 1}),
        ("audio", "clip", np.sin(np.linspace(0, 40, 2 * 300)).reshape(2, 300, 1).astype(np.float32),
         {"sample_rate": 8000.0}),
        ("audio", "stereo", rng.uniform(-1, 1, (1, 100, 2)).astype(np.float32),
         {"sample_rate": 44100.0, "max_outputs": 1}),
        ("text", "note", np.array(b"**loss** fell to 0.25"), {}),
        ("text", "table", np.array([[b"a", b"b"], [b"c", b"d"]]), {}),
        ("scalar", "loss", np.float32(0.5), {}),
        ("scalar", "loss", np.float64(-1.5), {"family": "train"}),
        ("histogram", "weights", rng.normal(size=(3, 4)), {"family": "params"}),
    ]


def test_summaries_are_stock_tfs_byte_for_byte_and_node_for_node():
    """The same images (uint8, float32 in [0, 1], float64 out of range, half),
    clips and strings give the Summary bytes stock TF1's summary ops give
    (its kernels encode the PNG and WAV files), and the same nodes."""
    cases = _media_cases()
    g = bridge.Graph()
    with g.as_default():
        made = []
        for kind, name, value, kwargs in cases:
            made.append(getattr(summary, kind)(name, bridge.constant(value), **kwargs))
    with bridge.Session(g) as sess:
        got = sess.run(made)
    want = run_oracle("event_files", {"mode": "summaries", "cases": cases})
    assert [(op.name, op.type) for op in g.get_operations()] == [tuple(n) for n in want["nodes"]]
    for (kind, name, _, _), mine, theirs in zip(cases, got, want["summaries"], strict=True):
        assert type(mine) is bytes and mine == theirs, (kind, name)   # TF1's type for a string scalar
    assert g.collections[summary.SUMMARIES] == made


def test_image_takes_matplotlib_figures():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    for k in range(2):
        fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
        ax.plot([0, 1, 2], [0, k, 2 * k])
        figures.append(fig)
    pixels = summary.figures_to_array(figures)
    assert pixels.shape == (2, 75, 100, 4) and pixels.dtype == np.uint8
    assert not np.array_equal(pixels[0], pixels[1])   # the two plots differ
    g = bridge.Graph()
    with g.as_default():
        one = summary.image("fig", figures[0])
        two = summary.image("figs", figures, max_outputs=2)
    with bridge.Session(g) as sess:
        assert sess.run(one) != sess.run(two)
    plt.close("all")
    small, _ = plt.subplots(figsize=(1, 1), dpi=50)
    with pytest.raises(ValueError, match=r"figures of different sizes \[\(50, 50, 4\), \(75, 100, 4\)\]"):
        summary.figures_to_array([figures[0], small])


def test_summary_arguments_are_checked():
    g = bridge.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="max_outputs must be a positive int, got 0"):
            summary.image("x", np.zeros((1, 2, 2, 1), np.uint8), max_outputs=0)
        with pytest.raises(ValueError, match="'t': expected tensor Const:0 to have dtype string, got float32"):
            summary.text("t", bridge.constant(1.0))


def test_run_metadata_and_python_scalars_reach_tensorflows_reader(tmp_path):
    """A FULL_TRACE run fills RunMetadata with the kernels' step stats;
    add_run_metadata writes it where TF's reader (and TensorBoard) finds it;
    add_scalar writes a value computed in Python as a ScalarSummary would."""
    g, x, w, _, merged = _graph()
    meta = bridge.RunMetadata()
    assert not meta.has_step_stats
    with bridge.Session(g) as sess, summary.FileWriter(tmp_path) as writer:
        sess.run(merged, {x: 1.0, w: np.ones(6, np.float32)},
                 run_options=bridge.RunOptions(trace_level=bridge.RunOptions.FULL_TRACE), run_metadata=meta)
        assert meta.has_step_stats
        writer.add_run_metadata(meta, "step 7", global_step=7)
        writer.add_scalar("python/loss", 0.125, global_step=8)
        plain = bridge.RunMetadata()
        sess.run(merged, {x: 1.0, w: np.ones(6, np.float32)}, run_metadata=plain)
        assert not plain.has_step_stats   # no trace asked for
    events = run_oracle("event_files", {"mode": "read", "data": writer.path.read_bytes()})["events"]
    tag, traced = events[1]["run_metadata"]
    assert (tag, events[1]["step"]) == ("step 7", 7)
    assert {"outer/loss", "params/weights", "MergeSummary"} <= set(traced)
    assert (events[2]["step"], events[2]["values"]) == (8, [("python/loss", "simple_value", 0.125)])
    with pytest.raises(ValueError, match="trace_level must be one of"):
        bridge.RunOptions(trace_level=7)


def test_the_pure_python_crc_is_the_fallback_and_agrees():
    data = np.random.default_rng(3).bytes(4099)
    assert records._crc32c_python(data) == records.crc32c(data) == records._fast.value(data)
    assert records._crc32c_python(b"123456789") == 0xE3069283
