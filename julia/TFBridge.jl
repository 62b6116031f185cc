# Julia side of tf-julia-bridge.
#
# The C++ runtime (kernels_cpp/) loads this module into Main once, on Julia's
# thread, and calls only the functions of the files below through jl_call.  Everything the
# runtime calls is wrapped in `protect`/`protect_value`, which never let a
# Julia exception escape: failures come back as a `Failure` value holding the
# formatted error and its coarse kind, so the C++ side needs no longjmp-aware
# code and the runtime stays usable after any error.
module TFBridge

using LinearAlgebra
using LinearAlgebra: Transpose

# Values the C++ runtime caches by pointer (helper functions, types, view
# types) are pushed here so they stay rooted for the life of the process.
const ROOTS = Any[]

# The contract shared with the C++ runtime and the code generator: dtypes,
# error kinds (INVALID_ARGUMENT, ...), the compiled entries' parameter types.
# Generated from bridge/julia/contract.py.
include("contract.jl")

# One file per concern, under julia/TFBridge/, in this order (later files use
# earlier files' types).  Every include is a line `include("<path>")`, the
# path relative to the including file: the copy of this module built into
# libtfjl_julia.so (kernels_cpp/CMakeLists.txt) has each such line replaced by
# the file, recursively, and the runtime's cache key
# (bridge/julia/runtime.py, julia_sources) follows the same lines.
include("TFBridge/errors.jl")
include("TFBridge/entries.jl")
include("TFBridge/readonly.jl")
include("TFBridge/functions.jl")
include("TFBridge/threads.jl")
include("TFBridge/interrupts.jl")
include("TFBridge/python.jl")
include("TFBridge/kernels.jl")
include("TFBridge/dynamic_outputs.jl")
include("TFBridge/environments.jl")
include("TFBridge/checks.jl")

end # module TFBridge
