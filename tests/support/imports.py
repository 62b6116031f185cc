"""The bridge package's import graph, as tests/project/test_import_graph.py reads it
(also used by tests/customop/test_build.py: a build key covers every module the
generator imports).

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
from pathlib import Path
from typing import Optional

import bridge

PACKAGE_DIR = Path(bridge.__file__).resolve().parent
ROOT = PACKAGE_DIR.name  # "bridge"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
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
    known = modules()
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
