"""Golden files (tests/golden/): whether this run may rewrite them.

``TFBRIDGE_UPDATE_GOLDEN=1`` rewrites them after a deliberate change to a
generator or a template, for a human to review the diff.  On CI
(``CI=true``) nobody reviews: a rewrite there would make every golden test
pass whatever the generators write, so the run is refused at its start
(tests/conftest.py) with :class:`GoldenUpdateRefused`'s message.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

from .ci import on_ci


class GoldenUpdateRefused(RuntimeError):
    """TFBRIDGE_UPDATE_GOLDEN asked for on CI."""


def update_requested(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether TFBRIDGE_UPDATE_GOLDEN asks to rewrite the golden files (any value but "" and "0");
    raises :class:`GoldenUpdateRefused` when it does on CI."""
    environ = os.environ if environ is None else environ
    value = environ.get("TFBRIDGE_UPDATE_GOLDEN", "")
    if value.strip() in ("", "0"):
        return False
    if on_ci(environ):
        raise GoldenUpdateRefused(
            f"TFBRIDGE_UPDATE_GOLDEN={value} on CI (CI={environ.get('CI')}): golden files are never rewritten "
            "there, or every golden test would pass whatever the generators write. Rewrite them on your "
            "machine, review the diff and commit it.")
    return True
