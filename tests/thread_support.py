"""Running a test's work in several Python threads at once."""
from __future__ import annotations

import threading
import time
from typing import Callable


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
