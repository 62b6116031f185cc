"""The seed example: a Julia function as a TensorFlow op, checked against
TensorFlow's own gradients.

TwoLayer computes the Jacobian of y = W2*tanh(W1*x + b1) + b2 in Julia
(ForwardDiff where Julia finds it: installed, or in the depot named by
TFBRIDGE_JULIA_DEPOT, which `make demo` sets; else analytically, saying why). This script builds the op
from custom_op.txt, runs it in a graph, computes the same Jacobian with
TensorFlow's gradients row by row, and prints the norm of the difference.
Then it gradient-tests the op's own gradient (TwoLayerGrad, also in Julia).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import bridge
from bridge import ops

HERE = Path(__file__).resolve().parent
N = M = H = 10


def main() -> int:
    t0 = time.perf_counter()
    two_layer = bridge.customop.load(HERE).two_layer
    print(f"TwoLayer op built and loaded in {time.perf_counter() - t0:.2f} s")
    print("Julia computes the Jacobian with", bridge.julia.eval("two_layer_method()"))

    rng = np.random.default_rng(0)
    values = {"x": rng.standard_normal(N), "w1": rng.standard_normal((H, N)) / 3, "b1": rng.standard_normal(H),
              "w2": rng.standard_normal((M, H)) / 3, "b2": rng.standard_normal(M)}

    g = bridge.Graph()
    with g.as_default():
        x, w1, b1, w2, b2 = (bridge.placeholder(bridge.float64, v.shape, name=k) for k, v in values.items())
        jac_julia = two_layer(x, w1, b1, w2, b2)

        # The same network in TensorFlow ops, differentiated row by row.
        hidden = ops.tanh(ops.mat_mul(w1, ops.reshape(x, [N, 1])) + ops.reshape(b1, [H, 1]))
        y = ops.reshape(ops.mat_mul(w2, hidden), [M]) + b2
        rows = [bridge.gradients(ops.gather_v2(y, i, 0), x)[0] for i in range(M)]

    feeds = {g.get_tensor_by_name(f"{k}:0"): v for k, v in values.items()}
    with bridge.Session(g) as sess:
        jac, tf_rows = sess.run([jac_julia, rows], feeds)
    jac = jac.reshape(M, N)
    diff = np.linalg.norm(jac - np.stack(tf_rows))
    print(f"|J_julia - J_tensorflow| = {diff:.3e}   (Frobenius norm; |J| = {np.linalg.norm(jac):.3f})")

    # The op's own gradient (TwoLayerGrad, also Julia) against finite differences.
    result = bridge.gradcheck(two_layer, list(values.values()), plot=str(HERE / "gradcheck_two_layer.png"))
    print(result)
    print(f"convergence plot: {HERE / 'gradcheck_two_layer.png'}")
    ok = diff < 1e-10 and result.passed
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
