"""Julia packages in ops: an op folder's own Julia environment.

An op folder may hold a ``Project.toml`` (and ``Manifest.toml``), as Pkg
writes them (``julia --project=<dir> -e 'using Pkg; Pkg.add("Pkg")'``).
``customop.load`` stacks that environment on Julia's load path, after the
user's entries (which stay), so the op's Julia file can ``using`` what it
lists, and checks every package the file imports at top level before any of
its code runs.  The Julia side is julia/TFBridge.jl, "package environments".
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

__all__ = ["PROJECT_FILE", "EXTRA_DEPOT_VARIABLE", "JuliaPackageError", "use", "explain_load_error", "how_to_add",
           "package_uuids", "project_text", "check_package_names"]

PROJECT_FILE = "Project.toml"

# bridge.julia.EXTRA_DEPOT_VARIABLE, spelled out: importing the Julia host
# here would load it for every use of bridge.customop.
EXTRA_DEPOT_VARIABLE = "TFBRIDGE_JULIA_DEPOT"

# How Julia 1.5 words a failed `using` (Base.require): unknown, or listed but not installed.
_JULIA_MISSING = re.compile(r"Package (\w+) not found in current path"
                            r"|Package (\w+) \[[0-9a-f-]+\] is required but does not seem to be installed")


class JuliaPackageError(ImportError):
    """A Julia package an op needs that Julia cannot load, or cannot find to scaffold.

    ``packages`` names them; ``directory`` is the op folder."""

    def __init__(self, message: str, packages: Sequence[str], directory: Path):
        super().__init__(message)
        self.packages = list(packages)
        self.directory = directory


def how_to_add(directory: Path, packages: Sequence[str]) -> str:
    """The ways to make ``packages`` loadable for the op in ``directory``."""
    names = ", ".join(f'"{p}"' for p in packages)
    pkg_list = names if len(packages) == 1 else f"[{names}]"
    return (f"add {'it' if len(packages) == 1 else 'them'} to the op's environment (where Julia's package "
            f"registry is reachable):\n    julia --project={directory} -e 'using Pkg; Pkg.add({pkg_list})'\n"
            f"or point {EXTRA_DEPOT_VARIABLE} at a Julia depot that holds {'it' if len(packages) == 1 else 'them'} "
            "(docs/guides/julia-packages.md)")


def use(op: str, directory: Path, source: Path) -> None:
    """Stack the op folder's environment (if it has a Project.toml) on Julia's
    load path and check that every package ``source`` imports at top level
    can be loaded; otherwise raise JuliaPackageError, with the load path as
    it was.  Runs none of ``source``."""
    from bridge import julia

    problems = julia.call("TFBridge.use_op_environment", str(directory), str(source))
    if problems:
        lines = problems.splitlines()
        raise _missing(op, directory, source, [line.split(":", 1)[0] for line in lines],
                       "\n".join(f"  {line}" for line in lines))


def explain_load_error(op: str, directory: Path, source: Path, error: Exception) -> JuliaPackageError | None:
    """The JuliaPackageError for Julia's own error of a failed ``using`` that
    the check could not see (an import inside ``if``, a function, another
    included file), or None for any other error."""
    found = _JULIA_MISSING.search(str(error))
    if found is None:
        return None
    name = found.group(1) or found.group(2)
    return _missing(op, directory, source, [name], f"  {name}: Julia says: {str(error).splitlines()[0]}")


def _missing(op: str, directory: Path, source: Path, packages: Sequence[str], details: str) -> JuliaPackageError:
    from bridge import julia

    load_path = julia.eval('join(Base.LOAD_PATH, ", ")')
    depots = julia.eval('join(Base.DEPOT_PATH, ", ")')
    noun = "package" if len(packages) == 1 else "packages"
    return JuliaPackageError(
        f"op {op} ({directory}): {source.name} uses the Julia {noun} {', '.join(packages)}, which Julia cannot "
        f"load:\n{details}\n(load path: {load_path}; depots: {depots})\n" + how_to_add(directory, packages),
        packages, directory)


def check_package_names(packages: Sequence[str]) -> None:
    """Refuse names that cannot be Julia packages (``using`` takes an identifier)."""
    for name in packages:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"'{name}' is not a Julia package name (expected an identifier such as "
                             "SpecialFunctions, without .jl)")


def package_uuids(packages: Sequence[str], directory: Path) -> dict[str, tuple[str, bool]]:
    """{name: (UUID, loadable now)} for each package, from what Julia can see
    (the environments on its load path, its standard library, registries and
    installed packages in its depots); JuliaPackageError for any it cannot
    find, naming how to fix it."""
    from bridge import julia

    check_package_names(packages)
    found, unknown = {}, []
    for name in packages:
        answer = julia.call("TFBridge.package_uuid", name)
        if answer:
            uuid, loadable = answer.split()
            found[name] = (uuid, loadable == "true")
        else:
            unknown.append(name)
    if unknown:
        depots = julia.eval('join(Base.DEPOT_PATH, ", ")')
        noun = "package" if len(unknown) == 1 else "packages"
        raise JuliaPackageError(
            f"Julia knows no {noun} named {', '.join(unknown)}: no environment on its load path, no registry "
            f"and no installed package in its depots ({depots}) has {'it' if len(unknown) == 1 else 'them'}, "
            f"so its UUID for {directory / PROJECT_FILE} is unknown. Check the spelling, or install it first: "
            f"julia -e 'using Pkg; Pkg.add(\"{unknown[0]}\")' where Julia's registry is reachable, or set "
            f"{EXTRA_DEPOT_VARIABLE} to a depot that holds it", unknown, directory)
    return found


def project_text(uuids: dict[str, tuple[str, bool]]) -> str:
    """A Project.toml listing the packages (Pkg's own layout: a [deps] table)."""
    return "[deps]\n" + "".join(f'{name} = "{uuid}"\n' for name, (uuid, _) in sorted(uuids.items()))
