"""Shared by the tests that build custom ops: what is missing to build one,
and an op folder to load."""
from __future__ import annotations

from pathlib import Path

from bridge.customop import toolchain
from bridge.customop.spec import snake_case


def toolchain_missing() -> str:
    """Why no custom op can be built here ("" when everything is there)."""
    try:
        toolchain.tensorflow()
        toolchain.julia()
        toolchain.cmake()
    except toolchain.ToolchainError as exc:
        return str(exc)
    return ""


def op_folder(parent: Path, name: str, spec: str, julia_source: str) -> Path:
    """``parent/name`` holding ``custom_op.txt`` and the op's Julia file
    (``<op in snake_case>.jl``), ready for ``customop.load``."""
    folder = parent / name
    folder.mkdir()
    (folder / "custom_op.txt").write_text(spec)
    (folder / f"{snake_case(name)}.jl").write_text(julia_source)
    return folder
