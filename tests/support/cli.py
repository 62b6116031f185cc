"""Running the ``tfbridge`` command as a user does: ``python -m bridge.cli`` in a child process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from . import REPO


def tfbridge(*args: str, cwd: Optional[Path] = None, timeout: float = 300,
             env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """``tfbridge ARGS...`` from ``cwd`` (the checkout by default), with this
    checkout's bridge first on PYTHONPATH and ``env`` added to the environment;
    text output captured."""
    full = dict(os.environ, **(env or {}))
    full["PYTHONPATH"] = str(REPO) + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "bridge.cli", *args], cwd=cwd or REPO, env=full,
                          capture_output=True, text=True, timeout=timeout)
