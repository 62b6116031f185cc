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

# Compiled entries (templates/entries.jl.j2) are Main functions named so.
const ENTRY_PREFIX = "tfbridge_entry_"

# The frame where the bridge called the user's code: protect's, or an entry's.
is_call_frame(fr) = (in_bridge(fr) && fr.func in (:protect, :protect_value)) ||
                    startswith(String(fr.func), ENTRY_PREFIX)

# Base's include machinery between the user's top-level code and the bridge.
const LOADING_FILES = ("loading.jl", "Base.jl", "boot.jl")

# The backtrace from the user's code up to (not including) the bridge's entry
# frame; what lies below it (jl_call, the runtime) and the bridge's and Base's
# include frames just above it are noise.
function backtrace_text(bt)
    frames = Base.StackTraces.stacktrace(bt)
    stop = findfirst(is_call_frame, frames)
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

# ---------------------------------------------------------------- compiled entries
#
# A compiled entry (generated per op from its spec, templates/entries.jl.j2)
# is called from C through @cfunction with TF's buffers as raw pointers and
# shapes.  It wraps them with `tensor` below, exactly as the C++ runtime does
# for jl_call (CONTRACT.md), calls the user's function with argument types
# fixed at generation time, and reports a failure through LAST_FAILURE,
# since nothing may be thrown back into C.

"""The failure of the last compiled entry that failed (read by the runtime)."""
const LAST_FAILURE = Ref{Any}(nothing)

"""
    tensor(T, Val(N), data, k, ints, d)

The argument of TF dtype `T` and rank `N` whose buffer is `data[k]` and whose
rank and TF shape are `ints[d]`, `ints[d+1:d+N]`: a zero-copy view in TF index
order (rank 0: a 0-dimensional Array, 1: a Vector, 2: a `Transpose`, >= 3: a
reversed `PermutedDimsArray`), the same values the runtime builds for jl_call.
"""
@inline function tensor(::Type{T}, ::Val{N}, data::Ptr{Ptr{Cvoid}}, k::Int, ints::Ptr{Int64},
                        d::Int) where {T,N}
    rank = unsafe_load(ints, d)
    rank == N || throw(ArgumentError("argument $k has rank $rank where the op's spec says $N"))
    p = Ptr{T}(unsafe_load(data, k))
    # An integer length takes jl_ptr_to_array_1d, which needs no boxed dims tuple.
    N == 1 && return unsafe_wrap(Array, p, unsafe_load(ints, d + 1))
    # TF's row-major buffer is a column-major array of the reversed shape.
    A = unsafe_wrap(Array, p, ntuple(i -> unsafe_load(ints, d + N + 1 - i), Val(N)))
    N == 0 && return A
    N == 2 && return transpose(A)
    return PermutedDimsArray(A, ntuple(i -> N + 1 - i, Val(N)))
end

"""The string attribute whose bytes are at `data[k]` and whose length is `ints[d]`."""
@inline string_attr(data::Ptr{Ptr{Cvoid}}, k::Int, ints::Ptr{Int64}, d::Int) =
    unsafe_string(Ptr{UInt8}(unsafe_load(data, k)), unsafe_load(ints, d))

"""`Main.name`, or `nothing` if it is not defined."""
main_function(name::Symbol) = isdefined(Main, name) ? getfield(Main, name) : nothing

# The generic path says the same from C++ (not_found in kernels_cpp/src/invoke.cc).
not_found_text(name::Symbol) = "UndefVarError: $name not defined: no such Julia function in Main " *
                               "(define it, e.g. with bridge.julia.include, before the call)"

"""
Records why a compiled entry's call of `Main.name` threw, as `protect` would
have returned it, and returns the error kind for the entry to return.  Never
throws: `failure` guards its own formatting.
"""
function entry_failure(e, bt, name::Symbol)::Cint
    fail = if e isa UndefVarError && e.var === name
        Failure(not_found_text(name), NOT_FOUND)
    else
        failure(e, bt, main_function(name))
    end
    LAST_FAILURE[] = fail
    return Cint(fail.kind)
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
