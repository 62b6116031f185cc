"""What the fuzz scripts share: command line, hypothesis settings, the
per-example time limit and the trace of the example being run.

Each fuzz script is a standalone program (tests/customop/test_fuzz.py runs it as a
child process, so that a crash fails one test instead of killing the suite):

    python tests/fuzz/fuzz_feeds.py --examples 2000 --derandomize
    python tests/fuzz/fuzz_spec.py --examples 20000 --seed 1234

It exits 0 when every property held, 1 with hypothesis' falsifying example
(and the seed that reproduces the run) otherwise.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from typing import Callable, Optional

DEFAULT_EXAMPLES = 2000
ENV_EXAMPLES = "TFBRIDGE_FUZZ_EXAMPLES"

# Hypothesis keeps caches in ./.hypothesis by default: not in the repository.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(tempfile.gettempdir(), f"tfbridge-fuzz-hypothesis-{os.getuid()}"))


class ExampleTimeout(Exception):
    """One example ran longer than --example-timeout seconds."""


def parse_args(description: str, properties: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--examples", type=int,
                        default=int(os.environ.get(ENV_EXAMPLES, DEFAULT_EXAMPLES)),
                        help=f"examples per property (default ${ENV_EXAMPLES} or {DEFAULT_EXAMPLES})")
    parser.add_argument("--seed", type=int, default=None,
                        help="hypothesis seed (default: a random one, printed; see --derandomize)")
    parser.add_argument("--derandomize", action="store_true",
                        help="the same examples every run (what the test suite uses)")
    parser.add_argument("--no-shrink", action="store_true",
                        help="report the first failing example as found, without shrinking it")
    parser.add_argument("--example-timeout", type=float, default=30.0,
                        help="seconds one example may take before it counts as a hang (default 30)")
    parser.add_argument("--trace", default=os.environ.get("TFBRIDGE_FUZZ_TRACE"),
                        help="file that always holds the example being run (what a crash leaves behind)")
    parser.add_argument("--property", action="append", choices=properties,
                        help="run only this property (repeatable; default: all)")
    return parser.parse_args()


class Tracer:
    """Keeps a description of the example in flight in a file, so that when
    the process dies (a segfault cannot be caught) the parent can show what
    killed it."""

    def __init__(self, path: Optional[str]):
        self.file = open(path, "w", encoding="utf-8", errors="backslashreplace") if path else None

    def __call__(self, text: str) -> None:
        if self.file is not None:
            self.file.seek(0)
            self.file.truncate()
            self.file.write(text)
            self.file.flush()


def short(value, limit: int = 400) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a description must never fail
        text = f"<repr failed: {exc!r}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def time_limited(seconds: float, fn: Callable, *args):
    """``fn(*args)`` under SIGALRM: an example that hangs in Python code fails
    with ExampleTimeout (one stuck in C code is caught by the parent's limit)."""
    def on_alarm(signum, frame):
        raise ExampleTimeout(f"example took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def settings_for(args: argparse.Namespace):
    from hypothesis import HealthCheck, Phase, Verbosity, settings
    phases = [Phase.explicit, Phase.generate] + ([] if args.no_shrink else [Phase.shrink])
    return settings(max_examples=args.examples, deadline=None, database=None,
                    derandomize=args.derandomize, phases=phases, print_blob=True,
                    report_multiple_bugs=False, verbosity=Verbosity.normal,
                    suppress_health_check=list(HealthCheck))


def run(script: str, args: argparse.Namespace, properties: dict[str, Callable]) -> int:
    """Run each property (a function decorated with @given) under the
    settings of ``args``; print a summary; return the exit status."""
    from hypothesis import seed as hypothesis_seed

    faulthandler.enable()
    if "tensorflow" in sys.modules:  # bridge must never import it (LLVM clash with Julia)
        print("tensorflow was imported", file=sys.stderr)
        return 1
    chosen = args.property or list(properties)
    run_seed = None
    if not args.derandomize:
        run_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    how = "derandomized" if args.derandomize else f"seed {run_seed}"
    print(f"{script}: {args.examples} examples per property, {how}", flush=True)
    failed = []
    for name in chosen:
        test = settings_for(args)(properties[name])
        if run_seed is not None:
            test = hypothesis_seed(run_seed)(test)
        start = time.monotonic()
        try:
            test()
        except Exception:  # noqa: BLE001 - hypothesis re-raises the falsifying example's error
            failed.append(name)
            print(f"FAILED {name} after {time.monotonic() - start:.1f} s", flush=True)
            traceback.print_exc()
            again = f"--seed {run_seed}" if run_seed is not None else "--derandomize"
            print(f"reproduce: python {script} --property {name} --examples {args.examples} {again}",
                  flush=True)
        else:
            print(f"ok {name} ({time.monotonic() - start:.1f} s)", flush=True)
    return 1 if failed else 0
