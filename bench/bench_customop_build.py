"""Build time of the TwoLayer op: cold (generate, configure, compile) and cached.

The anchor is g++ compiling a minimal hand-written TF custom op (REGISTER_OP,
one kernel, no Julia) with the same flags, measured in the same run.

A second op's cold build, once the precompiled header of TensorFlow's and the
runtime's headers is in the cache (bridge/customop/pch.py), is timed with and
without it (TFBRIDGE_PCH=0, as every build was before it), in rounds
alternating with the anchor's compile (BENCH_ROUNDS, 3 by default: each
round builds twice): medians and spreads, the ratio the median of the
rounds' with / without (goal <= 0.5).  The cold figure is the build with the
precompiled header; the first build of the run, which may make that header,
only warms up.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Figure, ratio, report, timed_rounds  # noqa: E402

from bridge.framework import _lib
from bridge import customop  # noqa: E402

EXAMPLE = REPO / "examples" / "twolayer"

MINIMAL_OP = textwrap.dedent("""
    #include "tensorflow/core/framework/op.h"
    #include "tensorflow/core/framework/op_kernel.h"
    #include "tensorflow/core/framework/common_shape_fns.h"
    using namespace tensorflow;
    REGISTER_OP("BenchTwice").Input("x: double").Output("y: double")
        .SetShapeFn(shape_inference::UnchangedShape);
    class BenchTwiceOp : public OpKernel {
     public:
      explicit BenchTwiceOp(OpKernelConstruction* c) : OpKernel(c) {}
      void Compute(OpKernelContext* ctx) override {
        const Tensor& x = ctx->input(0);
        Tensor* y = nullptr;
        OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
        auto in = x.flat<double>(); auto out = y->flat<double>();
        for (int64_t i = 0; i < in.size(); ++i) out(i) = 2 * in(i);
      }
    };
    REGISTER_KERNEL_BUILDER(Name("BenchTwice").Device(DEVICE_CPU), BenchTwiceOp);
""")

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    (tmp / "op.cc").write_text(MINIMAL_OP)
    framework, _ = _lib.library_paths()

    def compile_anchor() -> float:
        t0 = time.perf_counter()
        subprocess.run(["g++", "-w", "-std=c++17", "-O2", "-fPIC", "-shared", "-D_GLIBCXX_USE_CXX11_ABI=1",
                        "-DEIGEN_MAX_ALIGN_BYTES=64", f"-I{_lib.include_dir()}", str(tmp / "op.cc"), "-o",
                        str(tmp / "libop.so"), f"-L{framework.parent}", "-l:libtensorflow_framework.so.2"],
                       check=True, capture_output=True)
        return time.perf_counter() - t0

    def fresh_copy(label: str) -> Path:
        folder = tmp / label
        folder.mkdir()
        for name in ("custom_op.txt", "two_layer.jl"):
            shutil.copy(EXAMPLE / name, folder / name)
        return folder

    op_dir = fresh_copy("two_layer")
    customop.build(op_dir)  # warm-up: the precompiled header, TF's headers in the page cache

    # A second op, cold, with and without the precompiled header the first build left in the cache.
    # Wall time, and the CPU time of the build's processes (cmake, the compiler, the linker), which a
    # machine busy with other work inflates less.
    cpu: dict[str, list[float]] = {"with": [], "without": []}
    builds = iter(range(10**6))

    def second_build(mode: str) -> float:
        os.environ["TFBRIDGE_PCH"] = "1" if mode == "with" else "0"
        folder = fresh_copy(f"second_{mode}_{next(builds)}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        customop.build(folder, progress=lambda message: None)
        took = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[mode].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        return took

    builds_timed = timed_rounds({"anchor": compile_anchor, "without": lambda: second_build("without"),
                                 "with": lambda: second_build("with")}, rounds=ROUNDS, warmup=False)
    os.environ.pop("TFBRIDGE_PCH")
    cpu_fig = {mode: Figure(values) for mode, values in cpu.items()}

    def cached_in_process() -> float:
        t0 = time.perf_counter()
        customop.build(op_dir)
        return time.perf_counter() - t0

    code = (f"import time; t0 = time.perf_counter(); from bridge import customop; customop.build({str(op_dir)!r}); "
            "print(time.perf_counter() - t0)")

    def cached_fresh_process() -> float:
        return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout.split()[-1])
    cached = timed_rounds({"in process": cached_in_process, "fresh process": cached_fresh_process}, rounds=5)

anchor, cold = builds_timed["anchor"], builds_timed["with"]
report("Building the TwoLayer op (medians of alternating rounds)", [
    ("g++ of a minimal TF op, no Julia (anchor)", anchor, "s"),
    ("TwoLayer cold: generate + cmake configure + compile", cold, "s   (goal: <= 15 s)"),
    ("TwoLayer cached, in process", cached["in process"], "s"),
    ("TwoLayer cached, fresh process incl. import", cached["fresh process"], "s   (goal: < 0.5 s)"),
], "cold build / plain g++ compile", ratio(cold, anchor), "cold <= 15 s")
print()
report("A second op's cold build (TwoLayer in a new folder), medians of the rounds", [
    ("without the precompiled header (TFBRIDGE_PCH=0, as before)", builds_timed["without"], "s"),
    ("with the precompiled header", builds_timed["with"], "s"),
    ("CPU time of its processes, without", cpu_fig["without"], "s"),
    ("CPU time of its processes, with", cpu_fig["with"], "s"),
    ("CPU with / without", ratio(cpu_fig["with"], cpu_fig["without"]), "x"),
], "with / without (wall)", ratio(builds_timed["with"], builds_timed["without"]), "<= 0.5x")
