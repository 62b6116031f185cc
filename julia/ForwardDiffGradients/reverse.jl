# TFBridge.ForwardDiffGradients: the reverse mode (included by
# julia/ForwardDiffGradients.jl): one forward pass on Tracked numbers
# (tracked.jl), then one sweep back over its tape from the outputs, weighted
# by their incoming gradients, to every input.  For second order the tape's
# values are dual numbers moving along v (DIRECTION): the outputs' inner
# partials are J v, and the sweep's, d/dx [gy' J v] (forward over reverse).

"""Adjoint seeds of an output element `y` weighted by its incoming gradient `g` (`adj` indexed by node)."""
@inline seed_adjoint!(adj::Vector{V}, y::Tracked, g::Real) where {V} =
    (y.node == 0 || (adj[y.node] += convert(V, g)); adj)
@inline seed_adjoint!(adj::Vector, y::Complex{<:Tracked}, g::Number) =
    (seed_adjoint!(adj, real(y), real(g)); seed_adjoint!(adj, imag(y), imag(g)))
@inline seed_adjoint!(adj::Vector, y::Real, g::Number) = adj   # does not depend on the inputs

function seed_adjoints!(adj::Vector, Y::AbstractArray, G::AbstractArray)
    for (y, g) in zip(Y, G)
        seed_adjoint!(adj, y, g)
    end
    return adj
end

"""Sweep `t` back from the seeds in `adj` (by node): `adj` ends holding every node's adjoint."""
function sweep!(adj::Vector{V}, t::Tape{V}) where {V}
    last = length(t)
    # Between products, scalar nodes; a product's own nodes have no parents, and once the sweep has passed
    # them (every later node added its share), the product sends their adjoints to its factors.
    for j in length(t.products):-1:1
        p = t.products[j]
        sweep_nodes!(adj, t.nodes, p.first, last)
        backward!(adj, p)
        last = p.first - 1
    end
    return sweep_nodes!(adj, t.nodes, 1, last)
end

function sweep_nodes!(adj::Vector{V}, nodes::Vector{Node{V}}, first::Int, last::Int) where {V}
    @inbounds for i in last:-1:first
        i & 0xfffff == 0 && checkinterrupt()   # every million nodes
        a = adj[i]
        vanishes(a) && continue
        node = nodes[i]
        node.first == 0 || (adj[node.first] += a * node.first_partial)
        node.second == 0 || (adj[node.second] += a * node.second_partial)
    end
    return adj
end

"""
Whether an adjoint sends nothing back: zero, and for second order's dual
numbers zero in its partial too.  (ForwardDiff's `iszero` of a dual number
looks at its value alone: skipping on it lost every move along the
direction of a node whose first-order adjoint is zero, at a minimum all of
them.)
"""
@inline vanishes(a::Float64) = iszero(a)
@inline vanishes(a::Dual{DIRECTION,Float64,1}) = iszero(value(a)) && iszero(partials(a)[1])

"""The tape's adjoints, one per node, zeros."""
adjoints!(t::Tape{V}) where {V} = fill!(resize!(t.adjoints, length(t)), zero(V))

"""Per op, the length of its last tape, to size the next one."""
const TAPE_SIZES = Dict{String,Int}()
const TAPE_SIZES_LOCK = ReentrantLock()

tape_size(L::Layout) = lock(() -> get(TAPE_SIZES, L.op, 0), TAPE_SIZES_LOCK)
remember_size!(L::Layout, t::Tape) = lock(() -> (TAPE_SIZES[L.op] = length(t)), TAPE_SIZES_LOCK)

"""The dual copy of input `x` (memory order) as leaves of tape `t`; values moved along `v` for second order."""
function tracked_input(t::Tape{V}, x::AbstractArray, v = nothing) where {V}
    M = memory(x)
    E = lifted(eltype(M), Tracked{V})
    B = Array{E}(undef, size(M))
    D = v === nothing ? nothing : memory(v)
    @inbounds for k in eachindex(M)
        B[k] = tracked_leaf(t, M[k], D === nothing ? nothing : D[k])
    end
    return B
end

tracked_leaf(t::Tape{V}, x::Real, ::Nothing) where {V} = leaf(t, x)
tracked_leaf(t::Tape{V}, x::Complex, ::Nothing) where {V} = complex(leaf(t, real(x)), leaf(t, imag(x)))
tracked_leaf(t::Tape{V}, x::Real, v::Number) where {V} = leaf(t, V(Float64(x), Partials{1,Float64}((Float64(real(v)),))))
tracked_leaf(t::Tape{V}, x::Complex, v::Number) where {V} =
    complex(tracked_leaf(t, real(x), real(v)), tracked_leaf(t, imag(x), imag(v)))

"""Add the adjoints of the leaves of buffer `B` (an input's, memory order) to its gradient `G`, `part` of each adjoint."""
function gather!(G::AbstractArray, B::AbstractArray, adj::Vector, part::F) where {F<:Function}
    @inbounds for k in eachindex(B)
        G[k] += gathered(B[k], adj, part, eltype(G))
    end
    return G
end

@inline gathered(b::Tracked, adj, part, ::Type{T}) where {T} = convert(T, part(adj[b.node]))
@inline gathered(b::Complex{<:Tracked}, adj, part, ::Type{T}) where {T} =
    convert(T, complex(part(adj[real(b).node]), part(adj[imag(b).node])))

first_part(a::Float64) = a
@inline directional(y::Tracked{<:Dual}) = partials(y.value)[1]
inner_part(a::Dual) = partials(a)[1]

"""`gradient!` by the reverse mode: one recording pass, one sweep."""
function reverse_gradient!(L::Layout, grads::Tuple, gys::Tuple, ys::Tuple, xs::Tuple, attrs::Tuple)
    recording(Float64, tape_size(L)) do t
        P = Passes(L, ys, xs, attrs, (i, x) -> tracked_input(t, x), T -> lifted(T, Tracked{Float64}))
        P.ndirections == 0 && return nothing
        values = forward!(P)
        remember_size!(L, t)
        adj = adjoints!(t)
        for (j, o) in enumerate(L.differentiable_outputs)
            seed_adjoints!(adj, values[j], paired(L, o, values[j], gys[j]))
        end
        sweep!(adj, t)
        for (i, B) in enumerate(P.buffers)
            gather!(memory(grads[i]), B, adj, first_part)
        end
        return nothing
    end
end

"""`second!` by forward over reverse: one recording pass on values moving along v, one sweep."""
function reverse_second!(L::Layout, grad_gys::Tuple, grad_xs::Tuple, vs::Tuple, gys::Tuple, ys::Tuple, xs::Tuple,
                         attrs::Tuple)
    V = Dual{DIRECTION,Float64,1}
    recording(V, tape_size(L)) do t
        P = Passes(L, ys, xs, attrs, (i, x) -> tracked_input(t, x, vs[i]), T -> lifted(T, Tracked{V}))
        P.ndirections == 0 && return nothing
        values = forward!(P)
        remember_size!(L, t)
        adj = adjoints!(t)
        for (j, o) in enumerate(L.differentiable_outputs)
            store_directional!(paired(L, o, values[j], grad_gys[j]), values[j])
            seed_adjoints!(adj, values[j], paired(L, o, values[j], gys[j]))
        end
        sweep!(adj, t)
        for (i, B) in enumerate(P.buffers)
            gather!(memory(grad_xs[i]), B, adj, inner_part)
        end
        return nothing
    end
end
