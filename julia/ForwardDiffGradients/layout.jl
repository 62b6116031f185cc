# TFBridge.ForwardDiffGradients: what first and second order share (included
# by julia/ForwardDiffGradients.jl): an op's layout, the forward function's
# arguments built over dual numbers, seeding chunks of directions, and one
# forward pass.
#
# Arrays: the kernels pass every tensor as a view in TF's index order of a
# column-major array of the reversed shape (julia/TFBridge/entries.jl,
# `tf_view`), so `memory(x)` lists its elements in TF's row-major order.  The
# dual copies of the inputs and the outputs' buffers are built the same way
# (a ReadOnlyArray for an input), so the forward function receives the types
# it receives from the kernel, with dual numbers for elements.  A direction
# is one real degree of freedom of a differentiable input: an element, or
# the real or imaginary part of a complex one, numbered input by input in
# memory order.

"""
An op's arguments, as its spec gives them (the build writes one per op,
templates/forwarddiff.jl.j2): the forward function's name (resolved from
Main at each call, so a redefinition takes effect), the names, element
types and ranks of the inputs and outputs, the attributes' types, which
inputs and outputs are differentiable (float or complex) and which outputs
are dynamic (sized by Julia).
"""
struct Layout
    op::String
    forward::String
    inputs::Vector{Symbol}
    input_types::Vector{DataType}
    input_ranks::Vector{Int}
    outputs::Vector{Symbol}
    output_types::Vector{DataType}
    output_ranks::Vector{Int}
    attr_types::Vector{DataType}
    differentiable_inputs::Vector{Int}
    differentiable_outputs::Vector{Int}
    dynamic::Vector{Bool}
end

"""The column-major array under a tensor's view: its elements in TF's row-major order."""
memory(A::Union{Transpose,PermutedDimsArray}) = parent(A)
memory(A::AbstractArray) = A

realtype(::Type{T}) where {T<:Real} = T
realtype(::Type{Complex{T}}) where {T<:Real} = T

"""Directions per element: 1 for a real one, 2 (real and imaginary parts) for a complex one."""
parts(::Type{<:Real}) = 1
parts(::Type{<:Complex}) = 2

"""The dual element type `D` (a real dual type) for elements of type `T`: `D`, or `Complex{D}`."""
lifted(::Type{<:Real}, ::Type{D}) where {D} = D
lifted(::Type{<:Complex}, ::Type{D}) where {D} = Complex{D}

"""
One kind of forward pass set up for an op: the forward function's
arguments, with dual copies of the differentiable inputs (`buffers`, in
memory order) and dual buffers for the differentiable outputs (`outputs`:
memory order, or `nothing` for a dynamic output, which each pass assigns).
"""
struct Passes
    layout::Layout
    f::Any
    args::Vector{Any}
    buffers::Vector{Any}
    outputs::Vector{Any}
    offsets::Vector{Int}      # directions before each differentiable input
    counts::Vector{Int}       # its directions
    ndirections::Int
end

"""
The passes of `layout`'s forward function on the forward op's outputs `ys`
(for their shapes and types) and inputs `xs`, attributes `attrs`: `input(i, x)`
gives the dual copy (memory order) of the `i`-th differentiable input `x`,
`output_eltype(T)` the dual element type of an output of element type `T`.
"""
function Passes(L::Layout, ys::Tuple, xs::Tuple, attrs::Tuple, input::Function, output_eltype::Function)
    f = resolve_function(L.forward)
    f === nothing && throw(UndefVarError(Symbol(L.forward)))  # the kernel's failure says what is missing
    nout, nin = length(ys), length(xs)
    args = Vector{Any}(undef, nout + nin + length(attrs))
    outputs = Any[]
    for (o, y) in enumerate(ys)
        differentiable = o in L.differentiable_outputs
        if L.dynamic[o]
            args[o] = nothing  # a new DynamicOutput at each pass
            differentiable && push!(outputs, nothing)
        elseif y isa AbstractString || eltype(y) <: AbstractString
            args[o] = L.output_ranks[o] == 0 ? fill("") : fill("", size(y))
        elseif differentiable
            E = output_eltype(eltype(y))
            Y = fill(zero(E), reverse(size(y)))
            args[o] = tf_view(Y)
            push!(outputs, Y)
        else
            args[o] = tf_view(Array{eltype(y)}(undef, reverse(size(y))))
        end
    end
    buffers, offsets, counts, n = Any[], Int[], Int[], 0
    for (i, x) in enumerate(xs)
        if i in L.differentiable_inputs
            B = input(length(buffers) + 1, x)
            args[nout + i] = readonly_view(B, L.inputs[i])
            push!(buffers, B)
            push!(offsets, n)
            push!(counts, length(B) * parts(eltype(B)))
            n += counts[end]
        else
            args[nout + i] = x
        end
    end
    for (a, value) in enumerate(attrs)
        args[nout + nin + a] = value
    end
    return Passes(L, f, args, buffers, outputs, offsets, counts, n)
end

# (A function of B's type: `ReadOnlyArray{eltype(B),ndims(B)}` built in Passes' loop over untyped buffers cost
# more than TwoLayer's whole sweep.)
readonly_view(B::Array{T,N}, name::Symbol) where {T,N} = tf_view(ReadOnlyArray{T,N}(pointer(B), size(B), name, B))

"""A dual number `d` with partial `slot` one and the others zero (`slot` 0: all zero)."""
@inline function seeded(d::Dual{T,V,N}, slot::Int) where {T,V,N}
    return Dual{T}(value(d), Partials{N,V}(ntuple(q -> q == slot ? one(V) : zero(V), Val(N))))
end

"""Seed directions `lo:hi` of buffer `B` (local numbering) with slots from `slot` on, or clear them (`on` false)."""
function seed_range!(B::Array{<:Dual}, lo::Int, hi::Int, slot::Int, on::Bool)
    @inbounds for l in lo:hi
        B[l] = seeded(B[l], on ? slot + l - lo : 0)
    end
    return B
end

function seed_range!(B::Array{<:Complex}, lo::Int, hi::Int, slot::Int, on::Bool)
    @inbounds for l in lo:hi
        k, s = (l + 1) >> 1, on ? slot + l - lo : 0
        z = B[k]
        B[k] = isodd(l) ? complex(seeded(real(z), s), imag(z)) : complex(real(z), seeded(imag(z), s))
    end
    return B
end

"""Seed directions `first:last` (slot 1 for `first`), or clear them."""
function seed!(P::Passes, first::Int, last::Int, on::Bool)
    for (i, B) in enumerate(P.buffers)
        lo, hi = max(first, P.offsets[i] + 1), min(last, P.offsets[i] + P.counts[i])
        lo <= hi && seed_range!(B, lo - P.offsets[i], hi - P.offsets[i], lo - first + 1, on)
    end
    return P
end

"""`(i, k, part)` of direction `d`: differentiable input `i`, element `k` in memory order, part 1 (real) or 2 (imaginary)."""
function locate(P::Passes, d::Int)
    i = findlast(o -> o < d, P.offsets)
    l = d - P.offsets[i]
    return eltype(P.buffers[i]) <: Complex ? (i, (l + 1) >> 1, 2 - (l & 1)) : (i, l, 1)
end

"""
Run the forward function once on the passes' arguments; the differentiable
outputs' values, in the order of `layout.differentiable_outputs`: a
buffer in memory order, or a dynamic output's array in TF's index order.
"""
function forward!(P::Passes)
    L = P.layout
    dynamic = DynamicOutput[]
    for o in eachindex(L.outputs)
        if L.dynamic[o]
            r = DynamicOutput(L.outputs[o], "dynamic output '$(L.outputs[o])'")
            P.args[o] = r
            push!(dynamic, r)
        end
    end
    P.f(P.args...)
    values = Any[]
    for (j, o) in enumerate(L.differentiable_outputs)
        if L.dynamic[o]
            r = P.args[o]::DynamicOutput
            isdefined(r, :x) || throw(ArgumentError(
                "$(r.what) was not assigned: the function must set it, e.g. `$(r.name)[] = A`"))
            push!(values, r.x)
        else
            push!(values, P.outputs[j])
        end
    end
    return values
end

"""
The incoming gradient (or any array shaped like output `o`) to pair with
`value`, the output's value from `forward!`: its memory for a buffer, the
view itself for a dynamic output, whose size is checked against the
forward op's (it must not depend on the differentiated values).
"""
function paired(L::Layout, o::Int, value, g::AbstractArray)
    L.dynamic[o] || return memory(g)
    value isa AbstractArray && size(value) == size(g) || throw(DimensionMismatch(
        "@gradient forwarddiff: $(L.op)'s forward function $(L.forward) gave its dynamic output " *
        "'$(L.outputs[o])' the size $(value isa AbstractArray ? size(value) : "of a $(typeof(value))") on dual " *
        "numbers but $(size(g)) on the op's inputs: the size of a dynamic output must not depend on the " *
        "values of the differentiable inputs (write the backward function instead)"))
    return g
end

"""Add the `p`-th accumulated partial to direction `d`'s element of the gradient arrays `grads`."""
function scatter!(P::Passes, grads::Tuple, acc::Partials, first::Int, last::Int)
    for d in first:last
        i, k, part = locate(P, d)
        add_part!(memory(grads[i]), k, part, acc[d - first + 1])
    end
end

"""
The forward passes of `P` by dual numbers, CHUNK directions at a time
(seeded in slots 1 to CHUNK): `contract(values, first)` gives the partials
of the chunk starting at direction `first` from the pass's output values,
which are added to the gradient arrays `grads`.
"""
function each_chunk(contract::Function, P::Passes, grads::Tuple)
    for first in 1:CHUNK:P.ndirections
        checkinterrupt()
        last = min(first + CHUNK - 1, P.ndirections)
        seed!(P, first, last, true)
        acc = contract(forward!(P), first)
        scatter!(P, grads, acc, first, last)
        seed!(P, first, last, false)
    end
    return nothing
end

add_part!(G::AbstractArray{<:Real}, k::Int, part::Int, v) = (G[k] += v; G)
add_part!(G::AbstractArray{<:Complex}, k::Int, part::Int, v) =
    (G[k] += part == 1 ? complex(v, zero(v)) : complex(zero(v), v); G)

# ---------------------------------------------------------------- forward or reverse

"""
How gradients are computed: `:auto` (the reverse mode, or dual numbers for
an op whose forward function the reverse mode cannot run: FORWARD_ONLY),
`:forward` or `:reverse` (for tests and benchmarks:
`TFBridge.ForwardDiffGradients.MODE[] = :forward`).  The reverse mode costs
a recording pass and a sweep, about 7 times the forward function in Julia
(docs/performance.md) whatever the number of inputs; dual numbers cost a
pass per CHUNK input directions, each a few times the forward function:
more from a few dozen inputs on.
"""
const MODE = Ref(:auto)

"""The ops whose forward function the reverse mode cannot run (found at load, or at a first gradient): dual numbers only."""
const FORWARD_ONLY = Set{String}()
const FORWARD_ONLY_LOCK = ReentrantLock()

"""Run `forward(L, args...)` or `reverse(L, args...)`, as `MODE` says; falls back to `forward` for good when the
reverse mode meets an operation it cannot record (adding the op to FORWARD_ONLY)."""
function by_mode(forward::Function, reverse::Function, L::Layout, args...)
    mode = MODE[]
    reverse_first = mode === :reverse || (mode === :auto && !lock(() -> L.op in FORWARD_ONLY, FORWARD_ONLY_LOCK))
    reverse_first || return forward(L, args...)
    try
        return reverse(L, args...)
    catch e
        (mode === :auto && cannot_record(e)) || rethrow()
        lock(() -> push!(FORWARD_ONLY, L.op), FORWARD_ONLY_LOCK)
    end
    return forward(L, args...)
end

"""Whether `e` says the reverse mode cannot run the forward function (dual numbers may): a number computed on
another task, or a function with no method for tracked numbers (seen through the failure of a task)."""
cannot_record(e) = e isa OtherTaskError ||
    (e isa TaskFailedException && cannot_record(e.task.exception)) ||
    (e isa CompositeException && any(cannot_record, e.exceptions)) ||
    (e isa MethodError && any(a -> a isa Tracked || a isa Complex{<:Tracked} ||
                                   (a isa AbstractArray && eltype(a) <: Union{Tracked,Complex{<:Tracked}}), e.args))
