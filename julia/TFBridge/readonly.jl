# TFBridge: read-only inputs (included by julia/TFBridge.jl, inside module TFBridge).
#
# An op's inputs are TensorFlow's buffers: a numpy array fed by the user, a
# Const read by every later run, another op's output read by other ops.  They
# reach Julia as a ReadOnlyArray, which reads like an Array (it is a
# DenseArray: broadcasting, BLAS and LAPACK read it in place), refuses every
# write with a ReadOnlyInputError naming the input, and leads to no writable
# Array of the buffer (it holds its address, not an Array over it).

"""Thrown when a Julia op writes into its input `name`."""
struct ReadOnlyInputError <: Exception
    name::Symbol
end

function Base.showerror(io::IO, e::ReadOnlyInputError)
    print(io, "ReadOnlyInputError: input '", e.name, "' is read-only: a Julia op must not write into its ",
          "inputs (they are TensorFlow's buffers, shared with fed arrays, constants and other ops); ",
          "write into an output, or into a copy (copy(", e.name, "))")
end

"""
An input of a Julia op: TensorFlow's buffer, readable in place, never writable.

It holds the buffer's address and shape, not an Array over it: nothing of its
public API (`parent`, `reshape`, `vec`, `view`, `transpose`, their `parent`s,
`Base.unaliascopy`, `Base.dataids`) and not even `getfield` reaches a
writable Array of TensorFlow's memory.  `parent(x)` is `x` itself (it wraps
no array); `copy`, `similar`, `collect`, `Array(x)` and `Base.unaliascopy`
copy.  `root` keeps Julia-owned memory alive (an Array the wrapper was made
from, an unaliased copy); it is `nothing` for TensorFlow's buffers.  The raw
address (`pointer(x)`, `getfield(x, :ptr)`) is as unguarded as any pointer.
"""
struct ReadOnlyArray{T,N} <: DenseArray{T,N}
    ptr::Ptr{T}
    dims::NTuple{N,Int}
    name::Symbol
    root::Any
end

"""A read-only view of the Array `A` (which it keeps alive), as input `name`."""
ReadOnlyArray(A::Array{T,N}, name::Symbol) where {T,N} = ReadOnlyArray{T,N}(pointer(A), size(A), name, A)

Base.size(A::ReadOnlyArray) = getfield(A, :dims)
Base.length(A::ReadOnlyArray) = prod(getfield(A, :dims))
Base.IndexStyle(::Type{<:ReadOnlyArray}) = IndexLinear()
Base.@propagate_inbounds function Base.getindex(A::ReadOnlyArray, i::Int)
    @boundscheck checkbounds(A, i)
    return GC.@preserve A unsafe_load(getfield(A, :ptr), i)
end
Base.setindex!(A::ReadOnlyArray, v, i::Int...) = refuse(A)
Base.unsafe_convert(::Type{Ptr{T}}, A::ReadOnlyArray{T}) where {T} = getfield(A, :ptr)
Base.elsize(::Type{<:ReadOnlyArray{T}}) where {T} = Base.elsize(Array{T})
Base.strides(A::ReadOnlyArray) = Base.size_to_strides(1, size(A)...)
Base.similar(A::ReadOnlyArray, ::Type{S}, dims::Dims) where {S} = Array{S}(undef, dims)
# An empty input shares no memory (TF's empty buffers may all have one
# address): broadcasting into an empty output then needs no copy of it.
Base.dataids(A::ReadOnlyArray) = length(A) == 0 ? () : (UInt(getfield(A, :ptr)),)
function Base.copy(A::ReadOnlyArray{T,N}) where {T,N}
    B = Array{T,N}(undef, size(A))
    GC.@preserve A B unsafe_copyto!(pointer(B), getfield(A, :ptr), length(B))
    return B
end
# What broadcasting takes where a source shares memory with the destination:
# a read-only array of the same type over a copy.
function Base.unaliascopy(A::ReadOnlyArray{T,N}) where {T,N}
    B = copy(A)
    return ReadOnlyArray{T,N}(pointer(B), size(A), getfield(A, :name), B)
end
# Base's own unaliascopy has no method for these wrappers of a non-Array
# (and PermutedDimsArray has none at all: it fails for Arrays too).
Base.unaliascopy(V::SubArray{T,N,<:ReadOnlyArray}) where {T,N} =
    typeof(V)(Base.unaliascopy(parent(V)), map(Base.unaliascopy, V.indices), V.offset1, V.stride1)
Base.unaliascopy(A::PermutedDimsArray{T,N,perm,iperm,<:Union{Array,ReadOnlyArray}}) where {T,N,perm,iperm} =
    PermutedDimsArray(Base.unaliascopy(parent(A)), perm)
Base.unsafe_copyto!(A::ReadOnlyArray, args...) = refuse(A)

refuse(A::ReadOnlyArray) = throw(ReadOnlyInputError(getfield(A, :name)))
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
Arrays over an input's memory that BLAS and LAPACK are handed by pointer:
the input itself, its views, reshapes (and their views), reinterpretations
and permutations.
"""
const ReadOnlyMemory = Union{ReadOnlyArray, SubArray{<:Any,<:Any,<:ReadOnlyArray},
                             Base.ReshapedArray{<:Any,<:Any,<:ReadOnlyArray},
                             SubArray{<:Any,<:Any,<:Base.ReshapedArray{<:Any,<:Any,<:ReadOnlyArray}},
                             Base.ReinterpretArray{<:Any,<:Any,<:Any,<:ReadOnlyArray},
                             PermutedDimsArray{<:Any,<:Any,<:Any,<:Any,<:ReadOnlyArray}}

# LAPACK overwrites its arrays (factors, solutions, eigenvectors, work), except
# the ones below, which it only reads: the factors a solve or a Q product
# reads (getrs!'s A and ipiv, ormqr!'s A and tau, ...), the matrices a
# condition number or a Sylvester equation reads.  BLAS writes the last array
# it takes (rot! both of its arrays).
const LAPACK_READS = Dict(
    :getrs! => (:A, :ipiv), :trtrs! => (:A,), :potrs! => (:A,), :sytrs! => (:A, :ipiv), :hetrs! => (:A, :ipiv),
    :sytrs_rook! => (:A, :ipiv), :hetrs_rook! => (:A, :ipiv), :gttrs! => (:dl, :d, :du, :du2, :ipiv),
    :pttrs! => (:D, :E), :gbtrs! => (:AB, :ipiv), :ormqr! => (:A, :tau), :ormlq! => (:A, :tau),
    :ormql! => (:A, :tau), :ormrq! => (:A, :tau), :ormhr! => (:A, :tau), :ormtr! => (:A, :tau),
    :ormrz! => (:A, :tau), :gemqrt! => (:V, :T), :trsyl! => (:A, :B), :trcon! => (:A,), :gecon! => (:A,),
    :pocon! => (:A,), :sycon! => (:A, :ipiv), :trevc! => (:select, :T), :trrfs! => (:A, :B, :X),
    :gebak! => (:scale,), :stein! => (:dv, :ev_in, :w_in, :iblock_in, :isplit_in), :orgqr! => (:tau,),
    :orglq! => (:tau,), :orgql! => (:tau,), :orgrq! => (:tau,), :orghr! => (:tau,), :orgtr! => (:tau,))

"""
The definitions of the methods refusing read-only memory where BLAS and
LAPACK write: for each function ending in `!` of `LinearAlgebra.BLAS`
(exported) and `LinearAlgebra.LAPACK`, each arity of its methods and each
position they write an array in, `f(::Any, ..., ::ReadOnlyMemory, ..., ::Any)`.
Where the function's own method takes more specific types in the other
positions the two are ambiguous, and the MethodError is reported as the
read-only error (`read_only_cause`).  BLAS and LAPACK write through the
pointer, past setindex!, so this is where writes into inputs are caught,
whichever LinearAlgebra function led there (mul! of a Symmetric, lmul! of a
Q factor, eigen! of a Symmetric, ...).  Any elsewhere keeps these few (one
per position, not per element type) and leaves BLAS's and LAPACK's compiled
callers valid: no call with a writable array there can match.
tests/customop/test_readonly_methods.py sweeps every method of
LinearAlgebra's and BLAS's mutating functions for a write that gets through,
or a read refused.  (One plain loop, no closures: it runs at every start
without a system image, compiled.)
"""
function write_guards()
    defs = Expr[]
    for (M, all) in ((LinearAlgebra.BLAS, false), (LinearAlgebra.LAPACK, true))
        for name in names(M; all = all)
            endswith(string(name), "!") || continue
            f = getfield(M, name)
            f isa Function || continue
            reads = M === LinearAlgebra.LAPACK ? get(LAPACK_READS, name, ()) : ()
            done = Tuple{Int,Int}[]
            for m in methods(f)
                m.module === M || continue
                types = Base.unwrap_unionall(m.sig).parameters
                argnames = Base.method_argnames(m)
                arrays = Int[]
                for i in 2:length(types)
                    Base.isvarargtype(types[i]) && (empty!(arrays); break)
                    typeintersect(types[i], AbstractArray) === Union{} || push!(arrays, i - 1)
                end
                if M === LinearAlgebra.BLAS && name !== :rot! && !isempty(arrays)
                    arrays = arrays[end:end]
                end
                for p in arrays
                    (argnames[p+1] in reads || (length(types) - 1, p) in done) && continue
                    push!(done, (length(types) - 1, p))
                    args = Any[Symbol(:arg, i) for i in 1:length(types)-1]
                    args[p] = :($(Symbol(:arg, p))::ReadOnlyMemory)
                    push!(defs, :($M.$name($(args...)) = refuse($(Symbol(:arg, p)))))
                end
            end
        end
    end
    return defs
end

eval(Expr(:block, write_guards()...))

# lu! of a Tridiagonal writes its bands in Julia, and over read-only bands it
# would fail on a typeassert first (its new band, similar(d), is an Array):
# say why instead.
LinearAlgebra.lu!(A::Tridiagonal{<:Any,<:ReadOnlyMemory}, pivot::Union{Val{false},Val{true}} = Val(true);
                  check::Bool = true) = refuse(A.d)

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
        a isa ReadOnlyArray && return ReadOnlyInputError(getfield(a, :name))
    end
    return nothing
end

"""The string attribute whose bytes are at `data[k]` and whose length is `ints[d]`."""
@inline string_attr(data::EntryData, k::Int, ints::EntryInts, d::Int) =
    unsafe_string(Ptr{UInt8}(unsafe_load(data, k)), unsafe_load(ints, d))
