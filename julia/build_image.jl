# Julia's system image with module TFBridge built in, so a process starts
# without including TFBridge.jl (docs/internals/julia-start.md).  bridge/julia/sysimage.py
# runs it on top of the installation's own image, as Julia's own build does:
#
#   julia --startup-file=no --output-o <image>.o -J <stock sys.so> build_image.jl <TFBridge.jl>
#
# then links the object into a shared library.  In this mode Julia runs no
# module's `__init__` (it runs them when the image starts), so what Base's
# would have set up for TFBridge's `using LinearAlgebra` is set up here: the
# standard library alone, whatever JULIA_LOAD_PATH says, and emptied again at
# the end so that none of this process's paths stay in the image.
Sys.__init__()              # BINDIR and STDLIB of this installation, not of the machine that built Julia
Base.reinit_stdio()
empty!(DEPOT_PATH)
empty!(LOAD_PATH)
push!(LOAD_PATH, "@stdlib")

Base.include(Main, ARGS[1])

# What every start calls first, compiled into the image rather than at each
# start.  Nothing here may reach the runtime library (libtfjl_runtime.so is
# not loaded in this process) or leave a value in Main.
let T = Main.TFBridge
    precompile(T.serve_on_threads, (Ptr{Cvoid},))
    for W in (Nothing, Base.AsyncCondition)
        precompile(T.serve_forever, (Ptr{Cvoid}, W))
        precompile(T.serve_once, (Ptr{Cvoid}, W))
    end
    precompile(T.__init__, ())
    for f in (T.eval_code, T.include_file)
        precompile(T.protect, (typeof(f), String))
        precompile(T.protect_value, (typeof(f), String))
    end
    precompile(T.protect_value, (typeof(T.eval_code), String))
    precompile(T.protect_value, (typeof(T.use_op_environment), String, String))
    precompile(T.protect_value, (typeof(T.package_uuid), String))
    for D in T.DTYPES, N in 0:3
        T.readonly_type(D, N)
        N >= 2 && (T.view_type(D, N, true); T.view_type(D, N, false))
    end
    T.protect_value(T.eval_code, "1 + 1")
    T.protect_value(T.eval_code, "error(\"warm-up\")")
end

empty!(LOAD_PATH)
empty!(DEPOT_PATH)
