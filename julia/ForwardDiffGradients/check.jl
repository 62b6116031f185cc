# TFBridge.ForwardDiffGradients: the load-time check that the forward
# function can take dual numbers (included by julia/ForwardDiffGradients.jl).
#
# customop.load runs it once the op's file is included, so that a forward
# function written for Float64 only is refused when the op loads, naming the
# line and the fixes, not at its first gradient run.  Nothing of the user's
# code runs: Julia's type inference looks at the forward function called
# with the argument types of the gradient's forward passes, and at the
# functions of the op's own code that it calls, for a call that has no
# method for them and so would throw a MethodError:
# - a parameter annotated for Float64 (`x::Vector{Float64}`, here or in a
#   function of the file it calls);
# - a `ccall` passing a dual number to C;
# - a dual number stored into an array of a fixed number type (`zeros(n)`,
#   `Vector{Float64}(undef, n)`): `buf[i] = ...`, `buf .= ...`, `copyto!`,
#   `fill!`, `mul!`.
# What inference cannot see (a call whose argument types it does not know,
# a function chosen by value at run time) is left to the gradient's run.

const CC = Core.Compiler

"""A call the forward passes would make and that has no method."""
struct Problem
    file::String
    line::Int
    function_name::String     # the user's function holding the line
    call::Any                 # the signature called there (a Tuple type: function type, argument types)
    cause::Any                # the innermost signature with no method
    via::Vector{Any}          # the signatures between the two
end

"""The argument types of one forward pass of `L` (first order), as `Passes` builds its arguments, with
`element(T)` the element type of a differentiable argument of element type `T`."""
function pass_types(L::Layout, element::Function)
    types = Any[]
    for o in eachindex(L.outputs)
        T, r = L.output_types[o], L.output_ranks[o]
        if L.dynamic[o]
            push!(types, DynamicOutput)
        elseif T === String
            push!(types, Array{String,r})
        else
            E = o in L.differentiable_outputs ? element(T) : T
            push!(types, view_type(Array{E,r}))
        end
    end
    for i in eachindex(L.inputs)
        T, r = L.input_types[i], L.input_ranks[i]
        if T === String
            push!(types, r == 0 ? String : Array{String,r})
        else
            E = i in L.differentiable_inputs ? element(T) : T
            push!(types, view_type(ReadOnlyArray{E,r}))
        end
    end
    append!(types, L.attr_types)
    return types
end

"""The type of `tf_view` of an array of type `A`, without making one."""
function view_type(::Type{A}) where {A<:AbstractArray}
    N = ndims(A)
    N <= 1 && return A
    N == 2 && return Transpose{eltype(A),A}
    perm = ntuple(i -> N + 1 - i, N)
    return PermutedDimsArray{eltype(A),N,perm,perm,A}
end

"""Whether module `mod` holds the op's own code: Main, or a module under Main that is not a package, Base, the
standard library or TFBridge."""
function own_module(mod::Module)
    while true
        mod === Main && return true
        # Base, Core, the standard library and packages: each is a root module.
        Base.is_root_module(mod) && return false
        nameof(mod) === :TFBridge && parentmodule(mod) === Main && return false
        parent = parentmodule(mod)
        parent === mod && return false
        mod = parent
    end
end

"""Whether the method is the op's own code."""
users(m::Method) = own_module(m.module)

"""Typed (inferred, not optimised) code of every method `sig` (a Tuple type) may call: (code, static parameters, method)."""
function typed(@nospecialize(sig))
    world = Base.get_world_counter()
    found = Any[]
    matches = Base._methods_by_ftype(sig, -1, world)
    matches isa Vector || return found
    for x in matches
        method = Base.func_for_method_checked(x[3], sig, x[2])
        code, _ = CC.typeinf_code(method, x[1], x[2], false, CC.Params(world))
        code isa Core.CodeInfo && push!(found, (code, x[2], x[3]))
    end
    return found
end

"""Whether any method takes `sig` (false only when none can)."""
function has_method(@nospecialize(sig))
    matches = Base._methods_by_ftype(sig, -1, Base.get_world_counter())
    return !(matches isa Vector) || !isempty(matches)
end

function argument_type(code::Core.CodeInfo, @nospecialize(x), sparams)
    x isa Core.SSAValue && return CC.widenconst(code.ssavaluetypes[x.id])
    x isa Core.SlotNumber && return CC.widenconst(code.slottypes[x.id])
    x isa Core.TypedSlot && return CC.widenconst(x.typ)
    if x isa GlobalRef
        return isdefined(x.mod, x.name) && isconst(x.mod, x.name) ? Core.Typeof(getfield(x.mod, x.name)) : Any
    end
    x isa QuoteNode && return Core.Typeof(x.value)
    if x isa Expr
        if x.head === :static_parameter && x.args[1] <= length(sparams)
            v = sparams[x.args[1]]
            return v isa TypeVar ? Any : Core.Typeof(v)
        end
        return Any
    end
    return Core.Typeof(x)
end

"""`(file, line)` of statement `i`."""
function statement_line(code::Core.CodeInfo, i::Int)
    at = code.codelocs[i]
    at == 0 && return ("", 0)
    node = code.linetable[at]
    return (String(node.file), node.line)
end

"""Whether values of type `T` carry the numbers of a gradient's pass (a dual or tracked number, or an array or
broadcast of them)."""
function carries_dual(@nospecialize(T))
    T isa DataType || return false
    T <: Tracked && return true
    T <: Dual && return T <: Dual{GRADIENT}
    T <: Complex && return carries_dual(T.parameters[1])
    T <: AbstractArray && return carries_dual(eltype(T))
    T <: Base.Broadcast.Broadcasted && return carries_dual(T.parameters[4])
    T <: Tuple && return any(carries_dual, T.parameters)
    return false
end

"""The element type the mutating call `sig` writes into its first argument, when it carries dual numbers; else nothing."""
function written_type(@nospecialize(sig))
    params = sig.parameters
    length(params) >= 3 || return nothing
    f, dest = params[1], params[2]
    dest isa DataType && dest <: AbstractArray && !carries_dual(dest) && eltype(dest) <: Number || return nothing
    written = if f === typeof(Base.Broadcast.materialize!) && params[3] <: Base.Broadcast.Broadcasted
        bc = params[3]
        t = CC.return_type(Base.Broadcast.combine_eltypes, Tuple{bc.parameters[3], bc.parameters[4]})
        t isa DataType && t <: Type ? t.parameters[1] : nothing
    elseif f === typeof(copyto!) && params[3] <: AbstractArray
        eltype(params[3])
    elseif f === typeof(fill!)
        params[3]
    elseif f === typeof(LinearAlgebra.mul!) && length(params) >= 4
        promote_type(eltype(params[3]), eltype(params[4]))
    else
        nothing
    end
    return written !== nothing && carries_dual(written) ? written : nothing
end

"""A sparse matrix (or a wrapper of one) holding dual numbers."""
function sparse_dual(@nospecialize(T))
    T isa DataType || return false
    T.name.name === :SparseMatrixCSC && return carries_dual(eltype(T))
    return T <: AbstractArray && any(sparse_dual, T.parameters)
end

const FACTORIZATIONS = (:lu, :lu!, :cholesky, :cholesky!, :ldlt, :ldlt!, :qr, :qr!, :factorize, Symbol("\\"), :inv, :det,
                        :logdet)

"""Whether `sig` factorizes a sparse matrix of dual numbers: SparseArrays hands that to SuiteSparse's C code."""
function factorizes_sparse(@nospecialize(sig))
    f = callee(sig)
    f isa Function && nameof(f) in FACTORIZATIONS || return false
    return any(sparse_dual, sig.parameters[2:end])
end

"""Whether `sig` may call a method of the op's own code, directly or through a
function of the op's code it is given (a closure or generator passed to `map`,
a comprehension, a broadcast)."""
function calls_own(@nospecialize(sig))
    matches = Base._methods_by_ftype(sig, -1, Base.get_world_counter())
    matches isa Vector && any(m -> users(m[3]), matches) && return true
    return any(t -> carries_own_function(t, 3), sig.parameters[2:end])
end

"""Whether type `T` is, or holds in its parameters (`depth` levels down), a function type of the op's own code."""
function carries_own_function(@nospecialize(T), depth::Int)
    T isa DataType || return false
    T <: Function && !(T <: Core.Builtin) && return own_module(T.name.module)
    depth > 0 || return false
    return any(p -> carries_own_function(p, depth - 1), T.parameters)
end

"""
The first call the code of `sig` makes that has no method (see the top of
this file), or nothing.  Follows calls into the op's own functions, into
any function whose call cannot return (inference found it always throws),
and the conversion a mutating call makes into an array of a fixed type.
"""
function find_problem(@nospecialize(sig), seen::Set{Any}, depth::Int = 0)
    (sig in seen || depth > 12 || length(seen) > 400) && return nothing
    push!(seen, sig)
    for (code, sparams, method) in typed(sig)
        own = users(method)
        for (i, statement) in enumerate(code.code)
            ex = statement isa Expr && statement.head === :(=) ? statement.args[2] : statement
            ex isa Expr && ex.head === :call || continue
            types = Any[argument_type(code, a, sparams) for a in ex.args]
            types[1] <: Core.Builtin && continue
            call = Tuple{types...}
            returns = code.ssavaluetypes[i] !== Union{}
            found = nothing
            if (!returns && !has_method(call)) || (own && factorizes_sparse(call))
                found = Problem("", 0, "", call, call, Any[])
            elseif !returns || calls_own(call)
                found = find_problem(call, seen, depth + 1)
                found === nothing || pushfirst!(found.via, call)
            end
            if found === nothing && own
                written = written_type(call)
                if written !== nothing
                    store = Tuple{typeof(setindex!),Array{eltype(types[2]),1},written,Int}
                    found = find_problem(store, seen, depth + 1)
                    found === nothing || (found = Problem("", 0, "", call, found.cause, Any[call, store]))
                end
            end
            found === nothing && continue
            name = startswith(String(method.name), "#") ? "" : String(method.name)  # not a closure's
            if own && isempty(found.file)   # the deepest line of the op's own code
                file, line = statement_line(code, i)
                # Code lowering made (a comprehension's generator) has no lines: its caller's line says it.
                (file == "none" || line == 0) && return Problem("", 0, "", call, found.cause, found.via)
                return Problem(file, line, name, call, found.cause, found.via)
            elseif own && isempty(found.function_name)   # in a closure or generator of this function
                return Problem(found.file, found.line, name, found.call, found.cause, found.via)
            end
            return found
        end
    end
    return nothing
end

# ---------------------------------------------------------------- the message

"""The dual types of this module written short, `Dual{Float64}`, in `text`."""
function short_types(text::AbstractString)
    for R in (Float64, Float32)
        text = replace(text, string(gradient_dual(R)) => "Dual{$R}")
    end
    text = replace(text, string(Tracked{Float64}) => "Tracked{Float64}")
    return replace(replace(text, "ForwardDiff.Dual" => "Dual"), "Main.TFBridge." => "TFBridge.")
end

"""`f(::A, ::B)` for a signature type."""
function call_text(@nospecialize(sig))
    params = sig.parameters
    f = params[1]
    name = f <: Type && length(f.parameters) == 1 ? string(f.parameters[1]) :
           isdefined(f, :instance) ? string(nameof(f.instance)) : string(f)
    return short_types(name * "(" * join(("::" * string(t) for t in params[2:end]), ", ") * ")")
end

"""The function a signature calls, or nothing."""
callee(@nospecialize(sig)) = (f = sig.parameters[1]; isdefined(f, :instance) ? f.instance : nothing)

"""The source text of `file`'s line `line`, trimmed, or ""."""
source_line(file::String, line::Int) =
    (try strip(readlines(file)[line]) catch; "" end)

"""
For a call with no method: `(method, "x::Vector{Float64}")`, the first
method of the callee with the call's arity and the first parameter whose
declared type refuses the argument, or nothing.
"""
function refused_parameter(@nospecialize(sig))
    f = callee(sig)
    f === nothing && return nothing
    args = sig.parameters[2:end]
    for m in methods(f)
        m.isva && continue
        declared = Base.unwrap_unionall(m.sig).parameters[2:end]
        length(declared) == length(args) || continue
        names = Base.method_argnames(m)[2:end]
        for (k, (a, d)) in enumerate(zip(args, declared))
            d isa TypeVar && (d = d.ub)
            a <: d && continue
            return m, "$(names[k])::$(short_types(string(d)))"
        end
    end
    return nothing
end

"""What went wrong and its first fix, for the message."""
function explain(p::Problem)
    calls = Any[p.via..., p.cause]
    through(fs...) = any(s -> callee(s) in fs, calls)
    converts = p.cause.parameters[1] <: Type
    if converts && through(Base.cconvert, Base.unsafe_convert)
        return ("it passes a dual number to C through `ccall`, which takes plain numbers ($(call_text(p.cause)) " *
                "has no method)",
                "do that computation in Julia code that takes any number type")
    elseif converts && (through(setindex!, Base.Broadcast.materialize!, copyto!, fill!, LinearAlgebra.mul!))
        mutators = (setindex!, Base.Broadcast.materialize!, copyto!, fill!, LinearAlgebra.mul!)
        dest = first(s for s in Any[p.call, calls...] if callee(s) in mutators).parameters[2]
        return ("it stores dual numbers into an array of type $(short_types(string(dest))), allocated with a fixed " *
                "element type (zeros(n), Vector{Float64}(undef, n)), which cannot hold them " *
                "($(call_text(p.cause)) has no method)",
                "allocate it with the inputs' element type (similar(x), zeros(eltype(x), n))")
    end
    if factorizes_sparse(p.call)
        return ("it factorizes a sparse matrix of dual numbers ($(call_text(p.call))), which SparseArrays " *
                "hands to SuiteSparse's C code, for Float64 and ComplexF64 only",
                "solve with a matrix type Julia factorizes itself (Tridiagonal, SymTridiagonal, a dense Matrix)")
    end
    refused = p.cause === p.call ? refused_parameter(p.call) : nothing
    if refused !== nothing
        m, parameter = refused
        return ("$(call_text(p.call)) has no method: $(nameof(callee(p.call))) at $(m.file):$(m.line) declares " *
                "$parameter",
                "loosen the annotation so that any number type passes (AbstractVector{<:Real}, AbstractArray, " *
                "or no annotation)")
    end
    return ("$(call_text(p.cause)) has no method" *
            (p.cause === p.call ? "" : ", called by $(call_text(p.call))"),
            "make that code generic in the number type (no annotations such as ::Float64, buffers allocated " *
            "with the inputs' element type)")
end

"""
    check_forward(layout, where, backward) -> String

"" when the forward function of `layout` can take the dual numbers of its
gradient's forward passes, as far as type inference can tell; otherwise the
message, naming the line, what fails there and the two fixes.  `where` is
the spec line saying `@gradient forwarddiff`, `backward` the name a
hand-written backward function would have.
"""
function check_forward(L::Layout, where::String, backward::String)
    f = resolve_function(L.forward)
    f === nothing && return ""   # the check of the functions says so
    sig = Tuple{Core.Typeof(f), pass_types(L, gradient_output)...}
    head = "$where: @gradient forwarddiff runs the forward function $(L.forward) on ForwardDiff's dual numbers, " *
           "which it cannot take"
    second = "or write the backward function $backward in the op's file and replace '@gradient forwarddiff' " *
             "with it (docs/guides/julia-ops.md, \"Gradients from ForwardDiff\")"
    if !has_method(sig)
        refused = refused_parameter(sig)
        refused === nothing && return ""   # no method for any argument types: the arity check says so
        m, parameter = refused
        return "$head: its method at $(m.file):$(m.line) declares $parameter. Two fixes: loosen the annotation so " *
               "that any number type passes (AbstractVector{<:Real}, AbstractArray, or no annotation), $second"
    end
    p = find_problem(sig, Set{Any}())
    p === nothing && return ""
    what, fix = explain(p)
    text = source_line(p.file, p.line)
    return "$head: $(p.file):$(p.line), in $(isempty(p.function_name) ? L.forward : p.function_name)" * (isempty(text) ? "" : ", `$text`") *
           ": $what. Two fixes: $fix, $second"
end

"""
`check_forward` for the op `op`, whose generated file defined `LAYOUT_<op>`
here.  A forward function that takes dual numbers but not the reverse mode's
tracked numbers (a function ForwardDiff defines for dual numbers only) is
not refused: its gradients use dual numbers (FORWARD_ONLY).
"""
function check_op(op::String, where::String, backward::String)
    L = getfield(@__MODULE__, Symbol("LAYOUT_", op))::Layout
    problem = check_forward(L, where, backward)
    isempty(problem) || return problem
    lock(() -> delete!(FORWARD_ONLY, op), FORWARD_ONLY_LOCK)   # the file may have changed since
    f = resolve_function(L.forward)
    f === nothing && return ""
    sig = Tuple{Core.Typeof(f), pass_types(L, T -> lifted(T, Tracked{Float64}))...}
    if !has_method(sig) || find_problem(sig, Set{Any}()) !== nothing
        lock(() -> push!(FORWARD_ONLY, op), FORWARD_ONLY_LOCK)
    end
    return ""
end
