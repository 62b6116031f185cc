"""Spec names and the code generated from them.

A spec name becomes an identifier of the generated code: an argument a C++
variable of the kernel and a parameter of the Julia stub, a dimension a C++
variable, an attribute a Julia stub parameter (bridge/customop/reserved.py,
``reserved_reason``).  The parser refuses a name exactly where it would break
that code.  Here:

- every name the parser used to refuse that breaks nothing (``in``, C++20's
  keywords, the kernel's former local names, Julia's keywords as dimensions,
  C++'s keywords as attributes, ...) names the arguments, dimensions and
  attributes of ops that are built, loaded and run, through the compiled
  entry and the generic path, gradient included;
- every name still refused breaks what its message says: the real generated
  kernel fails to compile with it, g++ -std=c++17 refuses each C++ keyword as
  a variable name, the kernel's headers define each refused macro, and the
  generated Julia stub does not parse with a Julia keyword.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge.julia import buildtools
from bridge import customop, errors, julia
from bridge.customop import codegen, pch, reserved, toolchain
from bridge.customop.model import Arg, Attr, Expr, OpSpec
from bridge.customop.spec import reserved_reason
from support.build import op_folder, spec_error, toolchain_missing

# What the parser refused before it checked names against the generated code.
FORMERLY_RESERVED = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not
    not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
    return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void
    volatile wchar_t while xor xor_eq
    baremodule begin elseif end finally function global import let local macro module quote
    abstract primitive where in isa
    ctx args errors tensorflow tfjl std absl shape_inference int64_t out_size known unused
""".split())

# Of those, the names each role accepts now (the decision, written out).
ACCEPTED_ARGUMENTS = sorted("""
    char8_t concept consteval constinit co_await co_return co_yield requires
    abstract primitive where in isa
    args errors tensorflow tfjl std absl shape_inference out_size known unused
""".split())
JULIA_ONLY_KEYWORDS = sorted("""
    baremodule begin elseif end finally function global import let local macro module quote
""".split())
CXX_ONLY_KEYWORDS = sorted(reserved.CXX_KEYWORDS - reserved.JULIA_KEYWORDS)
# Attributes: no C++ variable, but TensorFlow refuses its data types' names (double, float, bool).
ATTRIBUTE_CXX_KEYWORDS = sorted(set(CXX_ONLY_KEYWORDS) - reserved.TF_DTYPE_NAMES)

MISSING = toolchain_missing()
needs_toolchain = pytest.mark.skipif(bool(MISSING), reason=MISSING)


def _role_spec(name: str, role: str) -> OpSpec:
    """An op using ``name`` as an argument, a dimension or an attribute,
    built without the parser (which would refuse it)."""
    if role == "argument":
        return OpSpec(name="Case", inputs=(Arg(name, "double", ("n",), 2),),
                      outputs=(Arg("y", "double", ("n",), 3),), forward="case", backward="case_grad")
    if role == "dimension":
        # Bound by an input, checked against a fixed size, used in an expression.
        return OpSpec(name="Case", inputs=(Arg("x", "double", (name, 2), 2),),
                      outputs=(Arg("y", "double", (Expr(f"{name}*2", (name,)),), 3),),
                      forward="case", backward="case_grad")
    return OpSpec(name="Case", inputs=(Arg("x", "double", ("n",), 2),), outputs=(Arg("y", "double", ("n",), 3),),
                  attrs=(Attr(name, "double", None, 4),), forward="case", backward="case_grad")


def _refused(role: str) -> list[str]:
    candidates = (FORMERLY_RESERVED | reserved.CXX_KEYWORDS | reserved.JULIA_KEYWORDS
                  | reserved.JULIA_SPECIAL_FORMS | set(reserved.CXX_MACROS) | set(reserved.KERNEL_NAMES))
    return sorted(n for n in candidates if reserved_reason(n, role) is not None)


# ------------------------------------------------------------------ the parser

def test_the_formerly_reserved_names_each_role_accepts():
    assert sorted(n for n in FORMERLY_RESERVED if reserved_reason(n, "argument") is None) == ACCEPTED_ARGUMENTS
    assert sorted(n for n in FORMERLY_RESERVED if reserved_reason(n, "dimension") is None) == sorted(
        set(ACCEPTED_ARGUMENTS) | set(JULIA_ONLY_KEYWORDS))
    assert sorted(n for n in FORMERLY_RESERVED if reserved_reason(n, "attribute") is None) == sorted(
        (set(ACCEPTED_ARGUMENTS) | set(ATTRIBUTE_CXX_KEYWORDS) | set(reserved.KERNEL_NAMES)) & FORMERLY_RESERVED)


@pytest.mark.parametrize("text, line, fragment", [
    ("Op\ndouble class(n)\ndouble y(n) -> output\n", 2,
     "argument name 'class' is reserved: it is a C++ keyword (the generated kernel names a C++ variable after "
     "each argument); choose another name"),
    ("Op\ndouble x(class)\ndouble y() -> output\n", 2, "dimension name 'class' is reserved: it is a C++ keyword"),
    ("Op\ndouble end(n)\ndouble y(n) -> output\n", 2,
     "argument name 'end' is reserved: it is a Julia keyword (the generated Julia stub names a parameter after "
     "each argument)"),
    ("Op\ndouble x(n)\ndouble y(n) -> output\n@attr double end\n", 4, "attribute name 'end' is reserved"),
    ("Op\ndouble for(n)\ndouble y(n) -> output\n", 2, "'for' is reserved: it is a C++ and a Julia keyword"),
    ("Op\ndouble ccall(n)\ndouble y(n) -> output\n", 2,
     "'ccall' is reserved: Julia keeps it for its ccall(...) special form"),
    ("Op\ndouble errno(n)\ndouble y(n) -> output\n", 2,
     "'errno' is reserved: it is a macro of the C library's <errno.h>, which the generated kernel includes"),
    ("Op\ndouble x(ctx)\ndouble y() -> output\n", 2,
     "dimension name 'ctx' is reserved: it is the name of the TensorFlow context"),
    ("Op\ndouble frame(n)\ndouble y(n) -> output\n", 2, "'frame' is reserved: it is the name of the tfjl::CallFrame"),
    ("Op\ndouble int64_t(n)\ndouble y(n) -> output\n", 2, "'int64_t' is reserved: it is the C++ type"),
    ("Op\ndouble x(tensorflow_2fcore_2fframework_2ftensor_2eproto_2epb_2eh)\ndouble y() -> output\n", 2,
     "is reserved: it is a macro of protobuf's include guards"),
    ("Op\ndouble x(n)\ndouble y(n) -> output\n@attr int64 int64 = 1\n", 4,
     "attribute name 'int64' is reserved: TensorFlow refuses attributes named like its data types"),
    ("Op\ndouble x(n)\ndouble y(n) -> output\n@attr double half_ref\n", 4, "attribute name 'half_ref' is reserved"),
])
def test_refused_names_say_why(text, line, fragment):
    spec_error(text, line, fragment)


def test_a_name_is_refused_only_in_the_roles_it_breaks():
    text = ("Op\ndouble in(end, begin)\ndouble isa(n) -> output\n@attr double class = 1.0\n"
            "@attr int64 frame = 2\n@attr bool ctx = true\n")
    spec = customop.parse(text)
    assert [a.name for a in spec.inputs + spec.outputs] == ["in", "isa"]
    assert [t.name for t in spec.attrs] == ["class", "frame", "ctx"]
    # An int64 attribute that sizes a dimension is that dimension: C++ then.
    spec_error("Op\ndouble x(class)\ndouble y() -> output\n@attr int64 class = 2\n", 2,
               "dimension name 'class' is reserved")


# ------------------------------------------------------------------ refused names break the generated code

def _kernel_flags() -> list[str]:
    """The compiler and flags of an op's kernel compile, with its precompiled header.

    The header's own compile command (kept in its cache entry) carries the
    kernel target's flags, which gcc requires to use the .gch; with it, a
    syntax check reads the headers from the .gch (about 1 s of CPU instead of
    5).  ``-Werror=invalid-pch`` makes a .gch that does not match an error,
    which the accepted names' kernels (CONTROL) would show.  Without a header
    (TFBRIDGE_PCH=0, an unwritable cache), the headers themselves."""
    tf, jl = toolchain.tensorflow(), toolchain.julia()
    cxx = buildtools.cxx_compiler()
    header = pch.header(tf, list(jl.include_dirs), toolchain.cmake(), cxx, report=lambda message: None)
    if header is None:
        return [cxx, "-std=c++17", "-w", *[f"-D{d}" for d in tf.definitions], "-isystem", str(tf.include_dir),
                *[f"-I{p}" for p in jl.include_dirs]]
    (entry,) = json.loads((header.parent / "compile_commands.json").read_text())
    command = shlex.split(entry["command"])
    flags = [a for a in command[1:command.index("-o")] if a != "-xc++-header"]
    assert command[0] == cxx and "-std=c++17" in flags, command
    return [cxx, *flags, "-include", str(header), "-Winvalid-pch", "-Werror=invalid-pch"]


def _compile(flags: list[str], source: str, tmp: Path, name: str) -> subprocess.CompletedProcess:
    """g++ -fsyntax-only of a generated kernel, with the flags of the op's build."""
    path = tmp / f"{name}.cc"
    path.write_text(source)
    return subprocess.run([*flags, "-fsyntax-only", str(path)], capture_output=True, text=True, timeout=600)


# One of each kind of C++ reason, in both roles that write C++: the kernel's own
# names, macros of its headers (glibc, Abseil, a protobuf include guard), keywords.
KERNEL_CASES = ([(name, "argument") for name in ("ctx", "frame", "int64_t", "errno", "absl_nullable",
                                                  "tensorflow_2fcore_2fframework_2ftensor_2eproto_2epb_2eh", "class")]
                + [(name, "dimension") for name in ("ctx", "frame", "int64_t", "math_errhandling", "double")])
CONTROL = ("in", "argument"), ("known", "dimension")  # accepted names: the same kernels compile


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    if MISSING:
        pytest.skip(MISSING)
    tmp = tmp_path_factory.mktemp("kernels")
    flags = _kernel_flags()
    cases = KERNEL_CASES + list(CONTROL)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda case: _compile(flags, codegen.kernel_source(_role_spec(*case)), tmp,
                                                 "_".join(case)), cases)
        return dict(zip(cases, results, strict=True))


@pytest.mark.parametrize("name, role", KERNEL_CASES)
def test_refused_cxx_names_break_the_generated_kernel(compiled, name, role):
    assert reserved_reason(name, role) is not None
    proc = compiled[(name, role)]
    assert proc.returncode != 0, f"the kernel with {role} {name!r} compiles: the parser need not refuse it"
    assert re.search(r"error", proc.stderr), proc.stderr[-2000:]


@pytest.mark.parametrize("name, role", CONTROL)
def test_the_same_kernels_compile_with_accepted_names(compiled, name, role):
    assert reserved_reason(name, role) is None
    proc = compiled[(name, role)]
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_kernel_declares_a_variable_for_each_argument_and_dimension():
    """Why a C++ keyword breaks an argument or a dimension, and not an attribute."""
    cc = codegen.kernel_source(customop.parse("Op\ndouble x(n, 2)\ndouble y(n*2) -> output\n@attr double alpha\n"
                                              "@attr int64 unsized = 1\n"))
    assert "const Tensor& x = ctx->input(0);" in cc and "ShapeHandle x;" in cc
    assert "const int64_t n = x.dim_size(0);" in cc and "DimensionHandle n = ctx->Dim(x, 0);" in cc
    assert "absl::StatusOr<int64_t> DimY_0(int64_t n) {" in cc
    # Attributes appear as C++ identifiers only as their members, alpha_: an
    # int64 attribute that sizes nothing is no dimension, so no variable either.
    code = re.sub(r"//[^\n]*", "", re.sub(r'"(?:\\.|[^"\\])*"', '""', cc))
    for attr in ("alpha", "unsized"):
        assert f"{attr}_" in code and not re.search(rf"\b{attr}\b", code), attr


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler")
def test_cxx_keywords_are_no_variable_names_for_gxx_cxx17(tmp_path):
    """The keywords refused are C++17's as g++ reads them with the kernel's
    -std=c++17; C++20's new keywords are names there, so they are accepted."""
    def compiles(name: str) -> bool:
        path = tmp_path / f"k_{name}.cc"
        path.write_text(f"#include <cstdint>\nint f() {{ int {name} = 1; return {name}; }}\n")
        return subprocess.run([buildtools.cxx_compiler(), "-std=c++17", "-fsyntax-only", "-w", str(path)],
                              capture_output=True, timeout=120).returncode == 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        names = sorted(reserved.CXX_KEYWORDS) + ["char8_t", "concept", "consteval", "constinit", "co_await",
                                                     "co_return", "co_yield", "requires"]
        results = dict(zip(names, pool.map(compiles, names), strict=True))
    assert [n for n in reserved.CXX_KEYWORDS if results[n]] == []
    assert [n for n in ("char8_t", "concept", "consteval", "constinit", "co_await", "co_return", "co_yield",
                        "requires") if not results[n]] == []


def test_the_refused_macros_are_the_kernel_headers_lowercase_macros(tmp_path):
    """Every lower-case object-like macro of the kernel's headers that would
    replace a variable is refused, and every macro refused is one."""
    if MISSING:
        pytest.skip(MISSING)
    cc = codegen.kernel_source(customop.parse("Op\ndouble x(n)\ndouble y(n+1) -> output\n"))
    headers = tmp_path / "headers.cc"
    headers.write_text("".join(line + "\n" for line in cc.splitlines() if line.startswith("#include")))
    tf, jl = toolchain.tensorflow(), toolchain.julia()
    out = subprocess.run([buildtools.cxx_compiler(), "-std=c++17", "-dM", "-E", *[f"-D{d}" for d in tf.definitions],
                          "-isystem", str(tf.include_dir), *[f"-I{p}" for p in jl.include_dirs], str(headers)],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    macros = dict(re.findall(r"^#define ([a-z][a-z0-9_]*)(?: (.*))?$", out, re.MULTILINE))
    replacing = {name for name, expansion in macros.items() if expansion.strip() != name}
    assert "errno" in replacing and "stdin" not in replacing  # stdin expands to itself: harmless
    assert sorted(n for n in replacing if reserved_reason(n, "argument") is None) == []
    assert sorted(n for n in reserved.CXX_MACROS if n not in replacing) == []


@pytest.mark.skipif(shutil.which("julia") is None, reason="julia executable not on PATH")
def test_refused_julia_names_break_the_stub_and_accepted_ones_do_not(tmp_path):
    """The generated Julia stub (tfbridge customop stub, customop.init) of an
    op using each name: it does not parse where the name is refused, and it
    defines the op's functions where it is accepted."""
    cases = [(n, role, True) for role in ("argument", "attribute") for n in _refused(role)
             if "Julia" in reserved_reason(n, role)]
    cases += [(n, "argument", False) for n in ACCEPTED_ARGUMENTS]
    cases += [(n, "attribute", False) for n in ATTRIBUTE_CXX_KEYWORDS + sorted(reserved.KERNEL_NAMES)]
    cases += [(n, "dimension", False) for n in JULIA_ONLY_KEYWORDS]  # dimensions are not Julia names
    files = []
    for k, (name, role, _) in enumerate(cases):
        path = tmp_path / f"case{k}.jl"
        path.write_text(codegen.julia_stub(_role_spec(name, role)))
        files.append(str(path))
    script = ("for f in ARGS\n"
              "    ok = try include(f); isdefined(Main, :case) && isdefined(Main, :case_grad) catch; false end\n"
              "    println(ok ? \"parses\" : \"breaks\")\n"
              "end\n")
    proc = subprocess.run([shutil.which("julia"), "--startup-file=no", "-e", script, *files],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = proc.stdout.split()
    assert len(verdicts) == len(cases)
    wrong = [(name, role, verdict) for (name, role, refused), verdict in zip(cases, verdicts, strict=True)
             if verdict != ("breaks" if refused else "parses")]
    assert wrong == []


def test_refused_attribute_names_are_the_names_tensorflow_reads_as_data_types():
    """tensorflow::DataTypeFromString, which TensorFlow's op registry applies
    to every attribute name, accepts exactly the names the parser refuses for
    attributes.  Its candidates: every identifier-like string in the
    framework library (its type names are literals there), with "_ref"."""
    import ctypes

    from bridge.framework import _lib

    framework, _ = _lib.library_paths()
    library = ctypes.CDLL(str(framework))
    try:
        reads = library["_ZN10tensorflow18DataTypeFromStringESt17basic_string_viewIcSt11char_traitsIcEEPNS_8DataTypeE"]
    except AttributeError:
        pytest.skip("tensorflow::DataTypeFromString(std::string_view, DataType*) is not exported here")
    reads.restype = ctypes.c_bool
    reads.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]  # string_view: size, data

    def is_type(name: str) -> bool:
        data = name.encode()
        return reads(len(data), data, ctypes.byref(ctypes.c_int()))

    strings = set(re.findall(rb"(?<![a-z0-9_])[a-z][a-z0-9_]{1,40}(?![a-z0-9_])", framework.read_bytes()))
    candidates = ({s.decode() for s in strings} | reserved.TF_DTYPE_NAMES
                  | {d.name for d in bridge.dtypes.all_dtypes()})
    candidates |= {n + "_ref" for n in candidates}
    types = sorted(n for n in candidates if is_type(n))
    assert "double" in types and "float_ref" in types and not is_type("alpha")
    assert sorted(n for n in types if reserved_reason(n, "attribute") is None) == []
    assert sorted(reserved.TF_DTYPE_NAMES - set(types)) == []


# ------------------------------------------------------------------ accepted names in real ops

WEIGHTS = {name: k + 1 for k, name in enumerate(ACCEPTED_ARGUMENTS)}
# Attributes named by C++ keywords and the kernel's names: the kernel writes only `<name>_`.
ATTRS = [("auto", "double", "1.5"), ("class", "int64", "2"), ("this", "bool", "true"),
         ("new", "string", '"x"'), ("ctx", "double", "0.25"), ("frame", "int64", "3"), ("int64_t", "int64", "4")]

ARGS_SPEC = ("ReservedArgs\n" + "".join(f"double {n}(n)\n" for n in ACCEPTED_ARGUMENTS) + "double y(n) -> output\n"
             + "".join(f"@attr {t} {n} = {d}\n" for n, t, d in ATTRS))
# y = sum_k k * arg_k + auto + class + this + length(new) + ctx + frame + int64_t (= 1.5+2+1+1+0.25+3+4)
ARGS_OFFSET = 12.75
ARGS_FORWARD = ["y .= " + " .+ ".join(f"{w} .* {n}" for n, w in WEIGHTS.items())
                + " .+ (auto + class + this + length(new) + ctx + frame + int64_t)"]
ARGS_BACKWARD = [f"grad_{n} .+= {w} .* grad_y" for n, w in WEIGHTS.items()]

DIMS_SPEC = """
ReservedDims
double x(end, begin, function, known, unused)
double u(global, local, macro, elseif, finally)
double v(end+1)
double w(import, let, 2)
double t(quote, baremodule)
double y(end*begin+known, let) -> output
double s(out_size, quote) -> output
double p(args) -> output
double q(args, module) -> output
double d(macro//unused) -> output
@attr int64 out_size = 3
"""
# Julia's keywords as dimensions: bound by inputs (x, u, w, t), checked
# against a fixed size (w) and an expression (v), in expressions of outputs
# (y, d: a division), sizing outputs through an attribute (s), and sized by
# Julia: `args`, shared by two dynamic outputs (p, q), and `module`.
DIMS_FORWARD = ["y .= reshape(1:length(y), size(y))",
                "s .= 2",
                "p[] = collect(1.0:(length(v) + offset[]))",  # args: q disagrees when offset[] != 0
                "q[] = ones(length(v), 2)",
                "d .= 7"]


@pytest.fixture(scope="module")
def reserved_ops(tmp_path_factory):
    if MISSING:
        pytest.skip(MISSING)
    root = tmp_path_factory.mktemp("names")
    args_spec = customop.parse(ARGS_SPEC)
    args_jl = codegen.julia_stub(args_spec, ARGS_FORWARD, ARGS_BACKWARD)
    dims_spec = customop.parse(DIMS_SPEC)
    dims_jl = "const offset = Ref(0)\n" + codegen.julia_stub(dims_spec, DIMS_FORWARD)
    return (customop.load(op_folder(root, "ReservedArgs", ARGS_SPEC, args_jl)),
            customop.load(op_folder(root, "ReservedDims", DIMS_SPEC, dims_jl)), root)


def _run_counting(fetches, feeds=None):
    before = julia.entry_calls()
    config = bridge.SessionConfig()
    config.disable_meta_optimizer = True  # no constant folding: every op runs once per run
    graph = (fetches[0] if isinstance(fetches, list) else fetches).graph
    with bridge.Session(graph, config=config) as sess:
        values = sess.run(fetches, feeds)
    return values, julia.entry_calls() - before


@needs_toolchain
def test_accepted_names_as_arguments_and_attributes_through_entry_and_generic_path(reserved_ops):
    ops, _, root = reserved_ops
    rng = np.random.default_rng(3)
    values = {n: rng.standard_normal(4) for n in ACCEPTED_ARGUMENTS}
    g = bridge.Graph()
    with g.as_default():
        xs = {n: bridge.placeholder(bridge.float64, [4], name=f"x_{k}") for k, n in enumerate(ACCEPTED_ARGUMENTS)}
        y = ops.reserved_args(*xs.values())       # inputs named like Python keywords (in) are positional
        grads = bridge.gradients(bridge.ops.sum(y, [0]), list(xs.values()))
    feeds = {xs[n]: values[n] for n in ACCEPTED_ARGUMENTS}
    want = sum(w * values[n] for n, w in WEIGHTS.items()) + ARGS_OFFSET
    through_entry, calls = _run_counting([y] + grads, feeds)
    assert calls == 2  # ReservedArgs and ReservedArgsGrad took their compiled entries
    np.testing.assert_allclose(through_entry[0], want, rtol=1e-13)
    for n, grad in zip(ACCEPTED_ARGUMENTS, through_entry[1:], strict=True):
        np.testing.assert_array_equal(grad, np.full(4, float(WEIGHTS[n])))
    for op_type in ("ReservedArgs", "ReservedArgsGrad"):
        julia.register_entry(op_type, 0)
    try:
        generic, calls = _run_counting([y] + grads, feeds)
    finally:
        customop.load(root / "ReservedArgs")  # includes the entries again and registers them
    assert calls == 0
    for a, b in zip(through_entry, generic, strict=True):
        np.testing.assert_array_equal(a, b)


@needs_toolchain
def test_accepted_attribute_names_take_keyword_values(reserved_ops):
    ops, _, _ = reserved_ops
    g = bridge.Graph()
    with g.as_default():
        ins = [np.zeros(2)] * len(ACCEPTED_ARGUMENTS)
        # Python keywords get a "_" (bridge.ops.opgen.safe_name): class_.
        y = ops.reserved_args(*ins, auto=-1.5, class_=10, this=False, new="four", ctx=1.0, frame=0, int64_t=0)
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y), np.full(2, -1.5 + 10 + 0 + 4 + 1.0))


@needs_toolchain
def test_accepted_names_as_dimensions(reserved_ops):
    _, ops, _ = reserved_ops
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None] * 5, name="x")  # end begin function known unused
        v = bridge.placeholder(bridge.float64, [None], name="v")       # end+1
        u = np.ones((3, 1, 11, 1, 1))                                  # global local macro elseif finally
        w = np.ones((4, 5, 2))                                         # import let
        t = np.ones((6, 1))                                            # quote baremodule
        outs = ops.reserved_dims(x, u, v, w, t)
        y, s, p, q, d = outs
    feeds = {x: np.ones((2, 3, 1, 2, 5)), v: np.ones(3)}
    with bridge.Session(g) as sess:
        got = sess.run(list(outs), feeds)
        assert got[0].shape == (2 * 3 + 2, 5)                       # y(end*begin+known, let)
        np.testing.assert_array_equal(got[0], np.arange(1, 41).reshape(5, 8).T)
        assert got[1].shape == (3, 6) and (got[1] == 2).all()      # s(out_size, quote), out_size = 3
        assert got[2].shape == (3,) and got[3].shape == (3, 2)     # p(args), q(args, module)
        assert got[4].shape == (11 // 5,) and (got[4] == 7).all()  # d(macro//unused)

        with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                "ReservedDims: input 'v' must have shape (end+1) with dimension 0 = end+1 = 3 "
                "(end = 2 from input 'x'), but has shape [4]")):
            sess.run(y, {**feeds, v: np.ones(4)})
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                "ReservedDims: output 'd' dimension 0 is macro//unused, which divides by zero (unused = 0)")):
            sess.run(d, {**feeds, x: np.ones((2, 3, 1, 2, 0))})
        julia.eval("offset[] = 1")
        try:
            with pytest.raises(errors.InvalidArgumentError, match=re.escape(
                    "ReservedDims: output 'q' dimension 0 is args, which output 'p' sets to 4, but "
                    "reserved_dims returned 3")):
                sess.run(q, feeds)
        finally:
            julia.eval("offset[] = 0")
        np.testing.assert_array_equal(sess.run(p, feeds), [1.0, 2.0, 3.0])
