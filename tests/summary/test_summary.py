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
    assert [s.op.name for s in (loss, twice, hist)] == [
        "outer/loss/ScalarSummary", "outer/loss_1/ScalarSummary", "params/weights/HistogramSummary"]
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
    assert "outer/loss/ScalarSummary" in events[1]["graph_nodes"] and "w" in events[1]["graph_nodes"]
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
