# TFBridge: compiled entries (included by julia/TFBridge.jl, inside module TFBridge).
#
# A compiled entry (generated per op from its spec, templates/entries.jl.j2)
# is called from C through @cfunction with TF's buffers as raw pointers and
# shapes.  It wraps them with `tensor` below, exactly as the C++ runtime does
# for jl_call (CONTRACT.md), calls the user's function with argument types
# fixed at generation time, and reports a failure through LAST_FAILURE,
# since nothing may be thrown back into C.

"""
Per Julia thread (`LAST_FAILURE[Threads.threadid()]`), the failure of the
last compiled entry that failed on it, which the runtime reads back on the
same thread right after the entry returns.  Sized by `__init__`
(TFBridge.jl), for this process's threads.
"""
const LAST_FAILURE = Any[]

"""
    tensor(T, Val(N), data, k, ints, d, name)

The output `name` of TF dtype `T` and rank `N` whose buffer is `data[k]` and
whose rank and TF shape are `ints[d]`, `ints[d+1:d+N]`: a zero-copy view in TF
index order (rank 0: a 0-dimensional Array, 1: a Vector, 2: a `Transpose`,
>= 3: a reversed `PermutedDimsArray`), the same values the runtime builds for
jl_call.
"""
@inline tensor(::Type{T}, v::Val{N}, data::EntryData, k::Int, ints::EntryInts, d::Int, name::Symbol) where {T,N} =
    tf_view(buffer_array(T, v, data, k, ints, d, "output", name))

"""
    input_tensor(T, Val(N), data, k, ints, d, name)

`tensor`, read-only: the input `name` of the op, whose buffer belongs to
TensorFlow (a fed numpy array, a Const, another op's output).
"""
@inline function input_tensor(::Type{T}, ::Val{N}, data::EntryData, k::Int, ints::EntryInts, d::Int,
                              name::Symbol) where {T,N}
    rank = unsafe_load(ints, d)
    rank == N || throw(ArgumentError("input '$name' has rank $rank where the op's spec says $N"))
    dims = ntuple(i -> unsafe_load(ints, d + N + 1 - i), Val(N))  # column-major: TF's shape reversed
    return tf_view(ReadOnlyArray{T,N}(Ptr{T}(unsafe_load(data, k)), dims, name, nothing))
end

# The column-major Array over TF's row-major buffer: TF's shape reversed.
# `role` and `name` ("input", :x) name the argument in errors.
@inline function buffer_array(::Type{T}, ::Val{N}, data::EntryData, k::Int, ints::EntryInts,
                              d::Int, role::String, name::Symbol) where {T,N}
    rank = unsafe_load(ints, d)
    rank == N || throw(ArgumentError("$role '$name' has rank $rank where the op's spec says $N"))
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
