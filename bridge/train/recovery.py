"""Checkpoints and recovery for ``train_loop``, as ``MonitoredTrainingSession`` does them.

``Checkpoints(session, checkpoint_dir, saver)`` saves ``<dir>/model.ckpt-<step>``
(the step is the number of steps done) and finds the step a checkpoint was
saved at from its name.  ``recover`` brings a training run back after a
task of its cluster died or stalled: on one of :data:`RECOVERABLE_ERRORS`
it makes the session connect anew (``session.reconnect()``), waits until
every task it uses answers again (``session.wait_for_tasks``), restores the
latest checkpoint (into restarted ps tasks too) and says at which step
training resumes; attempts that fail the same way are retried until
``recovery_timeout`` seconds have passed.

The errors a killed or stalled task gives, measured on loopback clusters
with TensorFlow 2.21: a worker or ps killed during a run, UnavailableError
("Socket closed", "failed to connect to all addresses"); the session's own
master killed during a run, DeadlineExceededError at the run's deadline
(its RPC never returns); a stopped (SIGSTOPped) task, DeadlineExceededError;
a ps task killed and restarted between two steps, FailedPreconditionError
("Could not find variable ...") at the next step.
TF's ``MonitoredSession`` recovers from AbortedError and UnavailableError
only (its ``_PREEMPTION_ERRORS``), so the run of a master that dies waits
on; here the run's deadline (``distribute.Session`` sets one by default) ends
the wait and the run recovers.
"""
from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, Optional, Sequence

from bridge.framework.errors import (AbortedError, DeadlineExceededError, FailedPreconditionError, OpError,
                                     UnavailableError)

__all__ = ["RECOVERABLE_ERRORS", "Checkpoints", "CHECKPOINT_BASENAME", "is_recoverable", "after_recovery"]

logger = logging.getLogger("bridge.train")

#: The errors after which ``train_loop`` recovers (with ``checkpoint_dir``, on a session that can reconnect);
#: and FailedPreconditionError for a variable a restarted ps lost (:func:`is_recoverable`).
RECOVERABLE_ERRORS = (UnavailableError, AbortedError, DeadlineExceededError)

#: What TensorFlow says reading a variable a restarted ps task does not hold.
_LOST_VARIABLE = re.compile(r"Could not find variable|uninitialized", re.I)


def is_recoverable(exc: BaseException) -> bool:
    """Whether ``train_loop`` recovers from ``exc``: one of RECOVERABLE_ERRORS,
    or a FailedPreconditionError reading a variable that is gone (a ps task
    that restarted between two steps, before any step failed)."""
    if isinstance(exc, RECOVERABLE_ERRORS):
        return True
    return isinstance(exc, FailedPreconditionError) and bool(_LOST_VARIABLE.search(exc.message or ""))


def after_recovery(hooks: Sequence[Any], session: Any, step: int, deadline: float) -> int:
    """Run each hook's set-up on the new session: its ``after_recovery(session,
    step, timeout)`` (the bridge's, returning the step to resume at) where it
    has one, else TF's ``after_create_session(session, coord)``; return the step."""
    for hook in hooks:
        again = getattr(hook, "after_recovery", None)
        if again is not None:
            step = int(again(session, step, max(0.1, deadline - time.monotonic())))
        elif hasattr(hook, "after_create_session"):
            hook.after_create_session(session, None)
    return step


def _wait_for_tasks(session: Any, timeout: float, fetches: Any) -> None:
    """The session's ``wait_for_tasks`` for the tasks a run of ``fetches`` needs, where it has one."""
    wait = getattr(session, "wait_for_tasks", None)
    if wait is not None:
        wait(timeout=timeout) if fetches is None else wait(timeout=timeout, fetches=fetches)


#: The checkpoints' name in ``checkpoint_dir``, as TF's ``CheckpointSaverHook`` names them.
CHECKPOINT_BASENAME = "model.ckpt"

_STEP = re.compile(r"-(\d+)$")


def first_line(exc: BaseException) -> str:
    """The first line of an error's message that says something (TF's gRPC
    errors may start with an empty line or a row of '=')."""
    text = exc.message if isinstance(exc, OpError) else str(exc)
    for line in (text or "").splitlines():
        line = line.strip()
        if line and any(c.isalnum() for c in line):
            return line
    return type(exc).__name__


class Checkpoints:
    """The checkpoints of one ``train_loop`` run in ``checkpoint_dir``.

    ``saver``: the Saver to use (default: a ``Saver(sharded=True)`` of the
    graph's global variables, so on a cluster each ps task writes its own
    shard).  Only the chief (``is_chief``) saves and restores; another
    worker of between-graph training recovers by waiting for the chief to
    restore the variables, and goes on at its own step."""

    def __init__(self, session: Any, checkpoint_dir: Any, saver: Any = None, is_chief: bool = True):
        from .saver import Saver

        self.folder = os.fspath(checkpoint_dir)
        self.is_chief = is_chief
        if is_chief:
            os.makedirs(self.folder, exist_ok=True)
            if saver is None:
                from bridge.framework.builders import global_variables
                saver = Saver(var_list=global_variables(session.graph), sharded=True)
        self.saver = saver
        self.last_saved: Optional[int] = None

    def latest(self) -> Optional[tuple[str, int]]:
        """(prefix, step) of the newest checkpoint, or None."""
        from .saver import latest_checkpoint

        prefix = latest_checkpoint(self.folder)
        if prefix is None:
            return None
        match = _STEP.search(prefix)
        if match is None:
            raise ValueError(f"train_loop: the latest checkpoint in {self.folder}, {prefix}, has no step in its "
                             f"name ('{CHECKPOINT_BASENAME}-<step>' as train_loop writes them)")
        return prefix, int(match.group(1))

    def save(self, session: Any, step: int) -> Optional[str]:
        if not self.is_chief:
            self.last_saved = step
            return None
        prefix = self.saver.save(session, os.path.join(self.folder, CHECKPOINT_BASENAME), global_step=step)
        self.last_saved = step
        return prefix

    def start(self, session: Any) -> int:
        """Restore the newest checkpoint and return its step; without one, save
        the variables as they are (they must be initialized) as step 0's.
        Not the chief: step 0, nothing saved or restored."""
        if not self.is_chief:
            return 0
        found = self.latest()
        if found is None:
            try:
                self.save(session, 0)
            except FailedPreconditionError as exc:
                raise FailedPreconditionError(
                    f"train_loop: {self.folder} holds no checkpoint to start from, and the variables cannot be "
                    "saved as step 0's: initialize them first (run the initializer, or the chief's "
                    f"distribute.Session.prepare()); {first_line(exc)}") from exc
            return 0
        prefix, step = found
        self.saver.restore(session, prefix)
        self.last_saved = step
        logger.info("train_loop: restored %s, starting at step %d", prefix, step)
        return step

    def reconnect(self, session: Any, error: OpError, attempt: int, max_recoveries: int, timeout: float,
                  fetches: Any = None) -> None:
        """After the first save or restore failed: reconnect ``session`` and
        wait for the tasks a step needs (at most ``timeout`` seconds); the
        caller tries again.  One log line says what happened."""
        start = time.monotonic()
        try:
            session.reconnect()
            _wait_for_tasks(session, timeout, fetches)
        except OpError as exc:
            if not is_recoverable(exc):
                raise
            raise type(error)(
                f"train_loop: the first checkpoint of {self.folder} could not be saved or restored "
                f"({type(error).__name__}: {first_line(error)}) and the run could not recover within {timeout:g} s "
                f"(recovery {attempt} of {max_recoveries}); last: {type(exc).__name__}: {first_line(exc)}") \
                from error
        logger.warning("train_loop: the first checkpoint failed with %s (%s); recovery %d of %d: new session, "
                       "trying again (%.1f s)", type(error).__name__, first_line(error), attempt, max_recoveries,
                       time.monotonic() - start)

    def recover(self, session: Any, error: OpError, step: int, attempt: int, max_recoveries: int,
                timeout: float, hooks: Sequence[Any] = (), fetches: Any = None) -> int:
        """Reconnect ``session``, wait for the tasks a run of ``fetches`` (a
        step) needs, restore the newest checkpoint, run the hooks' set-up
        again (:func:`after_recovery`); return the step to resume at.  One
        log line says what happened."""
        start = time.monotonic()
        deadline = start + timeout
        last: Optional[OpError] = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise type(error)(
                    f"train_loop: step {step} failed ({type(error).__name__}: {first_line(error)}) and the run "
                    f"could not recover within {timeout:g} s (recovery {attempt} of {max_recoveries})"
                    + (f"; last: {type(last).__name__}: {last.message}" if last is not None else "")) from error
            try:
                session.reconnect()
                _wait_for_tasks(session, left, fetches)
                if not self.is_chief:
                    session.wait_for_variables(timeout=max(0.1, deadline - time.monotonic()))
                    restored, prefix = step, None
                else:
                    found = self.latest()
                    if found is None:
                        raise ValueError(f"train_loop: no checkpoint in {self.folder} to recover from")
                    prefix, restored = found
                    self.saver.restore(session, prefix)
                restored = after_recovery(hooks, session, restored, deadline)
                break
            except OpError as exc:
                if not is_recoverable(exc):
                    raise
                last = exc
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        self.last_saved = restored
        what = f"restored {os.path.basename(prefix)}" if prefix else "the chief's variables are back"
        logger.warning("train_loop: step %d failed with %s (%s); recovery %d of %d: new session, %s, "
                       "resuming at step %d (%.1f s)", step, type(error).__name__, first_line(error), attempt,
                       max_recoveries, what, restored, time.monotonic() - start)
        return restored
