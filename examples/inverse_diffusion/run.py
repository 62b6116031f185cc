"""An inverse problem with a Julia op in the training loop.

The forward model is the steady diffusion equation

    -(kappa(x) u'(x))' = f(x) on [0, 1],   u(0) = u(1) = 0,

solved in Julia by the custom op DiffusionSolve1D (custom_op.txt,
diffusion_solve1d.jl): finite differences on ``--cells`` cells, a symmetric
tridiagonal matrix, an LDL' solve, and the gradient by the adjoint method
(one more solve, with A' = A).  The coefficient kappa(x) is unknown: a small
neural network of x built with ``bridge.layers.dense`` (1 -> H -> H -> 1,
tanh), kappa = softplus(net(x)) + a floor, in float64.

The data: u at every interior node for three sources f (uniform, and bumps at
x = 0.3 and x = 0.7), computed with the true kappa(x) = 1 + 0.5 sin(2 pi x),
plus Gaussian noise of ``--noise`` times max|u| (fixed seed).  Three sources,
because one does not pin kappa down everywhere: the flux kappa u' is known
from f (up to a constant), so kappa = flux / u' is poorly determined where u'
vanishes, which it does somewhere between the two walls; each source puts
that point elsewhere.

The loss is the misfit normalised by the noise, mean(((u - u_obs) / sigma)^2),
so a fit down to the noise level has loss about 1.  It is minimised with
L-BFGS-B (``bridge.train.ScipyOptimizer``) and then, from the same initial
values, with Adam (``bridge.train.AdamOptimizer`` at a rate decaying with
``bridge.train.exponential_decay``, run by ``bridge.train.train_loop``).
The script prints, per method, iterations, wall time, final loss and the
relative L2 errors of kappa and u against the truth, checks the L-BFGS-B
estimate against ``--target`` (kappa error 5% by default), and writes a plot
of truth vs both estimates to ``inverse_diffusion.png`` beside this file.
It logs both fits for TensorBoard in ``runs/`` beside this file (``--logdir``):
L-BFGS-B's loss at every iteration and its final kappa error and figure
(scipy holds its iterate outside the graph's variables until the end); for
Adam the loss, the kappa error, the learning rate and the step time every
thousandth of the run, and the kappa(x) figure ten times::

    tensorboard --logdir examples/inverse_diffusion/runs

``--gradient forwarddiff`` trains through DiffusionSolve1DAuto
(forwarddiff/), the same forward function with the gradient ForwardDiff
computes from it (``@gradient forwarddiff``) instead of the hand-written
adjoint: the same fit, to rounding.

    python examples/inverse_diffusion/run.py            # 100 cells, 1000 L-BFGS-B iterations, 3000 Adam steps
    python examples/inverse_diffusion/run.py --small    # the test's version: seconds
    python examples/inverse_diffusion/run.py --small --gradient forwarddiff
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

# TensorFlow's oneDNN graph rewriter warns "Not handling type DT_DOUBLE" each
# time it meets a float64 op it leaves to Eigen (some fifty lines here, none
# of them a problem); keep TF's errors, drop its warnings, unless the user
# chose a level.  Set before bridge loads TensorFlow.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import scipy.sparse  # noqa: E402
import scipy.sparse.linalg  # noqa: E402

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

HERE = Path(__file__).resolve().parent
PLOT = HERE / "inverse_diffusion.png"
LOGDIR = HERE / "runs"
# Defaults of the sizes: (full, --small).
SIZES = {"cells": (100, 50), "lbfgs_iterations": (1000, 300), "adam_steps": (3000, 2000)}
# --gradient: the op folder and its op function, by who writes the gradient.
OPS = {"adjoint": (HERE, "diffusion_solve1d"), "forwarddiff": (HERE / "forwarddiff", "diffusion_solve1d_auto")}
KAPPA_FLOOR = 0.05   # kappa = softplus(net(x)) + KAPPA_FLOOR > 0: the matrix stays positive definite


# --- the problem, in numpy ------------------------------------------------------------------

def kappa_true(x: np.ndarray) -> np.ndarray:
    """The coefficient to recover."""
    return 1.0 + 0.5 * np.sin(2 * np.pi * x)


def diffusion_matrix(kappa: np.ndarray) -> scipy.sparse.csc_matrix:
    """The op's discrete operator, assembled with scipy: n = len(kappa) cells,
    h = 1/n, unknowns at the n-1 interior nodes (the docstring of
    diffusion_solve1d.jl)."""
    n = len(kappa)
    diagonal = n ** 2 * (kappa[:-1] + kappa[1:])
    off = -n ** 2 * kappa[1:-1]
    return scipy.sparse.diags([off, diagonal, off], [-1, 0, 1], format="csc")


def reference_solve(kappa: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The discrete system the op solves, solved by scipy (for checks)."""
    return scipy.sparse.linalg.spsolve(diffusion_matrix(np.asarray(kappa, float)), np.asarray(f, float))


@dataclass
class Problem:
    cells: int
    x_cells: np.ndarray      # cell midpoints, where kappa lives (cells values)
    x_nodes: np.ndarray      # interior nodes, where f and u live (cells - 1 values)
    kappa: np.ndarray        # the truth at x_cells
    forcings: list           # one f per experiment
    u_true: list             # the noise-free solutions
    observed: list           # u_true + noise
    sigma: list              # the noise level of each experiment


def make_problem(cells: int = 100, noise: float = 0.01, seed: int = 0) -> Problem:
    """Synthetic data: three sources, the true kappa, Gaussian noise of
    ``noise * max|u|`` per experiment (numpy seed ``seed``)."""
    x_cells = (np.arange(cells) + 0.5) / cells
    x_nodes = np.arange(1, cells) / cells
    kappa = kappa_true(x_cells)
    forcings = [np.ones(cells - 1),
                10.0 * np.exp(-((x_nodes - 0.3) / 0.1) ** 2),
                10.0 * np.exp(-((x_nodes - 0.7) / 0.1) ** 2)]
    u_true = [reference_solve(kappa, f) for f in forcings]
    rng = np.random.default_rng(seed)
    sigma = [noise * float(np.abs(u).max()) for u in u_true]
    observed = [u + s * rng.standard_normal(u.shape) for u, s in zip(u_true, sigma)]
    return Problem(cells, x_cells, x_nodes, kappa, forcings, u_true, observed, sigma)


def relative_error(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.linalg.norm(np.ravel(estimate) - np.ravel(truth)) / np.linalg.norm(np.ravel(truth)))


# --- the model, in a bridge graph -------------------------------------------------------------

@dataclass
class Model:
    graph: bridge.Graph
    kappa: bridge.Output           # (cells,)
    u: list                        # one (cells-1,) solution per experiment
    loss: bridge.Output
    misfit: bridge.Output
    variables: list
    kappa_error: bridge.Output     # relative L2 error of kappa (a "kappa_error" scalar summary too)
    figure: bridge.Output          # a placeholder of a figure's RGBA pixels, [1, height, width, 4]
    figure_summary: bridge.Output  # its image summary "kappa" (outside merge_all: fed when drawn)
    note: bridge.Output            # a placeholder of a Markdown note
    note_summary: bridge.Output    # its text summary "setup" (outside merge_all)


def build_model(solve, problem: Problem, hidden: int = 20, reg: float = 0.0, seed: int = 0) -> Model:
    """kappa = softplus(dense(dense(dense(x, H, tanh), H, tanh), 1)) + floor at the
    cell midpoints; one DiffusionSolve1D per experiment; the noise-normalised misfit."""
    graph = bridge.Graph()
    with graph.as_default():
        bridge.set_random_seed(seed)
        x = bridge.constant(problem.x_cells.reshape(-1, 1), bridge.float64, name="x")
        h = bridge.layers.dense(x, hidden, activation=bridge.nn.tanh)
        h = bridge.layers.dense(h, hidden, activation=bridge.nn.tanh)
        out = bridge.layers.dense(h, 1)
        kappa = ops.reshape(bridge.nn.softplus(out), [problem.cells]) + KAPPA_FLOOR
        us, terms = [], []
        for k, (f, observed, sigma) in enumerate(zip(problem.forcings, problem.observed, problem.sigma)):
            u = solve(kappa, bridge.constant(f, bridge.float64, name=f"f{k}"))
            residual = (u - bridge.constant(observed, bridge.float64, name=f"u_observed{k}")) / sigma
            us.append(u)
            terms.append(ops.mean(ops.square(residual), [0]))
        misfit = ops.add_n(terms) / float(len(terms))
        variables = bridge.trainable_variables()
        loss = misfit
        if reg > 0:   # weight decay on the kernels: keeps the network from fitting the noise
            kernels = [v for v in variables if v.op.name.endswith("kernel")]
            loss = misfit + reg * ops.add_n([ops.l2_loss(v.value()) for v in kernels])
        truth = bridge.constant(problem.kappa, bridge.float64, name="kappa_true")
        kappa_error = ops.sqrt(ops.sum(ops.square(kappa - truth), [0])) / float(np.linalg.norm(problem.kappa))
        bridge.summary.scalar("kappa_error", kappa_error)
        figure = bridge.placeholder(bridge.uint8, [1, None, None, 4], name="figure")
        figure_summary = bridge.summary.image("kappa", figure, max_outputs=1, collections=[])
        note = bridge.placeholder(bridge.string, [], name="note")
        note_summary = bridge.summary.text("setup", note, collections=[])
    return Model(graph, kappa, us, loss, misfit, variables, kappa_error, figure, figure_summary, note,
                 note_summary)


# --- the two optimisations ---------------------------------------------------------------------

@dataclass
class Outcome:
    method: str
    iterations: int
    evaluations: int
    seconds: float
    loss: float
    kappa_error: float
    u_error: float
    kappa: np.ndarray
    u: list
    history: list


def evaluate(sess: bridge.Session, model: Model, problem: Problem, method: str, iterations: int,
             evaluations: int, seconds: float, history: Sequence[float]) -> Outcome:
    loss, kappa, us = sess.run([model.loss, model.kappa, model.u])
    return Outcome(method, iterations, evaluations, seconds, float(loss),
                   relative_error(kappa, problem.kappa),
                   relative_error(np.concatenate(us), np.concatenate(problem.u_true)),
                   kappa, us, [float(v) for v in history])


def run(cells: int = 100, hidden: int = 20, noise: float = 0.01, seed: int = 0, lbfgs_iterations: int = 1000,
        adam_steps: int = 3000, adam_lr: float = 0.02, adam_decay: float = 0.3, reg: float = 0.0, plot: Optional[Path] = PLOT,
        progress: Optional[bool] = None, log=print, logdir: Optional[Path] = LOGDIR,
        gradient: str = "adjoint") -> tuple[Problem, list[Outcome], np.ndarray]:
    """Build the op, make the data, fit with L-BFGS-B then Adam from the same
    start, logging both for TensorBoard in ``logdir`` (its runs "lbfgs" and
    "adam"; None: no log); return the problem, one Outcome per method and the
    initial kappa.  ``gradient``: "adjoint" (DiffusionSolve1D's hand-written
    adjoint) or "forwarddiff" (DiffusionSolve1DAuto: ForwardDiff's gradient of
    the same solver)."""
    t0 = time.perf_counter()
    folder, function = OPS[gradient]
    solve = getattr(bridge.customop.load(folder), function)
    log(f"{bridge.customop.parse_file(folder / 'custom_op.txt').name} op (gradient: {gradient}) built and loaded "
        f"in {time.perf_counter() - t0:.2f} s")

    problem = make_problem(cells, noise, seed)
    model = build_model(solve, problem, hidden, reg, seed)
    with model.graph.as_default():
        lbfgs = bridge.train.ScipyOptimizer(model.loss, method="L-BFGS-B",
                                            options={"maxiter": lbfgs_iterations})
        # The rate decays exponentially to adam_decay times its start over the run: a constant
        # one leaves Adam bouncing around the minimum (spikes in the loss) late in the run.
        global_step = bridge.train.get_or_create_global_step()
        rate = bridge.train.exponential_decay(bridge.constant(adam_lr, bridge.float64), global_step,
                                              max(adam_steps, 1), adam_decay)
        adam_step = bridge.train.AdamOptimizer(rate).minimize(model.loss, global_step=global_step)
        init = bridge.global_variables_initializer()
        # Both methods start from the same values: the ones the initializer gave.
        starts = [bridge.placeholder(v.dtype, v.shape, name=f"start{i}") for i, v in enumerate(model.variables)]
        restart = [v.assign(s) for v, s in zip(model.variables, starts)]
    n_weights = sum(int(np.prod(tuple(v.shape))) for v in model.variables)
    log(f"{cells} cells, {len(problem.forcings)} experiments x {cells - 1} noisy observations "
        f"({noise:.0%} noise); network 1-{hidden}-{hidden}-1, {n_weights} weights")

    outcomes = []
    with bridge.Session(model.graph) as sess:
        sess.run(init)
        initial = sess.run([v.value() for v in model.variables])
        kappa0 = sess.run(model.kappa)
        log(f"initial: loss {sess.run(model.loss):.4g}, kappa error {relative_error(kappa0, problem.kappa):.2%}")

        every = max(1, lbfgs_iterations // 10)
        lbfgs_log = None if logdir is None else bridge.summary.FileWriter(Path(logdir) / "lbfgs", model.graph)
        hparams = {"cells": cells, "hidden": hidden, "noise": noise, "reg": reg}
        if logdir is not None:
            write_experiment(Path(logdir), sess, problem, hparams)
            lbfgs_log.add_summary(bridge.summary.hparams.hparams_pb({**hparams, "method": "L-BFGS-B"}))
            lbfgs_log.add_summary(setup_text(sess, model, problem, "L-BFGS-B",
                                             f"at most {lbfgs_iterations} iterations"))

        def progress_line(iteration: int, loss: float) -> None:
            if lbfgs_log is not None:
                lbfgs_log.add_scalar("train/loss", loss, iteration)
            if (iteration + 1) % every == 0:
                log(f"L-BFGS-B: iteration {iteration + 1}/{lbfgs_iterations} loss {loss:.6g}")

        t = time.perf_counter()
        result = lbfgs.minimize(sess, callback=progress_line)
        seconds = time.perf_counter() - t
        if lbfgs_log is not None:   # the variables hold scipy's optimum now
            last = len(lbfgs.history) - 1
            lbfgs_log.add_scalar("kappa_error", sess.run(model.kappa_error), last)
            log_figure(sess, model, problem, lbfgs_log, "L-BFGS-B", last)
            lbfgs_log.add_summary(bridge.summary.hparams.session_end_pb("success"))
            lbfgs_log.close()
        log(f"L-BFGS-B: {result.message}")
        outcomes.append(evaluate(sess, model, problem, "L-BFGS-B", int(result.nit), int(result.nfev), seconds,
                                 lbfgs.history))

        sess.run(restart, dict(zip(starts, initial)))
        adam_every = max(1, adam_steps // 10)
        adam_log = None if logdir is None else bridge.summary.FileWriter(Path(logdir) / "adam")
        if adam_log is not None:
            budget = f"{adam_steps} steps from rate {adam_lr}, decaying to {adam_decay:g} of it"
            adam_log.add_summary(setup_text(sess, model, problem, "Adam", budget))

        def adam_figure(step: int, loss: float) -> None:
            if adam_log is not None and (step + 1) % adam_every == 0:
                log_figure(sess, model, problem, adam_log, "Adam", step)

        t = time.perf_counter()
        losses = bridge.train.train_loop(sess, adam_step, adam_steps, loss=model.loss, progress=progress,
                                         callback=adam_figure, summary_dir=None if logdir is None else
                                         Path(logdir) / "adam", summary_every=None if logdir is None else
                                         max(1, adam_steps // 1000),
                                         hparams=None if logdir is None else {**hparams, "method": "Adam"})
        seconds = time.perf_counter() - t
        if adam_log is not None:
            adam_log.close()
        outcomes.append(evaluate(sess, model, problem, "Adam", adam_steps, adam_steps, seconds, losses))

    if plot is not None:
        write_plot(problem, outcomes, kappa0, Path(plot))
        log(f"plot: {plot}")
    if logdir is not None:
        log(f"TensorBoard: tensorboard --logdir {logdir}")
    return problem, outcomes, kappa0


def write_experiment(logdir: Path, sess: bridge.Session, problem: Problem, hparams: dict) -> None:
    """The HParams dashboard's experiment, in ``logdir`` above the runs: this
    run's settings and the method, compared by final loss and kappa error."""
    hp = bridge.summary.hparams
    with bridge.summary.FileWriter(logdir) as root:
        root.add_summary(hp.hparams_config_pb(
            [hp.HParam("method", hp.Discrete(["L-BFGS-B", "Adam"]))] + [hp.HParam(name) for name in hparams],
            [hp.Metric("train/loss", display_name="loss"), hp.Metric("kappa_error", display_name="kappa error")]))


def setup_text(sess: bridge.Session, model: Model, problem: Problem, method: str, budget: str) -> bytes:
    """A Markdown note of the fit's set-up (TensorBoard's Text dashboard), as a summary."""
    note = (f"**{method}**, {budget}, on {problem.cells} cells and {len(problem.forcings)} experiments "
            f"(noise {problem.sigma[0] / np.abs(problem.u_true[0]).max():.1%} of max|u|): the unknown is "
            f"kappa(x) = 1 + 0.5 sin(2 pi x)")
    return sess.run(model.note_summary, {model.note: note.encode()})


def log_figure(sess: bridge.Session, model: Model, problem: Problem, writer, method: str, step: int) -> None:
    """The kappa(x) figure of the current fit, as the image summary "kappa" at ``step``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kappa, error = sess.run([model.kappa, model.kappa_error])
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=80)
    ax.plot(problem.x_cells, problem.kappa, "k-", lw=2, label="truth")
    ax.plot(problem.x_cells, kappa, "r--", lw=1.5, label=f"{method}, step {step + 1} ({error:.1%})")
    ax.set(title="coefficient kappa(x)", xlabel="x")
    ax.legend(fontsize=8)
    fig.tight_layout()
    pixels = bridge.summary.figures_to_array(fig)
    plt.close(fig)
    writer.add_summary(sess.run(model.figure_summary, {model.figure: pixels}), step)


def _first_below(history: Sequence[float], level: float) -> str:
    return next((str(i + 1) for i, v in enumerate(history) if v < level), "never")


def report(outcomes: Sequence[Outcome], target: float, log=print) -> bool:
    """Print the table; True when L-BFGS-B's kappa error meets the target."""
    log(f"{'method':<10} {'iterations':>10} {'evaluations':>11} {'wall time':>10} {'final loss':>11} "
        f"{'kappa error':>12} {'u error':>9}")
    for o in outcomes:
        log(f"{o.method:<10} {o.iterations:>10d} {o.evaluations:>11d} {o.seconds:>8.2f} s {o.loss:>11.4f} "
            f"{o.kappa_error:>11.2%} {o.u_error:>8.2%}")
    reached = ", ".join(f"{o.method} {_first_below(o.history, 2.0)}" for o in outcomes)
    log(f"iterations until the loss fell below 2 (twice the noise level): {reached}")
    verdicts = ", ".join(f"{o.method} {o.kappa_error:.2%} ({'met' if o.kappa_error < target else 'missed'})"
                         for o in outcomes)
    log(f"target: relative L2 error of kappa below {target:.0%} (required of L-BFGS-B): {verdicts}")
    return outcomes[0].kappa_error < target


def write_plot(problem: Problem, outcomes: Sequence[Outcome], kappa0: np.ndarray, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"L-BFGS-B": dict(color="tab:red", ls="--"), "Adam": dict(color="tab:green", ls=":")}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    ax.plot(problem.x_cells, problem.kappa, "k-", lw=2, label="truth")
    ax.plot(problem.x_cells, kappa0, color="0.6", lw=1, label="initial network")
    for o in outcomes:
        ax.plot(problem.x_cells, o.kappa, lw=1.5, label=f"{o.method} ({o.kappa_error:.1%})", **styles[o.method])
    ax.set(title="coefficient kappa(x)", xlabel="x")
    ax.legend(fontsize=8)
    ax = axes[1]
    for k, (u, obs) in enumerate(zip(problem.u_true, problem.observed)):
        ax.plot(problem.x_nodes, obs, ".", ms=3, color=f"C{k}", alpha=0.5,
                label="observed" if k == 0 else None)
        ax.plot(problem.x_nodes, u, "-", color="k", lw=1, label="truth" if k == 0 else None)
        for o in outcomes:
            ax.plot(problem.x_nodes, o.u[k], lw=1, label=o.method if k == 0 else None, **styles[o.method])
    ax.set(title="solutions u(x), three sources", xlabel="x")
    ax.legend(fontsize=8)
    ax = axes[2]
    for o in outcomes:
        ax.semilogy(np.arange(1, len(o.history) + 1), o.history, label=o.method, color=styles[o.method]["color"])
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--", label="noise level")
    ax.set(title="loss (misfit / noise)", xlabel="iteration")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, help="finite-difference cells (default 100; --small: 50)")
    parser.add_argument("--hidden", type=int, default=20, help="units per hidden layer (default 20)")
    parser.add_argument("--noise", type=float, default=0.01, help="noise, a fraction of max|u| (default 0.01)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise and of the initial weights")
    parser.add_argument("--lbfgs-iterations", type=int, help="L-BFGS-B maxiter (default 1000; --small: 300)")
    parser.add_argument("--adam-steps", type=int, help="Adam steps (default 3000; --small: 2000)")
    parser.add_argument("--adam-lr", type=float, default=0.02, help="Adam's initial learning rate (default 0.02)")
    parser.add_argument("--adam-decay", type=float, default=0.3,
                        help="Adam's rate decays exponentially to this fraction of --adam-lr over the run "
                             "(default 0.3; 1 keeps it constant)")
    parser.add_argument("--reg", type=float, default=0.0, help="weight decay on the kernels (default 0)")
    parser.add_argument("--gradient", choices=sorted(OPS), default="adjoint",
                        help="the op's gradient: the hand-written adjoint (DiffusionSolve1D, default), or "
                             "ForwardDiff's of the same solver (DiffusionSolve1DAuto, @gradient forwarddiff)")
    parser.add_argument("--target", type=float, default=0.05,
                        help="the relative L2 error of kappa L-BFGS-B must reach (default 0.05)")
    parser.add_argument("--small", action="store_true",
                        help="the quick version the test runs (defaults 50 cells, 300 L-BFGS-B iterations, "
                             "2000 Adam steps)")
    parser.add_argument("--plot", type=Path, default=PLOT, help=f"where to write the plot (default {PLOT})")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")
    parser.add_argument("--logdir", type=Path, default=LOGDIR,
                        help=f"TensorBoard's folder: runs lbfgs/ and adam/ (default {LOGDIR})")
    parser.add_argument("--no-log", action="store_true", help="write no TensorBoard log")
    args = parser.parse_args(argv)
    for name, (full, small) in SIZES.items():
        if getattr(args, name) is None:
            setattr(args, name, small if args.small else full)
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    # train_loop shows a tqdm bar on a terminal and logs to "bridge.train" elsewhere: print those lines.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("Adam: %(message)s"))
    train_log = logging.getLogger("bridge.train")
    train_log.addHandler(handler)
    train_log.setLevel(logging.INFO)
    _, outcomes, _ = run(args.cells, args.hidden, args.noise, args.seed, args.lbfgs_iterations, args.adam_steps,
                         args.adam_lr, args.adam_decay, args.reg, None if args.no_plot else args.plot,
                         logdir=None if args.no_log else args.logdir, gradient=args.gradient)
    ok = report(outcomes, args.target)
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
