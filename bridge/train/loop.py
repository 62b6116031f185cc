"""``train_loop``: run a train op for a number of steps, with a progress bar.

On a terminal the progress is a tqdm bar (step, loss, steps/s); elsewhere
(a log file, CI) plain lines go through ``logging.getLogger("bridge.train")``.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any, Callable, Optional, Union

__all__ = ["train_loop"]

logger = logging.getLogger("bridge.train")

FeedDict = Union[None, dict, Callable[[int], Optional[dict]]]


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


class _Bar:
    """The tqdm bar: steps done, loss of the last step, steps/s."""

    def __init__(self, steps: int):
        from tqdm.auto import tqdm

        self._bar = tqdm(total=steps, unit="step", file=sys.stderr, dynamic_ncols=True, leave=True)

    def step(self, step: int, loss: Optional[float]) -> None:
        if loss is not None:
            self._bar.set_postfix_str(f"loss={loss:.6g}", refresh=False)
        self._bar.update(1)

    def close(self, step: int, stopped: str = "") -> None:
        if stopped:
            self._bar.set_description_str(stopped, refresh=False)
        self._bar.close()


class _Log:
    """Plain lines every ``every`` steps and at the end."""

    def __init__(self, steps: int, every: Optional[int]):
        self._steps = steps
        self._every = max(1, math.ceil(steps / 10)) if every is None else int(every)
        self._start = self._last_time = time.perf_counter()
        self._last_step = 0
        self._loss: Optional[float] = None

    def _line(self, done: int, since: float, steps_since: int, what: str = "") -> None:
        now = time.perf_counter()
        rate = steps_since / (now - since) if now > since else float("inf")
        loss = "" if self._loss is None else f" loss {self._loss:.6g}"
        logger.info("%sstep %d/%d%s (%.1f steps/s)", what, done, self._steps, loss, rate)

    def step(self, step: int, loss: Optional[float]) -> None:
        self._loss = loss
        done = step + 1
        if self._every > 0 and done % self._every == 0 and done < self._steps:
            self._line(done, self._last_time, done - self._last_step)
            self._last_time, self._last_step = time.perf_counter(), done

    def close(self, step: int, stopped: str = "") -> None:
        self._line(step, self._start, step, f"{stopped}: " if stopped else "done: ")


def train_loop(session: Any, train_op: Any, steps: int, loss: Any = None, feed_dict: FeedDict = None,
               callback: Optional[Callable[[int, Optional[float]], Any]] = None,
               progress: Optional[bool] = None, log_every: Optional[int] = None) -> list[Optional[float]]:
    """Run ``train_op`` ``steps`` times; return the loss of each step run.

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
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"train_loop: steps must be a non-negative int, got {steps!r}")
    if log_every is not None and (isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 0):
        raise ValueError(f"train_loop: log_every must be a non-negative int or None, got {log_every!r}")
    if feed_dict is not None and not isinstance(feed_dict, dict) and not callable(feed_dict):
        raise TypeError(f"train_loop: feed_dict must be a dict or a callable step -> dict, "
                        f"got {type(feed_dict).__name__}")
    use_bar = _stderr_is_terminal() if progress is None else bool(progress)
    report = _Bar(steps) if use_bar else _Log(steps, log_every)
    fetches = train_op if loss is None else [train_op, loss]
    losses: list[Optional[float]] = []
    step = 0
    stopped = ""
    # Each step runs the same fetches: one session.make_callable per set of fed tensors.
    runners: dict[tuple, Callable[..., Any]] = {}
    try:
        for step in range(steps):
            feed = (feed_dict(step) if callable(feed_dict) else feed_dict) or {}
            if not isinstance(feed, dict):
                raise TypeError(f"train_loop: feed_dict({step}) returned {type(feed).__name__}, not a dict")
            keys = tuple(feed)
            run_step = runners.get(keys)
            if run_step is None:
                run_step = runners[keys] = session.make_callable(fetches, keys)
            out = run_step(*feed.values())
            value = None if loss is None else float(out[1])
            losses.append(value)
            report.step(step, value)
            if callback is not None and callback(step, value):
                stopped = "stopped by callback"
                break
    except KeyboardInterrupt:
        report.close(len(losses), "interrupted")
        raise
    except BaseException:
        report.close(len(losses), "failed")
        raise
    report.close(len(losses), stopped)
    return losses
