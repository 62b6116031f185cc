"""What the package wires into a module when that module is imported.

``bridge/__init__.py`` imports the binding lazily (``import bridge.julia``
and Julia's start then wait for neither numpy nor the graph modules), so it
cannot call a module's setters as it runs: it registers
``on_import("bridge.x.y", fn)`` here, and each module that takes such a
hook calls ``imported(__name__)`` as its last statement, which runs
``fn(module)`` (at once if the module was imported before the registration).
This keeps the rule that a lower module takes what it needs from a higher
one through a hook the higher one registers: the session's Julia-thread
runner, the SavedModel loader's op-folder loader, Output's operators.
"""
from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Callable

_lock = threading.Lock()
_hooks: dict[str, list[Callable[[ModuleType], None]]] = {}
_done: set[str] = set()


def on_import(name: str, fn: Callable[[ModuleType], None]) -> None:
    """Run ``fn(module)`` when the module ``name`` is imported (now, if it was)."""
    with _lock:
        _hooks.setdefault(name, []).append(fn)
        now = name in _done
    if now:
        fn(sys.modules[name])


def imported(name: str) -> None:
    """Called by module ``name`` as its last statement (again on a reload):
    runs the hooks registered for it."""
    with _lock:
        _done.add(name)
        hooks = list(_hooks.get(name, ()))
    for fn in hooks:
        fn(sys.modules[name])
