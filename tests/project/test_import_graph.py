"""The bridge package's import graph: no cycle, rooms stacked one way, and ``bridge.grad`` is what ``bridge`` exposes.

The graph's reader is tests/support/imports.py (what counts as an import is
said there).
"""
from __future__ import annotations

import re
from pathlib import Path

import bridge
from support.imports import (PACKAGE_DIR, ROOT, UnresolvedImport, find_cycle, import_graph, imports_of,
                             modules)


def test_import_graph_sees_imports() -> None:
    graph = import_graph()
    assert "bridge.grad.walk" in graph["bridge.grad.api"]          # from .walk import ...
    assert "bridge.framework.builders" in graph["bridge.grad.api"]  # from bridge.framework.builders import ...
    assert "bridge.grad.math_grad" in graph["bridge.grad"]         # from . import math_grad
    assert "bridge.grad" in graph["bridge.grad.gradient_check"]    # inside a function
    assert "bridge.grad.walk" not in graph["bridge.grad.registry"]


def test_import_graph_sees_module_names_in_strings_and_tables() -> None:
    graph = import_graph()
    assert "bridge.framework.graph" in graph["bridge"]       # _hooks.on_import("bridge.framework.graph", ...)
    assert "bridge.nn.random_ops" in graph["bridge"]          # _LAZY: "random_normal": ("bridge.nn.random_ops", ...)
    assert "bridge.ops.operators" in graph["bridge"]          # importlib.import_module("bridge.ops.operators")
    assert "bridge.train.loop" in graph["bridge.train"]       # import_module(f"{__name__}.{_LAZY[name]}"), "loop"
    assert "bridge.ops.opgen" in graph["bridge.ops"]          # import_module(f"{__name__}.{name}"), _SUBMODULES
    assert "bridge.nn.nn_ops" in graph["bridge.api.namespaces"]  # a table of module names read by import_module
    # a logger named after its package is no import
    assert "bridge.train" not in graph["bridge.train.loop"]


_KNOWN = {name: Path(name) for name in ("bridge", "bridge.low", "bridge.low.table", "bridge.high", "bridge.high.a")}


def test_strings_naming_modules_are_edges_and_logger_names_are_not() -> None:
    source = (
        "import importlib, logging\n"
        "_TABLE = {'x': ('bridge.high.a', 'x')}\n"
        "log = logging.getLogger('bridge.high')\n"
        "def get(name):\n"
        "    module, attr = _TABLE[name]\n"
        "    return getattr(importlib.import_module(module), attr)\n")
    assert imports_of("bridge.low.table", source, _KNOWN) == {"bridge.high.a"}
    prefixed = "import importlib\n_LAZY = {'f': 'a', 'g': 'b'}\ndef f(n):\n" \
               "    return importlib.import_module(f'{__name__}.{_LAZY[n]}')\n"
    assert imports_of("bridge.high", prefixed, _KNOWN, is_package=True) == {"bridge.high.a"}
    assert imports_of("bridge.low", "NOT_AN_IMPORT = 'bridge.high.a.attribute'\n", _KNOWN) == set()


def test_a_dynamic_import_no_string_resolves_fails() -> None:
    source = "import importlib\ndef f(n):\n    return importlib.import_module('bridge.' + n)\n"
    try:
        imports_of("bridge.low", source, _KNOWN, filename="bridge/low/__init__.py")
    except UnresolvedImport as exc:
        assert str(exc) == ("bridge/low/__init__.py:3: importlib.import_module('bridge.' + n) names no module "
                            "that a string of its module gives; the import graph cannot follow it")
    else:
        raise AssertionError("an unresolved dynamic import passed")


def test_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_the_package_itself() -> None:
    """``import bridge`` inside bridge/ (then ``bridge.load_op_library(...)``) is a
    circle through bridge/__init__.py's lazy table: a module imports the room
    that defines the name (``bridge.ops.op_library``) instead."""
    graph = import_graph()
    assert sorted(module for module, deps in graph.items() if ROOT in deps) == []


def test_bridge_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_bridge_exposes_bridge_grad() -> None:
    import bridge.grad as grad
    for name in ("gradients", "jacobian", "hessian", "RegisterGradient", "NotDifferentiable"):
        assert getattr(bridge, name) is getattr(grad, name), name
    assert "bridge.backprop" not in {m for m in modules()}


def test_importing_bridge_grad_registers_op_families() -> None:
    import bridge.grad  # noqa: F401
    from bridge.grad import registry
    for op_type in ("TanhGrad", "ReluGrad", "PreventGradient", "If", "While", "TensorListPopBack"):
        is_known, fn = registry.registered(op_type)
        assert is_known and fn is not None, op_type
    for op_type in ("Round", "OnesLike", "EmptyTensorList"):
        assert registry.registered(op_type) == (True, None), op_type


# --- rooms: the top-level modules and subpackages of bridge/ ----------------------

#: The resource folders beside bridge/ that count as units of the layout too.
RESOURCE_UNITS = ("kernels_cpp", "julia", "templates")
MAX_UNITS = 20
MAX_LEVELS = 9
#: Who may import the Julia host (bridge.julia): the custom-op tools, the
#: command line, and the package's own hook that wires julia_thread sessions.
JULIA_HOST_USERS = {"bridge", "bridge.julia", "bridge.customop", "bridge.cli"}


def unit_of(module: str) -> str:
    """bridge.framework.graph -> bridge.framework; bridge -> bridge."""
    return ".".join(module.split(".")[:2])


def unit_graph() -> dict[str, set[str]]:
    """room -> the rooms it imports (the package's own __init__, which wires them, left out)."""
    units: dict[str, set[str]] = {}
    for module, deps in import_graph().items():
        if module == ROOT:
            continue
        into = units.setdefault(unit_of(module), set())
        into.update(unit_of(d) for d in deps if unit_of(d) not in (unit_of(module), ROOT))
    return units


def levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each unit's level: 1 for a unit that imports none, else one above the highest it imports."""
    out: dict[str, int] = {}

    def level(unit: str) -> int:
        if unit not in out:
            out[unit] = 1 + max((level(d) for d in graph.get(unit, ())), default=0)
        return out[unit]

    for unit in graph:
        level(unit)
    return out


def test_rooms_are_few_and_stacked_one_way() -> None:
    graph = unit_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "rooms import each other in a circle: " + " -> ".join(cycle or [])
    decl = PACKAGE_DIR / "framework" / "decl"
    units = len(graph) + len(RESOURCE_UNITS) + int(decl.is_dir())
    assert units <= MAX_UNITS, sorted(graph)
    deepest = max(levels(graph).values())
    assert deepest <= MAX_LEVELS, levels(graph)
    print(f"{units} units, {deepest} levels")


def test_platform_and_framework_import_nothing_above_them() -> None:
    graph = unit_graph()
    assert graph["bridge.platform"] == set()
    assert graph["bridge.framework"] <= {"bridge.platform"}


def test_only_the_julia_side_imports_the_julia_host() -> None:
    offenders = {module: deps for module, deps in import_graph().items()
                 if unit_of(module) not in JULIA_HOST_USERS and any(unit_of(d) == "bridge.julia" for d in deps)}
    assert offenders == {}


def test_rooms_are_the_layout_pages() -> None:
    """Every room of bridge/ has a row in the table of docs/internals/layout.md, at its level,
    and the text above the table gives the counts."""
    layout = (PACKAGE_DIR.parent / "docs" / "internals" / "layout.md").read_text()
    graph = unit_graph()
    rows = dict(re.findall(r"^\| `(bridge/[a-z_]+(?:/|\.py))` \| (\d+) \|", layout, re.M))
    for unit, level in levels(graph).items():
        path = "bridge/" + unit.split(".")[1] + ("/" if (PACKAGE_DIR / unit.split(".")[1]).is_dir() else ".py")
        assert path in rows, f"docs/internals/layout.md has no row for {path}"
        assert int(rows[path]) == level, \
            f"docs/internals/layout.md puts {path} at level {rows[path]}, it is at {level}"
    units = len(graph) + len(RESOURCE_UNITS) + int((PACKAGE_DIR / "framework" / "decl").is_dir())
    counts = f"today {units} units, counting the resource folders,\nand {max(levels(graph).values())} levels"
    assert counts in layout
