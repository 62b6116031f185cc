# TFBridge: kernels, the types the generic path's kernels wrap TF's buffers in
# (included by julia/TFBridge.jl, inside module TFBridge).

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
