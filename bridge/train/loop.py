"""``train_loop``: run a train op for a number of steps, with a progress bar,
checkpoints and recovery from tasks that die.

On a terminal the progress is a tqdm bar (step, loss, steps/s); elsewhere
(a log file, CI) plain lines go through ``logging.getLogger("bridge.train")``
when logging is set up, and to stderr when it is not.
Checkpoints and recovery: :mod:`bridge.train.recovery`.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from bridge.framework.errors import OpError

from .progress import stderr_is_terminal
from .recovery import Checkpoints, is_recoverable

__all__ = ["train_loop"]

logger = logging.getLogger("bridge.train")

FeedDict = Union[None, dict, Callable[[int], Optional[dict]]]


def _say(line: str) -> None:
    """A progress line: through the "bridge.train" logger where logging is set
    up (a handler on it or an ancestor), else on stderr, so that a plain script
    shows its progress without configuring logging."""
    if logger.hasHandlers():
        logger.info(line)
    else:
        print(f"train_loop: {line}", file=sys.stderr, flush=True)


class _Bar:
    """The tqdm bar: steps done, loss of the last step, steps/s."""

    def __init__(self, steps: int, first: int = 0):
        from tqdm.auto import tqdm

        self._bar = tqdm(total=steps, initial=first, unit="step", file=sys.stderr, dynamic_ncols=True, leave=True)

    def step(self, step: int, loss: Optional[float]) -> None:
        if loss is not None:
            self._bar.set_postfix_str(f"loss={loss:.6g}", refresh=False)
        self._bar.update(1)

    def rewind(self, step: int) -> None:
        self._bar.n = step
        self._bar.refresh()

    def close(self, step: int, stopped: str = "") -> None:
        if stopped:
            self._bar.set_description_str(stopped, refresh=False)
        self._bar.close()


class _Log:
    """Plain lines every ``every`` steps and at the end."""

    def __init__(self, steps: int, every: Optional[int], first: int = 0):
        self._steps = steps
        self._every = max(1, math.ceil(steps / 10)) if every is None else int(every)
        self._start = self._last_time = time.perf_counter()
        self._last_step = first
        self._run = 0   # steps run, those run again after a recovery included
        self._loss: Optional[float] = None

    def _line(self, done: int, since: float, steps_since: int, what: str = "") -> None:
        now = time.perf_counter()
        rate = steps_since / (now - since) if now > since else float("inf")
        loss = "" if self._loss is None else f" loss {self._loss:.6g}"
        _say("%sstep %d/%d%s (%.1f steps/s)" % (what, done, self._steps, loss, rate))

    def step(self, step: int, loss: Optional[float]) -> None:
        self._loss = loss
        self._run += 1
        done = step + 1
        if self._every > 0 and done % self._every == 0 and done < self._steps:
            self._line(done, self._last_time, done - self._last_step)
            self._last_time, self._last_step = time.perf_counter(), done

    def rewind(self, step: int) -> None:
        self._last_time, self._last_step = time.perf_counter(), step

    def close(self, step: int, stopped: str = "") -> None:
        self._line(step, self._start, self._run, f"{stopped}: " if stopped else "done: ")


def _check_count(value: Any, what: str, positive: bool = False) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < int(positive)):
        raise ValueError(f"train_loop: {what} must be a {'positive' if positive else 'non-negative'} int or None, "
                         f"got {value!r}")


def train_loop(session: Any, train_op: Any, steps: int, loss: Any = None, feed_dict: FeedDict = None,
               callback: Optional[Callable[[int, Optional[float]], Any]] = None,
               progress: Optional[bool] = None, log_every: Optional[int] = None,
               checkpoint_dir: Any = None, save_every: Optional[int] = None, saver: Any = None,
               max_recoveries: int = 3, recovery_timeout: float = 120.0,
               is_chief: Optional[bool] = None, hooks: Sequence[Any] = (),
               summary_dir: Any = None, summary_every: Optional[int] = None,
               hparams: Optional[Mapping[Any, Any]] = None) -> list[Optional[float]]:
    """Run ``train_op`` until step ``steps``; return the loss of each step run.

    Each step is one ``session.run([train_op, loss], feed)`` (``train_op``
    alone without ``loss``; then the list holds None).  The loss is the one
    that run computed: before the update when the train op's gradients come
    from the same reads of the variables, as TF's optimizers build them.

    ``feed_dict``: a dict fed to every step, or ``feed_dict(step) -> dict``
    (steps count from 0).  ``callback(step, loss)`` after each step; returning
    True stops the loop there (that step's loss is the last in the list).
    ``progress``: a tqdm bar on stderr (True), logging lines on the
    ``"bridge.train"`` logger every ``log_every`` steps (default: about 10
    lines per run; 0: only the last) and at the end (False), or the bar when
    stderr is a terminal (None).  Ctrl-C closes the bar (or logs the step
    reached) and re-raises KeyboardInterrupt.

    **Checkpoints** (``checkpoint_dir``), as ``MonitoredTrainingSession``:
    the newest checkpoint there is restored first and training starts at its
    step (the list then holds the losses from that step on); without one,
    the variables (initialized by the caller) are saved as step 0.  Then
    ``<checkpoint_dir>/model.ckpt-<step>`` every ``save_every`` steps and at
    the end, with ``saver`` (default ``Saver(sharded=True)`` of the graph's
    variables: on a cluster each ps task writes its own shard).

    **Recovery**, with ``checkpoint_dir`` and a session that can reconnect
    (``bridge.distribute.Session``): a step that fails with
    UnavailableError, AbortedError or DeadlineExceededError (a task died,
    restarted or stalled past the run's deadline), or FailedPreconditionError
    reading a variable a restarted ps lost, makes the session connect
    anew, wait until its tasks answer (at most ``recovery_timeout`` seconds),
    restore the newest checkpoint (into restarted ps tasks too) and go on
    from its step, the lost steps run again; one warning line on the
    ``"bridge.train"`` logger per recovery.  After ``max_recoveries`` of
    them the next such error is raised.  With feeds that are a function of
    the step and a deterministic model, the result equals an uninterrupted
    run's.

    ``is_chief`` (default: the session's ``is_chief``, else True): only the
    chief saves and restores.  Another worker of between-graph training
    (its own client) saves nothing; after a failure it reconnects, waits
    for the chief to restore the variables (``wait_for_variables``) and
    goes on at its own step.

    ``hooks``: TF's session hooks, such as ``SyncReplicasOptimizer``'s
    ``make_session_run_hook(is_chief)``: ``after_create_session(session,
    coord)`` once the session is ready (after the checkpoint's restore) and
    again after every recovery, ``end(session)`` when the loop is done.  The
    bridge's additions, used where a hook has them: ``first_step(session,
    step)`` gives the step to start at, ``begin_recovery(session)`` runs when
    a step failed, ``after_recovery(session, step, timeout)`` replaces
    ``after_create_session`` after a recovery and gives the step to resume
    at.  With ``SyncReplicasOptimizer`` every worker rolls back to the
    chief's checkpoint (docs/guides/distributed.md, "Recovery"); a worker whose failed step the
    others completed resumes after it, its loss then None.

    **TensorBoard** (``summary_dir``, the chief only): the graph, then every
    ``summary_every`` steps (default: about 100 points per run) and at the
    last step ``train/loss``, ``train/learning_rate`` (the optimizer's, when
    ``train_op`` came from one), ``train/step_time`` (seconds per step since
    the last point) and the graph's own summaries (``summary.merge_all()``),
    fetched in that step's run; ``tensorboard --logdir <summary_dir>`` shows them.
    ``hparams`` (names or ``summary.hparams.HParam``s to values): the run's
    hyperparameters for TensorBoard's HParams dashboard, its session ending
    "success" or "failure" with the loop (the experiment's
    ``hparams_config_pb`` goes in the folder above the runs: docs/guides/tensorboard.md).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"train_loop: steps must be a non-negative int, got {steps!r}")
    _check_count(log_every, "log_every")
    _check_count(save_every, "save_every", positive=True)
    _check_count(max_recoveries, "max_recoveries")
    if not recovery_timeout or recovery_timeout <= 0:
        raise ValueError(f"train_loop: recovery_timeout must be positive seconds, got {recovery_timeout!r}")
    if checkpoint_dir is None and (save_every is not None or saver is not None):
        raise ValueError("train_loop: save_every and saver need a checkpoint_dir")
    _check_count(summary_every, "summary_every", positive=True)
    if summary_dir is None and (summary_every is not None or hparams is not None):
        raise ValueError("train_loop: summary_every and hparams need a summary_dir")
    if feed_dict is not None and not isinstance(feed_dict, dict) and not callable(feed_dict):
        raise TypeError(f"train_loop: feed_dict must be a dict or a callable step -> dict, "
                        f"got {type(feed_dict).__name__}")
    if is_chief is None:
        is_chief = bool(getattr(session, "is_chief", True))
    checkpoints = Checkpoints(session, checkpoint_dir, saver, is_chief) if checkpoint_dir is not None else None
    fetches = train_op if loss is None else [train_op, loss]
    recoveries = 0
    first = 0
    while checkpoints is not None:
        try:
            first = checkpoints.start(session)
            break
        except OpError as exc:  # the first save or restore: recovered as a step would be
            if (not is_recoverable(exc) or not hasattr(session, "reconnect") or recoveries >= max_recoveries):
                raise
            recoveries += 1
            checkpoints.reconnect(session, exc, recoveries, max_recoveries, recovery_timeout, fetches)
    hooks = list(hooks)
    for hook in hooks:
        if hasattr(hook, "after_create_session"):
            hook.after_create_session(session, None)
        if hasattr(hook, "first_step"):
            first = int(hook.first_step(session, first))
    use_bar = stderr_is_terminal() if progress is None else bool(progress)
    summaries = (_Summaries(session, summary_dir, train_op, loss, steps, summary_every, first, hparams)
                 if summary_dir is not None and is_chief else None)
    report = _Bar(steps, first) if use_bar else _Log(steps, log_every, first)
    losses: list[Optional[float]] = []
    stopped = ""
    # Each step runs the same fetches: one session.make_callable per set of fed
    # tensors (they keep working after session.reconnect()).
    runners: dict[tuple, Callable[..., Any]] = {}
    step = first
    try:
        while step < steps and not stopped:
            try:
                extra = summaries.fetches if summaries is not None and summaries.due(step) else ()
                value, extra_values = _run_step(session, runners, fetches, feed_dict, step, loss is not None, extra)
                if extra:
                    summaries.write(step, value, extra_values)
                losses.append(value)
                report.step(step, value)
                step += 1
                if checkpoints is not None and save_every and step % save_every == 0 and step < steps:
                    checkpoints.save(session, step)
            except OpError as exc:
                if (not is_recoverable(exc) or checkpoints is None or not hasattr(session, "reconnect")
                        or recoveries >= max_recoveries):
                    if is_recoverable(exc) and checkpoints is not None and recoveries >= max_recoveries:
                        logger.error("train_loop: step %d failed with %s after %d recoveries: giving up", step,
                                     type(exc).__name__, recoveries)
                    raise
                recoveries += 1
                for hook in hooks:
                    if hasattr(hook, "begin_recovery"):
                        hook.begin_recovery(session)
                step = checkpoints.recover(session, exc, step, recoveries, max_recoveries, recovery_timeout, hooks,
                                           fetches)
                del losses[max(0, step - first):]
                # Ahead of the failed step (the other workers completed it): no loss for the steps skipped.
                losses.extend([None] * max(0, step - first - len(losses)))
                report.rewind(step)
                continue
            if callback is not None and callback(step - 1, value):
                stopped = "stopped by callback"
        if checkpoints is not None and checkpoints.last_saved != step:
            checkpoints.save(session, step)
        for hook in hooks:
            if hasattr(hook, "end"):
                hook.end(session)
    except KeyboardInterrupt:
        report.close(step, "interrupted")
        if summaries is not None:
            summaries.close("failure")
        raise
    except BaseException:
        report.close(step, "failed")
        if summaries is not None:
            summaries.close("failure")
        raise
    if summaries is not None:
        summaries.close("success")
    report.close(step, stopped)
    return losses


def _run_step(session: Any, runners: dict, fetches: Any, feed_dict: FeedDict, step: int,
              with_loss: bool, extra: Sequence[Any] = ()) -> tuple[Optional[float], list]:
    """Run one step: (its loss or None, the values of ``extra`` fetched in the same run)."""
    feed = (feed_dict(step) if callable(feed_dict) else feed_dict) or {}
    if not isinstance(feed, dict):
        raise TypeError(f"train_loop: feed_dict({step}) returned {type(feed).__name__}, not a dict")
    keys = (tuple(feed), bool(extra))
    run_step = runners.get(keys)
    if run_step is None:
        run_step = runners[keys] = session.make_callable([fetches, list(extra)] if extra else fetches, keys[0])
    out = run_step(*feed.values())
    if extra:
        out, extra_values = out
        return (float(out[1]) if with_loss else None), list(extra_values)
    return (float(out[1]) if with_loss else None), []


class _Summaries:
    """train_loop's TensorBoard log: a FileWriter on ``summary_dir`` with the
    graph, and the scalars of every ``every``-th step (see train_loop)."""

    def __init__(self, session: Any, summary_dir: Any, train_op: Any, loss: Any, steps: int,
                 every: Optional[int], first: int, hparams: Optional[Mapping[Any, Any]]):
        from bridge.summary import FileWriter, hparams as hp, merge_all
        from .optimizer import LEARNING_RATES

        graph = session.graph
        self._hparams = hp if hparams is not None else None
        start = hp.hparams_pb(hparams) if hparams is not None else None   # refused values raise before any file
        self._writer = FileWriter(summary_dir, graph)
        if start is not None:
            self._writer.add_summary(start)
        self._every = max(1, math.ceil(steps / 100)) if every is None else every
        self._steps = steps
        rates = [lr for op, lr in graph.collections.get(LEARNING_RATES, []) if op is train_op]
        self._tags = ["train/learning_rate"] if rates else []
        self.fetches = rates[-1:]
        merged = merge_all(graph=graph) if graph.collections.get("summaries") else None
        if merged is not None:
            self.fetches.append(merged)
        self._has_merged = merged is not None
        self._last_time, self._last_step = time.perf_counter(), first
        if not self.fetches:   # nothing to fetch: still a point every `every` steps for the loss and time
            self.fetches = [train_op]
            self._tags, self._has_merged = [None], False

    def due(self, step: int) -> bool:
        return (step + 1) % self._every == 0 or step + 1 == self._steps

    def write(self, step: int, loss: Optional[float], values: list) -> None:
        now = time.perf_counter()
        if loss is not None:
            self._writer.add_scalar("train/loss", loss, step)
        for tag, value in zip(self._tags, values):
            if tag is not None:
                self._writer.add_scalar(tag, float(value), step)
        if self._has_merged:
            self._writer.add_summary(values[-1], step)
        done = step + 1 - self._last_step
        if done > 0:
            self._writer.add_scalar("train/step_time", (now - self._last_time) / done, step)
        self._last_time, self._last_step = now, step + 1

    def close(self, status: str) -> None:
        if self._hparams is not None:
            self._writer.add_summary(self._hparams.session_end_pb(status))
        self._writer.close()
