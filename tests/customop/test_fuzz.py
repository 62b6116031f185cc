"""Fuzzing (issue 12): no crash and no silent corruption, whatever the user
feeds or writes in a spec.

Each property of tests/fuzz/fuzz_feeds.py (Session.run feeds, bridge.Tensor),
tests/fuzz/fuzz_julia.py (feeds of a Julia op, in every scheduling mode) and
tests/fuzz/fuzz_spec.py (custom_op.txt parsing and code generation) runs
in a child process with a time limit, so that a crash (a segfault, an abort
from glibc's heap checks) fails that test, with the example it died on,
instead of killing the suite.

TFBRIDGE_FUZZ_EXAMPLES sets the examples per property (default 2000, the
bounded run of `make test`; `make fuzz` runs 20000).  TFBRIDGE_FUZZ_SEED:
unset, the run is derandomized (the same examples every time); "random", a
new seed per run (printed, with the command that reproduces a failure); a
number, that seed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.build import spec_error
from support import TESTS

FUZZ_DIR = TESTS / "fuzz"
EXAMPLES = int(os.environ.get("TFBRIDGE_FUZZ_EXAMPLES", "2000"))
SEED = os.environ.get("TFBRIDGE_FUZZ_SEED", "")
SMOKE_EXAMPLES = 40

PROPERTIES = [
    ("fuzz_spec.py", "tokens"), ("fuzz_spec.py", "text"), ("fuzz_spec.py", "file"),
    ("fuzz_feeds.py", "session"), ("fuzz_feeds.py", "tensor"), ("fuzz_feeds.py", "inferred"),
    ("fuzz_feeds.py", "static_shape"), ("fuzz_julia.py", "ops"),
]

# glibc's heap checks turn a corrupted heap into an abort at the next malloc
# or free, where it happened, instead of a crash much later or none at all.
_MALLOC_DEBUG = next((p for p in ("/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
                                  "/usr/lib/aarch64-linux-gnu/libc_malloc_debug.so.0",
                                  "/lib64/libc_malloc_debug.so.0") if os.path.exists(p)), None)


def _child_env(trace: Path) -> dict:
    env = dict(os.environ)
    env.update(TFBRIDGE_FUZZ_TRACE=str(trace), PYTHONFAULTHANDLER="1", TF_CPP_MIN_LOG_LEVEL="3",
               MALLOC_CHECK_="3", MALLOC_PERTURB_="165")
    if _MALLOC_DEBUG and os.environ.get("TFBRIDGE_FUZZ_MALLOC_DEBUG", "1") != "0":
        env["LD_PRELOAD"] = " ".join(filter(None, [env.get("LD_PRELOAD"), _MALLOC_DEBUG]))
    return env


def _seed_args() -> list[str]:
    if not SEED:
        return ["--derandomize"]
    if SEED == "random":
        return []
    return ["--seed", SEED]


def run_fuzzer(script: str, properties: list[str], examples: int, tmp_path: Path) -> None:
    trace = tmp_path / "example-in-flight.txt"
    cmd = [sys.executable, str(FUZZ_DIR / script), "--examples", str(examples), *_seed_args()]
    for prop in properties:
        cmd += ["--property", prop]
    # Generous: ~10 ms an example here, plus start-up, plus shrinking a failure.
    timeout = 180 + examples * 0.1 * len(properties)
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=_child_env(trace), capture_output=True, text=True,
                              errors="backslashreplace", timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"{script} {properties} did not finish in {timeout:.0f} s (a hang?).\n"
                    f"Example in flight:\n{_read(trace)}\n--- output ---\n{_tail(out)}", pytrace=False)
    output = proc.stdout + ("\n--- stderr ---\n" + proc.stderr if proc.stderr.strip() else "")
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        pytest.fail(f"{script} {properties}: the process died ({name}) on this example:\n{_read(trace)}\n"
                    f"--- output ---\n{_tail(output)}", pytrace=False)
    if proc.returncode != 0:
        pytest.fail(f"{script} {properties} found a counterexample (exit {proc.returncode}); "
                    f"command: {' '.join(cmd)}\n{_tail(output)}", pytrace=False)
    print(proc.stdout)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="backslashreplace")[:20000]
    except OSError:
        return "(no example recorded)"


def _tail(text: str, limit: int = 30000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


@pytest.mark.slow
@pytest.mark.parametrize("script, prop", PROPERTIES, ids=[f"{s[5:-3]}-{p}" for s, p in PROPERTIES])
def test_fuzz(script, prop, tmp_path):
    """The bounded run: TFBRIDGE_FUZZ_EXAMPLES examples of one property."""
    run_fuzzer(script, [prop], EXAMPLES, tmp_path)


@pytest.mark.parametrize("script", ["fuzz_spec.py", "fuzz_feeds.py", "fuzz_julia.py"])
def test_fuzz_smoke(script, tmp_path):
    """A few examples of every property, so that `make test-quick` keeps the fuzzers working."""
    props = [p for s, p in PROPERTIES if s == script and p != "tokens"]
    run_fuzzer(script, props, SMOKE_EXAMPLES, tmp_path)


# ------------------------------------------------------------------ an extreme but valid spec

# At the parser's limits (bridge/customop/spec.py: MAX_OP_NAME, MAX_NAME,
# MAX_EXPR_TOKENS, MAX_EXPR_DEPTH, int64 sizes, 32-bit float defaults), with a
# byte-order mark, CRLF line ends and many arguments: what parses must also
# generate C++ and Julia that compile.  The fuzzers cannot compile (too slow);
# this spec does, once (about 40 s: TensorFlow's headers).
def _extreme_spec() -> str:
    chain = "+".join(["n", "m"] * 50)[:-2]  # 99 names and 98 operators
    nested = "(" * 32 + "n+1" + ")" * 32
    lines = [
        "O" + "p" * 127,
        "double x(n)",
        f"double a{'b' * 127}(n, m)",
        "int64 big(9223372036854775807, 0)",
        "float r8(1, 1, 1, 1, 1, 1, 1, 1)",
        *[f"double x{i}(n{i % 5}, ?)" for i in range(40)],
        f"double y({chain}) -> output",
        f"double z({nested}, n*m*n*m) -> output",
        "float w(n//(m-1), (n+m)//2, ((n)) - 0, n0*n4) -> output",
        *[f"float y{i}(n{i % 5}) -> output" for i in range(10)],
        "string s(?) -> output",
        "@attr double amax = 3.4028234663852886e38",
        "@attr float amin = -1.1754943508222875e-38",
        "@attr int64 kmin = -9223372036854775808",
        "@attr int64 kmax = 9223372036854775807",
        "@attr string text = \" !#%&'()*+,-./09:;<=>?@AZ[]^_`az{|}~\"",
        "@attr bool b = false",
        f"@forward {'f' * 127}!",
        "@backward g!",
    ]
    return "\ufeff" + "\r\n".join(lines) + "\r\n"


@pytest.mark.slow
def test_extreme_valid_spec_compiles(tmp_path):
    import shutil

    from bridge.customop import codegen, parse, toolchain

    spec = parse(_extreme_spec().encode("utf-8"), str(tmp_path / "custom_op.txt"))
    compile(codegen.gradtest_script(spec), "gradtest.py", "exec")
    # The Julia files parse (without running them: the stub's functions raise by design).
    julia = shutil.which(os.environ.get("TFBRIDGE_JULIA") or "julia")
    if julia:
        for label, source in [("stub", codegen.julia_stub(spec)), ("entries", codegen.entries_source(spec) or "")]:
            path = tmp_path / f"{label}.jl"
            path.write_text(source)
            check = ("let src = read(ARGS[1], String), pos = 1; "
                     "while pos <= ncodeunits(src); ex, pos = Meta.parse(src, pos); "
                     "if ex isa Expr && ex.head in (:error, :incomplete); println(ex); exit(1); end; end; end")
            proc = subprocess.run([julia, "--startup-file=no", "-e", check, str(path)],
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{label}.jl does not parse: {proc.stdout}{proc.stderr}"
    try:
        tf, jl = toolchain.tensorflow(), toolchain.julia()
    except toolchain.ToolchainError as exc:
        pytest.skip(f"cannot compile custom ops: {exc}")
    kernel = tmp_path / f"{spec.name}.cc"
    kernel.write_text(codegen.kernel_source(spec))
    compiler = shutil.which("c++") or shutil.which("g++")
    # Errors fail; warnings are shown (-Wall -Wextra) but allowed.
    flags = ["-std=c++17", "-fsyntax-only", "-Wall", "-Wextra",
             *(f"-D{d}" for d in tf.definitions), "-isystem", str(tf.include_dir),
             *(f"-I{p}" for p in jl.include_dirs)]
    proc = subprocess.run([compiler, *flags, str(kernel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-20000:]
    print(proc.stderr[-5000:])


# ------------------------------------------------------------------ what the spec fuzzer found

# Each of these once escaped parse() as another exception (RecursionError,
# ValueError, ZeroDivisionError, UnicodeDecodeError, TypeError) or parsed into
# a spec whose generated code would not build; now each is a SpecError naming
# the line and what was expected.
_HEAD = "Op\ndouble x(n)\ndouble y(n) -> output\n"
SPEC_REGRESSIONS = [
    ("Op\ndouble x(" + "(" * 2000 + "1" + ")" * 2000 + ")\ndouble y() -> output\n", 2, "expression too long"),
    ("Op\ndouble x(" + "(" * 33 + "n" + ")" * 33 + ")\ndouble y() -> output\n", 2, "nested more than 32 deep"),
    ("Op\ndouble x(n)\ndouble y(" + "+".join(["n"] * 5000) + ") -> output\n", 3, "expression too long"),
    ("Op\ndouble x(" + "9" * 5000 + ")\ndouble y() -> output\n", 2, "does not fit in 64 bits"),
    ("Op\ndouble x(1180591620717411303424)\ndouble y() -> output\n", 2, "does not fit in 64 bits"),
    ("Op\ndouble x(99999999999*99999999999)\ndouble y() -> output\n", 2, "does not fit in 64 bits"),
    (_HEAD + "double z(n*99999999999999999999) -> output\n", 4, "does not fit in 64 bits"),
    ("Op\ndouble x(4//(1-1))\ndouble y() -> output\n", 2, "division by zero"),
    (_HEAD + "double z(n//(2-2)) -> output\n", 4, "division by zero"),
    (_HEAD + "@attr int64 k = " + "1" * 5000 + "\n", 4, "an integer that fits in 64 bits"),
    (_HEAD + "@attr double a = 1e999\n", 4, "a number a double can hold"),
    (_HEAD + "@attr float a = 1e39\n", 4, "32-bit float attributes"),
    (_HEAD + "@attr float a = 1e-50\n", 4, "32-bit float attributes"),
    (_HEAD + "@attr string s = \"$(run(`true`))\"\n", 4, "without \", \\ or $"),
    (_HEAD + "@forward end\n", 4, "not a valid Julia function name"),
    (_HEAD + "@backward _\n", 4, "not a valid Julia function name"),
    ("O" + "p" * 300 + "\ndouble x()\ndouble y() -> output\n", 1, "at most 128"),
    ("Op\ndouble " + "x" * 300 + "()\ndouble y() -> output\n", 2, "at most 128"),
    ("Op\ndouble x(\u0663)\ndouble y() -> output\n", 2, "unknown syntax at '\u0663'"),
    ("Op\ndouble x()\x0bdouble z()\ndouble y() -> output\n", 2, "unexpected 'double z()'"),
    ("Op\ndouble x()\ndouble y() -> output\n# \ud800\n", 4, "lone surrogate"),
    ("Op\ndouble x()\x00\ndouble y() -> output\n", 2, "unexpected '\\x00'"),
    (b"Op\n# caf\xe9\ndouble x()\ndouble y() -> output\n", 2, "not UTF-8 text: bytes e9 at column 6"),
    (b"Op\ndouble x(\xff)\ndouble y() -> output\n", 2, "not UTF-8 text: bytes ff at column 10"),
]


@pytest.mark.parametrize("text, line, fragment", SPEC_REGRESSIONS,
                         ids=[f"case{i}" for i in range(len(SPEC_REGRESSIONS))])
def test_spec_regressions(text, line, fragment):
    message = spec_error(text, line, fragment)
    assert len(message) < 600 and message.isprintable(), message


@pytest.mark.parametrize("data", [
    "Op\r\ndouble x()\r\ndouble y() -> output\r\n".encode("utf-8"),
    "\ufeffOp\ndouble x()\ndouble y() -> output\n".encode("utf-8"),
    "Op\r\n# \u00e9\r\ndouble x()\r\ndouble y() -> output\r\n".encode("utf-16"),
    "Op\n# \u00e9\ndouble x()\ndouble y() -> output\n".encode("utf-32"),
], ids=["crlf", "utf8-bom", "utf16", "utf32"])
def test_spec_files_in_other_encodings(data, tmp_path):
    from bridge.customop import parse_file

    path = tmp_path / "custom_op.txt"
    path.write_bytes(data)
    spec = parse_file(path)
    assert spec.name == "Op" and [a.name for a in spec.inputs + spec.outputs] == ["x", "y"]
    assert not spec.source.startswith("\ufeff")


def test_spec_file_errors_are_spec_errors(tmp_path):
    from bridge.customop import SpecError, parse_file

    with pytest.raises(SpecError, match=r":1: is a folder: expected the spec file itself"):
        parse_file(tmp_path)
