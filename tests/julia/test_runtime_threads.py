"""The tfjl runtime under TensorFlow's threads.

Hand-written Julia ops (tests/data/runtime_kernel/julia_ops.cc, over
tfjl/kernel.h) are compiled against TF and the runtime, loaded with
TF_LoadLibrary and run by real sessions: TF's pool threads hand their Julia
calls to Julia's thread, concurrently and under GC pressure; inline sessions
run them directly on Julia's thread.  Every run has a timeout, so a deadlock
fails the test instead of hanging it.
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
from bridge.framework import _lib
from bridge import errors, julia
from bridge.julia import runtime as julia_runtime
from support.threads import run_threads as _run_threads
from support import REPO, TESTS

DATA = TESTS / "data" / "runtime_kernel"

TIMEOUT = 120  # seconds for any group of runs; a deadlock would exceed it


def compile_cc(source: Path, output: Path, shared: bool) -> Path:
    """g++ with TF's flags (tf.sysconfig's, spelled out: TF must not be imported here)."""
    framework, _ = _lib.library_paths()
    tf_dir = framework.parent
    runtime_dir = julia_runtime.runtime_dir()
    cmd = [os.environ.get("CXX") or shutil.which("g++") or "c++", "-std=c++17", "-O2", "-fPIC",
           "-D_GLIBCXX_USE_CXX11_ABI=1", "-DEIGEN_MAX_ALIGN_BYTES=64"]
    cmd += [f"-I{d}" for d in julia_runtime.include_dirs()]
    if shared:
        cmd += ["-shared", "-isystem", str(_lib.include_dir())]
    cmd += [str(source), "-o", str(output), *julia_runtime.link_args(), "-pthread", "-Wl,--no-undefined"]
    if shared:
        cmd += [f"-L{tf_dir}", "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{tf_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"compiling {source.name} failed:\n{' '.join(cmd)}\n{proc.stderr}"
    return output


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    """The op module of the compiled julia_ops.cc (built once per test session)."""
    julia.init()
    library = compile_cc(DATA / "julia_ops.cc", tmp_path_factory.mktemp("runtime_kernel") / "libjulia_ops.so",
                         shared=True)
    julia.eval("""
        rt_affine!(y, x, k) = (y .= k .* x .+ 1; nothing)
        for k in 1:6
            @eval $(Symbol("rt_affine$(k)!"))(y, x) = rt_affine!(y, x, $k)
        end
        function rt_index!(y, x)
            for I in CartesianIndices(y)
                code = 0
                for k in 1:ndims(y)
                    code = 10code + I[k]   # y[1,2,3] gets 123
                end
                y[I] = x[I] + code
            end
            return nothing
        end
        rt_not!(y, x) = (y .= .!x; nothing)
        rt_attrs!(y, x, alpha::Float64, n::Int64, flag::Bool, label::String) =
            (y .= alpha .* x .+ n .+ flag .+ length(label); nothing)
        rt_positive!(o, x) = (o[] = filter(>(0), x); nothing)
        rt_matrix!(o, x) = (o[] = reshape(x, 1, :); nothing)
        rt_forgets!(o, x) = nothing
        rt_upper!(y, x) = (y .= uppercase.(x) .* "!"; nothing)
        rt_bad!(y, x) = throw(ArgumentError("x must be positive, got $(x[1])"))
        rt_crash!(y, x) = error("internal trouble")
        function rt_gc!(y, x)
            garbage = [rand(64) for _ in 1:50]   # allocate, then collect all of it
            GC.gc()
            y .= 2 .* x .+ (length(garbage) - 50)
            return nothing
        end
    """)
    return bridge.load_op_library(library)


def run_threads(target, n: int) -> None:
    """Run target(k) in n threads; fail on the first exception or on a timeout."""
    _run_threads(target, n, TIMEOUT)


def affine_graph(ops, nops: int = 6):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, shape=[None], name="x")
        ys = [ops.jl_rt_apply(x, fn=f"rt_affine{k}!", name=f"affine{k}") for k in range(1, nops + 1)]
    return g, x, ys


def test_independent_julia_ops_on_tf_pool_threads(ops):
    g, x, ys = affine_graph(ops)
    _, handed_before = julia.call_counts()
    with bridge.Session(g) as sess:  # TF's default multi-threaded executor
        def worker(k: int) -> None:
            for i in range(40):
                xv = np.arange(100.0) * (k + 1) + i
                outs = sess.run(ys, {x: xv})
                for j, out in enumerate(outs, start=1):
                    np.testing.assert_array_equal(out, j * xv + 1)
        run_threads(worker, 6)
    _, handed_after = julia.call_counts()
    assert handed_after - handed_before >= 6 * 40 * 6  # every call crossed to Julia's thread


def test_inline_session_calls_julia_directly(ops):
    config = bridge.SessionConfig(julia_thread=True)
    assert config.to_proto() == bytes.fromhex("28ffffffffffffffffff01")  # inter_op_parallelism_threads = -1
    g, x, ys = affine_graph(ops)
    direct_before, handed_before = julia.call_counts()
    with bridge.Session(g, config=config) as sess:
        def worker(k: int) -> None:
            for i in range(25):
                xv = np.linspace(-1, 1, 10) + k + i
                for j, out in enumerate(sess.run(ys, {x: xv}), start=1):
                    np.testing.assert_array_equal(out, j * xv + 1)
        run_threads(worker, 4)
    direct_after, handed_after = julia.call_counts()
    runs = 4 * 25
    # One hand-over per run (the run itself) and every op direct on Julia's thread.
    assert handed_after - handed_before == runs
    assert direct_after - direct_before == runs * len(ys)


def test_tfjl_session_run_on_julia_thread_with_the_c_api(ops):
    """The same through the raw C API: TF_SetConfig with the proto bytes, then the runtime's entry."""
    lib, ffi = _lib.lib, _lib.ffi
    g, x, ys = affine_graph(ops, nops=2)
    status = lib.TF_NewStatus()
    opts = lib.TF_NewSessionOptions()
    proto = bytes.fromhex("28ffffffffffffffffff01")
    lib.TF_SetConfig(opts, proto, len(proto), status)
    session = lib.TF_NewSession(g._ptr, opts, status)
    assert lib.TF_GetCode(status) == 0, ffi.string(lib.TF_Message(status))
    try:
        xv = np.arange(8.0)
        feed = bridge.Tensor(xv)
        inputs = ffi.new("TF_Output[1]")
        inputs[0].oper, inputs[0].index = x.op._ptr, 0
        input_values = ffi.new("TF_Tensor*[1]", [feed._ptr])
        outputs = ffi.new("TF_Output[2]")
        for i, y in enumerate(ys):
            outputs[i].oper, outputs[i].index = y.op._ptr, 0
        output_values = ffi.new("TF_Tensor*[2]")
        direct_before, _ = julia.call_counts()
        assert julia.session_runner().run(session, ffi.NULL, inputs, input_values, 1, outputs, output_values, 2,
                                          ffi.NULL, 0, ffi.NULL, status) is None
        assert lib.TF_GetCode(status) == 0, ffi.string(lib.TF_Message(status))
        assert julia.call_counts()[0] - direct_before == 2
        for k in range(2):
            data = ffi.buffer(lib.TF_TensorData(output_values[k]), 8 * 8)
            np.testing.assert_array_equal(np.frombuffer(data, np.float64), (k + 1) * xv + 1)
            lib.TF_DeleteTensor(output_values[k])
    finally:
        lib.TF_CloseSession(session, status)
        lib.TF_DeleteSession(session, status)
        lib.TF_DeleteSessionOptions(opts)
        lib.TF_DeleteStatus(status)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 3, 4), (3, 1, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64])
def test_views_are_zero_copy_in_tf_index_order(ops, shape, dtype):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.as_dtype(dtype), shape=list(shape), name="x")
        y = ops.jl_rt_apply(x, fn="rt_index!")
    xv = (np.arange(int(np.prod(shape))) * 1000).reshape(shape).astype(dtype)
    code = np.zeros(shape, dtype)
    for index in np.ndindex(*shape):  # 1-based TF index digits: y[1,2,3] gets 123 added
        code[index] = sum(10 ** (len(shape) - 1 - k) * (i + 1) for k, i in enumerate(index))
    with bridge.Session(g) as sess:
        out = sess.run(y, {x: xv})
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_array_equal(out, xv + code)


def test_bool_tensors(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.bool, shape=[2, 3], name="x")
        y = ops.jl_rt_apply(x, fn="rt_not!")
    xv = np.array([[True, False, True], [False, False, True]])
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: xv}), ~xv)


def test_attrs_reach_julia_with_their_types(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, shape=[3], name="x")
        y = ops.jl_rt_attrs(x, fn="rt_attrs!", alpha=0.5, n=3, flag=True, label="abcd")
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: np.array([2.0, 4.0, 6.0])}), [9.0, 10.0, 11.0])


def test_dynamic_output(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, shape=[None], name="x")
        positive = ops.jl_rt_dynamic(x, fn="rt_positive!")
        matrix = ops.jl_rt_dynamic(x, fn="rt_matrix!")
        forgets = ops.jl_rt_dynamic(x, fn="rt_forgets!")
    with bridge.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(positive, {x: np.array([1.0, -2.0, 3.0, 0.0, 5.0])}),
                                      [1.0, 3.0, 5.0])
        assert sess.run(positive, {x: np.array([-1.0])}).shape == (0,)
        with pytest.raises(errors.InvalidArgumentError, match=re.escape("has shape (1, 2), expected (?,)")):
            sess.run(matrix, {x: np.array([1.0, 2.0])})
        with pytest.raises(errors.InvalidArgumentError, match="was not assigned"):
            sess.run(forgets, {x: np.array([1.0])})


DYNAMIC_FORMS_JL = """
    # The same values as x (TF index order), handed over in different forms.
    rt_dyn_array!(o, x) = (o[] = collect(x); nothing)          # a column-major Array: transposed on the way
    rt_dyn_input!(o, x) = (o[] = x; nothing)                   # the input's own view: row-major memory
    rt_dyn_view!(o, x) = (o[] = view(x, axes(x)...); nothing)  # a SubArray: neither
    rt_dyn_any!(o, x) = (o[] = Array{Any}(x); nothing)         # elements converted one by one
    function rt_dyn_rowmajor!(o, x)                            # a lazy reversal of a row-major copy
        N = ndims(x)
        rev = ntuple(i -> N + 1 - i, N)
        o[] = N <= 1 ? copy(x) : N == 2 ? transpose(permutedims(x)) : PermutedDimsArray(permutedims(x, rev), rev)
        return nothing
    end
    rt_dyn_scalar!(o, x) = (o[] = x[]; nothing)                # rank 0: a plain value
    rt_dyn_range!(o, x) = (o[] = 1:length(x); nothing)
    rt_dyn_half!(o, x) = (o[] = 0.5:0.5:length(x) / 2; nothing)
    rt_dyn_adjoint!(o, x) = (o[] = collect(x)'; nothing)       # rank 1 in, a 1 x n Adjoint out
    rt_dyn_inexact!(o, x) = (o[] = [1.5, 2.5]; nothing)
    rt_dyn_text!(o, x) = (o[] = "text"; nothing)
"""

DYNAMIC_DTYPES = [np.float64, np.float32, np.int32, np.int64, np.bool_]
DYNAMIC_SHAPES = {0: [()], 1: [(7,), (0,)], 2: [(3, 5), (1, 4), (3, 0)], 3: [(2, 3, 4), (2, 0, 4)]}


def _values(dtype, shape, seed: int = 0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_dynamic_outputs_every_dtype_rank_and_form_exactly(ops, rank):
    """Whatever form Julia's value takes, the dynamic output equals it exactly,
    written by the runtime into TF's output (direct) or copied in afterwards,
    in the caller's thread and on Julia's thread."""
    julia.eval(DYNAMIC_FORMS_JL)
    forms = ["rt_dyn_array!", "rt_dyn_input!", "rt_dyn_view!", "rt_dyn_any!", "rt_dyn_rowmajor!"]
    if rank == 0:
        forms.append("rt_dyn_scalar!")
    g = bridge.Graph()
    cases = []
    with g.as_default():
        for dtype in DYNAMIC_DTYPES:
            x = bridge.placeholder(bridge.as_dtype(dtype), shape=None, name=f"x_{np.dtype(dtype).name}")
            ys = [ops.jl_rt_dynamic_any(x, fn=fn, direct=direct) for fn in forms for direct in (True, False)]
            cases.append((dtype, x, ys))
    for config in (bridge.SessionConfig(inline_small_graphs=0), bridge.SessionConfig(julia_thread=True)):
        with bridge.Session(g, config=config) as sess:
            for dtype, x, ys in cases:
                for shape in DYNAMIC_SHAPES[rank]:
                    xv = _values(dtype, shape)
                    for y, out in zip(ys, sess.run(ys, {x: xv}), strict=True):
                        assert out.dtype == np.dtype(dtype) and out.shape == shape, (y.op.name, out.dtype, out.shape)
                        np.testing.assert_array_equal(out, xv, err_msg=y.op.name)


def test_dynamic_outputs_from_ranges_and_adjoints_convert(ops):
    julia.eval(DYNAMIC_FORMS_JL)
    g = bridge.Graph()
    with g.as_default():
        x64 = bridge.placeholder(bridge.float64, shape=[None], name="x64")
        x32 = bridge.placeholder(bridge.int32, shape=[None], name="x32")
        outs = {
            "range_f64": ops.jl_rt_dynamic_any(x64, fn="rt_dyn_range!"),
            "range_i32": ops.jl_rt_dynamic_any(x32, fn="rt_dyn_range!"),
            "range_copied": ops.jl_rt_dynamic_any(x32, fn="rt_dyn_range!", direct=False),
            "half": ops.jl_rt_dynamic_any(x64, fn="rt_dyn_half!"),
            "adjoint": ops.jl_rt_dynamic_any(x64, fn="rt_dyn_adjoint!"),
        }
    xv = np.array([3.0, -1.0, 2.0, 7.0, 0.5])
    with bridge.Session(g) as sess:
        got = sess.run(outs, {x64: xv, x32: np.zeros(6, np.int32)})
        empty = sess.run(outs["range_i32"], {x32: np.zeros(0, np.int32)})
    np.testing.assert_array_equal(got["range_f64"], np.arange(1.0, 6.0))
    assert got["range_i32"].dtype == np.int32
    np.testing.assert_array_equal(got["range_i32"], np.arange(1, 7))
    np.testing.assert_array_equal(got["range_copied"], np.arange(1, 7))
    np.testing.assert_array_equal(got["half"], [0.5, 1.0, 1.5, 2.0, 2.5])
    np.testing.assert_array_equal(got["adjoint"], xv[None, :])
    assert empty.shape == (0,) and empty.dtype == np.int32


def test_dynamic_outputs_that_do_not_convert_are_invalid_arguments(ops):
    julia.eval(DYNAMIC_FORMS_JL)
    g = bridge.Graph()
    with g.as_default():
        xi = bridge.placeholder(bridge.int64, shape=[None], name="xi")
        xd = bridge.placeholder(bridge.float64, shape=[None], name="xd")
        inexact = [ops.jl_rt_dynamic_any(xi, fn="rt_dyn_inexact!", direct=d) for d in (True, False)]
        text = [ops.jl_rt_dynamic_any(xd, fn="rt_dyn_text!", direct=d) for d in (True, False)]
        good = ops.jl_rt_dynamic_any(xd, fn="rt_dyn_array!")
    with bridge.Session(g) as sess:
        for y in inexact:
            with pytest.raises(errors.InvalidArgumentError,
                               match=re.escape("holds a Array{Float64,1}, which does not convert to an Array{Int64}")):
                sess.run(y, {xi: np.zeros(1, np.int64)})
        for y in text:
            with pytest.raises(errors.InvalidArgumentError,
                               match=re.escape("holds a String, which does not convert to an Array{Float64}")):
                sess.run(y, {xd: np.zeros(1)})
        np.testing.assert_array_equal(sess.run(good, {xd: np.arange(3.0)}), np.arange(3.0))


def test_string_tensors(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.string, shape=[2, 2], name="x")
        y = ops.jl_rt_strings(x, fn="rt_upper!")
    xv = np.array([[b"ab", b"c"], [b"", "é".encode()]], dtype=object)
    with bridge.Session(g) as sess:
        out = sess.run(y, {x: xv})
    assert out.tolist() == [[b"AB!", b"C!"], [b"!", "É!".encode()]]


def test_julia_errors_become_tf_statuses_and_the_next_run_works(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, shape=[2], name="x")
        bad = ops.jl_rt_apply(x, fn="rt_bad!")
        crash = ops.jl_rt_apply(x, fn="rt_crash!")
        missing = ops.jl_rt_apply(x, fn="rt_not_defined_anywhere!")
        arity = ops.jl_rt_apply(x, fn="rt_attrs!")  # called with 2 of its 6 arguments
        good = ops.jl_rt_apply(x, fn="rt_affine1!")
    xv = np.array([-1.0, 2.0])
    with bridge.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(bad, {x: xv})
        message = str(info.value)
        assert message.startswith("JlRtApply: Julia function rt_bad! failed: ArgumentError: x must be positive, "
                                  "got -1.0"), message
        assert "Stacktrace:" in message and "rt_bad!" in message
        with pytest.raises(errors.InternalError, match="rt_crash! failed: ErrorException: internal trouble"):
            sess.run(crash, {x: xv})
        with pytest.raises(errors.NotFoundError, match="rt_not_defined_anywhere!"):
            sess.run(missing, {x: xv})
        with pytest.raises(errors.InvalidArgumentError, match="MethodError: no method matching rt_attrs!"):
            sess.run(arity, {x: xv})
        np.testing.assert_array_equal(sess.run(good, {x: xv}), xv + 1)


def test_gc_in_every_call_under_concurrency(ops):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, shape=[None], name="x")
        ys = [ops.jl_rt_apply(x, fn="rt_gc!", name=f"gc{k}") for k in range(4)]
    with bridge.Session(g) as sess:
        def worker(k: int) -> None:
            for i in range(15):
                xv = np.arange(1000.0) + 7 * k + i
                for out in sess.run(ys, {x: xv}):
                    np.testing.assert_array_equal(out, 2 * xv)
        run_threads(worker, 3)


@pytest.mark.serial  # a cost per call, bounded: measured alone
def test_runtime_from_plain_cpp_without_python(tmp_path):
    """bench_runtime.cc: no Python, no TF; prints the cost of each path (see docs/internals/kernels-cpp.md, \"Costs\")."""
    exe = compile_cc(DATA / "bench_runtime.cc", tmp_path / "bench_runtime", shared=False)
    config = julia_runtime.julia_config()
    proc = subprocess.run([str(exe), config.bindir, config.image, str(REPO / "julia" / "TFBridge.jl"), "20000"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("OK"), proc.stdout + proc.stderr
    costs = dict(line.split()[:2] for line in proc.stdout.splitlines() if line.count(" ") == 1)
    print("runtime costs (us per call):", costs)
    assert float(costs["direct"]) < 5.0  # the target is well under 1 us; leave room for a loaded machine


def test_kernel_starts_julia_lazily_without_bridge_julia(ops):
    """A process that has not called bridge.julia: the first Julia op starts Julia itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFBRIDGE_JULIA")}
    env["PYTHONPATH"] = str(REPO)
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import bridge
        ops = bridge.load_op_library({ops.LIBRARY_PATH!r})
        g = bridge.Graph()
        with g.as_default():
            x = bridge.placeholder(bridge.float64, shape=[3], name="x")
            y = ops.jl_rt_apply(x, fn="copyto!")   # Base's: Main needs no user code
        with bridge.Session(g) as sess:
            out = sess.run(y, {{x: np.array([1.5, 2.5, 3.5])}})
        assert list(out) == [1.5, 2.5, 3.5], out
        assert "bridge.julia" not in sys.modules
        from bridge import julia    # now Python joins the Julia the kernel started
        julia.init()
        assert julia.call_counts()[1] == 2  # the kernel's call and init's ping: one runtime
        assert julia.eval("1 + 1") == 2
        assert julia.call_counts()[1] == 3
        print("lazy ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          env=env, cwd=REPO)
    assert proc.returncode == 0 and "lazy ok" in proc.stdout, proc.stdout + proc.stderr


def test_julia_entries_do_not_hold_the_gil_and_with_gil_does(ops):
    """Entries into Julia leave the GIL to Python's threads; TFBridge.with_gil
    takes it.  Julia asks CPython itself, on the pool-thread path and the
    inline path."""
    julia.eval("rt_gil!(y, x) = (y .= ccall(:PyGILState_Check, Cint, ()) .+ "
               "10 .* TFBridge.with_gil(() -> ccall(:PyGILState_Check, Cint, ())); nothing)")
    assert julia.eval("ccall(:PyGILState_Check, Cint, ())") == 0
    assert julia.eval("TFBridge.with_gil(() -> ccall(:PyGILState_Check, Cint, ()))") == 1
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.int32, shape=[4], name="x")
        y = ops.jl_rt_apply(x, fn="rt_gil!")
    for config in (None, bridge.SessionConfig(julia_thread=True)):
        with bridge.Session(g, config=config) as sess:
            np.testing.assert_array_equal(sess.run(y, {x: np.zeros(4, np.int32)}), [10, 10, 10, 10])
