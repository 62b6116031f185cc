# TFBridge.ForwardDiffGradients: numbers that record a tape, for the reverse
# mode (included by julia/ForwardDiffGradients.jl; reverse.jl runs them).
#
# A forward pass on `Tracked` numbers records every scalar operation whose
# result depends on the inputs as a node of a tape: up to two parents and
# the partial derivative by each, ForwardDiff's own rules (DiffRules).  One
# sweep back over the tape then gives the gradient of every input at once,
# whatever their number: a vector-Jacobian product costs one recording pass
# and one sweep, where dual numbers need a pass per CHUNK inputs.
#
# The tape is the one of the task running the pass (`tape`), found through
# its thread's slot; a number computed on another task (the forward
# function's own Threads.@spawn) cannot be recorded there, and says so.

"""
A number of a reverse-mode pass: its value, and its node on the tape of the
pass (0 for a constant, which records nothing).  `V` is the values' type:
Float64, or the dual number of second order (DIRECTION), so that the sweep
back carries a Jacobian-vector product along.
"""
struct Tracked{V<:Real} <: Real
    value::V
    node::Int32
end

Tracked{V}(x::Real) where {V<:Real} = Tracked{V}(convert(V, x), Int32(0))
Tracked{V}(x::Tracked{V}) where {V<:Real} = x

"""One recorded operation: its parents (0: none) and the partial derivative by each."""
struct Node{V<:Real}
    first::Int32
    second::Int32
    first_partial::V
    second_partial::V
end

"""
A product C = A * B on a tape: C's elements are the nodes `first`,
`first + 1`, ... (column-major order, no parents); `A` and `B` are the
factors' values, `A_nodes` and `B_nodes` their elements' nodes (0 for a
constant), empty for a constant factor.
"""
struct Product{V<:Real}
    first::Int
    A::Matrix{V}
    B::Matrix{V}
    A_nodes::Matrix{Int32}
    B_nodes::Matrix{Int32}
end

"""
The operations of one reverse-mode pass, in order: `count` nodes (`nodes`
has room for more: a push! per node, a call into Julia's runtime, cost a
fifth of a recording) and the matrix products among them (products.jl); the
adjoints' room for the sweep back (reverse.jl); the task recording it.
"""
mutable struct Tape{V<:Real}
    nodes::Vector{Node{V}}
    count::Int
    products::Vector{Product{V}}
    adjoints::Vector{V}
    owner::Task
end

Base.length(t::Tape) = t.count


"""The value types a tape records: Float64 (first order) and the dual number of second order."""
const VALUE_TYPES = (Float64, Dual{DIRECTION,Float64,1})

"""Per value type and Julia thread, the tape of the pass its current task runs (`tape`)."""
const ACTIVE = ntuple(_ -> Any[], length(VALUE_TYPES))
@inline active(::Type{Float64}) = ACTIVE[1]
@inline active(::Type{Dual{DIRECTION,Float64,1}}) = ACTIVE[2]

"""Every tape in use, by the task recording it: how a task finds its own after another ran on its thread."""
const RECORDING = IdDict{Task,Any}()
const RECORDING_LOCK = ReentrantLock()

struct OtherTaskError <: Exception end
Base.showerror(io::IO, ::OtherTaskError) = print(io,
    "OtherTaskError: @gradient forwarddiff recorded the forward function's operations on the task running it, ",
    "but some ran on another task (Threads.@spawn, Threads.@threads): the reverse mode cannot follow them")

@inline function tape(::Type{V}) where {V}
    t = @inbounds active(V)[Threads.threadid()]
    if t isa Tape{V}
        t.owner === current_task() && return t
    end
    return owned_tape(V)::Tape{V}
end

# The task's tape after another task used its thread, or the error of a task that has none.
@noinline function owned_tape(::Type{V}) where {V}
    t = lock(() -> get(RECORDING, current_task(), nothing), RECORDING_LOCK)
    t isa Tape{V} || throw(OtherTaskError())
    active(V)[Threads.threadid()] = t
    return t
end

"""
Finished tapes, per value type, kept with their room for the next pass
(allocating an op's tape anew at each gradient, and its adjoints, cost as
much as recording it): at most one per thread, of at most SPARE_NODES nodes.
"""
const SPARE = ntuple(i -> Tape{VALUE_TYPES[i]}[], length(VALUE_TYPES))
@inline spare(::Type{Float64}) = SPARE[1]
@inline spare(::Type{Dual{DIRECTION,Float64,1}}) = SPARE[2]
const SPARE_NODES = 1 << 20

"""An empty tape for this task with room for `size` nodes (the length of the op's last tape: growing costs copies)."""
function Tape{V}(size::Int = 0) where {V}
    t = lock(() -> isempty(spare(V)) ? nothing : pop!(spare(V)), RECORDING_LOCK)
    t === nothing && return Tape{V}(Vector{Node{V}}(undef, max(size, 1024)), 0, Product{V}[], V[], current_task())
    length(t.nodes) < size && resize!(t.nodes, size)
    t.owner = current_task()
    return t
end

"""Keep a finished tape for the next pass (without its products' matrices)."""
function retire!(t::Tape{V}) where {V}
    t.count = 0
    empty!(t.products)
    length(t.nodes) <= SPARE_NODES || return nothing
    lock(RECORDING_LOCK) do
        length(spare(V)) < Threads.nthreads() && push!(spare(V), t)
    end
    return nothing
end

"""`f(tape)` with a new tape (room for `size` nodes) recording the numbers this task computes."""
function recording(f, ::Type{V}, size::Int = 0) where {V}
    t = Tape{V}(size)
    slots = active(V)   # one slot per thread: sized by __init__ (julia/ForwardDiffGradients.jl)
    lock(() -> (RECORDING[current_task()] = t), RECORDING_LOCK)
    slots[Threads.threadid()] = t
    try
        return f(t)
    finally
        lock(() -> delete!(RECORDING, current_task()), RECORDING_LOCK)
        slots[Threads.threadid()] = nothing
        retire!(t)
    end
end

"""Append `node` to `t`; its number."""
@inline function push_node!(t::Tape{V}, node::Node{V}) where {V}
    n = t.count + 1
    n > length(t.nodes) && grow!(t, n)
    @inbounds t.nodes[n] = node
    t.count = n
    return n
end

@noinline function grow!(t::Tape, n::Int)
    n < typemax(Int32) || throw(OutOfMemoryError())
    resize!(t.nodes, max(2 * length(t.nodes), n))
    return t
end

"""A new input of the tape: a node with no parents."""
leaf(t::Tape{V}, value) where {V} =
    Tracked{V}(convert(V, value), Int32(push_node!(t, Node{V}(Int32(0), Int32(0), zero(V), zero(V)))))

"""`count` new nodes without parents (a recorded product's elements); the first one's number."""
function parentless!(t::Tape{V}, count::Int) where {V}
    first, last = t.count + 1, t.count + count
    last > length(t.nodes) && grow!(t, last)
    fill!(view(t.nodes, first:last), Node{V}(Int32(0), Int32(0), zero(V), zero(V)))
    t.count = last
    return first
end

@inline node!(::Type{V}, value, a::Int32, da, b::Int32, db) where {V} =
    Tracked{V}(value, Int32(push_node!(tape(V), Node{V}(a, b, da, db))))

"""The result `value` of a unary operation on `x` whose derivative is `d`."""
@inline track(value, x::Tracked{V}, d) where {V} =
    x.node == 0 ? Tracked{V}(convert(V, value), Int32(0)) : node!(V, convert(V, value), x.node, convert(V, d), Int32(0), zero(V))

"""The result of a binary operation on `x` and `y` with partials `dx` and `dy`."""
@inline function track(value, x::Tracked{V}, dx, y::Tracked{V}, dy) where {V}
    x.node == 0 && return track(value, y, dy)
    y.node == 0 && return track(value, x, dx)
    return node!(V, convert(V, value), x.node, convert(V, dx), y.node, convert(V, dy))
end

"""The value of a number, tracked or not (a dual number's own value is ForwardDiff's `value`)."""
plain(x::Tracked) = x.value
plain(x::Real) = x

# ---------------------------------------------------------------- the number interface

Base.convert(::Type{Tracked{V}}, x::Tracked{V}) where {V} = x
Base.convert(::Type{Tracked{V}}, x::Tracked{W}) where {V,W} =
    x.node == 0 ? Tracked{V}(convert(V, x.value), Int32(0)) : throw(ArgumentError(
        "@gradient forwarddiff: a recorded $(typeof(x)) cannot become a Tracked{$V}"))
Base.convert(::Type{Tracked{V}}, x::Real) where {V} = Tracked{V}(convert(V, x), Int32(0))
Base.promote_rule(::Type{Tracked{V}}, ::Type{Tracked{W}}) where {V,W} = Tracked{promote_type(V, W)}
for R in (:Bool, :Integer, :Rational, :AbstractFloat, :AbstractIrrational)
    @eval Base.promote_rule(::Type{Tracked{V}}, ::Type{<:$R}) where {V} = Tracked{V}
end

for f in (:zero, :one, :eps, :floatmin, :floatmax, :typemin, :typemax)
    @eval Base.$f(::Type{Tracked{V}}) where {V} = Tracked{V}($f(V))
    @eval Base.$f(x::Tracked{V}) where {V} = Tracked{V}($f(x.value))
end
Base.precision(::Type{Tracked{V}}) where {V} = precision(V)
Base.precision(x::Tracked) = precision(x.value)
Base.float(x::Tracked) = x
Base.float(::Type{Tracked{V}}) where {V} = Tracked{V}
Base.AbstractFloat(x::Tracked) = x
Base.hash(x::Tracked, h::UInt) = hash(x.value, h)
Base.show(io::IO, x::Tracked) = print(io, "Tracked(", x.value, x.node == 0 ? "" : ", node $(x.node)", ")")

for f in (:isnan, :isinf, :isfinite, :iszero, :isone, :isinteger, :iseven, :isodd, :signbit, :isreal)
    @eval Base.$f(x::Tracked) = $f(x.value)
end
# Integer results of real numbers keep the value only: their derivative is zero where it exists.
for f in (:floor, :ceil, :round, :trunc)
    @eval Base.$f(x::Tracked{V}) where {V} = Tracked{V}($f(x.value))
    @eval Base.$f(::Type{I}, x::Tracked) where {I<:Integer} = $f(I, x.value)
end
Base.round(x::Tracked{V}, r::RoundingMode) where {V} = Tracked{V}(round(x.value, r))
Base.sign(x::Tracked{V}) where {V} = Tracked{V}(sign(x.value))
(::Type{I})(x::Tracked) where {I<:Integer} = I(x.value)
Base.Integer(x::Tracked) = Integer(x.value)
Base.Bool(x::Tracked) = Bool(x.value)

Base.copysign(x::Tracked, y::Real) = signbit(x.value) == signbit(plain(y)) ? x : -x
Base.flipsign(x::Tracked, y::Real) = signbit(plain(y)) ? -x : x
Base.muladd(x::Tracked, y::Tracked, z::Tracked) = x * y + z
Base.fma(x::Tracked, y::Tracked, z::Tracked) = x * y + z
Base.sincos(x::Tracked) = (sin(x), cos(x))
Base.literal_pow(::typeof(^), x::Tracked, ::Val{p}) where {p} = x^p
Base.:+(x::Tracked) = x
Base.:-(x::Tracked) = track(-x.value, x, -one(x.value))
Base.inv(x::Tracked) = (r = inv(x.value); track(r, x, -r * r))
Base.abs(x::Tracked) = signbit(x.value) ? -x : x
Base.abs2(x::Tracked) = x * x
Base.sqrt(x::Tracked) = (r = sqrt(x.value); track(r, x, inv(2 * r)))
Base.exp(x::Tracked) = (r = exp(x.value); track(r, x, r))
Base.tanh(x::Tracked) = (r = tanh(x.value); track(r, x, 1 - r * r))

# ---------------------------------------------------------------- the rules of ForwardDiff (DiffRules)

const DONE = Set([(:Base, f) for f in (:+, :-, :*, :/, :^, :inv, :abs, :abs2, :sqrt, :exp, :tanh, :sign, :floor,
                                       :ceil, :round, :trunc, :max, :min, :copysign, :flipsign)])

const MODULES = Dict(:Base => Base, :SpecialFunctions => ForwardDiff.SpecialFunctions, :NaNMath => ForwardDiff.NaNMath)

for (M, f, arity) in ForwardDiff.DiffRules.diffrules()
    ((M, f) in DONE || !haskey(MODULES, M) || !isdefined(MODULES[M], f)) && continue
    fn = :($(MODULES[M]).$f)
    if arity == 1
        d = ForwardDiff.DiffRules.diffrule(M, f, :v)
        @eval $fn(x::Tracked) = (v = x.value; track($fn(v), x, $d))
    elseif arity == 2
        da, db = ForwardDiff.DiffRules.diffrule(M, f, :a, :b)
        (da === :NaN || db === :NaN) && continue
        # (A pass records numbers of one value type only: no method mixes two.)
        @eval $fn(x::Tracked{V}, y::Tracked{V}) where {V} = (a = x.value; b = y.value; track($fn(a, b), x, $da, y, $db))
        for R in (:Bool, :Integer, :Rational, :AbstractFloat, :AbstractIrrational)
            @eval begin
                $fn(x::Tracked, y::$R) = (a = x.value; b = y; track($fn(a, b), x, $da))
                $fn(x::$R, y::Tracked) = (a = x; b = y.value; track($fn(a, b), y, $db))
            end
        end
    end
end

# The four arithmetic operations and the rest, written out: the most frequent ones (no rule to evaluate).
for R in (:Bool, :Integer, :Rational, :AbstractFloat, :AbstractIrrational)
    @eval begin
        Base.:+(x::Tracked, y::$R) = track(x.value + y, x, one(x.value))
        Base.:+(x::$R, y::Tracked) = track(x + y.value, y, one(y.value))
        Base.:-(x::Tracked, y::$R) = track(x.value - y, x, one(x.value))
        Base.:-(x::$R, y::Tracked) = track(x - y.value, y, -one(y.value))
        Base.:*(x::Tracked, y::$R) = track(x.value * y, x, y)
        Base.:*(x::$R, y::Tracked) = track(x * y.value, y, x)
        Base.:/(x::Tracked, y::$R) = track(x.value / y, x, inv(y))
        Base.:/(x::$R, y::Tracked) = (r = x / y.value; track(r, y, -r / y.value))
        Base.:^(x::$R, y::Tracked) = (r = x^y.value; track(r, y, r * log(x)))
        Base.max(x::Tracked, y::$R) = x.value > y ? x : typeof(x)(y)
        Base.max(x::$R, y::Tracked) = max(y, x)
        Base.min(x::Tracked, y::$R) = x.value < y ? x : typeof(x)(y)
        Base.min(x::$R, y::Tracked) = min(y, x)
    end
    for op in (:<, :<=, :(==), :isless, :isequal)
        @eval Base.$op(x::Tracked, y::$R) = $op(x.value, y)
        @eval Base.$op(x::$R, y::Tracked) = $op(x, y.value)
    end
end
Base.:^(x::Tracked, n::Integer) = n == 0 ? one(x) : n == 1 ? x : n == 2 ? x * x : track(x.value^n, x, n * x.value^(n - 1))
Base.:^(x::Tracked, y::Rational) = track(x.value^y, x, y * x.value^(y - 1))
Base.:^(x::Tracked, y::AbstractFloat) = track(x.value^y, x, y * x.value^(y - 1))
Base.:^(x::Tracked, y::AbstractIrrational) = track(x.value^y, x, y * x.value^(y - 1))
Base.:+(x::Tracked{V}, y::Tracked{V}) where {V} = track(x.value + y.value, x, one(V), y, one(V))
Base.:-(x::Tracked{V}, y::Tracked{V}) where {V} = track(x.value - y.value, x, one(V), y, -one(V))
Base.:*(x::Tracked{V}, y::Tracked{V}) where {V} = track(x.value * y.value, x, y.value, y, x.value)
Base.:/(x::Tracked{V}, y::Tracked{V}) where {V} = (r = x.value / y.value; track(r, x, inv(y.value), y, -r / y.value))
Base.:^(x::Tracked{V}, y::Tracked{V}) where {V} =
    (r = x.value^y.value; track(r, x, y.value * x.value^(y.value - 1), y, r * log(x.value)))
Base.max(x::Tracked{V}, y::Tracked{V}) where {V} = x.value > y.value ? x : y
Base.min(x::Tracked{V}, y::Tracked{V}) where {V} = x.value < y.value ? x : y
for op in (:<, :<=, :(==), :isless, :isequal)
    @eval Base.$op(x::Tracked, y::Tracked) = $op(x.value, y.value)
end

# A dual number of the user's own ForwardDiff call holds tracked numbers, never
# the other way round: a mixed operation treats the tracked number as a constant
# of the dual one, as ForwardDiff treats any other real number.
for op in (:+, :-, :*, :/, :^, :max, :min, :<, :<=, :(==), :isless, :isequal, :atan, :hypot, :mod, :rem)
    @eval begin
        Base.$op(x::Dual, y::Tracked) = invoke(Base.$op, Tuple{Dual,Real}, x, y)
        Base.$op(x::Tracked, y::Dual) = invoke(Base.$op, Tuple{Real,Dual}, x, y)
    end
end
