"""The bridge package's import graph: no cycle, rooms stacked one way, and ``bridge.grad`` is what ``bridge`` exposes.

Every import of a bridge module counts, at module level or inside a
function, as does ``importlib.import_module("bridge.x")`` with a literal
name.  Importing ``bridge.a.b`` runs ``bridge/a/__init__`` implicitly; that
does not count, only naming the package itself does.
"""
from __future__ import annotations

import bridge
from support.imports import PACKAGE_DIR, ROOT, find_cycle, import_graph, modules


def test_import_graph_sees_imports() -> None:
    graph = import_graph()
    assert "bridge.grad.walk" in graph["bridge.grad.api"]          # from .walk import ...
    assert "bridge.framework.builders" in graph["bridge.grad.api"]  # from bridge.framework.builders import ...
    assert "bridge.grad.math_grad" in graph["bridge.grad"]         # from . import math_grad
    assert "bridge.grad" in graph["bridge.grad.gradient_check"]    # inside a function
    assert "bridge.grad.walk" not in graph["bridge.grad.registry"]


def test_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


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


def test_rooms_are_the_readmes_layout() -> None:
    """Every room of bridge/ has a row in README's "Layout" table."""
    readme = (PACKAGE_DIR.parent / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.index("\n## ", 3)]
    for unit in unit_graph():
        path = "bridge/" + unit.split(".")[1] + ("/" if (PACKAGE_DIR / unit.split(".")[1]).is_dir() else ".py")
        assert f"`{path}`" in layout, f"README's Layout has no row for {path}"
