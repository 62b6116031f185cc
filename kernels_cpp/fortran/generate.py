"""Writes the generated sources of the tf_bridge Fortran module from the jinja2
templates in ``templates/``:

- ``tf_bridge_c.f90``: TensorFlow's C API for Fortran, each function of
  ``c_functions.txt`` (one C prototype a line) spelled as an abstract
  interface, a procedure pointer and the line binding it when TensorFlow is
  opened;
- ``tf_bridge_{from,to,view,alloc}.f90``: the typed procedures behind the
  generics ``tf_tensor_from``, ``tf_to_array``, ``tf_view`` and
  ``tf_allocate``, one per element type (``TYPES``) and rank (``RANKS``):
  Fortran has no generic over type or rank, so each is spelled out.

Maintainers run ``python kernels_cpp/fortran/generate.py`` after changing a
template, ``TYPES``, ``RANKS`` or ``c_functions.txt``;
tests/fortran/test_build.py checks that every generated file is current.
Users never run it: the generated files are part of the sources (building
the module needs no jinja2).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import jinja2

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
C_FUNCTIONS = HERE / "c_functions.txt"
RANKS = range(6)


@dataclass(frozen=True)
class ElementType:
    """A Fortran element type tf_bridge converts: its procedure suffix, Fortran type,
    TF_DataType constant and bytes per element."""
    suffix: str
    ftype: str
    dtype: str
    size: int


TYPES = [ElementType("r32", "real(c_float)", "TF_FLOAT", 4),
         ElementType("r64", "real(c_double)", "TF_DOUBLE", 8),
         ElementType("i8", "integer(c_int8_t)", "TF_INT8", 1),
         ElementType("i16", "integer(c_int16_t)", "TF_INT16", 2),
         ElementType("i32", "integer(c_int32_t)", "TF_INT32", 4),
         ElementType("i64", "integer(c_int64_t)", "TF_INT64", 8),
         ElementType("b8", "logical(c_bool)", "TF_BOOL", 1)]
#: Default logical: 4 bytes in gfortran, converted to and from TF's 1-byte bool (always a copy),
#: so only tf_tensor_from and tf_to_array take it.
LOGICAL = ElementType("lg", "logical", "TF_BOOL", 1)
#: Generated module -> the types its generic takes.
FAMILIES = {"from": TYPES + [LOGICAL], "to": TYPES + [LOGICAL], "view": TYPES, "alloc": TYPES}


# --- C prototypes -> Fortran --------------------------------------------------------

#: C types passed by value, and their Fortran kinds.
_SCALARS = {"int": "integer(c_int)", "TF_DataType": "integer(c_int)", "TF_Code": "integer(c_int)",
            "size_t": "integer(c_size_t)", "int64_t": "integer(c_int64_t)",
            "unsigned char": "integer(c_signed_char)", "float": "real(c_float)",
            "TF_Output": "type(tf_output_c)", "TF_Input": "type(tf_output_c)",
            "TF_Deallocator": "type(c_funptr)"}
_PROTOTYPE = re.compile(r"^(?P<result>.+?)\s*\b(?P<name>TF_\w+)\s*\((?P<params>.*)\)\s*;$")


@dataclass(frozen=True)
class Param:
    name: str
    declaration: str          # the Fortran declaration, without the name
    array: bool = False       # written `T name[]`: the dummy is name(*)


@dataclass(frozen=True)
class CFunction:
    """One C API function as Fortran sees it."""
    name: str
    result: str               # the Fortran result type, "" for a subroutine
    params: tuple[Param, ...]
    prototype: str            # its line in c_functions.txt

    @property
    def kinds(self) -> list[str]:
        """What its interface imports from iso_c_binding and tf_bridge_c."""
        text = " ".join([self.result] + [p.declaration for p in self.params])
        return sorted(set(re.findall(r"\b(c_\w+|tf_output_c)\b", text)))


def _fortran_param(text: str, position: int) -> Param:
    """One parameter of a prototype: its name (``arg<position>`` when the prototype
    gives none) and its Fortran declaration (see c_functions.txt)."""
    array = text.endswith("[]")
    text = text[:-2].strip() if array else text
    const = bool(re.search(r"\bconst\b", text))
    tokens = re.sub(r"\bconst\b", " ", text).replace("*", " * ").split()
    if len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]):
        name, tokens = tokens[-1], tokens[:-1]
    else:
        name = f"arg{position}"
    stars = tokens.count("*")
    base = " ".join(t for t in tokens if t != "*")
    intent = "intent(in)" if const else "intent(inout)"
    if array:
        return Param(name, f"{'type(c_ptr)' if stars else _SCALARS[base]}, {intent}", array=True)
    if stars == 0:
        return Param(name, f"{_SCALARS[base]}, value")
    if base == "char" and const:
        return Param(name, "character(kind=c_char), intent(in)", array=True)
    if base in _SCALARS and stars == 1:            # a scalar by reference
        return Param(name, f"{_SCALARS[base]}, {intent}")
    return Param(name, "type(c_ptr), value")


def _result(text: str) -> str:
    text = re.sub(r"\bconst\b", " ", text).strip()
    if text == "void":
        return ""
    if "*" in text:
        return "type(c_ptr)"
    return _SCALARS[text]


def parse_prototype(line: str) -> CFunction:
    """The CFunction of one prototype of c_functions.txt."""
    match = _PROTOTYPE.match(line.strip())
    if match is None:
        raise ValueError(f"c_functions.txt: not a C prototype: {line!r}")
    params = [p.strip() for p in match["params"].split(",")] if match["params"].strip() != "void" else []
    return CFunction(match["name"], _result(match["result"]),
                     tuple(_fortran_param(p, i + 1) for i, p in enumerate(params)), line.strip())


def c_functions(path: Path = C_FUNCTIONS) -> list[CFunction]:
    """The functions of c_functions.txt, in order (``#`` lines are comments)."""
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [parse_prototype(line) for line in lines]


# --- rendering ------------------------------------------------------------------------

def wrap_args(head: str, names: list[str], tail: str, indent: int = 4, width: int = 100) -> str:
    """``head(a, b, ...)tail`` as Fortran, continued with ``&`` past ``width`` columns."""
    lines, line = [], " " * indent + head + "("
    for i, name in enumerate(names):
        piece = name + (", " if i < len(names) - 1 else "")
        if len(line) + len(piece) > width:
            lines.append(line.rstrip() + " &")
            line = " " * (indent + 5) + piece
        else:
            line += piece
    return "\n".join(lines + [line + ")" + tail]).lstrip()


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.globals["dims"] = lambda rank: "" if rank == 0 else "(" + ",".join(":" * rank) + ")"
    env.globals["wrap_args"] = wrap_args
    return env


def outputs() -> dict[Path, str]:
    """Each generated file and its text."""
    env = _environment()
    files = {HERE / "tf_bridge_c.f90": env.get_template("tf_bridge_c.f90.j2").render(functions=c_functions())}
    for family, types in FAMILIES.items():
        files[HERE / f"tf_bridge_{family}.f90"] = env.get_template(f"tf_bridge_{family}.f90.j2").render(
            types=types, ranks=list(RANKS))
    return files


if __name__ == "__main__":
    for path, text in outputs().items():
        path.write_text(text)
    sys.exit(0)
