# TFBridge: read-only inputs (included by julia/TFBridge.jl, inside module TFBridge).
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
# An empty input and an empty output may have one address: `y .= 2 .* x` copies x then.
Base.unaliascopy(A::ReadOnlyArray) = ReadOnlyArray(copy(A.parent), A.name)
Base.copy(A::ReadOnlyArray) = copy(A.parent)
Base.unsafe_copyto!(A::ReadOnlyArray, args...) = refuse(A)

refuse(A::ReadOnlyArray) = throw(ReadOnlyInputError(A.name))
refuse(A::AbstractArray) = refuse(parent(A))

# LinearAlgebra's in-place functions write a StridedArray through its pointer,
# past setindex!: refuse the ones whose destination is an input, or a
# reshaped or sliced vector or matrix of one (still strided, so still written
# through its pointer).  mul! reaches BLAS through LinearAlgebra's gemv!,
# gemm_wrapper!, syrk_wrapper! and herk_wrapper!, each with one or two
# methods: refusing there, rather than in mul!'s forty, keeps defining these
# cheap (methods added to mul! itself cost seconds of method-table work at
# every start).  Calls these do not catch end in a MethodError (ambiguous),
# which `failure` reports as the read-only error too (read_only_cause).
# One method each, with the rank fixed, as a Union or a free rank would lose
# to LinearAlgebra's own, more specific, StridedVector and StridedMatrix methods.
for D in (:(ReadOnlyArray{T}),
          :(Base.ReshapedArray{T,1,<:ReadOnlyArray{T}}), :(Base.ReshapedArray{T,2,<:ReadOnlyArray{T}}),
          :(SubArray{T,1,<:ReadOnlyArray{T}}), :(SubArray{T,2,<:ReadOnlyArray{T}}))
    @eval begin
        LinearAlgebra.gemv!(y::$D, tA::AbstractChar, A::StridedVecOrMat{T}, x::StridedVector{T},
                            α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(y)
        LinearAlgebra.gemm_wrapper!(C::$D, tA::AbstractChar, tB::AbstractChar, A::StridedVecOrMat{T},
                                    B::StridedVecOrMat{T}, _add) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.syrk_wrapper!(C::$D, tA::AbstractChar, A::StridedVecOrMat{T}, α::Number,
                                    β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.herk_wrapper!(C::$D, tA::AbstractChar, A::StridedVecOrMat, α::Number,
                                    β::Number) where {T} = refuse(C)
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
