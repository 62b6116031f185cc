"""What read-only inputs cost a Julia op: a compiled entry wrapping its input
as TFBridge.ReadOnlyArray vs as a plain Array, timed in Julia itself (no TF),
so the difference is not lost in the noise of a whole op.

Both entries wrap two 10-double buffers and call the same @noinline
`y .= tanh.(x)`; rounds alternate between them and the best round of each
counts.  The anchor is the plain entry, measured in the same run.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402

from bridge.platform import paths
from bridge.julia import runtime as julia_runtime  # noqa: E402

SCRIPT = r"""
include(ARGS[1])
using .TFBridge
@noinline body(y, x) = (y .= tanh.(x); nothing)
plain(d, i) = body(TFBridge.tensor(Float64, Val(1), d, 1, i, 1, :y), TFBridge.tensor(Float64, Val(1), d, 2, i, 3, :x))
readonly(d, i) = body(TFBridge.tensor(Float64, Val(1), d, 1, i, 1, :y),
                      TFBridge.input_tensor(Float64, Val(1), d, 2, i, 3, :x))
loop(g, n, d, i) = for _ in 1:n; g(d, i); end
y, x = zeros(10), rand(10)
data, ints = [Ptr{Cvoid}(pointer(y)), Ptr{Cvoid}(pointer(x))], Int64[1, 10, 1, 10]
GC.@preserve y x data ints begin
    d, i = pointer(data), pointer(ints)
    loop(plain, 10, d, i); loop(readonly, 10, d, i)
    best = [Inf, Inf]
    for round in 1:15
        best[1] = min(best[1], @elapsed loop(plain, 10^6, d, i))
        best[2] = min(best[2], @elapsed loop(readonly, 10^6, d, i))
    end
    println(best[1] * 1e3, " ", best[2] * 1e3)  # ns per call
end
"""

config = julia_runtime.julia_config()
out = subprocess.run([config.executable, "--startup-file=no", "-O3", "-e", SCRIPT,
                      str(paths.julia_dir() / "TFBridge.jl")], capture_output=True, text=True, check=True)
plain_ns, readonly_ns = (float(v) for v in out.stdout.split())
report("Read-only inputs: an entry wrapping 2 x 10 doubles and calling y .= tanh.(x), in Julia",
       [("plain Array input (anchor)", plain_ns / 1e3, "us/call"),
        ("TFBridge.ReadOnlyArray input", readonly_ns / 1e3, "us/call")],
       "read-only / plain", readonly_ns / plain_ns, "<= 1.05x")
