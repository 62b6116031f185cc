"""MkDocs hook: the pages that are generated at each build, from the code
itself, so that they cannot drift from it.

A page asks for generated text with an HTML comment on a line of its own:

- ``<!-- generated: cli -->``: the ``tfbridge`` command, every subcommand's
  ``--help`` from its argparse parser (``bridge.cli._parser``);
- ``<!-- generated: fortran -->``: the ``tf_bridge`` Fortran module's
  reference, from ``kernels_cpp/fortran`` (docs/hooks/fortran_reference.py);
- ``<!-- generated: api bridge.train -->``: one mkdocstrings block per public
  name of a package, for packages whose names load lazily (PEP 562
  ``__getattr__`` over a ``_LAZY`` table), which static analysis cannot see,
  and for the others alike (``__all__``, else what the package imports).

Importing ``bridge`` here starts neither TensorFlow nor Julia: the packages'
``__init__`` modules are light, and the objects themselves are read by
mkdocstrings from the sources.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

import fortran_reference  # noqa: E402  (docs/hooks/, put on sys.path above)

_DIRECTIVE = re.compile(r"^<!-- generated: (\w+)(?: ([\w.]+))? -->$", re.M)

# Pages of the API reference, so that a package's entry on another page links to it.
API_PAGES = {
    "bridge": "bridge.md", "bridge.train": "train.md", "bridge.nn": "nn.md", "bridge.layers": "nn.md",
    "bridge.losses": "nn.md", "bridge.initializers": "nn.md", "bridge.distribute": "distribute.md",
    "bridge.customop": "customop.md", "bridge.summary": "summary.md", "bridge.saved_model": "saved_model.md",
    "bridge.julia": "julia.md",
}


def on_page_markdown(markdown: str, page, config, files) -> str:
    def expand(m: re.Match) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind == "cli":
            return cli_reference()
        if kind == "fortran":
            return fortran_reference.render(REPO / "kernels_cpp" / "fortran")
        if kind == "api" and arg:
            return api_reference(arg)
        raise ValueError(f"{page.file.src_path}: unknown directive {m.group(0)!r}")
    return _DIRECTIVE.sub(expand, markdown)


# --- the tfbridge command ------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name), sub


def cli_reference() -> str:
    from bridge.cli import _parser
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: a fixed width gives the same page everywhere
    try:
        out: list[str] = []

        def walk(parser: argparse.ArgumentParser, path: list[str], help_text: str | None, level: int) -> None:
            title = " ".join(path)
            out.extend([f"{'#' * level} `{title}`", ""])
            if help_text:
                out.extend([help_text[0].upper() + help_text[1:] + ".", ""])
            out.extend(["```text", parser.format_help().rstrip(), "```", ""])
            for name, sub_help, sub in _subcommands(parser):
                walk(sub, path + [name], sub_help, min(level + 1, 4))

        walk(_parser(), ["tfbridge"], None, 2)
        return "\n".join(out)
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


# --- the Python API ------------------------------------------------------------

def _public_names(package: str) -> list[tuple[str, str | None]]:
    """(name, the dotted path mkdocstrings documents it under; None for a package) for each public name."""
    module = importlib.import_module(package)
    lazy = getattr(module, "_LAZY", None)
    if lazy is not None:  # names that load on first access: the table says where each lives
        out = []
        for name, where in lazy.items():
            if isinstance(where, tuple):  # bridge: (module, attribute or None for a module)
                mod, attr = where
                out.append((name, None if attr is None else f"{mod}.{attr}"))
            else:  # bridge.train: the submodule's name
                out.append((name, f"{package}.{where}.{name}"))
        return out
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)
                 and ((getattr(v, "__module__", "") or "").startswith("bridge") or n.isupper())]
    out = []
    for name in names:
        value = getattr(module, name)
        out.append((name, None if inspect.ismodule(value) else f"{package}.{name}"))
    return out


_GRIFFE = {}


def _found(target: str) -> bool:
    """Whether mkdocstrings can document target: it exists in the sources (not made at run time, as the
    dtypes of bridge.framework.dtypes are from a table)."""
    import griffe
    if "bridge" not in _GRIFFE:
        _GRIFFE["bridge"] = griffe.load("bridge", search_paths=[str(REPO)], resolve_aliases=True,
                                        resolve_implicit=True)
    try:
        obj = _GRIFFE["bridge"][target.split(".", 1)[1]]
        if obj.is_alias:
            obj.final_target  # noqa: B018  (raises where the alias leads nowhere)
        return True
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return False


def _block(target: str, heading: str, level: int) -> list[str]:
    return [f"::: {target}", "    options:", f'      heading: "{heading}"', f'      toc_label: "{heading}"',
            f"      heading_level: {level}", ""]


def api_reference(package: str) -> str:
    entries = _public_names(package)
    out: list[str] = []
    generated = [(n, t) for n, t in entries if t is not None and t.rsplit(".", 1)[0] == "bridge.ops"]
    modules = [(n, t) for n, t in entries if t is None]
    documented = [(n, t) for n, t in entries if t is not None and (n, t) not in generated]
    made = [(n, t) for n, t in documented if not _found(t)]
    documented = [e for e in documented if e not in made]
    if package == "bridge":  # group the top level's names by the module they come from
        groups: dict[str, list[tuple[str, str]]] = {}
        for name, target in documented:
            groups.setdefault(target.rsplit(".", 1)[0], []).append((name, target))
        for module_name, members in groups.items():
            out.extend([f"## From `{module_name}`", ""])
            for name, target in members:
                out.extend(_block(target, f"{package}.{name}", 3))
    else:
        for name, target in sorted(documented, key=lambda e: (not e[0][:1].isupper(), e[0].lower())):
            out.extend(_block(target, f"{package}.{name}", 2))
    if generated:
        out.extend(["## Functions generated from TensorFlow's op registry", "",
                    "These names are functions of `bridge.ops`, generated on first use from the OpDef registry of "
                    "the TensorFlow the bridge runs on (their docstrings list the op's inputs and attributes):", "",
                    "| name | the function |", "| --- | --- |"])
        out.extend(f"| `{package}.{name}` | `{target}` |" for name, target in generated)
        out.append("")
    if made:
        out.extend(["## Values made as the module loads", "",
                    "These are built from a table when their module is imported:", "",
                    "| name | value |", "| --- | --- |"])
        out.extend(f"| `{package}.{name}` | `{target}` |" for name, target in made)
        out.append("")
    if modules:
        out.extend(["## Modules", "", "| name | module |", "| --- | --- |"])
        for name, _ in modules:
            full = f"{package}.{name}"
            where = importlib.import_module(package)._LAZY[name][0] if package == "bridge" else full
            page = API_PAGES.get(full) or API_PAGES.get(where)
            out.append(f"| `{full}` | " + (f"[`{where}`]({page})" if page else f"`{where}`") + " |")
        out.append("")
    return "\n".join(out)
