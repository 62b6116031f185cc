# Julia side of tf-julia-bridge.
#
# The C++ runtime (kernels_cpp/) loads this module into Main once, on Julia's
# thread, and calls only the functions below through jl_call.  Everything the
# runtime calls is wrapped in `protect`/`protect_value`, which never let a
# Julia exception escape: failures come back as a `Failure` value holding the
# formatted error and its coarse kind, so the C++ side needs no longjmp-aware
# code and the runtime stays usable after any error.
module TFBridge

using LinearAlgebra: Transpose

# Values the C++ runtime caches by pointer (helper functions, types, view
# types) are pushed here so they stay rooted for the life of the process.
const ROOTS = Any[]

# ---------------------------------------------------------------- errors

"""A call that threw: `text` is "<ExceptionType>: <message>\\n<backtrace>"."""
struct Failure
    text::String
    kind::Int   # 1 invalid argument, 2 not found, 3 internal (see CONTRACT.md)
end

const INVALID_ARGUMENT = 1
const NOT_FOUND = 2
const INTERNAL = 3

# MethodError counts as a bad argument only when it is about the function the
# caller named (wrong arity or argument types); deeper MethodErrors are bugs
# inside that function and stay internal.
function error_kind(e, f)
    e isa LoadError && return error_kind(e.error, f)
    e isa UndefVarError && return NOT_FOUND
    e isa Union{ArgumentError,DimensionMismatch,DomainError,BoundsError} && return INVALID_ARGUMENT
    e isa MethodError && e.f === f && return INVALID_ARGUMENT
    return INTERNAL
end

"""`<ExceptionType>: <message>` for any exception (showerror is not uniform)."""
function error_text(e)
    # include/eval wrap errors in LoadError; the inner error is the news.
    if e isa LoadError
        return error_text(e.error) * "\nin expression starting at $(e.file):$(e.line)"
    end
    T = string(nameof(typeof(e)))
    shown = sprint(showerror, e)
    startswith(shown, T) && return shown
    msg = hasfield(typeof(e), :msg) ? getfield(e, :msg) : nothing
    return T * ": " * (msg isa AbstractString ? String(msg) : shown)
end

const MAX_FRAMES = 40

in_bridge(fr) = fr.linfo isa Core.MethodInstance && fr.linfo.def isa Method && fr.linfo.def.module === TFBridge

# Base's include machinery between the user's top-level code and the bridge.
const LOADING_FILES = ("loading.jl", "Base.jl", "boot.jl")

# The backtrace from the user's code up to (not including) the bridge's entry
# frame; what lies below it (jl_call, the runtime) and the bridge's and Base's
# include frames just above it are noise.
function backtrace_text(bt)
    frames = Base.StackTraces.stacktrace(bt)
    stop = findfirst(fr -> in_bridge(fr) && fr.func in (:protect, :protect_value), frames)
    stop === nothing || (frames = frames[1:stop-1])
    filter!(fr -> !fr.from_c, frames)
    while !isempty(frames) && (in_bridge(frames[end]) || basename(String(frames[end].file)) in LOADING_FILES)
        pop!(frames)
    end
    isempty(frames) && return ""
    io = IOBuffer()
    print(io, "Stacktrace:")
    for (i, fr) in enumerate(frames)
        i > MAX_FRAMES && (print(io, "\n ... ", length(frames) - MAX_FRAMES, " more frames"); break)
        print(io, "\n [", i, "] ", fr)
    end
    return String(take!(io))
end

function failure(e, bt, f)
    # Formatting runs user show methods; it must not be able to throw out.
    text = try
        t = error_text(e)
        b = backtrace_text(bt)
        isempty(b) ? t : t * "\n" * b
    catch inner
        cause = e isa LoadError ? e.error : e
        "$(typeof(cause)) (its message could not be shown: showing it threw a $(typeof(inner)))"
    end
    kind = try error_kind(e, f) catch; INTERNAL end
    return Failure(text, kind)
end

"""Call `f(args...)`; return its value, or a `Failure` if it threw."""
function protect(f::F, args::Vararg{Any,N}) where {F,N}
    try
        return f(args...)
    catch e
        return failure(e, catch_backtrace(), f)
    end
end

"""Like `protect`, but the value is converted for Python (`py_value`)."""
function protect_value(f::F, args::Vararg{Any,N}) where {F,N}
    try
        return Base.invokelatest(py_value, f(args...))
    catch e
        return failure(e, catch_backtrace(), f)
    end
end

# ---------------------------------------------------------------- Python host

"""Evaluate every top-level expression of `code` in Main; the last value."""
eval_code(code::String) = include_string(Main, code, "bridge.julia.eval")

eval_repr(code::String) = Base.invokelatest(repr, eval_code(code))

function include_file(path::String)
    Base.include(Main, path)
    return nothing
end

# What the C side converts to Python objects; anything else becomes PyRepr.
struct PyRepr
    text::String
end

struct PyBigInt
    decimal::String
end

"""A numeric array copied into row-major (TF/numpy index) order."""
struct PyArray
    typestr::String        # numpy dtype string, e.g. "<f8"
    dims::Vector{Int64}    # TF index order
    data::Array            # contiguous, elements in row-major order
    nbytes::Int
end

numpy_typestr(::Type) = nothing
for (T, s) in ((Float64, "<f8"), (Float32, "<f4"), (Float16, "<f2"),
               (Int8, "|i1"), (Int16, "<i2"), (Int32, "<i4"), (Int64, "<i8"),
               (UInt8, "|u1"), (UInt16, "<u2"), (UInt32, "<u4"), (UInt64, "<u8"),
               (Bool, "|b1"), (ComplexF32, "<c8"), (ComplexF64, "<c16"))
    @eval numpy_typestr(::Type{$T}) = $s
end

py_value(x) = PyRepr(repr(x))
py_value(::Nothing) = nothing
py_value(x::Bool) = x
py_value(x::Integer) = typemin(Int64) <= x <= typemax(Int64) ? Int64(x) : PyBigInt(string(x))
py_value(x::AbstractFloat) = Float64(x)
py_value(x::AbstractString) = String(x)

function py_value(x::AbstractArray{T,N}) where {T,N}
    typestr = numpy_typestr(T)
    typestr === nothing && return PyRepr(repr(x))
    data = row_major(x)
    return PyArray(typestr, collect(Int64, size(x)), data, sizeof(data))
end

"""A fresh contiguous Array whose memory lists `x` in row-major order."""
row_major(x::AbstractArray{T,N}) where {T,N} =
    N <= 1 ? collect(x) : permutedims(x, ntuple(i -> N + 1 - i, N))

# ---------------------------------------------------------------- kernels

"""The zero-copy view type of a column-major buffer holding a TF tensor of rank N."""
function view_type(::Type{T}, N::Int) where {T}
    N == 2 && return Transpose{T,Matrix{T}}
    parent = Array{T,N}(undef, ntuple(_ -> 0, N))
    return typeof(PermutedDimsArray(parent, ntuple(i -> N + 1 - i, N)))
end

dims_tuple_type(N::Int) = NTuple{N,Int}

"""
What a DynamicOutput `Ref{Any}` held after the call, as (row-major data,
TF dims).  `position` is the argument's 1-based position, for messages.
"""
function dynamic_result(x, ::Type{T}, position::Int) where {T}
    x === nothing && throw(ArgumentError(
        "dynamic output (argument $position) was not assigned: the function must set it, e.g. `o[] = A`"))
    A = x isa AbstractArray ? x : fill(x)
    B = try
        convert(Array{T}, A)
    catch
        throw(ArgumentError("dynamic output (argument $position) holds a $(typeof(x)), " *
                            "which does not convert to an Array{$T}"))
    end
    return (row_major(B), collect(Int64, size(B)))
end

end # module TFBridge
