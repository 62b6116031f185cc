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
(its RPC never returns); a stopped (SIGSTOPped) task, DeadlineExceededError.
TF's ``MonitoredSession`` recovers from AbortedError and UnavailableError
only, so a master that dies hangs it; here the run's deadline ends the wait.
"""
from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, Optional

from bridge.framework.errors import AbortedError, DeadlineExceededError, OpError, UnavailableError

__all__ = ["RECOVERABLE_ERRORS", "Checkpoints", "CHECKPOINT_BASENAME"]

logger = logging.getLogger("bridge.train")

#: The errors after which ``train_loop`` recovers (with ``checkpoint_dir``, on a session that can reconnect).
RECOVERABLE_ERRORS = (UnavailableError, AbortedError, DeadlineExceededError)

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
    shard)."""

    def __init__(self, session: Any, checkpoint_dir: Any, saver: Any = None):
        from .saver import Saver

        self.folder = os.fspath(checkpoint_dir)
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

    def save(self, session: Any, step: int) -> str:
        prefix = self.saver.save(session, os.path.join(self.folder, CHECKPOINT_BASENAME), global_step=step)
        self.last_saved = step
        return prefix

    def start(self, session: Any) -> int:
        """Restore the newest checkpoint and return its step; without one, save
        the variables as they are (they must be initialized) as step 0's."""
        found = self.latest()
        if found is None:
            self.save(session, 0)
            return 0
        prefix, step = found
        self.saver.restore(session, prefix)
        self.last_saved = step
        logger.info("train_loop: restored %s, starting at step %d", prefix, step)
        return step

    def recover(self, session: Any, error: OpError, step: int, attempt: int, max_recoveries: int,
                timeout: float) -> int:
        """Reconnect ``session``, wait for its tasks, restore the newest
        checkpoint; return its step.  One log line says what happened."""
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
                if hasattr(session, "wait_for_tasks"):
                    session.wait_for_tasks(timeout=left)
                found = self.latest()
                if found is None:
                    raise ValueError(f"train_loop: no checkpoint in {self.folder} to recover from")
                prefix, restored = found
                self.saver.restore(session, prefix)
                break
            except RECOVERABLE_ERRORS as exc:
                last = exc
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        self.last_saved = restored
        logger.warning("train_loop: step %d failed with %s (%s); recovery %d of %d: new session, restored %s, "
                       "resuming at step %d (%.1f s)", step, type(error).__name__, first_line(error), attempt,
                       max_recoveries, os.path.basename(prefix), restored, time.monotonic() - start)
        return restored
