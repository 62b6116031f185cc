# Julia side of tf-julia-bridge.
#
# The C++ runtime (kernels_cpp/) loads this module into Main once, on Julia's
# thread, and calls only the functions below through jl_call.  Everything the
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
# Generated from bridge/julia_contract.py; the copy of this module built
# into libtfjl_julia.so has the file pasted in place of this line.
include(joinpath(@__DIR__, "contract.jl"))

# ---------------------------------------------------------------- errors

"""A call that threw: `text` is "<ExceptionType>: <message>\\n<backtrace>"."""
struct Failure
    text::String
    kind::Int   # INVALID_ARGUMENT, NOT_FOUND or INTERNAL (contract.jl)
end

# MethodError counts as a bad argument only when it is about the function the
# caller named (wrong arity or argument types); deeper MethodErrors are bugs
# inside that function and stay internal.
function error_kind(e, f)
    e isa LoadError && return error_kind(e.error, f)
    e isa ReadOnlyInputError && return INVALID_ARGUMENT
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
    # The bridge's own frames where the error was raised (a refused write into an input).
    while !isempty(frames) && in_bridge(frames[1])
        popfirst!(frames)
    end
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
    e = something(read_only_cause(e, f), e)
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
@inline tensor(::Type{T}, v::Val{N}, data::EntryData, k::Int, ints::EntryInts, d::Int) where {T,N} =
    tf_view(buffer_array(T, v, data, k, ints, d))

"""
    input_tensor(T, Val(N), data, k, ints, d, name)

`tensor`, read-only: the input `name` of the op, whose buffer belongs to
TensorFlow (a fed numpy array, a Const, another op's output).
"""
@inline input_tensor(::Type{T}, v::Val{N}, data::EntryData, k::Int, ints::EntryInts, d::Int,
                     name::Symbol) where {T,N} =
    tf_view(ReadOnlyArray(buffer_array(T, v, data, k, ints, d), name))

# The column-major Array over TF's row-major buffer: TF's shape reversed.
@inline function buffer_array(::Type{T}, ::Val{N}, data::EntryData, k::Int, ints::EntryInts,
                              d::Int) where {T,N}
    rank = unsafe_load(ints, d)
    rank == N || throw(ArgumentError("argument $k has rank $rank where the op's spec says $N"))
    p = Ptr{T}(unsafe_load(data, k))
    # An integer length takes jl_ptr_to_array_1d, which needs no boxed dims tuple.
    N == 1 && return unsafe_wrap(Array, p, unsafe_load(ints, d + 1))
    return unsafe_wrap(Array, p, ntuple(i -> unsafe_load(ints, d + N + 1 - i), Val(N)))
end

# TF's index order over a column-major array of the reversed shape.
@inline function tf_view(A::AbstractArray{T,N}) where {T,N}
    N <= 1 && return A
    N == 2 && return transpose(A)
    return PermutedDimsArray(A, ntuple(i -> N + 1 - i, Val(N)))
end

# ---------------------------------------------------------------- read-only inputs
#
# An op's inputs are TensorFlow's buffers: a numpy array fed by the user, a
# Const read by every later run, another op's output read by other ops.  They
# reach Julia as a ReadOnlyArray, which reads like the Array it wraps (it is a
# DenseArray: broadcasting, BLAS and LAPACK read it in place) and refuses
# every write with a ReadOnlyInputError naming the input.

"""Thrown when a Julia op writes into its input `name`."""
struct ReadOnlyInputError <: Exception
    name::Symbol
end

function Base.showerror(io::IO, e::ReadOnlyInputError)
    print(io, "ReadOnlyInputError: input '", e.name, "' is read-only: a Julia op must not write into its ",
          "inputs (they are TensorFlow's buffers, shared with fed arrays, constants and other ops); ",
          "write into an output, or into a copy (copy(", e.name, "))")
end

"""An input of a Julia op: TensorFlow's buffer, readable in place, never writable."""
struct ReadOnlyArray{T,N} <: DenseArray{T,N}
    parent::Array{T,N}
    name::Symbol
end

Base.parent(A::ReadOnlyArray) = A.parent
Base.size(A::ReadOnlyArray) = size(A.parent)
Base.length(A::ReadOnlyArray) = length(A.parent)
Base.IndexStyle(::Type{<:ReadOnlyArray}) = IndexLinear()
Base.@propagate_inbounds Base.getindex(A::ReadOnlyArray, i::Int) = A.parent[i]
Base.setindex!(A::ReadOnlyArray, v, i::Int...) = refuse(A)
Base.unsafe_convert(::Type{Ptr{T}}, A::ReadOnlyArray{T}) where {T} = Base.unsafe_convert(Ptr{T}, A.parent)
Base.elsize(::Type{<:ReadOnlyArray{T}}) where {T} = Base.elsize(Array{T})
Base.strides(A::ReadOnlyArray) = strides(A.parent)
Base.similar(A::ReadOnlyArray, ::Type{S}, dims::Dims) where {S} = similar(A.parent, S, dims)
Base.dataids(A::ReadOnlyArray) = Base.dataids(A.parent)
Base.copy(A::ReadOnlyArray) = copy(A.parent)
Base.unsafe_copyto!(A::ReadOnlyArray, args...) = refuse(A)

refuse(A::ReadOnlyArray) = throw(ReadOnlyInputError(A.name))
refuse(A::AbstractArray) = refuse(parent(A))

# LinearAlgebra's in-place functions write a StridedArray through its pointer,
# past setindex!: refuse the ones whose destination is an input.  Calls these
# do not catch end in a MethodError (ambiguous), which `failure` reports as
# the read-only error too (read_only_cause).
const _Strided{T} = Union{StridedVecOrMat{T}, LinearAlgebra.Transpose{<:Any,<:StridedVecOrMat{T}},
                          LinearAlgebra.Adjoint{<:Any,<:StridedVecOrMat{T}}}
# An input, or a reshaped or sliced vector or matrix of one (still strided,
# so still written through its pointer); one method each, with the rank
# fixed, as a Union or a free rank would lose to LinearAlgebra's own, more
# specific, StridedVector and StridedMatrix methods.
for D in (:(ReadOnlyArray{T}),
          :(Base.ReshapedArray{T,1,<:ReadOnlyArray{T}}), :(Base.ReshapedArray{T,2,<:ReadOnlyArray{T}}),
          :(SubArray{T,1,<:ReadOnlyArray{T}}), :(SubArray{T,2,<:ReadOnlyArray{T}}))
    @eval begin
        LinearAlgebra.mul!(C::$D, A::_Strided{T}, B::_Strided{T}, α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.mul!(C::$D, A::StridedVecOrMat{T}, B::StridedVector{T}, α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.mul!(C::$D, A::StridedVecOrMat{T}, B::StridedVecOrMat{T}, α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.ldiv!(A::LinearAlgebra.Factorization, B::$D) where {T} = refuse(B)
        LinearAlgebra.ldiv!(A::LinearAlgebra.AbstractTriangular, B::$D) where {T} = refuse(B)
        LinearAlgebra.lmul!(A::LinearAlgebra.AbstractTriangular, B::$D) where {T} = refuse(B)
        LinearAlgebra.rmul!(A::$D, B::LinearAlgebra.AbstractTriangular) where {T} = refuse(A)
        LinearAlgebra.rdiv!(A::$D, B::LinearAlgebra.AbstractTriangular) where {T} = refuse(A)
        LinearAlgebra.axpy!(α, x::AbstractArray, y::$D) where {T} = refuse(y)
        LinearAlgebra.axpby!(α, x::AbstractArray, β, y::$D) where {T} = refuse(y)
    end
    for f in (:lu!, :cholesky!, :qr!, :eigen!, :svd!, :bunchkaufman!, :ldlt!, :hessenberg!, :schur!, :lq!)
        @eval LinearAlgebra.$f(A::$D; kwargs...) where {T} = refuse(A)
        @eval LinearAlgebra.$f(A::$D, arg; kwargs...) where {T} = refuse(A)
    end
end

"""
The input that a failed in-place call of a library function (`mul!(x, ...)`
with no method for a read-only destination) was asked to write, or nothing.
`f` is the function the bridge called: its own MethodErrors (wrong arity)
are the user's, not a write.
"""
function read_only_cause(e, f)
    e isa MethodError || return nothing
    (e.f === f || (try parentmodule(e.f) === Main catch; true end)) && return nothing
    name = try string(nameof(e.f)) catch; "" end
    endswith(name, "!") || return nothing
    for a in e.args
        while a isa AbstractArray && !(a isa ReadOnlyArray) && parent(a) !== a
            a = parent(a)
        end
        a isa ReadOnlyArray && return ReadOnlyInputError(a.name)
    end
    return nothing
end

"""The string attribute whose bytes are at `data[k]` and whose length is `ints[d]`."""
@inline string_attr(data::EntryData, k::Int, ints::EntryInts, d::Int) =
    unsafe_string(Ptr{UInt8}(unsafe_load(data, k)), unsafe_load(ints, d))

"""`Main.name`, or `nothing` if it is not defined."""
main_function(name::Symbol) = isdefined(Main, name) ? getfield(Main, name) : nothing

# The generic path says the same from C++ (not_found in kernels_cpp/src/tfjl_julia/invoke.cc).
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

"""
The zero-copy view type of a column-major buffer holding a TF tensor of rank N
(N >= 2), over an Array, or over a ReadOnlyArray for an input.
"""
function view_type(::Type{T}, N::Int, input::Bool) where {T}
    parent = Array{T,N}(undef, ntuple(_ -> 0, N))
    return typeof(tf_view(input ? ReadOnlyArray(parent, :input) : parent))
end

readonly_type(::Type{T}, N::Int) where {T} = ReadOnlyArray{T,N}

dims_tuple_type(N::Int) = NTuple{N,Int}

# ---------------------------------------------------------------- dynamic outputs
#
# A dynamic output's value goes straight into TF's output buffer, copied
# once.  The runtime (collect_dynamic in kernels_cpp/src/tfjl_julia/invoke.cc) asks
# `dynamic_result` for the value's shape, has the kernel allocate the TF
# output of that shape, and then either copies `source` with one memcpy (the
# value's memory already lists its elements in TF's row-major order: a
# Vector, a transposed Matrix, an input) or calls `store_dynamic!`, one pass
# from Julia's column-major value into the row-major buffer.  The value stays
# rooted throughout: nothing is copied twice, nothing converted element by
# element through dynamic dispatch.

"""What the runtime needs of a dynamic output's value; fields boxed, so C reads them without allocating."""
struct DynamicValue
    value::Any           # numeric: an AbstractArray in TF index order; strings: a row-major Array{String}
    dims::Vector{Int64}  # its TF shape
    source::Any          # an Array{T} listing its elements in row-major order (memcpy), or nothing
end

not_convertible(x, ::Type{T}, position::Int) where {T} = ArgumentError(
    "dynamic output (argument $position) holds a $(typeof(x)), which does not convert to an Array{$T}")

"""
What a DynamicOutput `Ref{Any}` held after the call, as a `DynamicValue`.
`T` is the output's element type, `position` the argument's 1-based
position, for messages.  Numeric arrays are not copied here; strings are
collected into row-major order.
"""
function dynamic_result(x, ::Type{T}, position::Int) where {T}
    x === nothing && throw(ArgumentError(
        "dynamic output (argument $position) was not assigned: the function must set it, e.g. `o[] = A`"))
    A = if x isa AbstractArray
        x
    else
        fill(try convert(T, x) catch; throw(not_convertible(x, T, position)) end)
    end
    dims = collect(Int64, size(A))
    if T === String
        B = try convert(Array{T}, A) catch; throw(not_convertible(x, T, position)) end
        S = row_major(B)
        return DynamicValue(S, dims, S)
    end
    return DynamicValue(A, dims, row_major_source(A, T))
end

"""An Array whose memory lists the elements of `A` (of type `T`) in TF's row-major order, or nothing."""
row_major_source(A::AbstractArray, ::Type{T}) where {T} = nothing  # other element types: store_dynamic! converts
function row_major_source(A::AbstractArray{T,N}, ::Type{T}) where {T,N}
    M = dense_memory(A)
    # Column-major order is row-major order when at most one dimension exceeds 1.
    M !== nothing && count(>(1), size(A)) <= 1 && return M
    return reversed_memory(A)
end

# A view in TF's index order of a column-major array of the reversed shape
# (a transpose, a reversed PermutedDimsArray: how inputs arrive) has TF's
# row-major order in that array's memory.
reversed_memory(A) = nothing
reversed_memory(A::Union{LinearAlgebra.Transpose{T,<:AbstractVecOrMat{T}},
                         LinearAlgebra.Adjoint{T,<:AbstractVecOrMat{T}}}) where {T<:Real} = dense_memory(parent(A))
function reversed_memory(A::PermutedDimsArray{T,N,perm}) where {T,N,perm}
    perm == ntuple(i -> N + 1 - i, Val(N)) || return nothing
    return dense_memory(parent(A))
end

"""The Array holding the memory of `A`: `A` itself, or what a dense wrapper of the same size and memory wraps (an input's read-only array); or nothing."""
dense_memory(A) = nothing
dense_memory(A::Array) = A
function dense_memory(A::DenseArray)
    P = parent(A)
    (P !== A && P isa DenseArray && size(P) == size(A) && Base.dataids(P) == Base.dataids(A)) || return nothing
    return dense_memory(P)
end

"""
    store_dynamic!(p, nbytes, T, A, position)

Writes the dynamic output `A` (TF index order) into TF's row-major buffer at
`p`, `nbytes` bytes of elements of type `T`, in one pass: the buffer is the
column-major array of TF's shape reversed, filled by `copyto!` (rank <= 1),
`transpose!` (rank 2, cache-blocked) or a reversing `permutedims!`.
Elements convert to `T` on the way.
"""
function store_dynamic!(p::Ptr{Cvoid}, nbytes::Int, ::Type{T}, A::AbstractArray{S,N},
                        position::Int) where {T,S,N}
    length(A) * sizeof(T) == nbytes || throw(ErrorException(
        "dynamic output (argument $position) has $(length(A)) elements for a buffer of $nbytes bytes"))
    dest = unsafe_wrap(Array, Ptr{T}(p), reverse(size(A)))
    try
        if N <= 1
            copyto!(dest, A)
        elseif N == 2
            LinearAlgebra.transpose!(dest, A)
        else
            permutedims!(dest, A, ntuple(i -> N + 1 - i, Val(N)))
        end
    catch
        throw(not_convertible(A, T, position))
    end
    return nothing
end

end # module TFBridge
