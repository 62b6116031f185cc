"""What read-only inputs cost a Julia op: a compiled entry wrapping its input
as TFBridge.ReadOnlyArray vs as a plain Array, timed in Julia itself (no TF),
so the difference is not lost in the noise of a whole op.

Both entries wrap two 10-double buffers and call the same @noinline
`y .= tanh.(x)`; 15 rounds alternate between them; the figures are the
medians of the rounds, with their spread, and the ratio the median of the
paired rounds' ratios.  The anchor is the plain entry, measured in the same run.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Figure, ratio, report  # noqa: E402

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
    for round in 1:15
        a = @elapsed loop(plain, 10^6, d, i)
        b = @elapsed loop(readonly, 10^6, d, i)
        println(a * 1e3, " ", b * 1e3)  # ns per call
    end
end
"""

config = julia_runtime.julia_config()
out = subprocess.run([config.executable, "--startup-file=no", "-O3", "-e", SCRIPT,
                      str(paths.julia_dir() / "TFBridge.jl")], capture_output=True, text=True, check=True)
pairs = [line.split() for line in out.stdout.splitlines() if line.strip()]
plain_ns, readonly_ns = Figure(float(a) for a, _ in pairs), Figure(float(b) for _, b in pairs)
report("Read-only inputs: an entry wrapping 2 x 10 doubles and calling y .= tanh.(x), in Julia",
       [("plain Array input (anchor)", plain_ns.map(lambda ns: ns / 1e3), "us/call"),
        ("TFBridge.ReadOnlyArray input", readonly_ns.map(lambda ns: ns / 1e3), "us/call")],
       "read-only / plain", ratio(readonly_ns, plain_ns), "<= 1.05x")
