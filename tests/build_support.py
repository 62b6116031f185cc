"""Shared by the tests that build custom ops: what is missing to build one."""
from __future__ import annotations

from bridge.customop import toolchain


def toolchain_missing() -> str:
    """Why no custom op can be built here ("" when everything is there)."""
    try:
        toolchain.tensorflow()
        toolchain.julia()
        toolchain.cmake()
    except toolchain.ToolchainError as exc:
        return str(exc)
    return ""
