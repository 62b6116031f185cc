# Julia side of tf-julia-bridge.
#
# The C++ runtime (kernels_cpp/) loads this module into Main once, on Julia's
# thread, and calls only the functions of the files below through jl_call.  Everything the
# runtime calls is wrapped in `protect`/`protect_value`, which never let a
# Julia exception escape: failures come back as a `Failure` value holding the
# formatted error and its coarse kind, and the runtime stays usable after any
# error.  (What the runtime itself throws outside them, out of memory while it
# wraps arguments, it catches under a `try` of its own: julia_guarded in
# kernels_cpp/src/tfjl_julia/invoke.h.)
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

# Why `__init__` failed in this process (one line), empty when it did not:
# the runtime reports it as Julia's start failing (kernels_cpp/src/tfjl_julia/init.cc).
# Kept rather than thrown, since a throw out of `__init__` at the start of an
# image with this module built in would end the process.
const INIT_ERROR = String[]

# What belongs to the process, not to the module's code: set here, in every
# process, whether TFBridge.jl was just included or the module came built into
# Julia's system image (bridge/julia/sysimage.py), whose build process's
# threads, pointers and environment must not carry over.
function __init__()
    empty!(INIT_ERROR)
    empty!(ROOTS)
    resize!(LAST_FAILURE, Threads.nthreads())
    fill!(LAST_FAILURE, nothing)
    RUNNING_CALL[] = C_NULL
    INTERRUPTED_CALL[] = C_NULL
    empty!(EXTRA_ENVIRONMENTS)
    try
        add_extra_depot!()
    catch e
        push!(INIT_ERROR, sprint(showerror, e))
    end
    return nothing
end

end # module TFBridge
