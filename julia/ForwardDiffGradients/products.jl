# TFBridge.ForwardDiffGradients: matrix products as single entries of the
# reverse mode's tape (included by julia/ForwardDiffGradients.jl, after
# tracked.jl; reverse.jl sweeps them).
#
# Recorded scalar by scalar, a product of an m x k matrix by a k x n one
# costs 2mkn nodes (a multiply and an add each), and the sweep back as many
# scattered updates: TwoLayer, whose forward function takes
# ForwardDiff.jacobian of two 21 x 21 layers, recorded 47,000 nodes, 60
# times its hand-written backward.  Recorded as a product, the values come
# from BLAS, C's elements are nodes without parents, and the sweep back,
# on reaching them, adds dC B' to A's adjoints and A' dC to B's, by BLAS
# again.  Julia's matrix products of non-BLAS element types all end in
# LinearAlgebra's generic_matvecmul! and _generic_matmatmul! (Julia 1.5,
# the version this project runs): the methods below take those whose result
# holds tracked numbers, or ForwardDiff's dual numbers over tracked numbers
# (a forward function taking ForwardDiff.jacobian of its own), whose values
# and partials are each such a product.  Anything else (complex numbers,
# nested dual numbers, arrays of abstract element types) goes the generic
# way, scalar by scalar, as before.

import LinearAlgebra: MulAddMul

"""`A * B` of value matrices: BLAS for Float64; for second order's dual numbers, three BLAS products."""
dense(A::AbstractMatrix{Float64}, B::AbstractMatrix{Float64}) = A * B
function dense(A::AbstractMatrix{D}, B::AbstractMatrix{D}) where {D<:Dual{DIRECTION,Float64,1}}
    A0, A1 = value.(A), direction_partial.(A)
    B0, B1 = value.(B), direction_partial.(B)
    C1 = A1 * B0
    LinearAlgebra.mul!(C1, A0, B1, true, true)
    return Dual{DIRECTION}.(A0 * B0, C1)
end
@inline direction_partial(d::Dual{DIRECTION,Float64,1}) = partials(d)[1]

"""
A factor of a recorded product: the values (as `V`) and nodes (0 for a
constant) of `X`'s components `parts` (0: the value, p: the p-th partial
of a dual number; a plain or tracked number's partials are zeros), stacked
below one another (`rows`) or side by side; `nothing` if `X` holds other
numbers than tracked numbers of values `V`, plain real numbers, or dual
numbers of tag `T` and `N` partials over either.
"""
function factor(::Type{V}, ::Type{T}, ::Val{N}, X::AbstractMatrix, parts::UnitRange{Int}, rows::Bool) where {V,T,N}
    m, k = size(X)
    count = length(parts)
    values = Matrix{V}(undef, rows ? m * count : m, rows ? k : k * count)
    nodes = Matrix{Int32}(undef, size(values))
    tracked = false
    @inbounds for j in 1:k, i in 1:m
        x = X[i, j]
        for (q, p) in enumerate(parts)
            c = component(x, p, T, Val(N))
            c === nothing && return nothing
            r, s = rows ? ((q - 1) * m + i, j) : (i, (q - 1) * k + j)
            if c isa Tracked{V}
                values[r, s], nodes[r, s] = c.value, c.node
                tracked |= c.node != 0
            elseif c isa Tracked
                return nothing
            else
                values[r, s], nodes[r, s] = convert(V, c), Int32(0)
            end
        end
    end
    return values, tracked ? nodes : Matrix{Int32}(undef, 0, 0)
end

"""Component `p` of `x` (0: its value), or `nothing` for a number a product cannot record."""
@inline component(x::Dual{T,<:Real,N}, p::Int, ::Type{T}, ::Val{N}) where {T,N} =
    (c = p == 0 ? value(x) : partials(x)[p]; c isa Dual ? nothing : c)
@inline component(x::Dual, p::Int, ::Type, ::Val) = nothing   # another tag, or a factor not of dual type
@inline component(x::Real, p::Int, ::Type, ::Val) = p == 0 ? x : zero(x)
@inline component(x, p::Int, ::Type, ::Val) = nothing

"""
The product of two factors (`factor`) recorded on the tape of this task:
the number of the node of its first element (0 if both factors are
constant) and its values.
"""
function record_product(::Type{V}, a, b) where {V}
    (A_values, A_nodes), (B_values, B_nodes) = a, b
    C_values = dense(A_values, B_values)
    isempty(A_nodes) && isempty(B_nodes) && return 0, C_values
    t = tape(V)
    first = parentless!(t, length(C_values))
    push!(t.products, Product{V}(first, A_values, B_values, A_nodes, B_nodes))
    return first, C_values
end

"""Element `(i, j)` of a recorded product `(first, values)` as a tracked number."""
@inline function element(::Type{V}, (first, values)::Tuple{Int,Matrix{V}}, i::Int, j::Int) where {V}
    k = (j - 1) * size(values, 1) + i
    return Tracked{V}(values[k], first == 0 ? Int32(0) : Int32(first + k - 1))
end

"""At the sweep back, once every node of C holds its adjoint: add dC B' to A's elements', A' dC to B's."""
function backward!(adj::Vector{V}, p::Product{V}) where {V}
    m, n = size(p.A, 1), size(p.B, 2)
    dC = Matrix{V}(undef, m, n)
    copyto!(dC, 1, adj, p.first, m * n)
    all(vanishes, dC) && return adj
    isempty(p.A_nodes) || scatter_adjoints!(adj, p.A_nodes, dense(dC, transpose(p.B)))
    isempty(p.B_nodes) || scatter_adjoints!(adj, p.B_nodes, dense(transpose(p.A), dC))
    return adj
end

function scatter_adjoints!(adj::Vector, nodes::Matrix{Int32}, d::Matrix)
    @inbounds for k in eachindex(nodes)
        nodes[k] == 0 || (adj[nodes[k]] += d[k])
    end
    return adj
end

"""
`A * B` (`A` m x k, `B` k x n) for a result of element type `E` (tracked
numbers of values `V`, or dual numbers over them: `T`, `N`) as at most two
recorded products, or `nothing` (the generic way).  With dual numbers, A =
A0 + sum Ap e_p and B likewise: one product A0 [B0 B1 ... BN] when A has no
partials, [A0; A1; ...; AN] B0 when B has none, both [A0; ...; AN] B0 and
A0 [B1 ... BN] otherwise.
"""
function product(::Type{E}, A::AbstractMatrix, B::AbstractMatrix) where {E}
    V, T, N = values_of(E)
    m, n = size(A, 1), size(B, 2)
    A_dual, B_dual = eltype(A) <: Dual, eltype(B) <: Dual
    (A_dual || B_dual) && !(E <: Dual) && return nothing
    # A factor whose element type is not a dual type reads a dual element as a number it cannot record (Nothing).
    a = factor(V, A_dual ? T : Nothing, Val(N), A, 0:(A_dual ? N : 0), true)
    b = factor(V, B_dual ? T : Nothing, Val(N), B, 0:(!A_dual && B_dual ? N : 0), false)
    (a === nothing || b === nothing) && return nothing
    left = record_product(V, a, b)
    right = nothing
    if A_dual && B_dual
        right = record_product(V, factor(V, T, Val(N), A, 0:0, true), factor(V, T, Val(N), B, 1:N, false))
    end
    stacking = A_dual ? (B_dual ? :both : :rows) : (B_dual ? :columns : :none)
    C = Matrix{E}(undef, m, n)
    @inbounds for j in 1:n, i in 1:m
        C[i, j] = assemble(E, left, right, stacking, i, j, m, n)
    end
    return C
end

values_of(::Type{Tracked{V}}) where {V} = (V, Nothing, 0)
values_of(::Type{<:Dual{T,Tracked{V},N}}) where {T,V,N} = (V, T, N)

"""Element (i, j) of the product from the recorded products `left` and `right`, stacked as `product` says."""
@inline assemble(::Type{Tracked{V}}, left, right, stacking, i, j, m, n) where {V} = element(V, left, i, j)
@inline function assemble(::Type{D}, left, right, stacking, i, j, m, n) where {T,V,N,D<:Dual{T,Tracked{V},N}}
    parts = ntuple(Val(N)) do p
        stacking === :none && return Tracked{V}(zero(V), Int32(0))
        stacking === :columns && return element(V, left, i, p * n + j)
        from_a = element(V, left, p * m + i, j)
        stacking === :rows ? from_a : from_a + element(V, right, i, (p - 1) * n + j)
    end
    return D(element(V, left, i, j), Partials{N,Tracked{V}}(parts))
end

# ---------------------------------------------------------------- LinearAlgebra's entry points

"""The elements a recorded product can hold: tracked numbers, or dual numbers over them."""
const Recordable = Union{Tracked, Dual{<:Any,<:Tracked}}

"""`op(A)` of a generic product's `tA` ('N', 'T' or 'C': the same for real numbers) as a matrix."""
oriented(t::AbstractChar, A::AbstractVector) = t == 'N' ? reshape(A, :, 1) : reshape(A, 1, :)
oriented(t::AbstractChar, A::AbstractMatrix) = t == 'N' ? A : transpose(A)

"""C = alpha * P + beta * C, as the generic product does."""
function store_product!(C::AbstractVecOrMat, P::Matrix, add::MulAddMul)
    @inbounds for k in eachindex(P)
        LinearAlgebra._modify!(add, P[k], C, k)
    end
    return C
end

function LinearAlgebra.generic_matvecmul!(C::AbstractVector{E}, tA, A::AbstractVecOrMat, B::AbstractVector,
                                          add::MulAddMul = MulAddMul()) where {E<:Recordable}
    a = oriented(tA, A)
    if !Base.has_offset_axes(C, A, B) && size(a, 2) == length(B) > 0 && size(a, 1) == length(C)
        P = product(E, a, reshape(B, :, 1))
        P === nothing || return store_product!(C, P, add)
    end
    return invoke(LinearAlgebra.generic_matvecmul!, Tuple{AbstractVector,Any,AbstractVecOrMat,AbstractVector,MulAddMul},
                  C, tA, A, B, add)
end

function LinearAlgebra._generic_matmatmul!(C::AbstractVecOrMat{E}, tA, tB, A::AbstractVecOrMat, B::AbstractVecOrMat,
                                           add::MulAddMul) where {E<:Recordable}
    a, b = oriented(tA, A), oriented(tB, B)
    if !Base.has_offset_axes(C, A, B) && size(a, 2) == size(b, 1) > 0 && length(C) == size(a, 1) * size(b, 2) &&
       size(C, 1) == size(a, 1)
        P = product(E, a, b)
        P === nothing || return store_product!(C, P, add)
    end
    return invoke(LinearAlgebra._generic_matmatmul!,
                  Tuple{AbstractVecOrMat,Any,Any,AbstractVecOrMat,AbstractVecOrMat,MulAddMul}, C, tA, tB, A, B, add)
end
