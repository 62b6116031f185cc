"""The reference page of the `tf_bridge` Fortran module, generated from its
sources (kernels_cpp/fortran/*.f90 and the *.inc files they include) at each
docs build, so that it follows the module as it changes.

What it reads, with a few regular expressions rather than a Fortran parser:
the modules `tf_bridge` uses and what each makes public (`public :: ...`
lists, `private` defaults), derived types (components and type-bound
procedures with their trailing comments), generic interfaces (`interface
name` / `module procedure ...`), named constants (`parameter` lines) and
procedures: the comment block right above each, its first line and the
declarations of its dummy arguments.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ENTRY_MODULE = "tf_bridge"

_MODULE = re.compile(r"^\s*module\s+(\w+)\s*$", re.I | re.M)
# prefixes in any order: `integer module function`, `pure logical function`, `module subroutine`
_PROC_START = re.compile(r"^(\s*)((?:(?:pure|elemental|recursive|impure|module|logical|integer|real|character|complex"
                         r"|type\([^)]*\))(?:\([^)]*\))?\s+)*"
                         r"(subroutine|function)\s+(\w+)\s*\(([^)]*)\).*)$", re.I)
_TYPE_START = re.compile(r"^\s*type\s*(?:,[^:]*)?::\s*(\w+)\s*(!.*)?$", re.I)
_INTERFACE_START = re.compile(r"^\s*interface\s+(\w+)\s*$", re.I)


@dataclass
class Procedure:
    name: str
    kind: str  # subroutine or function
    first_line: str
    args: list[str]
    declarations: list[str]
    comment: list[str]
    source: str


@dataclass
class DerivedType:
    name: str
    comment: list[str]
    body: list[str]
    bindings: dict[str, str]  # type-bound procedure -> implementing procedure
    source: str


@dataclass
class Module:
    name: str
    source: str
    comment: list[str]
    default_private: bool = False
    public: list[str] = field(default_factory=list)
    uses: list[tuple[str, list[str] | None]] = field(default_factory=list)  # (module, its only: list)
    procedures: dict[str, Procedure] = field(default_factory=dict)
    types: dict[str, DerivedType] = field(default_factory=dict)
    generics: dict[str, list[str]] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)  # name -> its declaration line


def _logical_lines(text: str) -> list[str]:
    """Source lines with Fortran's `&` continuations joined (comments kept)."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        code = line.split("!", 1)[0] if not line.lstrip().startswith("!") else ""
        if pending:
            line = pending + " " + line.lstrip().lstrip("&").lstrip()
            pending = ""
        if code.rstrip().endswith("&"):
            pending = line.split("!", 1)[0].rstrip().rstrip("&").rstrip()
            continue
        out.append(line)
    if pending:
        out.append(pending)
    return out


def _with_includes(path: Path) -> str:
    """The file's text with its `include "x.inc"` lines replaced by those files (where present)."""
    lines = []
    for line in path.read_text().splitlines():
        m = re.match(r'^\s*include\s+"([^"]+)"', line)
        inc = path.parent / m.group(1) if m else None
        lines.append(_with_includes(inc) if inc is not None and inc.is_file() else line)
    return "\n".join(lines)


def _comment_above(lines: list[str], i: int) -> list[str]:
    """The `!` comment lines just above line i (no blank line between), without the `!`."""
    out = []
    j = i - 1
    while j >= 0 and lines[j].lstrip().startswith("!"):
        text = lines[j].lstrip()[1:]
        out.append(text[1:] if text.startswith(" ") else text)
        j -= 1
    out.reverse()
    # a section rule ("--- models: ... ---") is not the procedure's comment
    while out and re.match(r"^-{3}.*-{3,}$", out[0].strip()):
        out.pop(0)
    return out


def _names_in(decl: str) -> list[str]:
    """The entity names a declaration line declares (after its `::`)."""
    entities = decl.split("::", 1)[1].split("!", 1)[0]
    entities = re.sub(r"\([^()]*\)", "", re.sub(r"\([^()]*\)", "", entities))  # dims, twice for nesting
    return [e.split("=")[0].strip().lower() for e in entities.split(",") if e.strip()]


def parse_module(path: Path) -> Module | None:
    text = _with_includes(path)
    m = _MODULE.search(text)
    if m is None:
        return None
    lines = _logical_lines(text)
    start = next(i for i, line in enumerate(lines) if re.match(rf"^\s*module\s+{m.group(1)}\s*$", line, re.I))
    module = Module(name=m.group(1), source=path.name, comment=_comment_above(lines, start))
    depth = 0  # inside a procedure (its nesting depth)
    i = start + 1
    while i < len(lines):
        line = lines[i]
        code = line.split("!", 1)[0].strip()
        low = code.lower()
        if depth == 0:
            if re.match(r"^use\s+(\w+)", low) and "intrinsic" not in low:
                only = re.search(r"\bonly\s*:(.*)$", code, re.I)
                names = [n.strip().lower() for n in only.group(1).split(",") if n.strip()] if only else None
                module.uses.append((re.match(r"^use\s+(\w+)", low).group(1), names))
            elif re.match(r"^abstract\s+interface\b", low):  # procedure types, not procedures: skip them
                while not re.match(r"^\s*end\s*interface", lines[i], re.I):
                    i += 1
            elif low == "private":
                module.default_private = True
            elif re.match(r"^public\s*::", low):
                module.public += [n.strip() for n in code.split("::", 1)[1].split(",") if n.strip()]
            elif re.match(r"^[^!]*,\s*parameter\b", low) and "::" in code:
                for name in _names_in(line):
                    module.parameters[name] = line.strip()
                if re.search(r",\s*public\b", low):
                    module.public += _names_in(line)
            elif _TYPE_START.match(line):
                t = _TYPE_START.match(line)
                body, bindings = [], {}
                j = i + 1
                while not re.match(r"^\s*end\s*type", lines[j], re.I):
                    body.append(lines[j].rstrip())
                    b = re.match(r"^\s*procedure\s*::\s*(\w+)\s*=>\s*(\w+)", lines[j], re.I)
                    if b:
                        bindings[b.group(1)] = b.group(2)
                    j += 1
                module.types[t.group(1).lower()] = DerivedType(t.group(1), _comment_above(lines, i), body, bindings,
                                                               path.name)
                i = j
            elif _INTERFACE_START.match(line):
                name = _INTERFACE_START.match(line).group(1)
                specifics = []
                j = i + 1
                while not re.match(r"^\s*end\s*interface", lines[j], re.I):
                    p = re.match(r"^\s*module\s+procedure\s+(.*)$", lines[j], re.I)
                    if p:
                        specifics += [s.strip() for s in p.group(1).split(",") if s.strip()]
                    j += 1
                module.generics[name.lower()] = specifics
                i = j
        p = _PROC_START.match(line)
        if p and not low.startswith("end"):
            if depth == 0:
                args = [a.strip().lower() for a in p.group(5).split(",") if a.strip()]
                result = re.search(r"result\s*\(\s*(\w+)\s*\)", line, re.I)
                wanted = set(args) | ({result.group(1).lower()} if result else set())
                decls = []
                j = i + 1
                while j < len(lines) and "::" in lines[j].split("!", 1)[0]:
                    if set(_names_in(lines[j])) & wanted:
                        decls.append(lines[j].strip())
                    j += 1
                module.procedures[p.group(4).lower()] = Procedure(
                    p.group(4), p.group(3).lower(), p.group(2).split("!", 1)[0].strip(), args, decls,
                    _comment_above(lines, i), path.name)
            depth += 1
        elif re.match(r"^end\s*(subroutine|function)\b", low) or (depth > 0 and low == "end"):
            depth = max(0, depth - 1)
        i += 1
    return module


def load_modules(folder: Path) -> dict[str, Module]:
    modules = {}
    for path in sorted(folder.glob("*.f90")):
        module = parse_module(path)
        if module is not None:
            modules[module.name.lower()] = module
    return modules


def _public_names(module: Module, modules: dict[str, Module]) -> list[str]:
    """What `use <module>` gives: its public list where it defaults to private, else everything it has."""
    if module.default_private:
        return [n.lower() for n in module.public]
    names = list(module.types) + list(module.generics) + list(module.procedures) + list(module.parameters)
    for used, only in module.uses:
        if only is not None:
            names += only
        elif used in modules:
            names += _public_names(modules[used], modules)
    return list(dict.fromkeys(names))


def _find(name: str, kind: str, modules: dict[str, Module]):
    for module in modules.values():
        found = getattr(module, kind).get(name)
        if found is not None:
            return module, found
    return None, None


def _code(lines: list[str]) -> list[str]:
    return ["```fortran", *lines, "```", ""]


def _comment_text(comment: list[str]) -> list[str]:
    """A comment block as Markdown text: kept as written, code-like lines in a code block."""
    if not comment:
        return []
    if any(line.startswith("  ") for line in comment):  # an indented example: keep it verbatim
        return _code(["! " + line if line else "!" for line in comment])
    text = " ".join(line.strip() for line in comment)
    text = re.sub(r"^Generated by [^:]+: do not edit\.\s*", "", text)  # true of the file, not of the API
    return [text, ""]


def _procedure_lines(proc: Procedure, shown_name: str | None = None) -> list[str]:
    end = f"end {proc.kind}"
    return _code([proc.first_line, *["  " + d for d in proc.declarations], end])


def _element_type(proc: Procedure) -> str:
    """The element type of a typed specific: the declaration of its array argument (not t, st or a flag)."""
    for decl in proc.declarations:
        names = _names_in(decl)
        head = decl.split("::", 1)[0].lower()
        if "tf_tensor" in head or "tf_status" in head or head.startswith("logical, intent(in), optional"):
            continue
        if names and names[0] in ("x", "p"):
            return decl.split(",")[0].strip()
    return "?"


def render(folder: Path) -> str:
    modules = load_modules(folder)
    entry = modules[ENTRY_MODULE]
    names = _public_names(entry, modules)  # what `use tf_bridge` gives: its use lists' names

    out = ["Generated from `kernels_cpp/fortran/` at each docs build: the public procedures, types,",
           "generic interfaces and constants that `use tf_bridge` gives a program, each with the comment",
           "above it in the sources. The guide is [TensorFlow from Fortran](../guides/fortran.md).", ""]
    out += _comment_text(entry.comment)

    types = [n for n in names if _find(n, "types", modules)[1] is not None]
    generics = [n for n in names if _find(n, "generics", modules)[1] is not None]
    procs = [n for n in names if _find(n, "procedures", modules)[1] is not None]
    params = [n for n in names if _find(n, "parameters", modules)[1] is not None]
    api_procs = [n for n in procs if n.startswith("tf_")]
    helpers = [n for n in procs if not n.startswith("tf_")]

    out += ["## Derived types", ""]
    for name in types:
        module, t = _find(name, "types", modules)
        out += [f"### `{t.name}`", "", f"*{t.source}*", ""]
        out += _comment_text(t.comment)
        out += _code([f"type :: {t.name}", *[line[2:] if line.startswith("  ") else line for line in t.body],
                      "end type"])
        for binding, impl in t.bindings.items():
            _, proc = _find(impl.lower(), "procedures", modules)
            if proc is None:
                continue
            var = t.name.removeprefix("tf_")
            out += [f"#### `{var}%{binding}`", ""]
            out += _comment_text(proc.comment)
            out += _procedure_lines(proc)

    out += ["## Generic procedures", "",
            "Each name is a generic interface: one specific procedure per element type and rank, "
            "chosen by the compiler from the array passed.", ""]
    for name in generics:
        module, specifics = _find(name, "generics", modules)
        procs_of = [module.procedures[s.lower()] for s in specifics if s.lower() in module.procedures]
        out += [f"### `{name}`", "", f"*{module.source}*", ""]
        out += _comment_text(module.comment)
        kinds = list(dict.fromkeys(_element_type(p) for p in procs_of))
        out += [f"{len(procs_of)} specific procedures; element types: " + ", ".join(f"`{k}`" for k in kinds) + ".",
                "The first of them:", ""]
        if procs_of:
            out += _procedure_lines(procs_of[0])

    out += ["## Procedures", ""]
    for name in api_procs:
        module, proc = _find(name, "procedures", modules)
        out += [f"### `{proc.name}`", "", f"*{proc.source}*", ""]
        out += _comment_text(proc.comment)
        out += _procedure_lines(proc)

    if params:
        out += ["## Constants", "", "| name | value |", "| --- | --- |"]
        for name in params:
            _, decl = _find(name, "parameters", modules)
            value = re.search(rf"\b{name}\s*=\s*([^,!]+)", decl, re.I)
            out.append(f"| `{name.upper()}` | `{value.group(1).strip() if value else decl}` |")
        out.append("")

    if helpers:
        out += ["## Public for the module's own parts", "",
                "Public so that the typed modules (`tf_bridge_from`, `tf_bridge_to`, ...) can call them; "
                "not meant for programs.", ""]
        for name in helpers:
            module, proc = _find(name, "procedures", modules)
            out += [f"### `{proc.name}`", "", f"*{proc.source}*", ""]
            out += _comment_text(proc.comment)
            out += _procedure_lines(proc)
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # print the page: python docs/hooks/fortran_reference.py
    print(render(Path(__file__).resolve().parents[2] / "kernels_cpp" / "fortran"))
