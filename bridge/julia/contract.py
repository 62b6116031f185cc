"""The Julia-op contract, in one table: what every side of a Julia op agrees on.

A Julia op crosses four sides: the spec parser and code generator (Python,
``bridge/customop/``), the C++ runtime and the header-only kernel glue
(``kernels_cpp/``), the Julia module (``julia/TFBridge.jl``) and Python's
host calls (``bridge.julia``).  They must agree on

* the **dtypes** a Julia op takes (``DTYPES``): the spec's type names, the
  runtime's ``tfjl::DType`` code, the C++ and Julia types, and whether and
  how an ``@attr`` of the type is passed; TensorFlow's facts about each
  (``TF_DataType``, element size, numpy type, kind, whether it is
  differentiable) come from ``bridge.framework.dtypes`` by its TF name, and
  what its kind means for a Julia op (a scalar's field, the gradient test's
  samples) from ``KINDS``;
* the **error kinds** a call reports (``ERROR_KINDS``), with the TF_Code
  (``absl::StatusCode``) each becomes;
* the **compiled-entry layout** (``ENTRY_PARAMS``, ``tensor_slots``,
  ``AttrType.entry``): which argument goes into which of the entry's three
  flat arrays, in which order.

This module is that agreement.  The Python sides import it; the C++ header
``kernels_cpp/include/tfjl/contract.h`` and the Julia file
``julia/contract.jl`` are generated from it (checked in; ``make contract``,
i.e. ``python -m bridge.julia.contract``, rewrites them and
``tests/julia/test_contract.py`` fails when they differ, or when any side
disagrees with the table).  To add a dtype: add a row to ``DTYPES`` and run
``make contract`` (kernels_cpp/include/tfjl/CONTRACT.md, "Changing the
contract", lists the steps for error kinds and ``@attr`` types too).

Plain data: nothing here imports the rest of the package but
``bridge.framework.dtypes`` (TensorFlow's table of dtypes, itself plain data).
"""
from __future__ import annotations

import difflib
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from bridge.framework import dtypes as _tf

__all__ = ["DType", "Kind", "KINDS", "AttrType", "ErrorKind", "EntryParam", "DTYPES", "ERROR_KINDS", "ENTRY_PARAMS",
           "ENTRY_RESULT", "MAX_JULIA_THREADS", "by_code", "by_spec", "by_name", "spec_types", "spec_aliases", "attr_types",
           "attr_aliases", "error_kind", "tensor_slots", "header_text", "julia_text", "generated_files",
           "main"]


@dataclass(frozen=True)
class AttrType:
    """How an ``@attr`` of a dtype is declared, stored and passed."""
    aliases: tuple[str, ...]  # other spellings after @attr (the spec's type name is the main one)
    tf_type: str              # TensorFlow's attr type in REGISTER_OP ("float": TF has 32-bit float attrs only)
    cxx: str                  # the kernel's member holding the value
    frame_args: str           # CallFrame::Attr's arguments, {member} the member's name
    entry: str                # how a compiled entry receives it: "floats" (one double), "ints" (one
                              #   int64), "bytes" (pointer in data, length in ints)
    read: str                 # the entry's Julia expression reading it; {data}, {ints}, {floats}: the
                              #   1-based slot of each array it starts at
    sample: str               # a Python value for the generated gradient test
    carrier: str = "attr"     # how TensorFlow carries it: "attr", one attribute of tf_type
                              #   (OpKernelConstruction::GetAttr into cxx); "float+bits", TF's 32-bit float
                              #   attribute NAME and the int attribute NAME_f64bits holding the double's bits
                              #   (bridge/framework/double_attrs.py; the kernel's DoubleAttr reads the pair)


@dataclass(frozen=True)
class Kind:
    """What a dtype's kind (TensorFlow's, ``bridge.framework.dtypes``) means for a Julia op.
    Whether it is differentiable is TensorFlow's answer too (``DType.is_differentiable``)."""
    name: str                 # bridge.framework.dtypes' kind
    scalar: Optional[str]     # the tfjl::Arg field holding a scalar of it (an @attr, bridge.julia.call's
                              #   scalars); None: only arrays of it cross
    sample: str               # the gradient test's sample: a Python expression of `rng` (numpy's
                              #   Generator), {shape} and np.{numpy}
    sample_note: str          # what the samples are, for gradtest's messages
    gradient_note: str = ""   # how a gradient of it is computed, for the Julia stub's doc; {grad}: the
                              #   gradient's name, {like}: the input's


KINDS: tuple[Kind, ...] = (
    Kind("float", "f", "rng.standard_normal({shape}).astype(np.{numpy})", "random floats"),
    Kind("complex", None, "(rng.standard_normal({shape}) + 1j * rng.standard_normal({shape})).astype(np.{numpy})",
         "random complex numbers",
         "; TensorFlow's convention, dL/d(re {like}) + i dL/d(im {like}): for an output o = f({like}), f "
         "holomorphic, `{grad} .+= grad_o .* conj.(fprime.({like}))` (docs/reference/julia-receives.md)"),
    Kind("int", "i", "rng.integers(0, 3, {shape}).astype(np.{numpy})", "integers from 0 to 2"),
    Kind("bool", "b", "rng.integers(0, 2, {shape}).astype(np.{numpy})", "random booleans"),
    Kind("string", "s", "np.full({shape}, 'a', dtype=object)", "the string 'a'"),
)
_KINDS = {k.name: k for k in KINDS}


@dataclass(frozen=True)
class DType:
    """One dtype a Julia op takes.  TensorFlow's facts about it (TF_DataType,
    ``tensorflow::DataType``, element size, numpy type, kind) come from
    ``bridge.framework.dtypes`` by its TF name; the row adds the Julia op's."""
    name: str                 # tfjl::DType's enumerator (a C++ identifier)
    code: int                 # tfjl::DType's value (tfjl_arg.dtype in the C API)
    spec: str                 # the spec's type name (custom_op.txt), also TF's op-def type
    aliases: tuple[str, ...]  # other spellings of it in argument lines
    tf: str                   # TensorFlow's name of it (bridge.framework.dtypes): float64, complex128
    cxx: str                  # C++ element type of a TF tensor (Tensor::flat<cxx>): a standard type, usable
                              #   outside namespace tensorflow too (strings: TF's tstring)
    julia: str                # Julia element type, an expression Julia evaluates in TFBridge (julia/contract.jl's
                              #   DTYPES, from which libtfjl_julia.so takes the type of each code)
    attr: Optional[AttrType] = None  # None: not an @attr type
    includes: tuple[str, ...] = ()   # the C++ headers `cxx` needs (contract.h includes them)

    def __str__(self) -> str:
        return self.spec

    @property
    def tf_dtype(self) -> "_tf.DType":
        """bridge.framework.dtypes' DType of it."""
        return _tf.as_dtype(self.tf)

    @property
    def tf_name(self) -> str:
        """tensorflow::DataType's enumerator: DT_DOUBLE."""
        return self.tf_dtype.proto_name

    @property
    def tf_enum(self) -> int:
        """Its TF_DataType value."""
        return self.tf_dtype.enum

    @property
    def size(self) -> int:
        """Bytes per element in a TF buffer; 0: not plain memory (strings)."""
        return self.tf_dtype.size

    @property
    def np_dtype(self) -> Optional[np.dtype]:
        """numpy's dtype of its arrays; None: no numpy array crosses as it (strings)."""
        return None if self.kind == "string" else self.tf_dtype.as_numpy_dtype

    @property
    def numpy(self) -> Optional[str]:
        """numpy's scalar type's name, np.<numpy> (None for strings)."""
        if self.np_dtype is None:
            return None
        t = self.np_dtype.type
        return next(n for n in (self.np_dtype.name + "_", self.np_dtype.name, t.__name__) if getattr(np, n, None) is t)

    @property
    def kind(self) -> str:
        """TensorFlow's kind of it: "float", "complex", "int", "bool" or "string" (KINDS)."""
        return self.tf_dtype.kind

    @property
    def differentiable(self) -> bool:
        """Gradients flow through it (TensorFlow's rule: float and complex): the
        gradient op fills the gradients of such inputs from those of such outputs."""
        return self.tf_dtype.is_differentiable

    @property
    def arg_field(self) -> Optional[str]:
        """The tfjl::Arg field holding a scalar (attribute) of this dtype; None: none can."""
        return _KINDS[self.kind].scalar

    def sample(self, shape: tuple[int, ...]) -> str:
        """Python code for the gradient test's sample input of ``shape`` (with ``rng``)."""
        return _KINDS[self.kind].sample.format(shape=repr(tuple(shape)), numpy=self.numpy)

    @property
    def sample_note(self) -> str:
        return _KINDS[self.kind].sample_note

    @property
    def gradient_note(self) -> str:
        return _KINDS[self.kind].gradient_note


DTYPES: tuple[DType, ...] = (
    DType("Float64", 0, "double", ("float64",), "float64", "double", "Float64",
          AttrType(("float64",), "float", "double", "{member}, tfjl::DType::Float64", "floats",
                   "unsafe_load(floats, {floats})", "0.5", carrier="float+bits")),
    DType("Float32", 1, "float", ("float32",), "float32", "float", "Float32",
          AttrType(("float32",), "float", "float", "{member}", "floats",
                   "Float32(unsafe_load(floats, {floats}))", "0.5")),
    DType("Int32", 2, "int32", ("int",), "int32", "int32_t", "Int32"),
    DType("Int64", 3, "int64", (), "int64", "int64_t", "Int64",
          AttrType(("int", "int32"), "int", "int64_t", "{member}", "ints",
                   "unsafe_load(ints, {ints})", "2")),
    DType("Bool", 4, "bool", (), "bool", "bool", "Bool",
          AttrType((), "bool", "bool", "{member}", "ints",
                   "unsafe_load(ints, {ints}) != 0", "False")),
    DType("String", 5, "string", (), "string", "tstring", "String",
          AttrType((), "string", "std::string", "{member}", "bytes",
                   "TFBridge.string_attr(data, {data}, ints, {ints})", "''")),
    DType("ComplexF32", 6, "complex64", (), "complex64", "std::complex<float>", "ComplexF32", includes=("<complex>",)),
    DType("ComplexF64", 7, "complex128", (), "complex128", "std::complex<double>", "ComplexF64",
          includes=("<complex>",)),
)


@dataclass(frozen=True)
class ErrorKind:
    """What a call into Julia came to (tfjl::ErrorKind), and the TF status it becomes."""
    name: str                 # CamelCase: tfjl::k<name>, TF_Code / absl::StatusCode::k<name>,
                              #   Julia's UPPER_SNAKE constant, bridge.errors.<name>Error
    value: int
    tf_code: int              # TF_Code (= absl::StatusCode) of the kernel's status
    from_julia: bool          # TFBridge.Failure may carry it (else only the C++ side reports it)
    meaning: str

    @property
    def cxx(self) -> str:
        return "k" + self.name

    @property
    def julia(self) -> str:
        out = ""
        for i, ch in enumerate(self.name):
            out += ("_" if ch.isupper() and i else "") + ch.upper()
        return out


ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind("Ok", 0, 0, False, "success"),
    ErrorKind("InvalidArgument", 1, 3, True,
              "ArgumentError, DimensionMismatch, DomainError, BoundsError, a MethodError on the called "
              "function, a write into an input, or arguments and dynamic outputs the runtime cannot pass"),
    ErrorKind("NotFound", 2, 5, True, "the Julia function is not defined"),
    ErrorKind("Internal", 3, 13, True, "anything else, or Julia could not start"),
    ErrorKind("ResourceExhausted", 4, 8, True,
              "out of memory: Julia's OutOfMemoryError (in the function, or while the runtime wraps its "
              "arguments), or an output's allocator"),
    ErrorKind("FailedPrecondition", 5, 9, False,
              "Julia cannot run in this process: it was forked from one that runs Julia"),
)


@dataclass(frozen=True)
class EntryParam:
    """One parameter of a compiled entry, ``f(data, ints, floats)::Cint``."""
    name: str
    cxx: str                  # its C++ type (tfjl::EntryFn)
    julia: str                # its Julia type (@cfunction)
    julia_alias: str          # the name TFBridge gives that type
    holds: str


ENTRY_PARAMS: tuple[EntryParam, ...] = (
    EntryParam("data", "void* const*", "Ptr{Ptr{Cvoid}}", "EntryData",
               "per tensor its buffer; per string attribute its bytes"),
    EntryParam("ints", "const int64_t*", "Ptr{Int64}", "EntryInts",
               "per tensor its rank, then its TF (row-major) shape; per int or bool attribute its value; "
               "per string attribute its length"),
    EntryParam("floats", "const double*", "Ptr{Float64}", "EntryFloats",
               "per float attribute its value"),
)
# What an entry returns: 0 (kOk) or the ErrorKind it recorded in TFBridge.LAST_FAILURE.
ENTRY_RESULT = ("int", "Cint")

#: The most Julia threads the runtime starts (TFBRIDGE_JULIA_THREADS,
#: JULIA_NUM_THREADS or one per CPU, capped here) and tracks: its tables of
#: which threads are Julia's and of each thread's running and interrupted
#: call (TFBridge.interrupted() reads them) hold this many.
MAX_JULIA_THREADS = 255


def tensor_slots(rank: int) -> dict[str, int]:
    """How many slots of each entry array a tensor of ``rank`` takes: its
    buffer in ``data``, its rank and TF shape in ``ints``.  Arguments come in
    calling-convention order (outputs, inputs, attributes)."""
    return {"data": 1, "ints": 1 + rank}


_ATTR_SLOTS = {"floats": {"floats": 1}, "ints": {"ints": 1}, "bytes": {"data": 1, "ints": 1}}


def attr_slots(dtype: DType) -> dict[str, int]:
    """How many slots of each entry array an attribute of ``dtype`` takes."""
    return dict(_ATTR_SLOTS[dtype.attr.entry])


# ---------------------------------------------------------------- look-ups

_BY_CODE = {d.code: d for d in DTYPES}
_BY_SPEC = {d.spec: d for d in DTYPES}
_BY_NAME = {d.name: d for d in DTYPES}


def by_code(code: int) -> DType:
    """The dtype of a tfjl::DType code (KeyError if none)."""
    return _BY_CODE[code]


def by_spec(spec_type: str) -> DType:
    """The dtype of a canonical spec type name, ``double`` (KeyError if none)."""
    return _BY_SPEC[spec_type]


def by_name(name: str) -> DType:
    """The dtype of a tfjl::DType enumerator, ``Float64`` (KeyError if none)."""
    return _BY_NAME[name]


def spec_types() -> tuple[str, ...]:
    """The spec's argument types, in code order."""
    return tuple(d.spec for d in DTYPES)


def spec_aliases() -> dict[str, str]:
    """Other spellings of argument types -> the spec's type name."""
    return {alias: d.spec for d in DTYPES for alias in d.aliases}


def attr_types() -> tuple[str, ...]:
    """The spec's @attr types, in code order."""
    return tuple(d.spec for d in DTYPES if d.attr is not None)


def attr_aliases() -> dict[str, str]:
    """Other spellings of @attr types -> the spec's type name."""
    return {alias: d.spec for d in DTYPES if d.attr is not None for alias in d.attr.aliases}


def error_kind(name: str) -> ErrorKind:
    return next(k for k in ERROR_KINDS if k.name == name)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"bridge/julia/contract.py: {message}")


def _check() -> None:
    """The table's own invariants (run on import: a bad row fails at once)."""
    _require([d.code for d in DTYPES] == list(range(len(DTYPES))),
             "tfjl::DType codes must be 0, 1, ... in table order")
    for d in DTYPES:
        try:
            tf_name = _tf.as_dtype(d.tf).name
        except (TypeError, ValueError):
            tf_name = None
        _require(tf_name is not None, f"{d.name}: tf={d.tf!r} is not a dtype of bridge/framework/dtypes.py")
        _require(tf_name == d.tf, f"{d.name}: tf={d.tf!r} is an alias: use TensorFlow's name, {tf_name!r}")
    for field in ("name", "spec", "tf", "julia"):
        values = [getattr(d, field) for d in DTYPES]
        _require(len(set(values)) == len(values), f"DTYPES: duplicate {field}")
    spellings = [d.spec for d in DTYPES] + [a for d in DTYPES for a in d.aliases]
    _require(len(set(spellings)) == len(spellings), "DTYPES: a spec type name is used twice")
    attr_spellings = list(attr_types()) + list(attr_aliases())
    _require(len(set(attr_spellings)) == len(attr_spellings), "DTYPES: an @attr type name is used twice")
    for d in DTYPES:
        _require(d.name.isidentifier(), f"{d.name}: the name must be a C++ identifier")
        _require(d.kind in _KINDS, f"{d.name}: TensorFlow's kind {d.kind!r} is none of KINDS")
        _require((d.size == 0) == (d.kind == "string") == (d.numpy is None),
                 f"{d.name}: only strings have size 0 and no numpy type")
        _require(d.attr is None or d.attr.entry in _ATTR_SLOTS, f"{d.name}: unknown entry slot")
        _require(d.attr is None or d.arg_field is not None, f"{d.name}: an @attr type needs a scalar field")
        _require(d.attr is None or d.attr.carrier == "attr" or (d.attr.carrier, d.attr.tf_type, d.attr.cxx)
                 == ("float+bits", "float", "double"), f"{d.name}: carrier 'float+bits' is a float attribute "
                 "read into a double; any other is 'attr'")
        _require(all(h.startswith("<") and h.endswith(">") for h in d.includes),
                 f"{d.name}: includes are <standard headers>")
    _require([k.value for k in ERROR_KINDS] == list(range(len(ERROR_KINDS))) and ERROR_KINDS[0].name == "Ok",
             "ERROR_KINDS: 0 is Ok, then 1, 2, ...")
    _require(len({k.tf_code for k in ERROR_KINDS}) == len(ERROR_KINDS), "ERROR_KINDS: duplicate TF_Code")


_check()


# ---------------------------------------------------------------- generated files

HEADER_PATH = ("kernels_cpp", "include", "tfjl", "contract.h")
JULIA_PATH = ("julia", "contract.jl")
_NOTICE = "Generated from bridge/julia/contract.py by `make contract`; do not edit."


def _comment(prefix: str, text: str, indent: int = 0) -> list[str]:
    """``text`` as comment lines of at most 100 characters, continuation lines indented."""
    return textwrap.wrap(text, 100, initial_indent=prefix, subsequent_indent=prefix + " " * indent)


def _macro(name: str, doc: str, rows: list[str]) -> list[str]:
    out = [f"// {doc}", f"#define {name}(X) \\"]
    out += [f"  X({row})" + (" \\" if i + 1 < len(rows) else "") for i, row in enumerate(rows)]
    return out + [""]


def header_text() -> str:
    """kernels_cpp/include/tfjl/contract.h."""
    numeric = [d for d in DTYPES if d.size > 0]
    lines = [
        f"// {_NOTICE}",
        "//",
        "// The Julia-op contract (kernels_cpp/include/tfjl/CONTRACT.md): the dtypes a",
        "// Julia op takes, the error kinds a call reports, and the arguments of a",
        "// compiled entry.  Python (the spec parser, the code generator, bridge.julia)",
        "// and Julia (julia/contract.jl, included by TFBridge.jl) use the same table.",
        "// No TensorFlow or Julia header is needed: the X-macros name TF's and",
        "// Julia's symbols as tokens, for code that includes those headers to expand.",
        "#ifndef TFJL_CONTRACT_H_",
        "#define TFJL_CONTRACT_H_",
        "",
    ]
    includes = sorted({"<cstddef>", "<cstdint>"} | {h for d in DTYPES for h in d.includes})
    lines += [f"#include {h}" for h in includes] + [""]
    lines += _macro("TFJL_DTYPES",
                    "X(Name, code, tensorflow::DataType, its TF_DataType value, element bytes\n"
                    "// (0: not plain memory)).  Julia's element type of each is TFBridge.DTYPES[code + 1]\n"
                    "// (julia/contract.jl), which libtfjl_julia.so reads at start-up",
                    [f"{d.name}, {d.code}, {d.tf_name}, {d.tf_enum}, {d.size}" for d in DTYPES])
    lines += _macro("TFJL_SCALAR_DTYPES",
                    "X(Name, C++ element type, the tfjl::Arg field holding a scalar of it): the\n"
                    "// plain-memory dtypes a scalar (an attribute) crosses as",
                    [f"{d.name}, {d.cxx}, {d.arg_field}" for d in numeric if d.arg_field is not None])
    lines += _macro("TFJL_ERROR_KINDS",
                    "X(Name, value, TF_Code (= absl::StatusCode) of the status, TFBridge.Failure may carry it)",
                    [f"{k.name}, {k.value}, {k.tf_code}, {int(k.from_julia)}" for k in ERROR_KINDS])
    lines += ["namespace tfjl {", ""]
    lines += ["// A Julia op's dtypes (tfjl_arg.dtype in the C API holds the code).",
              "enum class DType : int { " + ", ".join(f"{d.name} = {d.code}" for d in DTYPES) + " };",
              "", f"constexpr int kNumDTypes = {len(DTYPES)};", "",
              "// Bytes per element in a TF buffer; 0 for strings (not plain memory).",
              "constexpr size_t DTypeSize(DType d) {", "  switch (d) {"]
    lines += [f"    case DType::{d.name}: return {d.size};" for d in DTYPES]
    lines += ["  }", "  return 0;", "}", ""]
    lines += ["// What a call into Julia came to (call_julia's kind_out, the C API's status):"]
    for k in ERROR_KINDS:
        lines += _comment("//   ", f"{k.cxx}: {k.meaning}", 2)
    lines += ["enum ErrorKind : int { " + ", ".join(f"{k.cxx} = {k.value}" for k in ERROR_KINDS) + " };", ""]
    lines += ["// The TF_Code (absl::StatusCode) of a kernel's status for an error kind; an",
              "// unknown kind is Internal.",
              "constexpr int ErrorKindTfCode(int kind) {", "  switch (kind) {"]
    lines += [f"    case {k.cxx}: return {k.tf_code};" for k in ERROR_KINDS]
    lines += ["  }", f"  return {error_kind('Internal').tf_code};", "}", "",
              "// The error kind of a TF_Code (a status from TensorFlow); Internal for any other.",
              "constexpr int ErrorKindOfTfCode(int code) {", "  switch (code) {"]
    lines += [f"    case {k.tf_code}: return {k.cxx};" for k in ERROR_KINDS]
    lines += ["  }", f"  return {error_kind('Internal').cxx};", "}", "",
              "// The kinds a TFBridge.Failure may carry (anything else read from Julia is Internal).",
              "constexpr bool IsJuliaErrorKind(int64_t kind) {",
              "  return " + " || ".join(f"kind == {k.cxx}" for k in ERROR_KINDS if k.from_julia) + ";",
              "}", ""]
    params = ", ".join(f"{p.cxx} {p.name}" for p in ENTRY_PARAMS)
    lines += ["// A compiled entry (templates/entries.jl.j2, made C-callable by Julia's @cfunction):",
              "// the calling convention's arguments in three flat arrays:"]
    for p in ENTRY_PARAMS:
        lines += _comment("//   ", f"{p.name}: {p.holds}", 2)
    lines += ["// It returns kOk or the ErrorKind it recorded in TFBridge.LAST_FAILURE.",
              f"using EntryFn = {ENTRY_RESULT[0]} (*)({params});", "",
              "// The three arrays of one entry call; they must outlive the call.",
              "struct EntryArgs {"]
    lines += [f"  {p.cxx} {p.name};" for p in ENTRY_PARAMS]
    lines += ["};", "",
              "// How a compiled entry receives an attribute of each dtype: kFloat one double in",
              "// `floats`, kInt one int64 in `ints`, kBytes a pointer in `data` and a length in `ints`.",
              "enum class EntryAttr : int { kFloat, kInt, kBytes };", "",
              "constexpr EntryAttr EntryAttrOf(DType d) {", "  switch (d) {"]
    slot = {"floats": "kFloat", "ints": "kInt", "bytes": "kBytes"}
    for d in DTYPES:  # a dtype without @attr: where its scalar field would go (none: kInt, unused)
        entry = d.attr.entry if d.attr is not None else {"f": "floats", "s": "bytes"}.get(d.arg_field, "ints")
        lines.append(f"    case DType::{d.name}: return EntryAttr::{slot[entry]};")
    lines += ["  }", "  return EntryAttr::kInt;", "}", ""]
    lines += _comment("// ", "The most Julia threads the runtime starts and tracks: serving_threads() caps "
                      "TFBRIDGE_JULIA_THREADS there, and its per-thread tables (which threads are Julia's, "
                      "each one's running and interrupted call) have that many rows.")
    lines += [f"constexpr int kMaxJuliaThreads = {MAX_JULIA_THREADS};", ""]
    lines += ["// The table's sizes hold for this compiler."]
    lines += [f'static_assert(sizeof({d.cxx}) == {d.size}, "tfjl::DType::{d.name} is {d.size}-byte {d.cxx}");'
              for d in numeric]
    lines += ["", "}  // namespace tfjl", "", "#endif  // TFJL_CONTRACT_H_", ""]
    return "\n".join(lines)


def julia_text() -> str:
    """julia/contract.jl, included into module TFBridge."""
    lines = [
        f"# {_NOTICE}",
        "#",
        "# The Julia-op contract (kernels_cpp/include/tfjl/CONTRACT.md), included into",
        "# module TFBridge: the same table as kernels_cpp/include/tfjl/contract.h.",
        "",
        "# tfjl::DType: the Julia element type of code c is DTYPES[c + 1].",
        "const DTYPES = (" + ", ".join(d.julia for d in DTYPES) + ")",
        "",
        "# Error kinds (tfjl::ErrorKind): what a Failure carries and a compiled entry returns.",
    ]
    for k in ERROR_KINDS:
        lines += _comment("#   ", f"{k.julia}: {k.meaning}", 2)
    width = max(len(k.julia) for k in ERROR_KINDS)
    lines += [f"const {k.julia.ljust(width)} = {k.value}" for k in ERROR_KINDS]
    lines += ["", "# The TF_Code of the kernel's status for kind k: TF_CODES[k + 1].",
              "const TF_CODES = (" + ", ".join(str(k.tf_code) for k in ERROR_KINDS) + ")",
              "",
              "# A compiled entry's parameters, f(data, ints, floats)::" + ENTRY_RESULT[1] + ":"]
    for p in ENTRY_PARAMS:
        lines += _comment("#   ", f"{p.name}: {p.holds}", 2)
    width = max(len(p.julia_alias) for p in ENTRY_PARAMS)
    lines += [f"const {p.julia_alias.ljust(width)} = {p.julia}" for p in ENTRY_PARAMS]
    lines += ["const ENTRY_PARAMETER_TYPES = (" + ", ".join(p.julia_alias for p in ENTRY_PARAMS) + ")",
              f"const EntryResult = {ENTRY_RESULT[1]}", ""]
    return "\n".join(lines)


def generated_files(root: Path) -> dict[Path, str]:
    """The generated files under a source tree ``root`` and their contents."""
    return {root.joinpath(*HEADER_PATH): header_text(), root.joinpath(*JULIA_PATH): julia_text()}


def _source_root() -> Path:
    return Path(__file__).resolve().parents[2]


def main(argv: Optional[list[str]] = None) -> int:
    """Rewrite the generated files (``--check``: only report differences, exit 1 on any)."""
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    root = _source_root()
    stale = 0
    for path, text in generated_files(root).items():
        current = path.read_text() if path.is_file() else ""
        if current == text:
            continue
        stale += 1
        if check:
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                       str(path), "generated"))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(root)}")
    if check and stale:
        print("generated contract files are stale: run `make contract` "
              "(.venv/bin/python -m bridge.julia.contract)")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
