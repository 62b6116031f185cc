"""The bridge modules a piece of code reads, for cache keys that cannot go stale.

A generator's output depends on its own source and on every bridge module
it imports, directly or through others (a table it reads, a helper it calls).
:func:`module_closure` finds them by reading the import statements, at module
level and inside functions, so a cache keyed by their contents
(``cache.Key.add_modules``) changes whenever any of them does, without a
hand-kept list of files that an edit elsewhere would silently miss.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

ROOT_PACKAGE = "bridge"


def _source(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _is_module(name: str) -> bool:
    try:
        return _source(name) is not None
    except (ImportError, ValueError):
        return False


def _resolve(name: str) -> tuple[str, Path] | None:
    """The bridge module ``name`` is, or is an attribute of (``bridge.a.f`` -> ``bridge.a``)."""
    while name.startswith(ROOT_PACKAGE):
        try:
            path = _source(name)
        except (ImportError, ValueError):
            path = None
        if path is not None:
            return name, path
        name = name.rpartition(".")[0]
    return None


def imported_modules(module: str, path: Path) -> set[str]:
    """The bridge modules that ``module`` (source ``path``) names in an import."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # ``from bridge.a import b`` names the module bridge.a.b where there is one, else bridge.a
            names = [f"{origin}.{alias.name}" if _is_module(f"{origin}.{alias.name}") else origin
                     for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == ROOT_PACKAGE:
                resolved = _resolve(name)
                if resolved is not None:
                    found.add(resolved[0])
    found.discard(module)
    return found


@functools.lru_cache(maxsize=None)
def module_closure(*modules: str) -> tuple[Path, ...]:
    """The source files of ``modules`` and of every bridge module they import, transitively,
    sorted.  As in the package's import graph (tests/project/test_import_graph.py), a
    package counts where it is named, not where ``bridge.a.b`` runs
    ``bridge/a/__init__.py`` on the way: the package's API, not what the
    generator reads."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        resolved = _resolve(name)
        if resolved is None:
            raise ModuleNotFoundError(f"no bridge module {name}")
        name, path = resolved
        seen[name] = path
        todo.extend(imported_modules(name, path))
    return tuple(sorted(seen.values()))
