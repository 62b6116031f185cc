"""examples/fortran_surrogate: train a closure model with the bridge, then run
a Fortran heat-equation time loop that calls it every step (heat.f90).

    python examples/fortran_surrogate/run.py [--steps 400] [--out DIR] [--cmake]

1. The closure s(u) = u - u**3 (a reaction term a coarse model would lack) is
   learned by an MLP (1 -> 16 tanh -> 16 tanh -> 1, Adam) from samples, and
   exported as a SavedModel (signature serving_default: u[?,1] -> s[?,1]).
2. heat.f90 is compiled with the flags of `tfbridge fortran --flags` (with
   --cmake: by CMake, CMakeLists.txt's find_package(tf_bridge)) and run:
   u_t = 0.01 u_xx + s(u) on a periodic grid of 64 points, the network
   called through the tf_bridge module at each step, beside the same loop
   with the exact closure.  It prints their largest difference.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import bridge
from bridge import fortran, ops
from bridge.train import AdamOptimizer

HERE = Path(__file__).resolve().parent


def train_closure(export_dir: Path, steps: int = 3000, seed: int = 0) -> float:
    """Fit s(u) = u - u**3 on [-1.5, 1.5] and export it; the final training loss."""
    rng = np.random.default_rng(seed)
    samples = rng.uniform(-1.5, 1.5, (512, 1)).astype(np.float32)
    target = samples - samples**3
    g = bridge.Graph()
    with g.as_default():
        u = bridge.placeholder(bridge.float32, [None, 1], name="u")
        s_true = bridge.placeholder(bridge.float32, [None, 1], name="s_true")
        h = u
        for i, (n_in, n_out) in enumerate([(1, 16), (16, 16), (16, 1)]):
            w = bridge.Variable(rng.normal(0, 1 / np.sqrt(n_in), (n_in, n_out)).astype(np.float32), name=f"w{i}")
            b = bridge.Variable(np.zeros(n_out, np.float32), name=f"b{i}")
            h = ops.bias_add(ops.mat_mul(h, w.value()), b.value())
            if i < 2:
                h = ops.tanh(h)
        s = ops.identity(h, name="s")
        loss = ops.mean(ops.square(s - s_true), [0, 1])
        train = AdamOptimizer(0.01).minimize(loss)
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        for _ in range(steps):
            _, value = sess.run([train, loss], {u: samples, s_true: target})
        bridge.saved_model.save(sess, export_dir, ({"u": u}, {"s": s}))
    return float(value)


def compile_heat(out: Path, cmake: bool = False) -> Path:
    """heat.f90 built into out: gfortran with `tfbridge fortran --flags`, or CMake with
    find_package(tf_bridge) (CMakeLists.txt, -Dtf_bridge_DIR=`tfbridge fortran --cmake-dir`)."""
    if not cmake:
        exe = out / "heat"
        subprocess.run([fortran.fortran_compiler(), "-O2", "-o", str(exe), str(HERE / "heat.f90"),
                        *fortran.flags().split()], check=True, cwd=out, timeout=600)
        return exe
    tree = out / "cmake-build"
    cmake_exe = shutil.which("cmake") or "cmake"
    subprocess.run([cmake_exe, "-S", str(HERE), "-B", str(tree), f"-Dtf_bridge_DIR={fortran.build().cmake_dir}",
                    f"-DCMAKE_Fortran_COMPILER={fortran.fortran_compiler()}"], check=True, timeout=600)
    subprocess.run([cmake_exe, "--build", str(tree)], check=True, timeout=600)
    return tree / "heat"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="time steps of the Fortran loop")
    parser.add_argument("--out", type=Path, default=HERE / "build", help="folder for the model and the program")
    parser.add_argument("--cmake", action="store_true", help="build heat.f90 with CMake (find_package(tf_bridge))")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    shutil.rmtree(out / "closure", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    loss = train_closure(out / "closure")
    print(f"closure trained: mean squared error {loss:.2e}, exported to {out / 'closure'}", flush=True)
    exe = compile_heat(out, args.cmake)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([str(exe), str(out / "closure"), str(args.steps)], cwd=out, env=env, timeout=600,
                          capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    if done.returncode:
        sys.stderr.write(done.stderr[-3000:])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
