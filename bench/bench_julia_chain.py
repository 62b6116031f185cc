"""Per-op cost of a Julia op: a chain of 100 ops computing tanh on 10 doubles.

Compared, in the same run, with the same chain of native Tanh ops and (in a
separate process, stock TensorFlow) with tf.numpy_function(np.tanh).
Three modes for the Julia op:
- direct: Session(julia_thread=True) runs the graph on Julia's thread, so
  each kernel calls Julia directly (through the op's compiled entry; the
  generic jl_call path is timed too, with the entry unregistered);
- pool: TF's multi-threaded executor (the default for graphs of more than 16
  ops) runs kernels on its pool threads; each posts its call to Julia's
  thread and returns to the pool;
- caller's thread: TF runs the graph in the thread calling Session.run (the
  default for small graphs; forced here with inline_small_graphs): the first
  Julia op is posted to Julia's thread, which then runs the rest of the chain.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (AnchorProcess, Figure, alternating_rounds, checked_runner, difference,  # noqa: E402
                     julia_op, ratio, ratio_line, report)
from support.build import op_chain  # noqa: E402  (tests/, put on sys.path by _common)

import bridge  # noqa: E402
from bridge import ops  # noqa: E402

CHAIN, SIZE, CALLS = 100, 10, 100
GIL_PROBE = "--with-gil-probe"

jl = julia_op("JlTanh", "JlTanh\ndouble x(n)\ndouble y(n) -> output\n",
              "jl_tanh(y, x) = (y .= tanh.(x); nothing)\njl_tanh_grad(gx, gy, y, x) = (gx .= gy .* (1 .- y .^ 2); nothing)\n")


def chain(make):
    return op_chain(make, CHAIN, [SIZE])


def tanh_chain(out) -> None:
    expected = np.linspace(-1, 1, SIZE)
    for _ in range(CHAIN):
        expected = np.tanh(expected)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def runner(graph_x_y, config, sessions: list):
    g, x, y = graph_x_y
    return checked_runner(g, x, y, np.linspace(-1, 1, SIZE), config, sessions, tanh_chain)


def per_op_us(runners: dict) -> dict[str, Figure]:
    return {name: us.map(lambda v: v / CHAIN) for name, us in alternating_rounds(runners, CALLS).items()}


native_graph, julia_graph = chain(ops.tanh), chain(jl.jl_tanh)
# Grappler would fuse the native chain into one UnaryOpsComposition kernel:
# every mode runs the graph as written.
inline = bridge.SessionConfig(julia_thread=True, disable_meta_optimizer=True)
if GIL_PROBE in sys.argv:
    # Run by the main run with TFBRIDGE_JULIA_GIL=1 (read once per process):
    # the headline pair again, with the GIL taken around each entry.
    probe_sessions: list = []
    probe = per_op_us({"native": runner(native_graph, inline, probe_sessions),
                       "julia": runner(julia_graph, inline, probe_sessions)})
    for sess in probe_sessions:
        sess.close()
    print(json.dumps({name: fig.samples for name, fig in probe.items()}))
    sys.exit(0)
inline_native = bridge.SessionConfig(inter_op_parallelism_threads=-1, disable_meta_optimizer=True)
default = bridge.SessionConfig(disable_meta_optimizer=True)
callers_thread = bridge.SessionConfig(inline_small_graphs=CHAIN + 10, disable_meta_optimizer=True)
# Stock TF's tf.numpy_function chain, in a process of its own that times a
# round when asked, so that it alternates with the bridge's modes.
NUMPY_FUNCTION = "tf.numpy_function(np.tanh), stock TF (anchor)"
numpy_function_anchor = AnchorProcess(f"""
import numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
x = tf.compat.v1.placeholder(tf.float64, [{SIZE}])
y = x
for _ in range({CHAIN}):
    y = tf.numpy_function(np.tanh, [y], tf.float64)
sess = tf.compat.v1.Session()
value = np.linspace(-1, 1, {SIZE})
ANCHOR_FNS = {{"run": lambda: sess.run(y, {{x: value}})}}
""")
sessions: list = []
try:
    results = per_op_us({
        "native Tanh, default executor": runner(native_graph, default, sessions),
        "native Tanh, inline executor": runner(native_graph, inline_native, sessions),
        "native Tanh, on Julia's thread (julia_thread)": runner(native_graph, inline, sessions),
        "Julia op, direct on Julia's thread (inline)": runner(julia_graph, inline, sessions),
        "Julia op, TF's pool threads post to Julia": runner(julia_graph, default, sessions),
        "Julia op, caller's thread runs the graph": runner(julia_graph, callers_thread, sessions),
        # A tenth of the calls: each of its runs is 100 Python calls.
        NUMPY_FUNCTION: numpy_function_anchor.mode("run", CALLS // 10),
    })
finally:
    numpy_function_anchor.close()
entry_calls = bridge.julia.entry_calls()
# The same direct run through the generic path: jl_call, dispatch on
# TFBridge.protect, arguments as std::vector<tfjl::Arg>.
bridge.julia.register_entry("JlTanh", 0)
results.update(per_op_us({"Julia op, direct, generic path (no entry)": runner(julia_graph, inline, sessions)}))
assert bridge.julia.entry_calls() == entry_calls, "the generic run went through the entry"
for sess in sessions:
    sess.close()
numpy_function = results[NUMPY_FUNCTION]
# The Julia function alone, called from Julia: the part of an op's cost the
# bridge cannot remove (Julia's tanh is exact and scalar; Eigen's is a
# vectorised approximation).
results["jl_tanh alone, called in Julia (no TF, no bridge)"] = Figure(bridge.julia.eval(f"""
    let x = collect(range(-1, 1, length={SIZE})), y = similar(x)
        jl_tanh(y, x)
        [@elapsed(for _ in 1:100_000; jl_tanh(y, x); end) / 100_000 * 1e6 for _ in 1:15]
    end"""))

rows = [(k, v, "us/op") for k, v in results.items()]
direct = results["Julia op, direct on Julia's thread (inline)"]
pool = results["Julia op, TF's pool threads post to Julia"]
callers = results["Julia op, caller's thread runs the graph"]
same_thread = results["native Tanh, on Julia's thread (julia_thread)"]
# Like for like: both chains in a Session(julia_thread=True), so both pay for
# handing the run to Julia's thread and back.
report("Chain of 100 ops, tanh on 10 doubles (medians of alternating rounds)", rows,
       "Julia direct / native, both on Julia's thread", ratio(direct, same_thread), "<= 2x")
ratio_line("the same in process CPU time", ratio(direct.cpu, same_thread.cpu))
ratio_line("Julia direct / native inline in the caller", ratio(direct, results["native Tanh, inline executor"]))
ratio_line("Julia direct / native (default executor)", ratio(direct, results["native Tanh, default executor"]))
ratio_line("generic path / compiled entry (direct)", ratio(results["Julia op, direct, generic path (no entry)"],
                                                              direct))
body = results["jl_tanh alone, called in Julia (no TF, no bridge)"]
ratio_line("bridge cost per op: (direct - body) / native", ratio(difference(direct, float(body)), same_thread),
           "   (same-thread native)")
proc = subprocess.run([sys.executable, __file__, GIL_PROBE], capture_output=True, text=True, timeout=900,
                      env={**os.environ, "TFBRIDGE_JULIA_GIL": "1"})
if proc.returncode:
    raise RuntimeError(f"the run with the GIL failed:\n{proc.stderr[-3000:]}")
with_gil = {name: Figure(samples) for name, samples in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
gil_ratio = ratio(with_gil["julia"], with_gil["native"])
ratio_line("Julia direct / native, GIL around each entry", gil_ratio, "   (TFBRIDGE_JULIA_GIL=1, another process)")
print(f"  {'GIL per entry, from the two ratios':<48s} "
      f"{(float(gil_ratio) - float(ratio(direct, same_thread))) * float(same_thread):12.2f} us")
ratio_line("Julia direct / tf.numpy_function", ratio(direct, numpy_function), "   (goal: < 1x)")
ratio_line("Julia pool / tf.numpy_function", ratio(pool, numpy_function), "   (goal: < 1x)")
ratio_line("Julia in the caller thread / tf.numpy_function", ratio(callers, numpy_function), "   (goal: < 1x)")
