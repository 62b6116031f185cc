"""TensorFlow's log lines as its libraries load (absl's "All log messages
before absl::InitializeLog() ..." notice and the oneDNN line): a bridge
process says nothing on stderr by default, and TF_CPP_MIN_LOG_LEVEL still
decides (bridge/framework/_lib.py, filter_tf_log)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from support import REPO

_GRAPH_RUN = """
import numpy as np
import bridge
g = bridge.Graph()
with g.as_default():
    y = bridge.constant(np.arange(3.0)) * 2.0
with bridge.Session(g) as sess:
    print(sess.run(y).tolist())
"""
NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ONEDNN = re.compile(r"I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ port\.cc:\d+\] oneDNN custom operations are on\. .*")


def _run(level):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    return subprocess.run([sys.executable, "-c", _GRAPH_RUN], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(REPO))


@pytest.mark.parametrize("level", [None, "2"])
def test_a_graph_run_says_nothing_on_stderr(level):
    done = _run(level)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[0.0, 2.0, 4.0]\n", "")


def test_tf_cpp_min_log_level_0_shows_tfs_lines():
    done = _run("0")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == NOTICE
    assert ONEDNN.fullmatch(lines[1]), lines


def test_the_filter_keeps_records_at_or_above_the_level_and_everything_else():
    from bridge.framework._lib import filter_tf_log

    data = (f"{NOTICE}\n"
            "I0000 00:00:1795832033.140850   19206 port.cc:153] an info\n"
            "W0000 00:00:1795832033.140850   19206 thing.cc:9] a warning\n"
            "  its second line\n"
            "E0000 00:00:1795832033.140851   19206 other.cc:7] an error\n").encode()
    assert filter_tf_log(b"someone else's line\n" + data, 3) == b"someone else's line\n"
    assert filter_tf_log(data, 2) == (f"{NOTICE}\nE0000 00:00:1795832033.140851   19206 other.cc:7] an error\n"
                                      .encode())
    assert filter_tf_log(data, 1) == (f"{NOTICE}\nW0000 00:00:1795832033.140850   19206 thing.cc:9] a warning\n"
                                      "  its second line\nE0000 00:00:1795832033.140851   19206 other.cc:7] an "
                                      "error\n").encode()
    assert filter_tf_log(data, 0) == data
