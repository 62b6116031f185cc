"""Julia inside this Python process: ``bridge.julia.init()``, ``eval``, ``call``, ``include``.

The Julia side of the bridge, one module per concern: ``host`` (starting
Julia and calling into it; its public API is this package's), ``runtime``
(building the C++ runtime library the host and every Julia op load),
``contract`` (the Julia-op contract table that the C++ and Julia sides are
generated from) and ``buildtools`` (cmake, the compiler and Julia's own
account of its installation).
"""
from __future__ import annotations

from .host import *  # noqa: F401,F403  (the public API, host.__all__)
from .host import EXTRA_DEPOT_VARIABLE, __all__, entry_calls, register_entry, session_runner  # noqa: F401
