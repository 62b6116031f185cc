"""Building custom ops with cmake: a real compile, the cache, compiler errors,
the CLI, and (in a child process) loading and running the op."""
from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bridge.julia import buildtools
from bridge import cli
from bridge.customop import BuildError, SpecError, build, cache_key, codegen, init, parse
from bridge.customop import toolchain
from support.build import toolchain_missing
from support import REPO, TESTS

ROOT = REPO
GOLDEN = TESTS / "golden" / "customop"


def _toolchain_missing() -> str:
    missing = toolchain_missing()
    if missing:
        return missing
    if not (ROOT / "kernels_cpp" / "include" / "tfjl" / "kernel.h").is_file():
        return "kernels_cpp/include/tfjl/kernel.h is missing"
    return ""


MISSING = _toolchain_missing()
needs_toolchain = pytest.mark.skipif(bool(MISSING), reason=f"cannot compile custom ops: {MISSING}")


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    """The scaffolded op, built once for the module."""
    if MISSING:
        pytest.skip(f"cannot compile custom ops: {MISSING}")
    directory = tmp_path_factory.mktemp("ops") / "twice"
    init("Twice", directory)
    lines: list[str] = []
    library = build(directory, progress=lines.append)
    return directory, library, lines


def _visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


# ------------------------------------------------------------------ a real build

@needs_toolchain
def test_build_makes_the_library(twice):
    directory, library, lines = twice
    assert library.name == "libTwice.so" and library.is_file()
    spec = parse((directory / "custom_op.txt").read_text(), str(directory / "custom_op.txt"))
    assert library.parent == directory / "build" / cache_key(spec)
    assert (library.parent / "Twice.cc").is_file() and (library.parent / "build.log").is_file()
    assert "building Twice: configuring..." in lines
    assert "building Twice: compiling..." in lines
    assert lines[-1].startswith("building Twice: done in ")
    # Nothing half-built is left beside it (hidden files: the lock and .gitignore).
    assert _visible(library.parent.parent) == [library.parent.name]
    assert (library.parent.parent / ".gitignore").read_text().endswith("*\n")


@needs_toolchain
def test_library_finds_tensorflow_and_the_runtime_by_itself(twice):
    _, library, _ = twice
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True, env=env)
    assert ldd.returncode == 0, ldd.stderr
    assert "not found" not in ldd.stdout, ldd.stdout
    assert "libtensorflow_framework.so.2 => " in ldd.stdout
    assert "libtfjl_runtime.so => " in ldd.stdout


@needs_toolchain
def test_cached_build_is_fast_and_runs_no_cmake(twice, monkeypatch):
    directory, library, _ = twice

    def no_subprocess(*args, **kwargs):
        raise AssertionError("a cached build must not run cmake")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    lines: list[str] = []
    start = time.perf_counter()
    again = build(directory, progress=lines.append)
    elapsed = time.perf_counter() - start
    assert again == library
    assert lines == []
    assert elapsed < 0.5, f"cached build took {elapsed:.2f} s"


@needs_toolchain
def test_compile_error_points_at_the_generated_source(tmp_path, monkeypatch):
    directory = tmp_path / "broken"
    init("Broken", directory)
    real = codegen.kernel_source
    monkeypatch.setattr(codegen, "kernel_source",
                        lambda spec: real(spec) + "\nthis_is_not_cpp = ;\n")
    with pytest.raises(BuildError) as info:
        build(directory, progress=lambda line: None)
    message = str(info.value)
    spec = parse((directory / "custom_op.txt").read_text())
    failed = directory / "build" / f"{cache_key(spec)}.failed"
    assert "building Broken failed while compiling" in message
    assert f"{failed / 'Broken.cc'}:" in message, message
    assert "error:" in message and "this_is_not_cpp" in message
    assert f"full log: {failed / 'build.log'}" in message
    lines = (failed / "Broken.cc").read_text().splitlines()
    line_number = int(message.split(f"{failed / 'Broken.cc'}:")[1].split(":")[0])
    assert "this_is_not_cpp" in lines[line_number - 1]
    # The failed build never looks like a finished one.
    assert _visible(directory / "build") == [failed.name]


@needs_toolchain
def test_golden_kernels_compile(tmp_path):
    """Every golden kernel compiles against TF's headers and tfjl/kernel.h, warning-free."""
    tf = toolchain.tensorflow()
    flags = ["-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
             *(f"-D{d}" for d in tf.definitions), "-isystem", str(tf.include_dir),
             *(f"-I{p}" for p in toolchain.julia().include_dirs)]
    compiler = buildtools.cxx_compiler()

    def compile_one(source: Path) -> tuple[str, subprocess.CompletedProcess]:
        return source.name, subprocess.run([compiler, *flags, str(source)], capture_output=True,
                                           text=True)

    # Two at a time: each compiler takes a few hundred MB and a core.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(compile_one, sorted(GOLDEN.glob("*/*.cc"))))
    assert len(results) >= 5
    failures = {name: proc.stderr for name, proc in results if proc.returncode != 0}
    assert not failures, "\n".join(f"{k}:\n{v}" for k, v in failures.items())


# ------------------------------------------------------------------ no compiler needed

def test_load_parses_the_spec_once(tmp_path, monkeypatch):
    """customop.load goes on with the spec its build parsed (the build itself
    is stubbed here; the load stops at the missing Julia file, before Julia)."""
    import importlib

    from bridge import customop
    from bridge.customop import spec as spec_module

    build_module = importlib.import_module("bridge.customop.build")  # customop.build is the function

    (tmp_path / "custom_op.txt").write_text("Twice\ndouble x(n)\ndouble y(n) -> output\n")
    runs = []
    real_run = spec_module._Parser.run
    monkeypatch.setattr(spec_module._Parser, "run", lambda self: runs.append(self.path) or real_run(self))
    monkeypatch.setattr(build_module, "_build_parsed",
                        lambda directory, spec, progress: directory / "build" / "key" / "libTwice.so")
    with pytest.raises(FileNotFoundError, match="twice.jl not found"):
        customop.load(tmp_path)
    assert runs == [str(tmp_path.resolve() / "custom_op.txt")]


def test_bad_spec_writes_nothing(tmp_path):
    (tmp_path / "custom_op.txt").write_text("Op\ndouble x(?)\n")
    with pytest.raises(SpecError, match=r"custom_op.txt:2: op Op has no output"):
        build(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom_op.txt"]


@pytest.mark.skipif(bool(MISSING), reason=f"no toolchain: {MISSING}")
def test_cache_key_follows_the_spec_text():
    a = parse("Op\ndouble x(?)\ndouble y(?) -> output\n")
    b = parse("Op\ndouble x(?)\ndouble y(?) -> output\n# a comment\n")
    assert cache_key(a) == cache_key(a)
    assert cache_key(a) != cache_key(b)
    assert len(cache_key(a)) == 16


def test_error_excerpt_keeps_errors_and_their_context():
    output = textwrap.dedent("""\
        [ 50%] Building CXX object CMakeFiles/Op.dir/Op.cc.o
        In file included from /x/Op.cc:3:
        /x/Op.cc: In member function 'virtual void OpOp::Compute()':
        /x/Op.cc:42:7: error: 'foo' was not declared in this scope
           42 |   foo();
              |   ^~~
        /x/Op.cc:42:7: note: suggested alternative: 'for'
        /x/Op.cc:50:1: warning: unused variable 'z' [-Wunused-variable]
        make[2]: *** [CMakeFiles/Op.dir/build.make:76: CMakeFiles/Op.dir/Op.cc.o] Error 1
        """)
    excerpt = buildtools.error_excerpt(output)
    assert excerpt.splitlines() == [
        "  /x/Op.cc:42:7: error: 'foo' was not declared in this scope",
        "     42 |   foo();",
        "        |   ^~~",
        "  /x/Op.cc:42:7: note: suggested alternative: 'for'",
    ]
    linker = "/usr/bin/ld: Op.cc.o: in function `f':\nOp.cc:(.text+0x1): undefined reference to `g'\n"
    assert "undefined reference to `g'" in buildtools.error_excerpt(linker)
    assert buildtools.error_excerpt("something odd\nhappened\n") == "  something odd\n  happened"


# ------------------------------------------------------------------ op names TensorFlow has

@pytest.mark.skipif(bool(MISSING), reason=f"no toolchain: {MISSING}")
@pytest.mark.parametrize("name", ["Square", "SparseToDense"])
def test_an_op_name_tensorflow_has_is_refused_before_anything_is_built(tmp_path, name):
    """TensorFlow would ignore the library's registration and keep its own
    op: the spec error names the file, the op-name line and the clash, and
    nothing is generated or compiled."""
    spec_path = tmp_path / "custom_op.txt"
    spec_path.write_text(f"# An op name TensorFlow already has.\n\n{name}\ndouble x(n)\ndouble y(n) -> output\n")
    with pytest.raises(SpecError) as info:
        build(tmp_path)
    assert str(info.value) == (
        f"{spec_path}:3: op name {name} cannot be used: TensorFlow already has an op named {name} (built in), "
        "which would stay in place of this library's (its name is taken); rename the op")
    assert _visible(tmp_path) == ["custom_op.txt"]


def test_parsing_an_op_name_tensorflow_has_needs_no_tensorflow():
    """parse() checks only the spec (the fuzzer calls it by the thousand):
    the registry check belongs to the build, and TensorFlow stays unloaded."""
    code = ("import bridge.customop as c\n"
            "spec = c.parse('Square\\ndouble x(n)\\ndouble y(n) -> output\\n')\n"
            "assert spec.name == 'Square' and spec.line == 1\n"
            "print('libtensorflow' in open('/proc/self/maps').read())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"


@pytest.mark.skipif(bool(MISSING), reason=f"no toolchain: {MISSING}")
def test_cli_build_of_an_op_name_tensorflow_has_exits_non_zero(tmp_path):
    (tmp_path / "custom_op.txt").write_text("Square\ndouble x()\ndouble y() -> output\n")
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "customop", "build", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == (
        f"tfbridge: {tmp_path / 'custom_op.txt'}:1: op name Square cannot be used: TensorFlow already has an op "
        "named Square (built in), which would stay in place of this library's (its name is taken); rename the op")
    assert _visible(tmp_path) == ["custom_op.txt"]


RUN_CLASH = """
import importlib, sys, time
from pathlib import Path
from bridge import customop

build_module = importlib.import_module("bridge.customop.build")  # customop.build is the function

first, second, third = map(Path, sys.argv[1:])
module = customop.load(first)     # registers the op type LoadClashGrad
assert customop.load(first) is module  # the same op again: fine
for folder in (second, third, first):
    if folder == first:           # the same folder, its spec changed: a new build it could not load
        (first / "custom_op.txt").write_text("# changed\\n" + (first / "custom_op.txt").read_text())
    started = time.monotonic()
    try:
        customop.load(folder)
        raise SystemExit(f"loaded {folder}, whose op names another loaded library took")
    except customop.SpecError as e:
        print(e)
    assert time.monotonic() - started < 10, "refused after a build"
    builds = sorted(p.name for p in (folder / "build").iterdir()) if (folder / "build").exists() else []
    print(folder.name, "builds:", len([b for b in builds if not b.startswith(".")]))

# build() is not load(): it builds what a new process may load (stopped here before cmake).
def no_compiler(spec, work, report):
    raise RuntimeError("would compile " + spec.name)
build_module._build_in = no_compiler
try:
    raise SystemExit(f"built {customop.build(second)}")
except RuntimeError as e:
    print(e)
"""


@needs_toolchain
def test_load_refuses_an_op_type_another_loaded_library_registered_before_building(tmp_path):
    """An op name (here the gradient op's, then the op's own) that a library
    loaded in this process registered is refused by load() before anything
    is built (it was refused only after a full 30-70 s build), naming both
    folders; so is a changed spec of a folder already loaded.  build() still
    goes ahead: a name of a loaded library is not built into TensorFlow."""
    tmp_path = tmp_path.resolve()
    first, second, third = tmp_path / "first", tmp_path / "second", tmp_path / "third"
    grad_clash = "LoadClashGrad\nint64 x(n)\nint64 y(n) -> output\n"
    for folder, text, julia in [
            (first, grad_clash, "load_clash_grad(y, x) = (y .= x; nothing)\n"),
            (second, "# gradient op: LoadClashGrad\nLoadClash\ndouble x(n)\ndouble y(n) -> output\n",
             "load_clash(y, x) = (y .= x; nothing)\n"),
            (third, grad_clash, "load_clash_grad(y, x) = (y .= x; nothing)\n")]:
        folder.mkdir()
        (folder / "custom_op.txt").write_text(text)
        (folder / (_julia_file(text))).write_text(julia)
    proc = subprocess.run([sys.executable, "-c", RUN_CLASH, str(first), str(second), str(third)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    library = next((first / "build").glob("*/libLoadClashGrad.so")).resolve()
    tail = "and TensorFlow keeps an op's first registration; rename one of the two ops, or load them in separate processes"
    assert proc.stdout.splitlines() == [
        f"{second / 'custom_op.txt'}:2: the op name LoadClash of {second} cannot be used in this process: the op "
        f"folder {first} (loaded from {library}) already registered an op named LoadClashGrad (the name of its "
        f"gradient op, LoadClashGrad, is taken), {tail}",
        "second builds: 0",
        f"{third / 'custom_op.txt'}:1: the op name LoadClashGrad of {third} cannot be used in this process: the op "
        f"folder {first} (loaded from {library}) already registered an op named LoadClashGrad (its name is "
        f"taken), {tail}",
        "third builds: 0",
        f"{first / 'custom_op.txt'}:2: op LoadClashGrad of {first} cannot be loaded again in this process: an "
        f"earlier build of the same folder, {library}, registered LoadClashGrad (its name is taken), and "
        "TensorFlow keeps an op's first registration; load the changed op in a new process",
        "first builds: 1",
        "would compile LoadClash",
    ]


def _julia_file(spec_text: str) -> str:
    return codegen.julia_file_name(parse(spec_text))


# ------------------------------------------------------------------ CLI

def test_cli_init(tmp_path, capsys):
    assert cli.main(["customop", "init", "MyOp", str(tmp_path / "my")]) == 0
    assert (tmp_path / "my" / "custom_op.txt").is_file()
    assert (tmp_path / "my" / "my_op.jl").is_file()
    assert "tfbridge customop build" in capsys.readouterr().out
    assert cli.main(["customop", "init", "MyOp", str(tmp_path / "my")]) == 1
    assert "not overwriting" in capsys.readouterr().err


def test_cli_reports_spec_errors_without_traceback(tmp_path, capsys):
    (tmp_path / "custom_op.txt").write_text("Op\ndouble x(?, ?) -> outptu\n")
    assert cli.main(["customop", "build", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tfbridge: {tmp_path / 'custom_op.txt'}:2: ")
    assert "Traceback" not in err


def test_cli_stub_prints_julia(tmp_path, capsys):
    (tmp_path / "custom_op.txt").write_text("Scale\ndouble x(n)\ndouble y(n) -> output\n")
    assert cli.main(["customop", "stub", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "function scale(y, x)" in out and "function scale_grad(grad_x, grad_y, y, x)" in out


def test_cli_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["customop"])
    assert info.value.code == 2


# ------------------------------------------------------------------ load and run

RUN_OP = """
import sys
import numpy as np
import bridge
from bridge import customop

ops = customop.load(sys.argv[1])
x = bridge.placeholder("double", shape=[None])
y = ops.twice(x)
(dx,) = bridge.gradients([y], [x])
with bridge.Session() as s:
    y_value, dx_value = s.run([y, dx], {x: np.array([1.0, -2.0, 3.5])})
assert np.array_equal(y_value, [2.0, -4.0, 7.0]), y_value
assert np.array_equal(dx_value, [2.0, 2.0, 2.0]), dx_value
print("ok")
"""


@needs_toolchain
def test_load_runs_the_julia_op_and_its_gradient(twice):
    """In a child process: Julia must never share a process with `import tensorflow`."""
    directory, _, _ = twice
    proc = subprocess.run([sys.executable, "-c", RUN_OP, str(directory)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


MIX_SPEC = """\
Mix
double x(n)
double w(m, n)
string label()
@attr double scale = 2.0
double y(m) -> output
int64 positive(?) -> output
string echo(2) -> output
"""

MIX_JULIA = """\
function mix(y, positive, echo, x, w, label, scale)
    y .= scale .* (w * x)
    positive[] = Int64[i - 1 for i in 1:length(y) if y[i] > 0]
    echo[1] = label
    echo[2] = uppercase(label)
    return nothing
end

function mix_grad(grad_x, grad_w, grad_y, y, positive, echo, x, w, label, scale)
    grad_x .+= scale .* (transpose(w) * grad_y)
    grad_w .+= scale .* (grad_y * transpose(x))
    return nothing
end
"""

RUN_MIX = """
import sys
import numpy as np
import bridge
from bridge import customop, errors

ops = customop.load(sys.argv[1])

# Shape inference: named dims flow to the outputs, and a mismatch fails at construction.
y, positive, echo = ops.mix(bridge.placeholder("double", [3]), bridge.placeholder("double", [2, 3]), "a")
assert [list(y.shape), list(positive.shape), list(echo.shape)] == [[2], [None], [2]]
try:
    ops.mix(bridge.placeholder("double", [3]), bridge.placeholder("double", [2, 4]), "a")
    raise SystemExit("shape inference missed n = 3 vs 4")
except errors.InvalidArgumentError as e:
    assert "Dimensions must be equal" in e.message, e.message

x = bridge.placeholder("double", shape=[None])
w = bridge.placeholder("double", shape=[None, None])
y, positive, echo = ops.mix(x, w, "hello", scale=3.0)
xv = np.array([1.0, -2.0, 0.5])
wv = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
with bridge.Session() as s:
    yv, pv, ev = s.run([y, positive, echo], {x: xv, w: wv})
    assert np.array_equal(yv, [3.0, -6.0]), yv
    assert pv.dtype == np.int64 and list(pv) == [0], pv
    assert list(ev) == [b"hello", b"HELLO"], ev
    try:
        s.run(y, {x: xv, w: np.zeros((2, 4))})
        raise SystemExit("the kernel missed n = 3 vs 4")
    except errors.InvalidArgumentError as e:
        assert ("Mix: input 'w' must have shape (m,n) with n = 3 (from input 'x'), "
                "but has shape [2,4]") in e.message, e.message

result = bridge.gradcheck(lambda a, b: ops.mix(a, b, "hi", scale=3.0)[0], [xv, wv])
assert result.passed, str(result)
print("ok")
"""


@needs_toolchain
def test_named_dims_attrs_dynamic_and_string_outputs_end_to_end(tmp_path):
    """A spec using the extensions, built, loaded and run in a child process."""
    (tmp_path / "custom_op.txt").write_text(MIX_SPEC)
    (tmp_path / "mix.jl").write_text(MIX_JULIA)
    proc = subprocess.run([sys.executable, "-c", RUN_MIX, str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


@needs_toolchain
def test_generated_gradtest_script_passes(twice):
    _, library, _ = twice
    proc = subprocess.run([sys.executable, str(library.parent / "gradtest.py")], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    # The scaffold is y = 2x: its gradient is exact, and the report says the op is linear.
    assert "Twice: gradcheck LINEAR" in proc.stdout and "f is linear along v" in proc.stdout


def test_prune_keeps_the_newest_builds_and_drops_leftovers(tmp_path):
    import os
    import time as _time

    from bridge.platform.cache import STALE_SECONDS
    from bridge.customop.build import prune

    root = tmp_path / "build"
    root.mkdir()
    now = _time.time()
    keys = [f"{i:016x}" for i in range(5)]
    for age, key in enumerate(reversed(keys)):  # keys[4] newest ... keys[0] oldest
        (root / key).mkdir()
        (root / f".{key}.lock").write_text("")
        os.utime(root / key, (now - age * 60, now - age * 60))
    (root / f"{keys[2]}.failed").mkdir()                    # an older failed attempt of another key
    (root / f".{keys[4]}.abcd").mkdir()                      # a build running now
    killed = root / f".{keys[1]}.dead"
    killed.mkdir()
    os.utime(killed, (now - 2 * STALE_SECONDS,) * 2)  # left by a build killed long ago
    prune(root, keep=keys[0])
    left = sorted(p.name for p in root.iterdir())
    assert keys[4] in left and keys[3] in left and keys[2] in left  # the three newest
    assert keys[0] in left                                          # the one just built, however old
    assert keys[1] not in left and f".{keys[1]}.lock" not in left
    assert f"{keys[2]}.failed" not in left and f".{keys[1]}.dead" not in left
    assert f".{keys[4]}.abcd" in left                                # not stale: may be in progress


def _closure(*modules: str) -> set[Path]:
    """The bridge modules ``modules`` import, transitively, by the import graph's own reading."""
    from support.imports import import_graph, modules as bridge_modules
    graph, sources = import_graph(), bridge_modules()
    seen, todo = set(), list(modules)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    return {sources[m].resolve() for m in seen}


def _hashed_files(monkeypatch, make_key) -> set[Path]:
    from bridge.platform import cache
    hashed: set[Path] = set()
    real = cache.Key.add_file

    def add_file(self, path, name=None):
        hashed.add(Path(path).resolve())
        return real(self, path, name)
    monkeypatch.setattr(cache.Key, "add_file", add_file)
    make_key()
    return hashed


@pytest.mark.skipif(bool(MISSING), reason=f"no toolchain: {MISSING}")
def test_build_key_reads_every_module_the_generator_imports(monkeypatch):
    """The contract table (bridge/julia/contract.py) shapes the generated kernel: an
    edit there, or in any module codegen imports, must give every op a new build."""
    spec = parse("Probe\ndouble x(n)\ndouble y(n) -> output\n")
    hashed = _hashed_files(monkeypatch, lambda: cache_key(spec))
    repo = Path(codegen.__file__).resolve().parents[2]
    assert repo / "bridge" / "julia" / "contract.py" in hashed
    assert _closure("bridge.customop.codegen") <= hashed
    assert set(codegen.template_files()) <= hashed


@pytest.mark.skipif(bool(MISSING), reason=f"no toolchain: {MISSING}")
def test_build_key_changes_with_any_file_the_generator_reads(monkeypatch):
    spec = parse("Probe\ndouble x(n)\ndouble y(n) -> output\n")
    before = cache_key(spec)
    for path in sorted(_closure("bridge.customop.codegen")) + list(codegen.template_files()):
        real = Path.read_bytes
        monkeypatch.setattr(Path, "read_bytes",
                            lambda self, _p=path, _r=real: _r(self) + (b"\n# edited" if self.resolve() == _p else b""))
        assert cache_key(spec) != before, f"editing {path} leaves the build key unchanged"
        monkeypatch.setattr(Path, "read_bytes", real)


def test_op_module_key_reads_every_module_the_generator_imports(monkeypatch):
    from bridge.ops import opgen
    hashed = _hashed_files(monkeypatch, opgen.generator_fingerprint)
    assert _closure("bridge.ops.opgen", "bridge.ops.op_helpers") <= hashed
    templates = Path(opgen.__file__).resolve().parents[2] / "templates"
    assert {templates / "python_op.py.j2", templates / "python_ops_module.py.j2"} <= hashed
