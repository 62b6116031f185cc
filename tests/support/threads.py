"""Running a test's work in several Python threads at once."""
from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np


def run_threads(target: Callable[[int], None], n: int, timeout: float = 120.0) -> None:
    """Run ``target(k)`` for k = 0 .. n-1, each in a thread of its own.
    Re-raises the first exception a thread raised, and fails when the
    threads are not all done within ``timeout`` seconds (a deadlock)."""
    failures: list[BaseException] = []

    def body(k: int) -> None:
        try:
            target(k)
        except BaseException as exc:  # re-raised in the calling thread, below
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert not stuck, f"{stuck} of {n} threads did not finish within {timeout:g} s (deadlock?)"
    if failures:
        raise failures[0]


def run_threads_for(step: Callable[[int, np.random.Generator], None], n: int, seconds: float,
                    seed: int = 0, timeout: float = 120.0) -> list[int]:
    """Stress: ``n`` threads each call ``step(k, rng)`` again and again for
    ``seconds`` (``rng`` is thread k's own generator, seeded ``seed + k``);
    ``step`` asserts its results.  The first failure stops every thread and
    is re-raised here; returns each thread's count of calls, all checked > 0."""

    stop = threading.Event()
    counts = [0] * n

    def target(k: int) -> None:
        rng = np.random.default_rng(seed + k)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and not stop.is_set():
                step(k, rng)
                counts[k] += 1
        except BaseException:
            stop.set()
            raise

    run_threads(target, n, timeout=seconds + timeout)
    assert all(c > 0 for c in counts), f"a thread never completed a call: {counts}"
    return counts
