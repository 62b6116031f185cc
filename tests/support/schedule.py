"""How `make test` shares the suite among its pytest-xdist workers.

Each test module goes to one worker whole (xdist's ``loadscope``), so a
module's fixtures (its built ops, its cluster, its oracle answers) are made
once.  Modules go out longest first, so that no long module starts last
while the other worker has nothing left to do: ``LONGEST_FIRST`` lists the
modules that take more than about a minute of CPU (measured with
``TFBRIDGE_TEST_CPU_LOG``, tests/support/cputime.py), longest first; the
others follow in xdist's order (most tests first).  A module missing from
the list only makes the run end later, never fail; a name in it that is no
module fails the run (tests/conftest.py), so the list cannot rot.
"""
from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

#: Modules by CPU time, most first (what each took, in CPU seconds, where measured).
LONGEST_FIRST: tuple[str, ...] = (
    "tests/julia/test_opimage.py",
    "tests/customop/test_readonly_methods.py",   # about 100 s: one Julia process sweeping 655 methods
    "tests/customop/test_forwarddiff.py",   # 84.5 (its three ops' builds included)
)


def _module(scope: str) -> str:
    return scope.split("::", 1)[0]


class LongestFirstScheduling(LoadScopeScheduling):
    """``loadscope`` with the work queue sorted by ``LONGEST_FIRST``."""

    _sorted = False

    def _assign_work_unit(self, node) -> None:
        if not self._sorted:  # the first assignment: the queue is complete now
            self._sorted = True
            rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
            units = sorted(self.workqueue.items(), key=lambda unit: rank.get(_module(unit[0]), len(rank)))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)
