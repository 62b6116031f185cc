"""Shared by the tests (and benchmarks) that build custom ops: what is
missing to build one, an op folder to load, ops built and loaded, a chain of
ops, sample inputs, and the check of a spec error."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pytest

import bridge

from bridge import customop
from bridge.customop import toolchain
from bridge.customop.spec import SpecError, parse, snake_case


def toolchain_missing() -> str:
    """Why no custom op can be built here ("" when everything is there)."""
    try:
        toolchain.tensorflow()
        toolchain.julia()
        toolchain.cmake()
    except toolchain.ToolchainError as exc:
        return str(exc)
    return ""


def skip_without_forwarddiff() -> None:
    """Skip the calling test module where no op can be built or no depot holds
    ForwardDiff (`@gradient forwarddiff`; `make test` sets TFBRIDGE_JULIA_DEPOT)."""
    missing = toolchain_missing()
    if missing:
        pytest.skip(f"cannot compile custom ops: {missing}", allow_module_level=True)
    if not os.environ.get("TFBRIDGE_JULIA_DEPOT"):
        pytest.skip("TFBRIDGE_JULIA_DEPOT names no depot holding ForwardDiff (`make test` sets it)",
                    allow_module_level=True)


def op_folder(parent: Path, name: str, spec: str, julia_source: str) -> Path:
    """``parent/name`` (made if missing) holding ``custom_op.txt`` and the op's
    Julia file (``<op in snake_case>.jl``), ready for ``customop.load``."""
    folder = parent / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "custom_op.txt").write_text(spec)
    (folder / f"{snake_case(name)}.jl").write_text(julia_source)
    return folder


def built_twice(tmp_path_factory, label: str) -> Path:
    """A built copy of the ``customop init`` template op Twice (y = 2x), in a new folder."""
    folder = tmp_path_factory.mktemp(label) / "Twice"
    customop.init("Twice", folder)
    customop.build(folder)
    return folder


def busy_op(name: str) -> tuple[str, str]:
    """Spec and Julia source of an op ``name`` whose function
    (``<name in snake_case>(y, x, s)``) computes for ``s`` seconds without
    allocating, yielding or any I/O, as a numeric solver does, then sets y = x."""
    function = snake_case(name)
    spec = f"{name}\ndouble x(n)\ndouble s()\ndouble y(n) -> output\n"
    source = f"""
function {function}(y, x, s)
    acc, t0 = 0.0, time()
    while time() - t0 < s[]
        for v in x
            acc += v
        end
    end
    y .= x .+ 0 * acc
    return nothing
end
"""
    return spec, source


def load_ops(tmp_path_factory, label: str, ops: dict) -> list:
    """Build and load ops for a module's tests (skipped without a toolchain):
    ``ops`` maps op names to (spec, Julia source); returns (folder, loaded
    module) pairs in that order."""
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp(label)
    loaded = []
    for name, (spec, source) in ops.items():
        folder = op_folder(root, name, spec, source)
        loaded.append((folder, customop.load(folder)))
    return loaded


def op_chain(op: Callable, length: int, shape: Sequence = (None,)):
    """A graph computing ``op(op(...op(x)))``, ``length`` deep, on a float64
    placeholder ``x`` of ``shape``: (graph, x, the last output)."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, list(shape), name="x")
        y = x
        for _ in range(length):
            y = op(y)
    return g, x, y


def mixed_inputs(seed: int) -> tuple:
    """One input of each numeric dtype, ranks 0-3, for an op whose spec reads
    ``double a()``, ``float b(?)``, ``int32 c(?,?)``, ``int64 d(?,?,?)``, ``bool e(?)``."""
    rng = np.random.default_rng(seed)
    return (np.float64(1.5),
            rng.standard_normal(4).astype(np.float32),
            rng.integers(-50, 50, (2, 3)).astype(np.int32),
            rng.integers(-50, 50, (2, 3, 4)).astype(np.int64),
            np.array([True, False, True]))


def spec_error(text, line: int, fragment: str) -> str:
    """The SpecError message of parsing ``text`` as ``dir/custom_op.txt``,
    checked to name that file and ``line`` and to contain ``fragment``."""
    try:
        parse(text, "dir/custom_op.txt")
    except SpecError as exc:
        message = str(exc)
        assert message.startswith(f"dir/custom_op.txt:{line}: "), message
        assert fragment in message, message
        assert exc.line == line, message
        return message
    raise AssertionError(f"no SpecError for {text!r}")
