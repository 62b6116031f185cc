"""Progress on stderr for the training loops: whether stderr is a terminal
(then a tqdm bar), and ``ScipyOptimizer``'s ``verbose`` lines."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional, Union

__all__ = ["PROGRESS_SECONDS", "ScipyProgress", "stderr_is_terminal"]

PROGRESS_SECONDS = 1.0  # verbose=True off a terminal: at most one line per this many seconds


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal (tqdm bars) rather than a file or a pipe (plain lines)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


class ScipyProgress:
    """What ``verbose`` shows on stderr.  True: a tqdm bar on a terminal, else
    a line for the starting point, then at most one every PROGRESS_SECONDS,
    and one at the end; an int N: a line every N iterations and at the end;
    False (or 0): nothing."""

    def __init__(self, name: str, verbose: Union[bool, int], maxiter: Optional[int], opt: Any):
        self.name, self.opt = name, opt
        self.on = bool(verbose)
        self.every = None if verbose is True else int(verbose)
        self.bar = None
        self.start = self.last = time.perf_counter()
        if verbose is True and stderr_is_terminal():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=maxiter, unit="it", desc=name, file=sys.stderr, dynamic_ncols=True, leave=True)

    def _line(self, text: str) -> None:
        print(f"{self.name}: {text}", file=sys.stderr, flush=True)

    def iteration(self, k: int, f: float, evaluations: int) -> None:
        if not self.on:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss={f:.6g}", refresh=k == 0)
            if k:
                self.bar.update(1)
            return
        now = time.perf_counter()
        if k == 0 or (k % self.every == 0 if self.every else now - self.last >= PROGRESS_SECONDS):
            self.last = now
            self._line(f"iteration {k}: loss {f:.9g}, {evaluations} evaluations, {now - self.start:.2f} s")

    def close(self, result: Any, error: Optional[BaseException]) -> None:
        if not self.on:
            return
        if self.bar is not None:
            if error is not None:
                self.bar.set_description_str(f"{self.name}: {type(error).__name__}", refresh=False)
            self.bar.close()
            if error is not None or result is None:
                return
        opt = self.opt
        iterations = max(len(opt.history) - 1, 0)
        spent = time.perf_counter() - self.start
        if error is not None:
            self._line(f"{type(error).__name__} in iteration {len(opt.history)}, after {opt.evaluations} "
                       f"evaluations, {spent:.2f} s")
            return
        self._line(f"{'done' if result.success else 'stopped'} after {iterations} iterations, "
                   f"{opt.evaluations} evaluations, {spent:.2f} s: loss {float(result.fun):.9g}; "
                   f"{result.message}")
