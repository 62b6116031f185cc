"""The bridge package's import graph: no cycle, rooms stacked one way, and ``bridge.grad`` is what ``bridge`` exposes.

Every import of a bridge module counts, at module level or inside a
function, as does ``importlib.import_module("bridge.x")`` with a literal
name.  Importing ``bridge.a.b`` runs ``bridge/a/__init__`` implicitly; that
does not count, only naming the package itself does.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import bridge

PACKAGE_DIR = Path(bridge.__file__).resolve().parent
ROOT = PACKAGE_DIR.name  # "bridge"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> Optional[str]:
    """The bridge module ``name`` is, or is inside (``bridge.x.attr`` -> ``bridge.x``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        target = _resolve(name, known)
        if target is not None and target != module:
            found.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if not origin.split(".")[0] == ROOT:
                continue
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                add(submodule if submodule in known else origin)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id == "import_module"))):
            add(node.args[0].value)
    return found


def import_graph() -> dict[str, set[str]]:
    """bridge module -> the bridge modules it imports."""
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> Optional[list[str]]:
    """One cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> Optional[list[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


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
    assert "bridge.backprop" not in {m for m in _modules()}


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
    """Every room of bridge/ has a row in the table of docs/internals/layout.md."""
    layout = (PACKAGE_DIR.parent / "docs" / "internals" / "layout.md").read_text()
    for unit in unit_graph():
        path = "bridge/" + unit.split(".")[1] + ("/" if (PACKAGE_DIR / unit.split(".")[1]).is_dir() else ".py")
        assert f"| `{path}` |" in layout, f"docs/internals/layout.md has no row for {path}"
