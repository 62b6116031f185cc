# Every method of LinearAlgebra's and BLAS's mutating functions, called with a
# read-only array in each array position (tests/customop/test_readonly_methods.py).
#
# The methods come from `methods(f)` at run time, not from a list, so a new
# Julia or LinearAlgebra version with a new method is swept as it appears.
# For each method the sweep looks for arguments that dispatch to it and run:
# each argument position takes values from a pool (`make_recipes`: arrays,
# views, reshapes, Symmetric, triangular, Diagonal and their adjoints, Q
# factors, factorizations; `SCALARS`: chars, counts, numbers, ranges, Vals),
# by type first (dispatch sees only types), for each element type in turn.
# A call with writable arrays that runs shows which positions the method
# writes (their arrays change).  Then each position holding an array is given
# the same value built over read-only memory (TFBridge.ReadOnlyArray, as an
# op's input arrives), and the call must leave that memory unchanged; where
# the writable call wrote that position, it must be refused
# (ReadOnlyInputError, or the MethodError TFBridge.read_only_cause reports as
# one); where it did not, it must not be (a read stays a read).
#
# A method counts as covered when some writable call ran.  One for which no
# arguments were found must be in NOT_APPLICABLE, with the reason; anything
# else is reported.  From Julia, TFBridge loaded:
#     include("readonly_methods.jl"); report = ReadOnlyMethods.sweep(TFBridge)

module ReadOnlyMethods

using LinearAlgebra
const LA = LinearAlgebra
const BLAS = LinearAlgebra.BLAS

const N = 3

# --- storage: every array a value is built on, writable or read-only -----------

"""Builds the arrays of one value; `ro`: read-only (over an Array it keeps)."""
mutable struct Store
    ro::Bool
    ReadOnly::Any           # TFBridge.ReadOnlyArray
    seed::Int
    arrays::Vector{Array}   # the memory of every array made, read-only ones' included
    poison::Bool            # fill with one value everywhere (a write of what was there shows too)
end
Store(ro, ReadOnly, seed, arrays) = Store(ro, ReadOnly, seed, arrays, false)

function fresh(s::Store, ::Type{T}, dims::Int...; kind::Symbol = :plain) where {T}
    s.seed += 1
    A = Array{T}(undef, dims...)
    for i in eachindex(A)   # positive, exact in every element type, no linear pattern (matrices invertible)
        x = (1 + mod(5i^2 + 3i * s.seed + 7, 17)) // (T <: Integer ? 1 : 4)
        A[i] = T <: Complex ? T(x, (1 + mod(3i^2 + s.seed, 7)) // 8) : T(x)
    end
    if s.poison
        fill!(A, T(13))
    elseif kind === :spd  # Hermitian positive definite
        A .= A * A' + T(4N) * I
    elseif kind === :upper  # well-conditioned as a triangle (the other triangle not zero: a write there shows)
        A .= A + T(4N) * I
    end
    push!(s.arrays, A)
    return s.ro ? s.ReadOnly(A, :input) : A
end

"""Snapshots of arrays' bytes, to see what a call changed."""
snapshot(arrays) = [copy(reinterpret(UInt8, vec(A))) for A in arrays]
changed(arrays, snap) = [reinterpret(UInt8, vec(A)) != b for (A, b) in zip(arrays, snap)]

# --- the pool of values ----------------------------------------------------------

"""
A value of the pool: `build(store)` makes it with `fresh`, so that the same
recipe gives its writable and its read-only form.  `ro`: whether it has a
read-only form (values made by copying, as factorizations, have none).
"""
struct Recipe
    name::String
    build::Function
    ro::Bool
end

const RECIPES = IdDict{Any,Vector{Recipe}}()
recipes_for(T) = get!(() -> make_recipes(T), RECIPES, T)

function make_recipes(::Type{T}) where {T}
    r = Recipe[]
    add(name, f; ro = true) = push!(r, Recipe("$name{$T}", f, ro))
    matrices = Pair{String,Function}[]
    mat(name, f) = (add(name, f); push!(matrices, name => f))
    mat("matrix", s -> fresh(s, T, N, N))   # square matrices first: most methods take them
    add("vector", s -> fresh(s, T, N))
    mat("spd matrix", s -> fresh(s, T, N, N; kind = :spd))
    mat("upper matrix", s -> fresh(s, T, N, N; kind = :upper))
    add("wide matrix", s -> fresh(s, T, N, N + 1))
    add("tall matrix", s -> fresh(s, T, N + 1, N))
    add("packed vector", s -> fresh(s, T, N * (N + 1) ÷ 2))
    add("band matrix", s -> fresh(s, T, 2, N))
    add("long vector", s -> fresh(s, T, N * N))
    add("short vector", s -> fresh(s, T, N - 1))
    add("view of a vector", s -> view(fresh(s, T, N + 2), 2:N+1))
    add("strided view", s -> view(fresh(s, T, 2N), 1:2:2N))
    mat("view of a matrix", s -> view(fresh(s, T, N + 1, N + 1), 1:N, 1:N))
    add("column view", s -> view(fresh(s, T, N, N), :, 2))
    add("reshaped vector", s -> reshape(fresh(s, T, N), N, 1))
    add("reshaped row", s -> reshape(fresh(s, T, N), 1, N))
    add("reshaped matrix", s -> vec(fresh(s, T, N, N)))
    add("view of a reshape", s -> view(reshape(fresh(s, T, N * N), N, N), :, 1))
    add("indexed view", s -> view(fresh(s, T, N + 1), [1, 3, 4]))   # not strided
    add("transposed row matrix", s -> transpose(fresh(s, T, 1, N)))
    add("adjoint row matrix", s -> adjoint(fresh(s, T, 1, N)))
    mat("transpose", s -> transpose(fresh(s, T, N, N)))     # how a rank-2 input arrives
    add("adjoint", s -> adjoint(fresh(s, T, N, N)))
    add("transposed vector", s -> transpose(fresh(s, T, N)))
    add("adjoint vector", s -> adjoint(fresh(s, T, N)))
    add("permuted", s -> PermutedDimsArray(fresh(s, T, N, N), (2, 1)))
    add("reinterpreted", s -> reinterpret(T, fresh(s, T, N)))
    mat("Symmetric", s -> Symmetric(fresh(s, T, N, N)))
    add("Symmetric L", s -> Symmetric(fresh(s, T, N, N), :L))
    mat("Symmetric spd", s -> Symmetric(fresh(s, T, N, N; kind = :spd)))
    add("Symmetric spd of a transpose", s -> Symmetric(transpose(fresh(s, T, N, N; kind = :spd))))
    mat("Hermitian", s -> Hermitian(fresh(s, T, N, N)))
    mat("Hermitian spd", s -> Hermitian(fresh(s, T, N, N; kind = :spd)))
    add("Hermitian spd of a transpose", s -> Hermitian(transpose(fresh(s, T, N, N; kind = :spd))))
    mat("UpperTriangular", s -> UpperTriangular(fresh(s, T, N, N; kind = :upper)))
    mat("LowerTriangular", s -> LowerTriangular(transpose(fresh(s, T, N, N; kind = :upper))))
    mat("LowerTriangular dense", s -> LowerTriangular(fresh(s, T, N, N; kind = :spd)))
    mat("UnitUpperTriangular", s -> UnitUpperTriangular(fresh(s, T, N, N)))
    mat("UnitLowerTriangular", s -> UnitLowerTriangular(fresh(s, T, N, N)))
    mat("UpperHessenberg", s -> UpperHessenberg(fresh(s, T, N, N)))
    mat("Diagonal", s -> Diagonal(fresh(s, T, N)))
    mat("Bidiagonal", s -> Bidiagonal(fresh(s, T, N), fresh(s, T, N - 1), :U))
    mat("Bidiagonal L", s -> Bidiagonal(fresh(s, T, N), fresh(s, T, N - 1), :L))
    mat("Tridiagonal", s -> Tridiagonal(fresh(s, T, N - 1), fresh(s, T, N), fresh(s, T, N - 1)))
    mat("SymTridiagonal", s -> SymTridiagonal(fresh(s, T, N), fresh(s, T, N - 1)))
    for (name, f) in copy(matrices)   # under adjoint and transpose: what the functions give, and the wrappers
        add("adjoint of $name", s -> adjoint(f(s)))
        add("transpose of $name", s -> transpose(f(s)))
        add("Adjoint of $name", s -> Adjoint(f(s)))
        add("Transpose of $name", s -> Transpose(f(s)))
    end
    add("scaled identity", s -> T(2) * I; ro = false)
    # Made by copying (factorizations, Q factors): no read-only form.
    spd(A) = A * A' + T(4N) * I
    factorizations = (
        ("QR Q", A -> qr(A).Q), ("pivoted QR Q", A -> qr(A, Val(true)).Q), ("QR Q'", A -> qr(A).Q'),
        ("LQ Q", A -> lq(A).Q), ("Hessenberg Q", A -> hessenberg(A).Q), ("QR", A -> qr(A)),
        ("pivoted QR", A -> qr(A, Val(true))), ("LU", A -> lu(A)), ("LQ", A -> lq(A)),
        ("Cholesky", A -> cholesky(Hermitian(spd(A)))),
        ("pivoted Cholesky", A -> cholesky(Hermitian(spd(A)), Val(true))),
        ("BunchKaufman", A -> bunchkaufman(Symmetric(A + transpose(A)))),
        ("Hessenberg", A -> hessenberg(A)), ("SVD", A -> svd(A)), ("Schur", A -> schur(A)),
        ("Eigen", A -> eigen(A)), ("tridiagonal LU", A -> lu(Tridiagonal(A))),
        ("LDLt", A -> ldlt(SymTridiagonal(diag(spd(A)), diag(spd(A), 1)))),
        ("Hermitian Hessenberg Q", A -> hessenberg(Hermitian(A)).Q),
        ("shifted Hessenberg", A -> hessenberg(A) + (T <: Real ? complex(T(2), T(1)) : T(2)) * I),
        ("generalized Schur", A -> schur(A, A + 4N * I)))
    for (name, f) in factorizations
        add(name, s -> f(copy(fresh(s, T, N, N))); ro = false)
        add("adjoint of $name", s -> adjoint(f(copy(fresh(s, T, N, N)))); ro = false)
        add("transpose of $name", s -> transpose(f(copy(fresh(s, T, N, N)))); ro = false)
    end
    if T <: AbstractFloat || T <: Complex   # plane rotations hold no array
        add("Givens", s -> givens(T(1), T(2), 1, 2)[1]; ro = false)
        add("Rotation", s -> LA.Rotation([givens(T(1), T(2), 1, 2)[1]]); ro = false)
        add("adjoint of a Rotation", s -> adjoint(LA.Rotation([givens(T(1), T(2), 1, 3)[1]])); ro = false)
    end
    add("structured broadcast", s -> Broadcast.instantiate(Broadcast.broadcasted(+, Diagonal(fresh(s, T, N)),
                                                                                  Diagonal(fresh(s, T, N)))); ro = false)
    return r
end

# The arguments that are no arrays, most often valid first (chars: 'N' is a
# no-transpose and a unit-less diagonal, 'L' a side and a triangle).
const SCALARS = Any['N', 'L', 'U', 'T', 'C', 'R', 'V', 'A', 'S', 'B', 'E',
                    2, 1, 0, N, true, false, 2.0, 0.5, 2.0f0, 0.5f0, 2.0 + 1.0im, 2.0f0 + 1.0f0im,
                    Float16(2), 2 // 1, 1:2, 1:N, 2:N, Base.OneTo(N), Val(true), Val(false), :U, :L,
                    Bool[true, false, true]]

# Arrays no input is (TF's bools arrive as Array{Bool}), for the methods taking them.
append!(SCALARS, Any[falses(N, N), falses(N)])

# Element types tried in turn: the BLAS ones, then a generic float (the methods
# for other element types) and an integer (integer inputs exist too).
const ELTYPES = (Float64, Float32, ComplexF64, ComplexF32, Float16, Int64)

# --- methods ---------------------------------------------------------------------

"""The functions swept: LinearAlgebra's and BLAS's exported ones ending in `!`."""
function functions()
    fs = Pair{String,Any}[]
    for (M, prefix) in ((LA, "LinearAlgebra."), (BLAS, "LinearAlgebra.BLAS."))
        for n in names(M)
            endswith(string(n), "!") || continue
            f = getfield(M, n)
            f isa Function && !any(p -> p.second === f, fs) && push!(fs, prefix * string(n) => f)
        end
    end
    return fs
end

in_linear_algebra(m::Method) = m.module === LA || parentmodule(m.module) === LA
params(m::Method) = Base.unwrap_unionall(m.sig).parameters[2:end]
position_type(m::Method, i) = Base.rewrap_unionall(params(m)[i], m.sig)
takes_array(m::Method, i) = typeintersect(position_type(m, i), AbstractArray) !== Union{}

"""The methods swept: LinearAlgebra's own, with a position that takes arrays (and no varargs)."""
function swept_methods()
    out = Tuple{String,Any,Method}[]
    for (name, f) in functions()
        for m in methods(f)
            in_linear_algebra(m) || continue
            ps = params(m)
            any(p -> Base.isvarargtype(p), ps) && continue
            any(i -> takes_array(m, i), 1:length(ps)) || continue
            push!(out, (name, f, m))
        end
    end
    return out
end

"""A method's key in NOT_APPLICABLE and the reports: `mul!(C, A, B, α, β) at matmul.jl:171`."""
signature(m::Method) = "$(m.name)($(join(Base.method_argnames(m)[2:end], ", "))) at $(basename(string(m.file))):$(m.line)"

# --- arguments for one method ----------------------------------------------------

const PROTOTYPES = IdDict{Recipe,Any}()
prototype(r::Recipe) = get!(PROTOTYPES, r) do
    try
        r.build(Store(false, nothing, 1, Array[]))
    catch
        nothing
    end
end
value_type(v) = v isa Recipe ? typeof(prototype(v)) : typeof(v)

"""
The pool's values that fit position `i` of `m`, grouped by type, in pool
order; where the position is declared `Number`, or `Any` and `scalars_first`,
scalars first.
"""
function candidates(m, i, pool; scalars_first::Bool = true)
    P = position_type(m, i)
    if P === Number || (P === Any && scalars_first)
        pool = vcat(filter(v -> !(v isa Recipe), pool), filter(v -> v isa Recipe, pool))
    end
    groups, order = Dict{Any,Vector{Any}}(), Any[]
    for v in pool
        v isa Recipe && prototype(v) === nothing && continue
        (v isa Recipe ? prototype(v) : v) isa P || continue
        T = value_type(v)
        haskey(groups, T) || push!(order, T)
        push!(get!(groups, T, Any[]), v)
    end
    return [groups[T] for T in order]
end

"""Index tuples into lists of `lengths`, by increasing sum (the first entries first), `limit` of them."""
function by_sum(lengths, limit)
    out = Vector{Int}[]
    total = sum(lengths) - length(lengths)
    function walk(prefix, k, left)
        length(out) >= limit && return
        if k > length(lengths)
            left == 0 && push!(out, copy(prefix))
            return
        end
        for i in 0:min(left, lengths[k] - 1)
            push!(prefix, i + 1)
            walk(prefix, k + 1, left - i)
            pop!(prefix)
        end
    end
    for s in 0:total
        walk(Int[], 1, s)
        length(out) >= limit && break
    end
    return out
end

"""
Calls that crash Julia 1.5.3 itself, whatever memory they are given: never
made.  `eigen!`/`eigvals!` of a SymTridiagonal between bounds vl, vu that hold
no eigenvalue corrupt the heap (LAPACK.stegr! with no eigenvalue found: a
later call segfaults in dlarrv).
"""
function crashes(f, values)
    if f in (eigen!, eigvals!) && length(values) == 3 && values[1] isa SymTridiagonal && values[2] isa Real
        λ = eigvals(SymTridiagonal(Float64.(values[1].dv), Float64.(values[1].ev)))
        return !any(e -> values[2] < e <= values[3], λ)
    end
    return false
end

const MAX_TYPE_COMBOS = 5_000    # type combinations looked at, per element type
const MAX_TYPE_TRIALS = 40       # combinations of types reaching the method that are called, per element type
const MAX_CALLS_PER_TYPES = 12   # calls tried, per such combination (other values: no new compilation)

struct Trial
    args::Vector{Any}       # per position a Recipe or a scalar
end

function build(t::Trial, ro_position::Int, ReadOnly; poison::Int = 0)
    values, stores = Any[], Store[]
    for (i, a) in enumerate(t.args)
        s = Store(i == ro_position, ReadOnly, 7i, Array[], i == poison)
        push!(values, a isa Recipe ? a.build(s) : a)
        push!(stores, s)
    end
    return values, stores
end

"""
Arguments dispatching to `m` with which a writable call runs, and the
positions it wrote; or nothing.  Positions declared `Any` take scalars first
(an `α` more often than not); a method found no arguments that way is
searched again with arrays first there (the generic fallbacks, `mul!(C, A, B)`
and `ldiv!(Y, A, B)`: every scalar combination dispatches to them and fails,
using up the trials before an array is tried).
"""
function find_trial(f, m::Method, ReadOnly)
    hinted = hinted_trial(f, m)
    hinted === :stale && error("the hint in HINTS no longer runs this method: $(HINTS[signature(m)])")
    hinted === nothing || return hinted
    for scalars_first in (true, false)
        found = find_trial(f, m, ReadOnly, scalars_first)
        found === nothing || return found
        any(P -> P === Any, (position_type(m, i) for i in 1:length(params(m)))) || break
    end
    return nothing
end

function find_trial(f, m::Method, ReadOnly, scalars_first::Bool)
    ps = params(m)
    for T in ELTYPES
        trials = 0
        # Complex methods may take real arrays too (mul! of a complex and a real matrix).
        pool = vcat(recipes_for(T), T <: Complex ? recipes_for(real(T)) : Recipe[], SCALARS)
        groups = [candidates(m, i, pool; scalars_first = scalars_first) for i in 1:length(ps)]
        any(isempty, groups) && continue
        for gi in by_sum(map(length, groups), MAX_TYPE_COMBOS)   # the pool's first types first
            typed = [g[j] for (g, j) in zip(groups, gi)]
            argtypes = map(g -> value_type(first(g)), typed)
            (Tuple{typeof(f), argtypes...} <: m.sig && which(f, Tuple{argtypes...}) === m) || continue
            trials += 1
            trials > MAX_TYPE_TRIALS && break
            for idx in by_sum(map(length, typed), MAX_CALLS_PER_TYPES)
                found = writable_call(f, Trial(Any[g[j] for (g, j) in zip(typed, idx)]))
                found === nothing || return found
            end
        end
    end
    return nothing
end

"""The trial, the positions its writable call wrote and those found written poisoned; nothing if it fails."""
function writable_call(f, t::Trial)
    values, stores = build(t, 0, nothing)
    crashes(f, values) && return nothing
    snaps = [snapshot(s.arrays) for s in stores]
    try
        f(values...)
    catch
        return nothing
    end
    wrote = [any(changed(s.arrays, snap)) for (s, snap) in zip(stores, snaps)]
    poisoned = falses(length(wrote))
    for (p, a) in enumerate(t.args)  # again, poisoned: a write of the values it held shows too
        (a isa Recipe && a.ro && !wrote[p]) || continue
        wrote[p] = poisoned[p] = wrote_poisoned(f, t, p)
    end
    return t, wrote, poisoned
end

"""
Where the search is known to miss arguments that exist (`signature` ->
the pool's names, Float64's, per position): tried before the search, and
reported (`stale`) when they no longer dispatch to that method.  The method
still comes from `methods(...)`; this only saves the search a long way.
`ldiv!(Y, A, B)`, the generic fallback, runs only for the few matrix types
with a two-argument `ldiv!` and no three-argument one (triangular, Hessenberg,
bidiagonal), far down the pool: every combination before them dispatches to
it and fails.  `mul!(C, A, B)` takes `Any` everywhere: the scalars, tried
first there, use up the trials (the retry with arrays first finds it, after a
minute of compiling calls that fail).
"""
const HINTS = Dict{String,Vector{String}}(
    "ldiv!(Y, A, B) at generic.jl:260" => ["vector", "UpperTriangular", "vector"],
    "mul!(C, A, B) at matmul.jl:207" => ["matrix", "matrix", "matrix"])

"""The hinted trial for `m`, if it dispatches there and runs; nothing if no hint; :stale if it fails."""
function hinted_trial(f, m::Method)
    names = get(HINTS, signature(m), nothing)
    names === nothing && return nothing
    pool = Dict(r.name => r for r in recipes_for(Float64))
    args = Any[get(pool, "$n{Float64}", nothing) for n in names]
    any(a -> a === nothing, args) && return :stale
    types = map(a -> value_type(a), args)
    (Tuple{typeof(f), types...} <: m.sig && which(f, Tuple{types...}) === m) || return :stale
    found = writable_call(f, Trial(args))
    return found === nothing ? :stale : found
end

"""Whether the writable call writes position `p` when it holds one value everywhere."""
function wrote_poisoned(f, t::Trial, p::Int)
    values, stores = build(t, 0, nothing; poison = p)
    snap = snapshot(stores[p].arrays)
    try
        f(values...)
    catch
    end
    return any(changed(stores[p].arrays, snap))
end

"""Whether MethodError `e` is an ambiguity (methods apply, none is the most specific) rather than no method."""
ambiguous(e::MethodError) = !isempty(methods(e.f, Base.typesof(e.args...)))

"""
The call with position `p` read-only: (its memory unchanged, how it ended, the
error).  How: :ran; :refused (ReadOnlyInputError, or a MethodError the bridge
reports as one, `read_only_cause`: an ambiguity with a guard, or no method at
all for the read-only array), :other (any other error).
"""
function read_only_call(f, t::Trial, p::Int, TFBridge; poison::Bool = false)
    values, stores = build(t, p, TFBridge.ReadOnlyArray; poison = poison ? p : 0)
    snap = snapshot(stores[p].arrays)
    how, text = :ran, ""
    try
        f(values...)
    catch e
        refused = e isa TFBridge.ReadOnlyInputError || TFBridge.read_only_cause(e, nothing) !== nothing
        how = !refused ? :other : e isa MethodError && !ambiguous(e) ? :no_method : :refused
        text = sprint(showerror, e)
    end
    return !any(changed(stores[p].arrays, snap)), how, text
end

# --- the methods no arguments are found for -----------------------------------------

"""
The methods (`signature`: name, arguments, file and line in Julia 1.5.3's
LinearAlgebra) the sweep finds no arguments for, and why that is no hole:
each was tried by hand with arguments of every shape, and fails before it
writes anything.  Listed methods are not searched (the search for one takes
a minute); one that no longer exists is reported (`stale`), so the list
follows the Julia version.
"""
const NOT_APPLICABLE = Dict{String,String}(
    "cholesky!(A, ) at cholesky.jl:267" =>
        "generic pivoted Cholesky (non-strided storage): always throws ArgumentError, 'not implemented yet'",
    "mul!(C, A, B) at triangular.jl:728" =>
        "vector C, Adjoint of a triangular A, Transpose B: always a MethodError (it calls a mul! that has no method)",
    "mul!(C, A, B) at triangular.jl:729" =>
        "vector C, Transpose of a triangular A, Transpose B: always a MethodError (it calls a mul! that has no method)",
    "mul!(C, A, B, alpha, beta) at bidiag.jl:393" =>
        "vector C, bidiagonal or tridiagonal A, Adjoint B: always a MethodError or a DimensionMismatch",
    "mul!(C, A, B, alpha, beta) at bidiag.jl:396" =>
        "vector C, bidiagonal or tridiagonal A, Transpose B: always an ArgumentError ('throw: too many arguments')")

# --- the sweep -------------------------------------------------------------------

"""
Sweep every method.  Returns (methods, covered, not_applicable, positions:
the read-only calls made, uncovered: signatures neither covered nor listed,
holes: read-only memory written or a write not refused, refused_reads: a
read refused, stale: listed but no such method).
"""
function sweep(TFBridge; not_applicable = NOT_APPLICABLE, verbose = false)
    covered, na, positions = 0, 0, 0
    uncovered, holes, refused_reads, stale = String[], String[], String[], String[]
    swept = swept_methods()
    for (name, f, m) in swept
        t0 = time()
        sig = signature(m)
        if haskey(not_applicable, sig)   # not searched again: the search takes long, and the reason holds
            na += 1
            continue
        end
        found = try
            find_trial(f, m, TFBridge.ReadOnlyArray)
        catch e
            push!(holes, "$sig: the search failed: $(sprint(showerror, e))")
            nothing
        end
        if found === nothing
            verbose && (println(round(time() - t0, digits = 2), " s ", name, " ", sig, " NOT FOUND"); flush(stdout))
            push!(uncovered, sig)
            continue
        end
        covered += 1
        t, wrote, poisoned = found
        for (p, a) in enumerate(t.args)
            a isa Recipe && a.ro || continue
            positions += 1
            what = "$name with a read-only $(a.name) as argument $p (" *
                   join([x isa Recipe ? x.name : repr(x) for x in t.args], ", ") * "; $sig)"
            unchanged, how, text = try
                read_only_call(f, t, p, TFBridge; poison = poisoned[p])
            catch e  # the read-only form could not be built: the pool's mistake
                push!(holes, "$what: no read-only form: $(sprint(showerror, e))")
                continue
            end
            unchanged || push!(holes, "$what: the read-only memory was written")
            # A write must end in the read-only error; a read in no error of the guards' (a method
            # taking Arrays only, :no_method, is the function's own limit).
            wrote[p] && how in (:ran, :other) && push!(holes, "$what: a write not refused ($(first(text, 300)))")
            !wrote[p] && how === :refused && push!(refused_reads, "$what: a read refused ($(first(text, 300)))")
        end
        verbose && (println(round(time() - t0, digits = 2), " s ", name, " ", sig, " wrote ", findall(wrote)); flush(stdout))
    end
    keys_now = Set(signature(m) for (_, _, m) in swept)
    append!(stale, [k for k in keys(not_applicable) if !(k in keys_now)])
    return (methods = length(swept), covered = covered, not_applicable = na, positions = positions,
            uncovered = uncovered, holes = holes, refused_reads = refused_reads, stale = stale)
end

# --- Base -------------------------------------------------------------------------

struct GenericArray{T,N} <: AbstractArray{T,N} end   # stands for any AbstractArray without storage

"""
The methods of Base's exported functions ending in `!` that take an array by
its storage: a position a ReadOnlyArray fits and a generic AbstractArray
does not (DenseArray, StridedArray, ...).  Only those could write an input
through its pointer; every other method a read-only input reaches takes it
as an AbstractArray and writes through `setindex!`, which refuses it.
"""
function base_storage_methods(TFBridge)
    out = String[]
    for name in names(Base)
        endswith(string(name), "!") || continue
        f = getfield(Base, name)
        f isa Function || continue
        for m in methods(f)
            m.module === TFBridge && continue   # the bridge's own refusals
            ps = params(m)
            any(Base.isvarargtype, ps) && continue
            fits(i, N) = typeintersect(TFBridge.ReadOnlyArray{Float64,N}, position_type(m, i)) !== Union{} &&
                         typeintersect(GenericArray{Float64,N}, position_type(m, i)) === Union{}
            any(i -> fits(i, 1) || fits(i, 2), 1:length(ps)) && push!(out, signature(m))
        end
    end
    return sort(out)
end

"""
Each of them (`signature` => a call with a read-only array where it takes
storage, and why it only reads there), called: the read-only memory must be
unchanged and the call must run.  A method not listed is reported, so a new
Julia version's storage method is looked at before inputs reach it.
"""
const BASE_STORAGE = Dict{String,Tuple{Function,String}}(
    "permutedims!(P, B, perm) at multidimensional.jl:1396" =>
        (ro -> permutedims!(zeros(N, N), ro(reshape(collect(1.0:N*N), N, N)), (2, 1)),
         "the destination P is an Array; B, the strided array it takes, is read"),
    "setindex!(B, X, J0) at multidimensional.jl:1250" =>
        (ro -> setindex!(falses(N), ro([true, false, true]), 1:N),
         "the destination B is a BitArray; X, the strided array it takes, is read"))

"""(unlisted storage methods, listed ones that no longer exist, problems of the listed calls)."""
function base_check(TFBridge)
    found = base_storage_methods(TFBridge)
    unlisted = [s for s in found if !haskey(BASE_STORAGE, s)]
    stale = [s for s in keys(BASE_STORAGE) if !(s in found)]
    problems = String[]
    for (sig, (call, _)) in BASE_STORAGE
        sig in found || continue
        made = Array[]
        ro = A -> (push!(made, A); TFBridge.ReadOnlyArray(A, :input))
        try
            call(ro)
        catch e
            push!(problems, "$sig: a read refused: $(first(sprint(showerror, e), 300))")
        end
        # Compare with the arrays as the call builds them again (given it copies of them this time).
        again = Array[]
        try call(A -> (push!(again, A); TFBridge.ReadOnlyArray(copy(A), :input))) catch end
        all(made .== again) || push!(problems, "$sig: the read-only memory was written")
    end
    return unlisted, stale, problems
end

end # module ReadOnlyMethods
