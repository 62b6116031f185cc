"""The bridge package's import graph: no cycle, rooms stacked one way, and ``bridge.grad`` is what ``bridge`` exposes.

Every import of a bridge module counts, at module level or inside a
function.  So do module names held in strings: a string constant that is
exactly a bridge module's name (``importlib.import_module("bridge.x")``, a
lazy table such as ``_LAZY`` in ``bridge/__init__.py``, an ``on_import``
hook's module) is an edge from the module that holds it, logger names
(``logging.getLogger("bridge.train")``) aside; and a name built at run time
(``import_module(f"{__name__}.{name}")``) is an edge to every module its
fixed prefix and a string of the same module name (``_SUBMODULES``,
``bridge/train/__init__.py``'s ``_LAZY``).  A dynamic import that no string
of its module resolves fails the test: the graph would miss its edges.
Importing ``bridge.a.b`` runs ``bridge/a/__init__`` implicitly; that does
not count, only naming the package itself does.
"""
from __future__ import annotations

import ast
import re
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


def _called(node: ast.Call) -> str:
    """The name a call calls: ``import_module`` for ``importlib.import_module(...)``."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


#: Calls that import the module their first argument names.
IMPORTING_CALLS = {"import_module", "__import__"}
#: Calls whose string arguments are dotted names of something else than a module to import.
NOT_MODULE_NAMES = {"getLogger"}


def _static_prefix(node: ast.expr, module: str) -> Optional[str]:
    """The fixed start of a module name built at run time, ``__name__`` read as
    ``module``: ``f"{__name__}.{x}"`` -> ``"bridge.train."``; None where it has none."""
    if isinstance(node, ast.JoinedStr):
        prefix = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                prefix += str(part.value)
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) \
                    and part.value.id == "__name__":
                prefix += module
            else:
                return prefix or None
        return prefix
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _static_prefix(node.left, module)
    if isinstance(node, ast.Name) and node.id == "__name__":
        return module
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class UnresolvedImport(Exception):
    """A dynamic import whose possible modules no string of its module names."""


def imports_of(module: str, source: str, known: dict[str, Path], is_package: bool = False,
               filename: str = "<source>") -> set[str]:
    """The bridge modules ``module`` (whose text is ``source``) imports, by
    statement, by a string naming one, or by a name built from a table of
    strings (see the module's docstring).  Raises UnresolvedImport for a
    dynamic import it cannot resolve."""
    tree = ast.parse(source, filename)
    found: set[str] = set()

    def add(name: str) -> None:
        target = _resolve(name, known)
        if target is not None and target != module:
            found.add(target)

    skipped: set[int] = set()  # string constants that are not module names (logger names)
    dynamic: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in NOT_MODULE_NAMES:
            skipped.update(id(a) for a in node.args)
        elif isinstance(node, ast.Call) and _called(node) in IMPORTING_CALLS and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                add(arg.value)
            else:
                dynamic.append(node)
    strings = [node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]

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
    # A string that is exactly a module's name: a lazy table's entry, an on_import hook's module, ...
    # ("bridge" alone is the package's name as a word: a path part, sources.ROOT_PACKAGE.)
    for text in strings:
        if text in known and text not in (module, ROOT):
            found.add(text)
    # A name built at run time: its fixed prefix and any string of this module.
    for call in dynamic:
        prefix = _static_prefix(call.args[0], module)
        if prefix:
            reached = {prefix + text for text in strings if prefix + text in known}
        else:  # a name held whole in a variable: the module's strings that name modules
            reached = {text for text in strings if text in known and text != ROOT}
        if not reached:
            raise UnresolvedImport(f"{filename}:{call.lineno}: {ast.unparse(call)} names no module that a "
                                   "string of its module gives; the import graph cannot follow it")
        found.update(r for r in reached if r != module)
    return found


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    return imports_of(module, path.read_text(), known, path.name == "__init__.py", str(path))


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


#: Modules that still import the package itself (``import bridge``, then
#: ``bridge.load_op_library(...)``): a circle through bridge/__init__.py's lazy
#: table, which names them.  bridge/customop/ is being rewritten (issue 41, "an
#: op's language is decided in a dozen places"); importing the rooms below
#: (``bridge.ops.op_library``, ...) in its place ends these.  The list only
#: shrinks: test_only_the_listed_modules_import_the_package_itself.
PACKAGE_IMPORTERS_PENDING = frozenset({"bridge.customop", "bridge.customop.gradtest"})


def test_only_the_listed_modules_import_the_package_itself() -> None:
    graph = import_graph()
    assert {module for module, deps in graph.items() if ROOT in deps} == PACKAGE_IMPORTERS_PENDING


def test_bridge_has_no_import_cycle() -> None:
    graph = {module: deps - {ROOT} if module in PACKAGE_IMPORTERS_PENDING else deps
             for module, deps in import_graph().items()}
    cycle = find_cycle(graph)
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


def test_rooms_are_the_readmes_layout() -> None:
    """Every room of bridge/ has a row in README's "Layout" table, at its level,
    and the text above the table gives the counts."""
    readme = (PACKAGE_DIR.parent / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.index("\n## ", 3)]
    graph = unit_graph()
    rows = dict(re.findall(r"^\| `(bridge/[a-z_]+(?:/|\.py))` \| (\d+) \|", layout, re.M))
    for unit, level in levels(graph).items():
        path = "bridge/" + unit.split(".")[1] + ("/" if (PACKAGE_DIR / unit.split(".")[1]).is_dir() else ".py")
        assert path in rows, f"README's Layout has no row for {path}"
        assert int(rows[path]) == level, f"README's Layout puts {path} at level {rows[path]}, it is at {level}"
    units = len(graph) + len(RESOURCE_UNITS) + int((PACKAGE_DIR / "framework" / "decl").is_dir())
    counts = f"today {units} units, counting the resource folders,\nand {max(levels(graph).values())} levels"
    assert counts in layout
