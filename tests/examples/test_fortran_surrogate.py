"""examples/fortran_surrogate runs by one command: it trains the closure with
the bridge, compiles heat.f90 against tf_bridge and runs the Fortran time
loop, whose surrogate solution stays within 2% of the exact-closure one; the
Fortran loop's final state is within 1e-5 of the same loop replayed in Python
with the bridge calling the same SavedModel (not bit for bit: the replay's
Laplacian is numpy's float32 arithmetic, not the Fortran program's)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import bridge
from support import REPO


STEPS = 400


def test_fortran_surrogate_example_runs_and_tracks_the_exact_closure(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(REPO / "examples" / "fortran_surrogate" / "run.py"),
                           "--steps", str(STEPS), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    diff = float(re.search(r"max \|u_surrogate - u_exact\|\s+(\S+)", done.stdout).group(1))
    scale = float(re.search(r"max \|u_exact\|\s+(\S+)", done.stdout).group(1))
    assert 0.3 < scale < 1.5 and diff < 0.02 * scale, done.stdout

    raw = np.frombuffer((tmp_path / "u_final.bin").read_bytes(), np.float32)
    fortran_u, fortran_exact = raw[:64], raw[64:]
    n, d = 64, np.float32(0.01)
    dx = np.float32(1.0) / np.float32(n)
    dt = np.float32(0.2) * dx**2 / d
    grid = np.arange(n, dtype=np.float32) * dx
    pi = np.float32(3.14159265)
    u = (np.float32(0.8) * np.sin(2 * pi * grid) + np.float32(0.3) * np.cos(6 * pi * grid)).astype(np.float32)
    with bridge.load_saved_model(tmp_path / "closure") as model:
        closure = model.signatures["serving_default"]
        for _ in range(STEPS):
            s = closure(u=u.reshape(n, 1))["s"].reshape(n)
            lap = (np.roll(u, -1) - 2 * u + np.roll(u, 1)) / dx**2
            u = (u + dt * (d * lap + s)).astype(np.float32)
    np.testing.assert_allclose(fortran_u, u, rtol=0, atol=1e-5)
    assert np.abs(fortran_exact - u).max() < 0.02 * scale
