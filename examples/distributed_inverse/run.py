"""The inverse-diffusion problem (examples/inverse_diffusion) trained on a
TensorFlow cluster: its experiments split over two workers, each running the
Julia PDE op, and the network's weights on a ps.

    python examples/distributed_inverse/run.py            # 100 cells, 3000 Adam steps
    python examples/distributed_inverse/run.py --small    # 50 cells, 2000 steps: what the test runs

One command: it starts three `tfbridge server` processes on loopback ports
(launch.py: /job:ps/task:0, and /job:worker/task:0 and 1, each worker with
``--ops examples/inverse_diffusion``, so Julia starts there), trains from
this process, prints the kappa error, and stops every server, also on an
error or Ctrl-C.  This process only declares the op (``customop.declare``):
it never starts Julia.

The model is examples/inverse_diffusion's: kappa(x) = softplus(net(x)) +
0.05 with a 1 -> H -> H -> 1 tanh network (``bridge.layers.dense``), three
experiments (sources) with noisy observations of u, the misfit over the
noise as the loss.  Placement (``bridge.distribute.replica_device_setter``
and device scopes):
- the network's weights (and Adam's slots, the global step) on the ps;
- the network itself on worker 0 (kappa is 50 to 100 numbers);
- experiment k's solve and misfit on worker k % 2: worker 0 solves
  experiments 0 and 2, worker 1 experiment 1;
- the gradients with their forward ops (``colocate_gradients_with_ops``):
  each adjoint solve runs in Julia on the worker of its experiment;
- the loss (the mean over the experiments) and Adam's update on the ps.
Each step is synchronous: one ``Session.run`` of the train op, which waits
for both workers.  Adam's rate decays from --lr to --decay times it over the
run, as in the one-process example.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from launch import local_servers  # noqa: E402  (standard library only)

OP_FOLDER = HERE.parent / "inverse_diffusion"
SIZES = {"cells": (100, 50), "steps": (3000, 2000)}   # (full, --small)
WORKERS = 2


def _bridge_repo() -> Optional[Path]:
    """The source tree holding the bridge, if it is not installed (the servers import it too)."""
    repo = HERE.parent.parent
    return repo if (repo / "bridge" / "__init__.py").is_file() else None


def _one_process_example():
    """examples/inverse_diffusion/run.py as a module: the problem, its data and errors."""
    spec = importlib.util.spec_from_file_location("inverse_diffusion_run", OP_FOLDER / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def build(example, solve, problem, cluster, hidden: int, seed: int, steps: int, lr: float, decay: float):
    """The graph: (graph, kappa, us, loss, train op, the devices of the Julia ops)."""
    import bridge
    from bridge import distribute, ops

    graph = bridge.Graph()
    with graph.as_default():
        bridge.set_random_seed(seed)
        with bridge.device(distribute.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
            x = bridge.constant(problem.x_cells.reshape(-1, 1), bridge.float64, name="x")
            h = bridge.layers.dense(x, hidden, activation=bridge.nn.tanh)
            h = bridge.layers.dense(h, hidden, activation=bridge.nn.tanh)
            out = bridge.layers.dense(h, 1)
            kappa = ops.reshape(bridge.nn.softplus(out), [problem.cells]) + example.KAPPA_FLOOR
        us, terms = [], []
        for k, (f, observed, sigma) in enumerate(zip(problem.forcings, problem.observed, problem.sigma)):
            with bridge.device(f"/job:worker/task:{k % WORKERS}"), graph.name_scope(f"experiment_{k}"):
                u = solve(kappa, bridge.constant(f, bridge.float64, name="f"))
                residual = (u - bridge.constant(observed, bridge.float64, name="u_observed")) / sigma
                us.append(u)
                terms.append(ops.mean(ops.square(residual), [0]))
        with bridge.device("/job:ps/task:0"):
            loss = ops.add_n(terms) / float(len(terms))
            global_step = bridge.train.get_or_create_global_step()
            rate = bridge.train.exponential_decay(bridge.constant(lr, bridge.float64), global_step,
                                                  max(steps, 1), decay)
            train = bridge.train.AdamOptimizer(rate).minimize(loss, global_step=global_step,
                                                              colocate_gradients_with_ops=True)
    julia_ops = sorted({(op.type, op.device) for op in graph.get_operations()
                        if op.type.startswith("DiffusionSolve1D")})
    return graph, kappa, us, loss, train, julia_ops


def train(args: argparse.Namespace, cluster_file: Path, log=print) -> tuple[float, float]:
    """Build, initialise on the ps, train; returns (kappa error, u error)."""
    import numpy as np

    from bridge import customop, distribute

    example = _one_process_example()
    solve = customop.declare(OP_FOLDER).diffusion_solve1d   # registers the op here; Julia runs on the workers
    cluster = distribute.ClusterSpec.from_json(cluster_file)
    problem = example.make_problem(args.cells, args.noise, args.seed)
    graph, kappa, us, loss, train_op, julia_ops = build(example, solve, problem, cluster, args.hidden, args.seed,
                                                        args.steps, args.lr, args.decay)
    for op_type, device in julia_ops:
        which = [k for k in range(len(problem.forcings)) if f"task:{k % WORKERS}" in device]
        log(f"{op_type:<22} on {device}: experiments {', '.join(map(str, which))}")
    from bridge import summary

    # The chief (this client, worker 0) logs for TensorBoard: the graph with
    # each Julia op's device, the loss every step, the kappa error ten times.
    writer = summary.FileWriter(args.logdir, graph) if args.logdir is not None else None
    with distribute.Session(cluster, ("worker", 0), graph=graph, timeout=args.timeout) as sess:
        log(f"variables: {sess.prepare()} on the ps (the chief, worker 0, initialises them)")
        log(f"initial: loss {sess.run(loss):.4g}, kappa error "
            f"{example.relative_error(sess.run(kappa), problem.kappa):.2%}")
        every = max(1, args.steps // 10)
        t0 = time.perf_counter()
        for step in range(args.steps):
            value = sess.run([loss, train_op])[0]
            if not np.isfinite(value):
                raise FloatingPointError(f"step {step + 1}: the loss is {value}")
            if writer is not None:
                writer.add_scalar("train/loss", value, step)
            if (step + 1) % every == 0:
                log(f"Adam: step {step + 1}/{args.steps} loss {value:.6g} "
                    f"({(step + 1) / (time.perf_counter() - t0):.0f} steps/s)")
                if writer is not None:
                    writer.add_scalar("kappa_error", example.relative_error(sess.run(kappa), problem.kappa), step)
        seconds = time.perf_counter() - t0
        final, kappa_value, u_values = sess.run([loss, kappa, us])
    if writer is not None:
        writer.close()
        log(f"TensorBoard: tensorboard --logdir {args.logdir}")
    kappa_error = example.relative_error(kappa_value, problem.kappa)
    u_error = example.relative_error(np.concatenate(u_values), np.concatenate(problem.u_true))
    log(f"{'method':<10} {'steps':>6} {'wall time':>10} {'final loss':>11} {'kappa error':>12} {'u error':>9}")
    log(f"{'Adam':<10} {args.steps:>6d} {seconds:>8.2f} s {final:>11.4f} {kappa_error:>11.2%} {u_error:>8.2%}")
    from bridge.julia import host

    log(f"Julia started in this process: {'yes' if host.is_initialized() else 'no'}")
    return kappa_error, u_error


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, help="finite-difference cells (default 100; --small: 50)")
    parser.add_argument("--steps", type=int, help="Adam steps (default 3000; --small: 2000)")
    parser.add_argument("--hidden", type=int, default=20, help="units per hidden layer (default 20)")
    parser.add_argument("--noise", type=float, default=0.01, help="noise, a fraction of max|u| (default 0.01)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise and of the initial weights")
    parser.add_argument("--lr", type=float, default=0.02, help="Adam's initial learning rate (default 0.02)")
    parser.add_argument("--decay", type=float, default=0.3,
                        help="the rate decays to this fraction of --lr over the run (default 0.3)")
    parser.add_argument("--target", type=float, default=0.05,
                        help="the relative L2 error of kappa to reach (default 0.05)")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of each run, seconds (default 60)")
    parser.add_argument("--small", action="store_true", help="the quick version the test runs")
    parser.add_argument("--logdir", type=Path, default=Path(__file__).resolve().parent / "runs" / "chief",
                        help="the chief's TensorBoard log (default runs/chief beside this file)")
    parser.add_argument("--no-log", dest="logdir", action="store_const", const=None,
                        help="write no TensorBoard log")
    args = parser.parse_args(argv)
    for name, (full, small) in SIZES.items():
        if getattr(args, name) is None:
            setattr(args, name, small if args.small else full)
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before this process or a server loads TensorFlow
    repo = _bridge_repo()
    if repo is not None and str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    print("starting the servers: /job:ps/task:0, /job:worker/task:0 and /job:worker/task:1 "
          "(the workers start Julia and load the DiffusionSolve1D op)", flush=True)
    t0 = time.perf_counter()
    ops = {("worker", i): [OP_FOLDER] for i in range(WORKERS)}
    try:
        with local_servers({"ps": 1, "worker": WORKERS}, ops=ops, repo=repo,
                           log=lambda line: print(f"  {line}", flush=True)) as cluster:
            print(f"servers ready in {time.perf_counter() - t0:.1f} s:", flush=True)
            for server in cluster.servers.values():
                print(f"  {server.ready_line}", flush=True)
            kappa_error, _ = train(args, cluster.path, log=lambda line: print(line, flush=True))
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc or 'Ctrl-C'}): the servers are stopped", file=sys.stderr)
        return 130
    print("servers stopped")
    ok = kappa_error <= args.target
    print(f"target: relative L2 error of kappa at most {args.target:.0%}: {kappa_error:.2%} "
          f"({'met' if ok else 'missed'})")
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
