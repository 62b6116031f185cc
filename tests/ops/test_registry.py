"""bridge.ops over the whole registry: a function per op with the signature
its OpDef implies, the module's bookkeeping, generation caching, and the
errors raised before the C API."""
from __future__ import annotations

import builtins
import inspect
import json
import keyword
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import dtypes, errors
from bridge.ops import op_library
from bridge.framework import opdef
from bridge.ops.op_helpers import TF_DEFAULT
from support import REPO


@pytest.fixture(scope="module")
def ops():
    from bridge import ops
    return ops


@pytest.fixture(scope="module")
def registry() -> list[opdef.OpDef]:
    skip = op_library.library_op_names()  # ops of libraries loaded by other tests live elsewhere
    return [op for op in opdef.registry_op_defs() if op.name not in skip]


# --- the whole registry ------------------------------------------------------------

def _python_name(name: str, taken: set) -> str:
    """The rename rule, restated from the running Python's own lists."""
    reserved = set(keyword.kwlist) | {n for n in dir(builtins) if n.islower() and not n.startswith("_")} | {"name"}
    while name in reserved or name in taken:
        name += "_"
    return name


def _same_default(actual, attr: opdef.AttrDef) -> bool:
    want, kind = attr.default, attr.type
    if kind == "tensor" or (kind in ("list(tensor)", "list(func)") and want):
        return actual is TF_DEFAULT
    if kind == "shape":
        return actual is None if want.unknown_rank else actual == tuple(want)
    if kind == "list(shape)":
        return list(actual) == [None if s.unknown_rank else tuple(s) for s in want]
    if kind == "float":
        return (math.isnan(want) and math.isnan(actual)) or np.float32(actual) == np.float32(want)
    if kind == "list(float)":
        return np.array_equal(np.float32(actual), np.float32(want))
    if kind == "string":
        return (actual.encode() if isinstance(actual, str) else actual) == want
    if kind == "list(string)":
        return [a.encode() if isinstance(a, str) else a for a in actual] == want
    if kind.startswith("list("):
        return isinstance(actual, tuple) and list(actual) == want
    return type(actual) is type(want) and actual == want


def test_every_op_has_a_function(ops, registry) -> None:
    assert len(registry) > 1500
    assert sorted(ops.OP_TYPES.values()) == sorted(op.name for op in registry)
    assert len(set(ops.OP_TYPES)) == len(ops.OP_TYPES)
    for fn_name in ops.OP_TYPES:
        assert fn_name.isidentifier() and not keyword.iskeyword(fn_name), fn_name
        assert callable(getattr(ops, fn_name)), fn_name


def test_every_signature_matches_its_op_def(ops, registry) -> None:
    """Inputs positional in OpDef order; then keyword-only: required attrs,
    attrs with their defaults, name=None; inferred attrs absent."""
    by_op = {v: k for k, v in ops.OP_TYPES.items()}
    P = inspect.Parameter
    problems = []
    for op in registry:
        fn = getattr(ops, by_op[op.name])
        params = list(inspect.signature(fn).parameters.values())
        inferred = {a for arg in op.input_args for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a}
        attrs = [a for a in op.attrs if a.name not in inferred]
        taken: set = set()
        names = []  # inputs first, then attrs, each renamed against the names before it
        for n in [a.name for a in op.input_args] + [a.name for a in attrs]:
            py = _python_name(n, taken)
            taken.add(py)
            names.append(py)
        in_names = names[:len(op.input_args)]
        attr_names = dict(zip([a.name for a in attrs], names[len(op.input_args):], strict=True))
        required = [a for a in attrs if not a.has_default]
        optional = [a for a in attrs if a.has_default]
        want = ([(n, P.POSITIONAL_OR_KEYWORD) for n in in_names]
                + [(attr_names[a.name], P.KEYWORD_ONLY) for a in required + optional] + [("name", P.KEYWORD_ONLY)])
        got = [(p.name, p.kind) for p in params]
        if got != want:
            problems.append(f"{op.name}: {got} != {want}")
            continue
        for p in params[:len(in_names) + len(required)]:
            if p.default is not P.empty:
                problems.append(f"{op.name}.{p.name} should have no default")
        for a, p in zip(optional, params[len(in_names) + len(required):-1], strict=True):
            if not _same_default(p.default, a):
                problems.append(f"{op.name}.{p.name}: default {p.default!r} != {a.default!r}")
        if params[-1].default is not None:
            problems.append(f"{op.name}: name default is not None")
        doc = fn.__doc__ or ""
        if f"``{op.name}``" not in doc or (op.summary and inspect.cleandoc(op.summary)[:40] not in doc):
            problems.append(f"{op.name}: docstring lacks the op type or summary")
    assert not problems, f"{len(problems)} mismatches, first ones:\n" + "\n".join(problems[:20])


def test_module_bookkeeping(ops) -> None:
    assert ops.OP_TYPES["mat_mul"] == "MatMul"
    assert ops.OP_TYPES["add_v2"] == "AddV2"
    assert ops.OP_TYPES["bias_add_grad"] == "BiasAddGrad"
    assert ops.OP_TYPES["tensor_array_v3"] == "TensorArrayV3"
    assert ops.OP_TYPES["if_"] == "If" and "if_" in ops.RENAMED
    assert {"assert_", "for_", "while_"} <= set(ops.RENAMED)
    assert ops.COLLISIONS == {}  # TF 2.21's registry has none; the rule is tested with made-up ops
    assert ops.mat_mul.__module__ == "bridge.ops"
    # Builtin names stay functions (bridge.ops.abs) but star-imports cannot shadow them.
    assert ops.OP_TYPES["abs"] == "Abs" and "abs" not in ops.__all__ and "range" not in ops.__all__
    assert "mat_mul" in ops.__all__ and not any(n.startswith("_") for n in ops.__all__)
    assert ops._arg is getattr(ops, "_arg") and ops.OP_TYPES["_arg"] == "_Arg"


# The op layer: generating, decoding and loading op functions (heavy: the first
# use of a bridge.ops function generates a module for 1,900 ops).  The package
# bridge.ops itself is light: its functions load on first use.
OP_LAYER = ("bridge.ops._generated", "bridge.ops.opgen", "bridge.framework.opdef", "bridge.ops.op_helpers",
            "bridge.ops.op_library", "bridge.ops.array_ops", "bridge.ops.math_ops", "bridge.ops.gen_ops")


def test_import_bridge_does_not_import_ops() -> None:
    """Not even for Output's operators (bridge.ops.operators imports bridge.ops on their first use)."""
    named_op = ({f"bridge.ops.{p.stem}" for p in (REPO / "bridge" / "ops").glob("*.py")}
                | {"bridge.ops._generated", "bridge.framework.opdef"})
    assert named_op - {"bridge.ops.operators", "bridge.ops.__init__"} == set(OP_LAYER)  # the list covers the layer
    # Nor TF 2's namespaces over them (bridge.math, ...: bridge/api/namespaces.py).
    loaded_late = sorted(OP_LAYER + ("bridge.api.namespaces",))
    code = f"import sys, bridge; print(json.dumps([m for m in sys.modules if m in {loaded_late!r}]))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
