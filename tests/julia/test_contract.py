"""The Julia-op contract has one home, bridge/julia/contract.py: every side agrees with it.

(a) The generated files (kernels_cpp/include/tfjl/contract.h, julia/contract.jl)
    are what the table generates.
(b) Each side uses the table: the spec parser's type names, the code
    generator's per-type names and entry layout, bridge.julia's dtype codes,
    TensorFlow's TF_DataType and TF_Code values (bridge.dtypes,
    bridge.errors), the C++ header on its own (compiled: its static_asserts),
    Julia's TFBridge constants and the runtime's dtype codes asked at run time,
    and the copy of TFBridge.jl built into libtfjl_julia.so.
(c) No hand-written copy of the lists is left beside the generated ones.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge.julia import contract
from bridge.customop import codegen, spec as spec_module
from bridge.customop.spec import parse
from support import REPO


REGENERATE = "make contract  (.venv/bin/python -m bridge.julia.contract)"


# ---------------------------------------------------------------- (a) generated files

@pytest.mark.parametrize("relative", ["/".join(contract.HEADER_PATH), "/".join(contract.JULIA_PATH)])
def test_generated_file_matches_table(relative):
    path = REPO / relative
    expected = contract.generated_files(REPO)[path]
    current = path.read_text() if path.is_file() else ""
    if current != expected:
        import difflib
        diff = "".join(difflib.unified_diff(current.splitlines(True), expected.splitlines(True),
                                            relative, "generated from bridge/julia/contract.py"))
        pytest.fail(f"{relative} is not what bridge/julia/contract.py generates; run {REGENERATE}\n{diff}")
    assert current.splitlines()[0].endswith("Generated from bridge/julia/contract.py by `make contract`; "
                                            "do not edit.")


def test_check_mode_reports_nothing_stale(capsys):
    assert contract.main(["--check"]) == 0, capsys.readouterr().out


# ---------------------------------------------------------------- (b) Python sides

def test_spec_parser_types_are_the_table():
    assert spec_module.TYPES == tuple(d.spec for d in contract.DTYPES)
    assert spec_module.ATTR_TYPES == tuple(d.spec for d in contract.DTYPES if d.attr is not None)
    # Every spelling parses to its dtype, as an argument and (where allowed) as an attribute.
    lines = ["Probe"]
    expected_args, expected_attrs = {}, {}
    for d in contract.DTYPES:
        for i, word in enumerate((d.spec,) + d.aliases):
            lines.append(f"{word} a{d.code}_{i}(?)")
            expected_args[f"a{d.code}_{i}"] = d
        if d.attr is not None:
            for i, word in enumerate((d.spec,) + d.attr.aliases):
                lines.append(f"@attr {word} t{d.code}_{i}")
                expected_attrs[f"t{d.code}_{i}"] = d
    lines.append("double out(?) -> output")
    parsed = parse("\n".join(lines))
    assert {a.name: a.dtype for a in parsed.inputs} == expected_args
    assert {a.name: a.dtype for a in parsed.attrs} == expected_attrs
    for d in contract.DTYPES:
        arg = next(a for a in parsed.inputs if a.dtype is d)  # the table's row itself
        # Gradients flow through TensorFlow's differentiable kinds, float and complex.
        assert spec_module.is_differentiable(arg) == d.differentiable == (d.kind in ("float", "complex"))


def _probe_spec():
    lines = ["Probe"] + [f"{d.spec} x{d.code}(n, 2)" for d in contract.DTYPES]
    lines += [f"{d.spec} y{d.code}(n, 2) -> output" for d in contract.DTYPES]
    lines += [f"@attr {d.spec} t{d.code}" for d in contract.DTYPES if d.attr is not None]
    return parse("\n".join(lines))


def test_code_generator_names_are_the_table():
    ctx = codegen.context(_probe_spec())
    for view in ctx["inputs"] + ctx["outputs"]:
        d = view.dtype
        assert d in contract.DTYPES
        assert (view.tf_type, view.cxx_type, view.tfjl_dtype, view.julia_type, view.is_string) == \
               (d.spec, d.cxx, d.name, d.julia, d.kind == "string")
    for t in ctx["attrs"]:
        d = t.dtype
        assert d in contract.DTYPES
        assert t.tf_decl == f"{t.name}: {d.attr.tf_type}"
        assert (t.cxx_type, t.julia_type) == (d.attr.cxx, d.julia)
        assert t.cxx_value == d.attr.frame_args.format(member=f"{t.name}_")
    source = codegen.kernel_source(_probe_spec())
    for d in contract.DTYPES:
        assert f'.Input("x{d.code}: {d.spec}")' in source
        if d.attr is not None:
            assert f'.Attr("t{d.code}: {d.attr.tf_type}")' in source


def test_entry_layout_is_the_table():
    """The generated entry reads its arrays as the table lays them out: per tensor
    one data slot and 1 + rank ints, per attribute what AttrType.entry says."""
    numeric = [d for d in contract.DTYPES if d.kind != "string"]
    lines = ["Probe"] + [f"{d.spec} x{d.code}(n, 2)" for d in numeric] + ["double y(n) -> output"]
    lines += [f"@attr {d.spec} t{d.code}" for d in contract.DTYPES if d.attr is not None]
    entry, = [e for e in codegen.entries(parse("\n".join(lines))) if e.op == "Probe"]
    slot = {p.name: 1 for p in contract.ENTRY_PARAMS}
    expected = [f"TFBridge.tensor(Float64, Val(1), data, {slot['data']}, ints, {slot['ints']}, :y)"]
    for array, n in contract.tensor_slots(1).items():
        slot[array] += n
    for d in numeric:
        expected.append(f"TFBridge.input_tensor({d.julia}, Val(2), data, {slot['data']}, ints, "
                        f"{slot['ints']}, :x{d.code})")
        for array, n in contract.tensor_slots(2).items():
            slot[array] += n
    for d in contract.DTYPES:
        if d.attr is not None:
            expected.append(d.attr.read.format(**slot))
            for array, n in contract.attr_slots(d).items():
                slot[array] += n
    assert [a.expr for a in entry.args] == expected
    text = codegen.entries_source(parse("\n".join(lines)))
    params = ", ".join(f"{p.name}::{p.julia}" for p in contract.ENTRY_PARAMS)
    assert f"function tfbridge_entry_Probe({params})::{contract.ENTRY_RESULT[1]}" in text
    assert ", ".join(p.julia for p in contract.ENTRY_PARAMS) in text


def test_bridge_julia_codes_are_the_table():
    from bridge.julia import host as julia
    numeric = {np.dtype(getattr(np, d.numpy)): d.code for d in contract.DTYPES if d.numpy is not None}
    assert julia._DTYPE_CODES == numeric
    assert julia._STRING == contract.by_name("String").code


def test_tf_datatype_values_are_tensorflows():
    for d in contract.DTYPES:
        tf = bridge.dtypes.as_dtype(d.tf_enum)
        assert bridge.dtypes.as_dtype(d.tf_name).enum == d.tf_enum, d.name
        assert tf.size == d.size, d.name
        if d.numpy is not None:
            assert tf.as_numpy_dtype == np.dtype(getattr(np, d.numpy)), d.name
            assert np.dtype(getattr(np, d.numpy)).itemsize == d.size, d.name
        else:
            assert tf.name == "string"


def test_tf_codes_are_tensorflows():
    by_code = bridge.errors._BY_CODE
    for k in contract.ERROR_KINDS:
        if k.name == "Ok":
            assert k.tf_code == 0
        else:
            assert by_code[k.tf_code].__name__ == k.name + "Error", k.name


# ---------------------------------------------------------------- (b) C++

def test_header_compiles_on_its_own(tmp_path):
    """contract.h needs no other header, and its static_asserts (element sizes) hold."""
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    probe = tmp_path / "probe.cc"
    probe.write_text(textwrap.dedent("""
        #include "tfjl/contract.h"
        #define COUNT(name, ...) +1
        static_assert(0 TFJL_DTYPES(COUNT) == tfjl::kNumDTypes, "one row per dtype");
        static_assert(tfjl::DTypeSize(tfjl::DType::Float64) == 8, "");
        static_assert(tfjl::ErrorKindTfCode(tfjl::kNotFound) == 5, "");
        static_assert(tfjl::ErrorKindOfTfCode(13) == tfjl::kInternal, "");
        static_assert(tfjl::kMaxJuliaThreads == MAX_JULIA_THREADS, "the table's thread limit");
        int main() { return 0; }
        """))
    proc = subprocess.run([compiler, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           f"-DMAX_JULIA_THREADS={contract.MAX_JULIA_THREADS}",
                           f"-I{REPO / 'kernels_cpp' / 'include'}", str(probe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- (c) no stray copies

def _cpp_sources() -> list[Path]:
    root = REPO / "kernels_cpp"
    return [p for p in sorted(root.rglob("*")) if p.suffix in (".h", ".cc") and p.name != "contract.h"]


def test_the_julia_thread_limit_is_the_tables():
    """The runtime's limits on Julia threads (how many it starts, which threads it knows as
    Julia's, the interrupt slots) are contract.h's kMaxJuliaThreads, never a number of their own."""
    for name in ("julia_thread.h", "julia_thread.cc"):
        text = (REPO / "kernels_cpp" / "src" / "tfjl_runtime" / name).read_text()
        assert "kMaxJuliaThreads" in text, name
        code = re.sub(r"//.*", "", text)
        assert re.findall(r"\b25[56]\b", code) == [], name


def test_no_hand_written_copy_of_the_lists():
    """No C++ file outside contract.h lists the dtypes or error kinds itself
    (names every dtype's TF or Julia symbol, switches over every dtype, or
    defines the enums): they expand contract.h's X-macros or ask its functions
    (and TFBridge.DTYPES, for Julia's element types)."""
    sources = {p: p.read_text() for p in _cpp_sources()}
    columns = {"tensorflow::DataType": [rf"\b{d.tf_name}\b" for d in contract.DTYPES],
               # julia.h's datatype (jl_float64_type) or the type's name (ComplexF64 has no datatype
               # there): the runtime takes them from TFBridge.DTYPES (julia/contract.jl)
               "Julia datatype": [rf"\bjl_{d.julia.lower()}_type\b|\"{d.julia}\"" for d in contract.DTYPES],
               "case label": [rf"case\s+DType::{d.name}\b" for d in contract.DTYPES],
               "error kind case label": [rf"case\s+(tfjl::)?{k.cxx}\b" for k in contract.ERROR_KINDS[1:]]}
    for p, text in sources.items():
        for column, patterns in columns.items():
            assert not all(re.search(pattern, text) for pattern in patterns), \
                f"{p.relative_to(REPO)} lists every {column} of the contract: expand contract.h's X-macros instead"
        assert not re.search(r"enum\s+(class\s+)?(DType|ErrorKind)\b", text), p
        assert "kNumDTypes =" not in text, p
    from bridge.julia import runtime as julia_runtime

    julia_files = julia_runtime.julia_sources(REPO / "julia" / "TFBridge.jl")
    assert REPO / "julia" / "contract.jl" in julia_files
    for p in julia_files:
        if p.name == "contract.jl":
            continue
        for k in contract.ERROR_KINDS:
            assert not re.search(rf"^\s*const\s+{k.julia}\s*=", p.read_text(), re.M), (p, k.julia)
    assert 'include("contract.jl")' in (REPO / "julia" / "TFBridge.jl").read_text()


# ---------------------------------------------------------------- (b) Julia and the runtime, at run time

@pytest.fixture(scope="module")
def julia():
    from bridge import julia
    julia.init()
    return julia


def test_tfbridge_constants_are_the_table(julia):
    # As Julia prints the table's type expressions (ComplexF64 prints as Complex{Float64} in Julia 1.5).
    table = "(" + ", ".join(d.julia for d in contract.DTYPES) + ",)"
    assert julia.eval("join(string.(TFBridge.DTYPES), ' ')") == julia.eval(f"join(string.({table}), ' ')")
    for k in contract.ERROR_KINDS:
        assert julia.eval(f"TFBridge.{k.julia}") == k.value
    assert julia.eval("join(TFBridge.TF_CODES, ' ')") == " ".join(str(k.tf_code) for k in contract.ERROR_KINDS)
    assert julia.eval("join(string.(TFBridge.ENTRY_PARAMETER_TYPES), ' ')") == \
        julia.eval("join(string.((" + ", ".join(p.julia for p in contract.ENTRY_PARAMS) + ")), ' ')")
    assert julia.eval("string(TFBridge.EntryResult)") == julia.eval(f"string({contract.ENTRY_RESULT[1]})")


def test_runtime_dtype_codes_reach_julia_as_the_table_says(julia):
    """bridge.julia's code -> the C++ runtime's element type -> Julia's type."""
    for d in contract.DTYPES:
        if d.numpy is None:
            continue
        value = np.zeros(3, dtype=getattr(np, d.numpy))
        assert str(julia.call("eltype", value)) == julia.eval(f"string({d.julia})"), d.name
    assert str(julia.call("typeof", "text")) == "String"
    scalars = {"Float64": 1.5, "Float32": np.float32(1.5), "Int32": np.int32(3), "Int64": 3, "Bool": True}
    for name, value in scalars.items():
        assert str(julia.call("typeof", value)) == name
        assert julia.call("identity", value) == value
    assert julia.call("identity", True) is True and julia.call("identity", False) is False


def test_error_kinds_reach_python_as_the_table_says(julia):
    kinds = {k.name: k.value for k in contract.ERROR_KINDS}
    with pytest.raises(julia.JuliaError) as e:
        julia.eval('throw(ArgumentError("probe"))')
    assert e.value.kind == kinds["InvalidArgument"]
    with pytest.raises(julia.JuliaError) as e:
        julia.call("tfbridge_contract_no_such_function")
    assert e.value.kind == kinds["NotFound"]
    with pytest.raises(julia.JuliaError) as e:
        julia.eval('error("probe")')
    assert e.value.kind == kinds["Internal"]


def test_embedded_module_has_the_contract():
    """The copy of TFBridge.jl built into libtfjl_julia.so (lazy start) has
    contract.jl pasted in: start Julia with it in a fresh process and ask."""
    constants = ", ".join(f"TFBridge.{k.julia}" for k in contract.ERROR_KINDS)
    table = "(" + ", ".join(d.julia for d in contract.DTYPES) + ",)"
    code = textwrap.dedent("""
        import ctypes, os
        from bridge.julia import runtime as julia_runtime
        config = julia_runtime.julia_config()
        library = julia_runtime.runtime_library()
        ctypes.CDLL("libgcc_s.so.1", mode=os.RTLD_GLOBAL | os.RTLD_NOW)
        ctypes.CDLL(config.libjulia, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
        rt = ctypes.CDLL(str(library))
        err = ctypes.create_string_buffer(4096)
        if rt.tfjl_init(config.bindir.encode(), config.image.encode(), None, err, 4096):
            raise SystemExit("tfjl_init: " + err.value.decode())
        out, why = ctypes.c_char_p(), ctypes.c_char_p()
        query = b"(TFBridge.DTYPES, TFBridge.DTYPES === TABLE, CONSTANTS, TFBridge.ENTRY_PARAMETER_TYPES)"
        if rt.tfjl_eval(query, ctypes.byref(out), ctypes.byref(why)):
            raise SystemExit("tfjl_eval: " + why.value.decode())
        print(out.value.decode())
        """).replace("CONSTANTS", constants).replace("TABLE", table)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFBRIDGE_JULIA_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kinds = ", ".join(str(k.value) for k in contract.ERROR_KINDS)
    # TFBridge.DTYPES is the table's types (printed as Julia prints them: Complex{Float64}).
    assert re.match(rf"\(\([^()]*\), true, {kinds}, \(Ptr{{Ptr{{Nothing}}}}, Ptr{{Int64}}, Ptr{{Float64}}\)\)",
                    proc.stdout.strip()), proc.stdout


# ---------------------------------------------------------------- (d) adding a dtype is one row

_UINT8_ROW = '''    DType("UInt8", {code}, "uint8", (), "uint8", "uint8_t", "UInt8"),
'''

_UINT8_OP = '''
import numpy as np
import bridge
from bridge import customop
from bridge.julia import contract as julia_contract

assert julia_contract.by_spec("uint8").code == {code}
ops = customop.load("ops/bytes")
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.uint8, [None], name="x")
    s = bridge.placeholder(bridge.float64, [None], name="s")
    y = ops.bytes(x, s)
xv, sv = np.array([1, 2, 250], np.uint8), np.array([3.0, 0.0, 5.0])
for config in (None, bridge.SessionConfig(julia_thread=True), bridge.SessionConfig(inline_small_graphs=0)):
    with bridge.Session(g, config=config) as sess:
        out = sess.run(y, {{x: xv, s: sv}})
    assert out.dtype == np.uint8 and out.tolist() == [4, 2, 255], out
assert bridge.julia.entry_calls() == 3  # each run took the op's compiled entry
assert str(bridge.julia.call("eltype", np.zeros(2, np.uint8))) == "UInt8"
print("uint8 op ok")
'''


def _tree_with_row(tmp_path: Path, row: str, drop: tuple[str, ...] = ()) -> tuple[Path, dict]:
    """A copy of the package whose DTYPES lacks the rows of ``drop`` (tfjl::DType
    names) and ends with ``row``, after `make contract`; and the environment to run it."""
    tree = tmp_path / "tree"
    for folder in ("bridge", "kernels_cpp", "julia", "templates"):
        shutil.copytree(REPO / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    table = tree / "bridge" / "julia" / "contract.py"
    text = table.read_text()
    for name in drop:  # a row runs from its `    DType("Name"` line to the next row or the table's end
        start = text.index(f'    DType("{name}", ')
        end = min(i for i in (text.find('\n    DType("', start + 1), text.find("\n)\n", start)) if i >= 0)
        text = text[:start] + text[end + 1:]
    end = text.index(")\n\n\n@dataclass(frozen=True)\nclass ErrorKind")  # the end of DTYPES
    table.write_text(text[:end] + row + text[end:])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFBRIDGE_JULIA_")}
    # A fresh cache builds the runtime of the copy's contract.  Not a precompiled
    # header: one op's kernel compiles faster from the headers than the header
    # builds (about 25 s of CPU less per test), and a header that failed to build
    # would only be skipped, so it proves nothing about the new row.
    env.update(PYTHONPATH=str(tree), TFBRIDGE_CACHE_DIR=str(tmp_path / "cache"), TFBRIDGE_PCH="0")
    regenerate = subprocess.run([sys.executable, "-m", "bridge.julia.contract"], cwd=tree, env=env,
                                capture_output=True, text=True, timeout=120)
    assert regenerate.returncode == 0, regenerate.stderr
    return tree, env


def _run_op(tmp_path: Path, env: dict, name: str, spec: str, source: str, script: str) -> None:
    op = tmp_path / "work" / "ops" / name
    op.mkdir(parents=True)
    (op / "custom_op.txt").write_text(spec)
    (op / f"{name}.jl").write_text(source)
    run = subprocess.run([sys.executable, "-c", script], cwd=op.parent.parent, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert run.stdout.strip().endswith("op ok")


def test_a_new_dtype_is_one_row_of_the_table(tmp_path):
    """What CONTRACT.md promises, done: a copy of the package gets a uint8 row
    in DTYPES and `make contract`, nothing else, and a Julia op taking and
    returning uint8 builds and runs in every scheduling mode, through its
    compiled entry (runtime, kernel, entries, TFBridge and bridge.julia all
    following the table)."""
    from support.build import toolchain_missing
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    tree, env = _tree_with_row(tmp_path, _UINT8_ROW.format(code=len(contract.DTYPES)))
    assert "DT_UINT8" in (tree / "kernels_cpp" / "include" / "tfjl" / "contract.h").read_text()
    _run_op(tmp_path, env, "bytes", "Bytes\nuint8 x(n)\ndouble s(n)\nuint8 y(n) -> output\n",
            "bytes(y, x, s) = (y .= x .+ UInt8.(round.(s)); nothing)\n", _UINT8_OP.format(code=len(contract.DTYPES)))


_COMPLEX128_ROW = '''    DType("ComplexF64", {code}, "complex128", (), "complex128", "std::complex<double>", "ComplexF64",
          includes=("<complex>",)),
'''

_COMPLEX128_OP = '''
import numpy as np
import bridge
from bridge import customop
from bridge.julia import contract as julia_contract

assert julia_contract.by_spec("complex128").code == {code}
assert "complex64" not in julia_contract.spec_types()  # the copy has only the row added back
ops = customop.load("ops/csq")
g = bridge.Graph()
with g.as_default():
    z = bridge.placeholder(bridge.complex128, [None], name="z")
    s = bridge.placeholder(bridge.float64, [None], name="s")
    y = ops.csq(z, s)
    gy = bridge.placeholder(bridge.complex128, [None], name="gy")
    gz, gs = bridge.gradients(y, [z, s], grad_ys=gy)
rng = np.random.default_rng(0)
zv, sv = rng.standard_normal(4) + 1j * rng.standard_normal(4), rng.standard_normal(4)
gyv = rng.standard_normal(4) + 1j * rng.standard_normal(4)
for config in (None, bridge.SessionConfig(julia_thread=True), bridge.SessionConfig(inline_small_graphs=0)):
    with bridge.Session(g, config=config) as sess:
        out, dz, ds = sess.run([y, gz, gs], {{z: zv, s: sv, gy: gyv}})
    assert out.dtype == np.complex128 and dz.dtype == np.complex128 and ds.dtype == np.float64
    np.testing.assert_allclose(out, zv ** 2 + sv, rtol=1e-15)
    np.testing.assert_allclose(dz, gyv * np.conj(2 * zv), rtol=1e-15)  # TF's convention
    np.testing.assert_allclose(ds, gyv.real, rtol=1e-15)
assert bridge.julia.entry_calls() == 6  # each run took the compiled entries of Csq and CsqGrad
assert str(bridge.julia.call("eltype", np.zeros(2, np.complex128))) == bridge.julia.eval("string(ComplexF64)")
print("complex128 op ok")
'''


def test_complex128_is_one_row_of_the_table(tmp_path):
    """A complex dtype is one row too: a copy of the package without the
    complex rows gets the complex128 row back, `make contract`, nothing else,
    and a complex128 op with its gradient (TF's convention: grad_z = grad_y *
    conj(f'(z))) builds and runs in every scheduling mode through its
    compiled entries."""
    from support.build import toolchain_missing
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    kept = [d for d in contract.DTYPES if d.kind != "complex"]
    assert [d.code for d in kept] == list(range(len(kept)))  # the complex rows are the table's last
    tree, env = _tree_with_row(tmp_path, _COMPLEX128_ROW.format(code=len(kept)), drop=("ComplexF32", "ComplexF64"))
    header = (tree / "kernels_cpp" / "include" / "tfjl" / "contract.h").read_text()
    assert "DT_COMPLEX128" in header and "DT_COMPLEX64" not in header and "#include <complex>" in header
    _run_op(tmp_path, env, "csq", "Csq\ncomplex128 z(n)\ndouble s(n)\ncomplex128 y(n) -> output\n",
            "csq(y, z, s) = (y .= z .^ 2 .+ s; nothing)\n"
            "csq_grad(grad_z, grad_s, grad_y, y, z, s) = (grad_z .= grad_y .* conj.(2 .* z); "
            "grad_s .= real.(grad_y); nothing)\n", _COMPLEX128_OP.format(code=len(kept)))
