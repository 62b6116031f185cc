# TFBridge: dynamic outputs (included by julia/TFBridge.jl, inside module TFBridge).
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

"""
A dynamic output as the Julia function receives it: a `Ref{Any}` that the
function assigns, `p[] = A`.  Its size is the array's, so nothing exists to
write into before that: `p .= ...`, `p[i] = v`, `copyto!(p, ...)` and
`fill!(p, v)` throw an ArgumentError that says so, naming the output.  The
runtime creates it (invoke.cc: `name` is the output's name in the spec, `what`
how errors call it) and reads `x` after the call (`dynamic_result`).
"""
mutable struct DynamicOutput <: Ref{Any}
    name::Symbol    # the output's name in the spec (:o when the kernel gave none)
    what::String    # "dynamic output 'p'", or "dynamic output (argument 2)" without a name
    x::Any          # the value assigned: undefined until then (so the constructor leaves it out)
    DynamicOutput(name::Symbol, what::String) = new(name, what)
end

function Base.getindex(r::DynamicOutput)
    isdefined(r, :x) || throw(ArgumentError(
        "$(r.what) has no value yet: the function assigns it, `$(r.name)[] = A`, before reading it"))
    return r.x
end
Base.setindex!(r::DynamicOutput, value) = (r.x = value; r)

function written_in_place(r::DynamicOutput)
    throw(ArgumentError("$(r.what) is assigned, not written in place: `$(r.name)[] = A` sets it to the " *
                        "array A, whose size becomes the output's (TensorFlow allocates it after the call, so " *
                        "`$(r.name) .= ...`, `$(r.name)[i] = ...`, copyto! and fill! have nothing to write into)"))
end
Base.setindex!(r::DynamicOutput, value, i...) = written_in_place(r)
Base.copyto!(r::DynamicOutput, src) = written_in_place(r)
Base.fill!(r::DynamicOutput, value) = written_in_place(r)
Base.Broadcast.materialize!(r::DynamicOutput, value) = written_in_place(r)
Base.Broadcast.materialize!(r::DynamicOutput, bc::Base.Broadcast.Broadcasted) = written_in_place(r)

"""What the runtime needs of a dynamic output's value; fields boxed, so C reads them without allocating."""
struct DynamicValue
    value::Any           # numeric: an AbstractArray in TF index order; strings: a row-major Array{String}
    dims::Vector{Int64}  # its TF shape
    source::Any          # an Array{T} listing its elements in row-major order (memcpy), or nothing
end

not_convertible(x, ::Type{T}, r::DynamicOutput) where {T} = ArgumentError(
    "$(r.what) holds a $(typeof(x)), which does not convert to an Array{$T}")

"""
What the dynamic output `r` held after the call, as a `DynamicValue`.  `T`
is the output's element type.  Numeric arrays are not copied here; strings
are collected into row-major order.
"""
function dynamic_result(r::DynamicOutput, ::Type{T}) where {T}
    x = isdefined(r, :x) ? r.x : nothing
    x === nothing && throw(ArgumentError(
        "$(r.what) was not assigned: the function must set it, e.g. `$(r.name)[] = A`"))
    A = if x isa AbstractArray
        x
    else
        fill(try convert(T, x) catch; throw(not_convertible(x, T, r)) end)
    end
    dims = collect(Int64, size(A))
    if T === String
        B = try convert(Array{T}, A) catch; throw(not_convertible(x, T, r)) end
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
# An input's own memory, for the runtime to copy from (never handed to the op).
dense_memory(A::ReadOnlyArray) = unsafe_wrap(Array, getfield(A, :ptr), size(A))
function dense_memory(A::DenseArray)
    P = parent(A)
    (P !== A && P isa DenseArray && size(P) == size(A) && Base.dataids(P) == Base.dataids(A)) || return nothing
    return dense_memory(P)
end

"""
    store_dynamic!(p, nbytes, T, A, r)

Writes the dynamic output `A` (TF index order) into TF's row-major buffer at
`p`, `nbytes` bytes of elements of type `T`, in one pass: the buffer is the
column-major array of TF's shape reversed, filled by `copyto!` (rank <= 1),
`transpose!` (rank 2, cache-blocked) or a reversing `permutedims!`.
Elements convert to `T` on the way; `r` is the DynamicOutput, for messages.
"""
function store_dynamic!(p::Ptr{Cvoid}, nbytes::Int, ::Type{T}, A::AbstractArray{S,N},
                        r::DynamicOutput) where {T,S,N}
    length(A) * sizeof(T) == nbytes || throw(ErrorException(
        "$(r.what) has $(length(A)) elements for a buffer of $nbytes bytes"))
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
        throw(not_convertible(A, T, r))
    end
    return nothing
end
