"""The names a custom_op.txt spec may use, and why others are refused.

A spec's names become identifiers of the code generated from it: argument,
dimension and attribute names name C++ variables of the kernel and parameters
of the Julia stub, ``@forward`` and ``@backward`` name Julia functions.  This
module holds the rules (``NAME``, ``MAX_NAME``, ``JULIA_FN``) and the reserved
words each target language or header keeps (``reserved_reason``,
``julia_name_problem``); the parser (:mod:`bridge.customop.spec`) applies them.
"""
from __future__ import annotations

import re
from typing import Optional

__all__ = ["NAME", "MAX_NAME", "JULIA_FN", "JULIA_KEYWORDS", "JULIA_SPECIAL_FORMS", "CXX_KEYWORDS", "CXX_MACROS",
           "TF_DTYPE_NAMES", "KERNEL_NAMES", "julia_name_problem", "reserved_reason"]

# Argument, attribute and dimension names: lower-case identifiers, as TensorFlow requires.
NAME = re.compile(r"[a-z][a-z0-9_]*")
MAX_NAME = 128     # argument, attribute, dimension and Julia function names

# ---------------------------------------------------------------- Julia function names
#
# @forward and @backward name a function in Main (``f``, ``f!``) or in a module
# that Main reaches (``MyModule.f``, ``A.B.f``): a file defining ``module
# MyModule ... end`` puts it in Main, ``using MyPackage`` binds the package
# there.  The runtime resolves the path from Main at every call (generic path:
# kernels_cpp/src/tfjl_julia/invoke.cc; compiled entries: entries.jl.j2).
_JULIA_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
JULIA_FN = re.compile(rf"(?:{_JULIA_IDENTIFIER}\.)*{_JULIA_IDENTIFIER}!?")
# Julia's reserved words (Julia 1.5): no argument, function or module can
# have one of these names.  (`where`, `in` and `isa` are infix operators, and
# `abstract`, `primitive`, `mutable` and `type` keywords only before another
# word: all of them can name arguments and functions.)
JULIA_KEYWORDS = frozenset("""
    baremodule begin break catch const continue do else elseif end export false finally for
    function global if import let local macro module quote return struct true try using while
""".split())
# Julia's lowering keeps these names for its special forms: "ccall" is not a
# valid function argument name (nor a function name).
JULIA_SPECIAL_FORMS = frozenset({"ccall", "cglobal"})
# `module in ... end` and `module isa ... end` do not parse: infix operators there.
_JULIA_NOT_MODULES = frozenset({"in", "isa"})


def julia_name_problem(name: str, kind: str) -> str:
    """Why ``name`` cannot name a Julia ``kind`` ("function" or "module"), or ""."""
    if name in JULIA_KEYWORDS:
        return "a Julia keyword"
    if not name.strip("_!"):
        return "only underscores, which Julia reads as no value"
    if kind == "function" and name in JULIA_SPECIAL_FORMS:
        return f"Julia keeps it for its {name}(...) special form"
    if kind == "module" and name in _JULIA_NOT_MODULES:
        return f"an infix operator: 'module {name}' does not parse"
    return ""


# ---------------------------------------------------------------- names in generated code
#
# Each spec name becomes an identifier of the generated code, so a name is
# refused exactly where it would break that code (tests/customop/test_names.py
# shows each refused name failing there, and builds and runs ops named with
# the others):
#   - an argument names a C++ variable of the kernel (kernel.cc.j2: a Tensor in
#     Prepare, a ShapeHandle in shape inference) and a parameter of the Julia
#     stub (julia_stub.jl.j2);
#   - a dimension names a C++ variable of the kernel only (its size);
#   - an attribute names a parameter of the Julia stub; the kernel writes only
#     `<name>_`, its member (an int64 attribute sizing a dimension is also that
#     dimension's name, checked as such); and TensorFlow's op registry refuses
#     attributes named like its data types.
# Python keywords need nothing: the op functions append "_" to them
# (bridge.ops.opgen.safe_name), and the compiled entries and gradtest.py write the
# names only inside strings and symbols.

# C++17's keywords and alternative tokens, as g++ -std=c++17 reads them (the
# kernel's CMakeLists.txt).  C++20's char8_t, concept, consteval, constinit,
# co_await, co_return, co_yield and requires are plain names there.
CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t
    class compl const constexpr const_cast continue decltype default delete do double dynamic_cast
    else enum explicit export extern false float for friend goto if inline int long mutable namespace
    new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
    template this thread_local throw true try typedef typeid typename union unsigned using virtual
    void volatile wchar_t while xor xor_eq
""".split())
# Lower-case macros of the headers every kernel includes (kernel.cc.j2's
# includes, with TensorFlow 2.21): the preprocessor would replace a variable of
# that name by their expansion.  Macros that expand to their own name (stdin,
# stdout, stderr, sched_priority) are harmless.
CXX_MACROS = {
    "errno": "the C library's <errno.h>",
    "math_errhandling": "the C library's <math.h>",
    "absl_nonnull": "Abseil's nullability annotations",
    "absl_nullable": "Abseil's nullability annotations",
    "absl_nullability_unknown": "Abseil's nullability annotations",
}
# Protobuf's include guards of TensorFlow's generated headers, e.g.
# tensorflow_2fcore_2fframework_2ftensor_2eproto_2epb_2eh, are macros too.
_CXX_MACRO_PATTERN = re.compile(r"[a-z0-9_]*_2epb_2eh")
# TensorFlow refuses to register an op with an attribute named like a data
# type ("Attr can't have name double that matches a data type", when the
# library loads): the names tensorflow::DataTypeFromString reads
# (TensorFlow 2.21), each also with "_ref".
TF_DTYPE_NAMES = frozenset("""
    bfloat16 bool complex128 complex64 double float float16 float32 float4_e2m1fn float64
    float8_e4m3b11fnuz float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz half int16 int2
    int32 int4 int64 int8 qint16 qint32 qint8 quint16 quint8 resource string uint16 uint2 uint32
    uint4 uint64 uint8 variant
""".split())
# Names the kernel's own code declares where the spec's names are variables.
KERNEL_NAMES = {
    "ctx": "the name of the TensorFlow context that every function of the generated kernel takes",
    "frame": "the name of the tfjl::CallFrame that the generated kernel's Prepare fills",
    "int64_t": "the C++ type of the generated kernel's sizes",
}


def reserved_reason(name: str, role: str) -> Optional[str]:
    """Why ``name`` cannot name a spec ``role`` ("argument", "dimension" or
    "attribute"), or None: what in the generated code it would break."""
    cxx = f"the generated kernel names a C++ variable after each {role}" if role != "attribute" else ""
    julia = f"the generated Julia stub names a parameter after each {role}" if role != "dimension" else ""
    if cxx and julia and name in CXX_KEYWORDS and name in JULIA_KEYWORDS:
        return f"it is a C++ and a Julia keyword ({cxx}, and {julia})"
    if cxx and name in CXX_KEYWORDS:
        return f"it is a C++ keyword ({cxx})"
    if julia and name in JULIA_KEYWORDS:
        return f"it is a Julia keyword ({julia})"
    if julia and name in JULIA_SPECIAL_FORMS:
        return f"Julia keeps it for its {name}(...) special form, so it is no valid Julia argument name ({julia})"
    if cxx and (name in CXX_MACROS or _CXX_MACRO_PATTERN.fullmatch(name)):
        header = CXX_MACROS.get(name, "protobuf's include guards in TensorFlow's headers")
        return (f"it is a macro of {header}, which the generated kernel includes, and the macro would "
                f"replace the variable ({cxx})")
    if cxx and name in KERNEL_NAMES:
        return f"it is {KERNEL_NAMES[name]} ({cxx})"
    if role == "attribute" and (name in TF_DTYPE_NAMES or name.endswith("_ref") and name[:-4] in TF_DTYPE_NAMES):
        return "TensorFlow refuses attributes named like its data types (its op registry would read it as a type)"
    return None
