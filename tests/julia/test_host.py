"""bridge.julia: Julia inside the Python process, through the tfjl runtime.

Real Julia, real TensorFlow libraries, no mocks.  Julia can start only once
per process, so what needs a fresh process (load order, SIGINT, concurrent
init) runs in a subprocess.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from bridge import julia
from bridge.julia import runtime as julia_runtime
from support.threads import run_threads
from support import REPO


@pytest.fixture(scope="module", autouse=True)
def started():
    julia.init()
    yield


def run_python(code: str, timeout: float = 120, **env_vars: str) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (the same venv and cache), failing with its output."""
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_vars)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


# ---------------------------------------------------------------- eval

@pytest.mark.parametrize("code, expected", [
    ("nothing", None),
    ("1 + 1", 2),
    ("Int32(7)", 7),
    ("UInt8(255)", 255),
    ("-2^62", -2**62),
    ("big(2)^70", 2**70),
    ("true", True),
    ("1 == 2", False),
    ("1.5", 1.5),
    ("Float32(0.25)", 0.25),
    ("1/0", float("inf")),
    ('"héllo"', "héllo"),
    ('SubString("abcdef", 2, 3)', "bc"),
    ('x = 3\ny = 4\nx * y', 12),
])
def test_eval_scalars(code, expected):
    value = julia.eval(code)
    assert value == expected and type(value) is type(expected)


def test_eval_arrays_are_numpy_copies_in_tf_index_order():
    m = julia.eval("[1 2 3; 4 5 6]")
    assert m.dtype == np.int64 and m.shape == (2, 3)
    np.testing.assert_array_equal(m, [[1, 2, 3], [4, 5, 6]])
    t = julia.eval("reshape(collect(1.0:24.0), 2, 3, 4)")
    assert t.shape == (2, 3, 4) and t.dtype == np.float64
    # Julia's A[i,j,k] (1-based) is numpy's t[i-1,j-1,k-1].
    assert t[1, 2, 3] == julia.eval("reshape(collect(1.0:24.0), 2, 3, 4)[2, 3, 4]")
    assert julia.eval("fill(2.5)").shape == ()
    assert julia.eval("fill(2.5)")[()] == 2.5
    np.testing.assert_array_equal(julia.eval("Float32[1, 2]"), np.array([1, 2], np.float32))
    assert julia.eval("Float32[1, 2]").dtype == np.float32
    np.testing.assert_array_equal(julia.eval("[true, false]"), [True, False])
    np.testing.assert_array_equal(julia.eval("1:4"), [1, 2, 3, 4])  # any AbstractArray
    np.testing.assert_array_equal(julia.eval("transpose([1 2; 3 4])"), [[1, 3], [2, 4]])
    assert julia.eval("zeros(0, 3)").shape == (0, 3)
    m.flags.writeable = True
    m[0, 0] = 100  # a copy: Julia's array is unaffected
    assert julia.eval("[1 2 3; 4 5 6]")[0, 0] == 1


def test_eval_other_values_are_julia_objects():
    sym = julia.eval(":abc")
    assert isinstance(sym, julia.JuliaObject) and sym.repr == ":abc"
    assert julia.eval('["a", "b"]').repr == '["a", "b"]'
    assert julia.eval("(1, 2.0)").repr == "(1, 2.0)"
    assert julia.eval("sin").repr == "sin"
    assert repr(julia.eval("'x'")) == "JuliaObject('x')"


def test_eval_defines_things_in_main():
    julia.eval("struct HostPoint; x::Int; y::Int; end")
    assert julia.eval("HostPoint(1, 2)").repr == "HostPoint(1, 2)"
    julia.eval("host_counter = Ref(0)")
    for _ in range(3):
        julia.eval("host_counter[] += 1")
    assert julia.eval("host_counter[]") == 3


# ---------------------------------------------------------------- errors

def test_error_has_julia_message_and_backtrace_then_next_call_works():
    julia.eval("host_fails(x) = error(\"bad value: $x\")")
    with pytest.raises(julia.JuliaError) as info:
        julia.eval("host_fails(42)")
    text = str(info.value)
    assert text.startswith("ErrorException: bad value: 42")
    assert "Stacktrace:" in text and "host_fails" in text
    assert isinstance(info.value, RuntimeError) and info.value.kind == 3
    assert julia.eval("40 + 2") == 42


def test_error_kinds():
    with pytest.raises(julia.JuliaError) as info:
        julia.call("no_such_function_anywhere", 1.0)
    assert info.value.kind == 2 and "no_such_function_anywhere" in str(info.value)
    with pytest.raises(julia.JuliaError) as info:
        julia.call("sin", "not a number")  # MethodError on the function called
    assert info.value.kind == 1 and "MethodError: no method matching sin(::String)" in str(info.value)
    with pytest.raises(julia.JuliaError) as info:
        julia.eval("throw(ArgumentError(\"nope\"))")
    assert info.value.kind == 1 and "ArgumentError: nope" in str(info.value)
    with pytest.raises(julia.JuliaError) as info:
        julia.eval("this is not julia")
    assert "syntax" in str(info.value).lower()
    assert julia.eval("1") == 1


def test_error_in_show_does_not_escape():
    julia.eval("""
        struct HostUnshowable end
        Base.show(io::IO, ::HostUnshowable) = error("no show")
        struct HostBadError <: Exception end
        Base.showerror(io::IO, ::HostBadError) = error("no showerror")
    """)
    with pytest.raises(julia.JuliaError) as info:
        julia.eval("HostUnshowable()")  # repr throws while converting the result
    assert "no show" in str(info.value)
    with pytest.raises(julia.JuliaError) as info:
        julia.eval("throw(HostBadError())")
    assert "HostBadError" in str(info.value)
    assert julia.eval("2") == 2


# ---------------------------------------------------------------- include

def test_include_defines_functions(tmp_path):
    source = tmp_path / "host_included.jl"
    source.write_text("host_included_twice(x) = 2x\nconst HOST_INCLUDED = 1\n")
    assert julia.include(source) is None
    assert julia.call("host_included_twice", 21) == 42


def test_include_errors_name_the_file(tmp_path):
    broken = tmp_path / "host_broken.jl"
    broken.write_text("x = 1\nerror(\"inside the file\")\n")
    with pytest.raises(julia.JuliaError) as info:
        julia.include(broken)
    assert str(broken) in str(info.value) and "inside the file" in str(info.value)
    assert f"{broken}:2" in str(info.value)
    with pytest.raises(FileNotFoundError) as missing:
        julia.include(tmp_path / "does_not_exist.jl")
    assert str(missing.value) == f"bridge.julia.include: {tmp_path / 'does_not_exist.jl'} does not exist"


def test_a_relative_path_is_relative_to_the_current_directory(tmp_path, monkeypatch):
    """As step 7 of docs/getting-started/first-op.md includes ops/sinc/sinc.jl: from the current directory, the file's
    own include lines from its folder (Julia sees the absolute path)."""
    folder = tmp_path / "ops" / "rel"
    folder.mkdir(parents=True)
    (folder / "rel.jl").write_text('include("part.jl")\nhost_relative_thrice(x) = 3 * host_relative_part(x)\n')
    (folder / "part.jl").write_text("host_relative_part(x) = x + 1\n")
    monkeypatch.chdir(tmp_path)
    julia.include("ops/rel/rel.jl")
    assert julia.call("host_relative_thrice", 4) == 15
    with pytest.raises(FileNotFoundError) as missing:
        julia.include(Path("ops", "nothing.jl"))
    here = Path.cwd()  # tmp_path, its links resolved
    assert str(missing.value) == (f"bridge.julia.include: {here / 'ops' / 'nothing.jl'} ('ops/nothing.jl' "
                                  f"from {here}) does not exist")


# ---------------------------------------------------------------- call

def test_call_with_arrays_is_zero_copy_in_tf_index_order():
    julia.eval("""
        function host_fill_index!(A)
            for I in CartesianIndices(A)
                A[I] = sum(10^(ndims(A) - k) * I[k] for k in 1:ndims(A))
            end
            return nothing
        end
    """)
    m = np.zeros((2, 3))
    assert julia.call("host_fill_index!", m) is None
    np.testing.assert_array_equal(m, [[11, 12, 13], [21, 22, 23]])
    t = np.zeros((2, 3, 4), np.int32)
    julia.call("host_fill_index!", t)
    assert t[1, 2, 3] == 234 and t[0, 0, 0] == 111
    v = np.zeros(3, np.float32)
    julia.call("host_fill_index!", v)
    np.testing.assert_array_equal(v, [1, 2, 3])


def test_call_reads_arrays_and_scalars():
    assert julia.call("sum", np.arange(10.0)) == 45.0
    assert julia.call("size", np.zeros((2, 5))).repr == "(2, 5)"
    assert julia.call("eltype", np.zeros(2, np.int32)).repr == "Int32"
    assert julia.call("eltype", np.zeros(2, np.bool_)).repr == "Bool"
    assert julia.call("getindex", np.array([[1.0, 2.0], [3.0, 4.0]]), 1, 2) == 2.0
    assert julia.call("getindex", np.array(7.5)) == 7.5  # rank 0: a 0-dim array
    assert julia.call("string", "a", 1, 2.5, True, np.float32(1.5), np.int32(3), np.int64(4)) == "a12.5true1.534"
    assert julia.call("typeof", np.float32(1)).repr == "Float32"
    assert julia.call("+", 1, 2) == 3
    assert julia.call("Base.Math.sin", 0.0) == 0.0
    np.testing.assert_array_equal(julia.call("reverse", np.array([1, 2, 3])), [3, 2, 1])


def test_call_copies_what_cannot_be_shared():
    julia.eval("host_bump!(A) = (A .+= 1; sum(A))")
    fortran = np.asfortranarray(np.zeros((2, 2)))
    assert julia.call("host_bump!", fortran) == 4.0
    assert fortran.sum() == 0  # not C-ordered: Julia got a copy
    readonly = np.zeros(3)
    readonly.flags.writeable = False
    assert julia.call("host_bump!", readonly) == 3.0
    assert readonly.sum() == 0
    assert julia.call("length", np.zeros((0, 4))) == 0


def test_call_rejects_unsupported_arguments():
    with pytest.raises(TypeError, match="argument 1 has dtype uint16"):
        julia.call("sum", np.zeros(2, np.uint16))
    # complex arrays cross (a Julia-op dtype); a complex scalar comes back as a JuliaObject
    assert "4.0 + 1.0im" in repr(julia.call("sum", np.array([1 + 2j, 3 - 1j])))
    with pytest.raises(TypeError, match="argument 2 is a dict"):
        julia.call("println", 1, {})
    with pytest.raises(OverflowError):
        julia.call("identity", 2**70)


# ---------------------------------------------------------------- threads

def test_calls_from_8_python_threads():
    julia.eval("host_scale!(y, x, a) = (y .= a .* x; sum(y))")

    def worker(k: int) -> None:
        x = np.arange(50.0) + k
        y = np.zeros_like(x)
        for i in range(150):
            total = julia.call("host_scale!", y, x, float(i))
            assert total == pytest.approx(i * x.sum(), rel=0, abs=0)
            np.testing.assert_array_equal(y, i * x)
            assert julia.eval(f"{k} * 1000 + {i}") == k * 1000 + i

    run_threads(worker, 8)


def test_a_caller_holding_the_gil_releases_it_while_julia_works():
    """Through ctypes.PyDLL the GIL stays held during the call: the runtime must drop it while waiting."""
    runtime = ctypes.PyDLL(str(julia_runtime.runtime_library()))  # the copy already loaded
    runtime.tfjl_eval.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    runtime.tfjl_free.argtypes = [ctypes.c_void_p]
    ticks = 0
    stop = threading.Event()

    def count() -> None:  # runs only while this thread can get the GIL
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    repr_text, err = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        before = ticks
        status = runtime.tfjl_eval(b"Libc.systemsleep(0.5); 7", ctypes.byref(repr_text), ctypes.byref(err))
        during = ticks - before
    finally:
        stop.set()
        counter.join()
    assert status == 0 and ctypes.string_at(repr_text.value) == b"7"
    runtime.tfjl_free(repr_text)
    assert during > 1000, "the Python thread did not run while Julia worked: the GIL was held"


def test_is_initialized_and_init_is_idempotent():
    assert julia.is_initialized()
    julia.init()
    assert julia.is_initialized()
    direct, handed = julia.call_counts()
    assert handed > 0 and direct >= 0


# ---------------------------------------------------------------- whole process

def test_process_loads_tf_then_julia_and_runs_both():
    proc = run_python("""
        import signal, sys, threading
        import numpy as np
        import bridge
        from bridge import julia
        from bridge.framework import _lib

        assert not julia.is_initialized()
        errors = []
        def start():
            try:
                julia.init()  # eight threads race to start Julia once
            except BaseException as exc:
                errors.append(exc)
        threads = [threading.Thread(target=start) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert not errors, errors
        assert julia.is_initialized() and _lib.is_loaded()
        assert "tensorflow" not in sys.modules

        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder(bridge.float64, shape=[3], name="x")
            y = bridge.ops.square(x)
        with bridge.Session(g) as s:
            out = s.run(y, {x: np.array([1.0, 2.0, 3.0])})
        assert list(out) == [1.0, 4.0, 9.0], out
        assert julia.eval("sum(abs2, [1.0, 2.0, 3.0])") == 14.0

        # Julia must not have taken Ctrl-C from Python.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        print("done")
    """)
    assert proc.stdout.split() == ["KeyboardInterrupt", "done"]


def test_julia_worker_threads_collect_while_julias_thread_idles():
    """With JULIA_NUM_THREADS=2 a spawned task allocates (so collects) while Python sleeps."""
    proc = run_python("""
        import time
        from bridge import julia
        from bridge.julia import runtime as julia_runtime
        julia.init()
        assert julia.eval("Threads.nthreads()") == 2
        julia.eval("task = Threads.@spawn (for i in 1:10^6; sum(rand(10)); end; time())")
        time.sleep(3)  # Julia's thread waits for work meanwhile
        fetch_start = time.time()
        finished = julia.eval("fetch(task)")
        assert julia.eval("Base.gc_num().pause") > 0
        print("finished before fetch" if finished < fetch_start else "stalled until the fetch")
    """, JULIA_NUM_THREADS="2")
    assert proc.stdout.strip() == "finished before fetch"


def test_cpp_exceptions_still_unwind_in_extensions_imported_after_julia():
    """libjulia's libunwind must not take over _Unwind_*: pybind11 modules
    imported after Julia (matplotlib's ft2font throws and catches internally
    while importing) would otherwise abort the process."""
    code = ("import bridge; bridge.julia.init(); import matplotlib; matplotlib.use('Agg'); "
            "import matplotlib.pyplot as plt; plt.figure(); "
            "print(bridge.julia.eval('try error(\"x\") catch e; 7 end'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("7")
