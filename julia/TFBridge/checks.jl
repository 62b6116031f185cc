# TFBridge: what customop.load checks in an op's Julia file before the op's
# first run (included by julia/TFBridge.jl, inside module TFBridge), and the
# hint a MethodError against a read-only input gets.
#
# Each check returns "" when it finds nothing, or one message that names the
# file, the line and the fix; bridge/customop/checks.py raises it.

# ---------------------------------------------------------------- outputs assigned with `=`

# Assignments that rebind a name; `y += v` rebinds like `y = y + v`.
const REBINDING = (:(=), :(+=), :(-=), :(*=), :(/=), :(\=), :(^=), :(÷=), :(%=), :(|=), :(&=), :(⊻=))

# `y = reshape(y, ...)`, `y = view(y, ...)`: a new name for the same memory,
# which writes through; not the mistake this check looks for.
const ALIASING = (:reshape, :view, :vec, :selectdim, :reinterpret, :transpose, :adjoint, :PermutedDimsArray,
                  :parent, Symbol("@view"), Symbol("@views"))

mentions(ex, s::Symbol) = ex === s || (ex isa Expr && any(a -> mentions(a, s), ex.args))

function is_alias_of(rhs, s::Symbol)
    rhs isa Expr || return false
    if rhs.head in (:call, :macrocall) && !isempty(rhs.args)
        f = rhs.args[1]
        f isa Expr && f.head == :. && (f = f.args[end])   # Base.reshape
        f isa QuoteNode && (f = f.value)
        return f in ALIASING && mentions(rhs, s)
    end
    return rhs.head == Symbol("'") && rhs.args[1] === s   # y = y'
end

"""The parameter name of a function definition's parameter (`y`, `y::T`, `y = 1`), or `nothing`."""
function parameter_name(p)
    p isa Symbol && return p
    p isa Expr || return nothing
    p.head == :(::) && length(p.args) == 2 && return parameter_name(p.args[1])
    p.head in (:kw, :(=)) && return parameter_name(p.args[1])
    return nothing
end

"""`(name, positional parameters)` of a definition's signature, or `nothing`."""
function signature(sig)
    sig isa Expr || return nothing
    sig.head in (:where, :(::)) && return signature(sig.args[1])
    sig.head == :call || return nothing
    params = [p for p in sig.args[2:end] if !(p isa Expr && p.head == :parameters)]
    return sig.args[1], params
end

"""`(name, params, body)` when `ex` defines a method (`function f(...)`, `f(...) = ...`), else `nothing`."""
function definition(ex)
    ex isa Expr && ex.head in (:function, :(=)) && length(ex.args) == 2 || return nothing
    s = signature(ex.args[1])
    s === nothing && return nothing
    return s[1], s[2], ex.args[2]
end

"""The names a `for`/`let` binds (`i = 1:n`, `(a, b) = ...`) or a nested function's parameters."""
function bound_names(ex::Expr)
    if ex.head in (:for, :let)
        spec = ex.args[1]
        specs = spec isa Expr && spec.head == :block ? spec.args : [spec]
        lhs = [s isa Expr && s.head == :(=) ? s.args[1] : s for s in specs]
    elseif ex.head == :->
        lhs = ex.args[1] isa Expr && ex.args[1].head == :tuple ? ex.args[1].args : [ex.args[1]]
    else
        s = signature(ex.args[1])
        lhs = s === nothing ? [] : s[2]
    end
    names = Symbol[]
    for l in lhs
        l isa Expr && l.head == :tuple ? append!(names, filter(n -> n isa Symbol, parameter_name.(l.args))) :
            (n = parameter_name(l); n isa Symbol && push!(names, n))
    end
    return names
end

"""The first rebinding of an output parameter in `ex`: `(line, name, operator)` or `nothing`."""
function rebinding(ex, outputs::Set{Symbol}, line::Int)
    ex isa Expr || return nothing
    args = ex.args
    # A loop's or let's variables and a nested function's parameters are new
    # names, not the outputs: rebinding them is no mistake.
    if ex.head in (:for, :let, :->, :function) || definition(ex) !== nothing
        outputs = setdiff(outputs, bound_names(ex))
        args = ex.args[2:end]
    elseif ex.head in REBINDING && args[1] isa Symbol && args[1] in outputs &&
            !(ex.head == :(=) && is_alias_of(args[2], args[1]))
        return line, args[1], ex.head
    end
    for arg in args
        if arg isa LineNumberNode
            line = arg.line
            continue
        end
        found = rebinding(arg, outputs, line)
        found === nothing || return found
    end
    return nothing
end

"""
    check_output_assignments(file, function_name, noutputs, dynamic) -> String

Parses `file` with Julia's parser and looks in every method of
`function_name` (`f`, or `f` inside `module M` for `M.f`) for an output
parameter (the first `noutputs` positional ones) rebound with `=`: the
output then keeps TensorFlow's uninitialised buffer.  `dynamic[i]` ('1' or '0') says
whether output `i` is dynamic (its fix is `y[] = ...`, not `y .= ...`).
"""
function check_output_assignments(file::String, function_name::String, noutputs::Int, dynamic::String)
    noutputs == 0 && return ""
    text = read(file, String)
    tree = try
        Base.parse_input_line(text; filename=file)
    catch
        return ""   # a syntax error: include reports it, naming the line
    end
    parts = Symbol.(split(function_name, '.'))
    problem = find_rebinding(tree, parts, noutputs, 0)
    problem === nothing && return ""
    line, name, op, position = problem
    assign = op == :(=) ? "=" : string(op)
    fixed = dynamic[position] == '1' ? "$name[] = ..." : (op == :(=) ? "$name .= ..." : "$name .$assign ...")
    what = dynamic[position] == '1' ? "the dynamic output $name is never set (it is a Ref to assign)" :
           "the output $name keeps whatever its memory held (uninitialised values, and no error)"
    return "$file:$line: `$name $assign ...` in $function_name rebinds the name $name, so $what; " *
           "write `$fixed` instead"
end

# `parts`: the module path then the function's name, as in the spec.
function find_rebinding(tree, parts::Vector{Symbol}, noutputs::Int, line::Int)
    tree isa Expr || return nothing
    for ex in tree.args
        if ex isa LineNumberNode
            line = ex.line
            continue
        end
        ex isa Expr || continue
        if ex.head == :module && length(parts) > 1 && ex.args[2] === parts[1]
            found = find_rebinding(ex.args[3], parts[2:end], noutputs, line)
            found === nothing || return found
        elseif ex.head in (:toplevel, :block, :macrocall)
            found = find_rebinding(ex, parts, noutputs, line)
            found === nothing || return found
        elseif length(parts) == 1 && (d = definition(ex)) !== nothing && d[1] === parts[1]
            _, params, body = d
            outputs = Symbol[]
            for p in params[1:min(noutputs, length(params))]
                n = parameter_name(p)
                n isa Symbol && push!(outputs, n)
            end
            found = rebinding(body, Set(outputs), line)
            if found !== nothing
                l, name, op = found
                return l, name, op, findfirst(==(name), [parameter_name(p) for p in params])
            end
        end
    end
    return nothing
end

# ---------------------------------------------------------------- the functions exist

"""
What `m.s` is, or `nothing`, without resolving the binding: in Julia 1.5,
looking a name of Base up in Main (`isdefined(Main, :sinc)`) binds Main's
`sinc` to Base's for good, after which the op's file can no longer define
its own `sinc` ("must be explicitly imported to be extended").  An
unresolved name is what a module `using`'d by `m` exports.
"""
function peek(m::Module, s::Symbol)
    Base.isbindingresolved(m, s) && return isdefined(m, s) ? getfield(m, s) : nothing
    for u in ccall(:jl_module_usings, Any, (Any,), m)
        Base.isexported(u, s) && isdefined(u, s) && return getfield(u, s)
    end
    return nothing
end

"""`name` (`f`, `M.f`) as Main would resolve it, without resolving it (`peek`)."""
function peek_function(name::AbstractString)
    value = Main
    for part in split(name, '.')
        value isa Module || return nothing
        value = peek(value, Symbol(part))
    end
    return value
end

"""The module a spec's name is looked up in: Main for `f`, `M` for `M.f` (or `nothing`)."""
function home_module(name::AbstractString)
    parts = split(name, '.')
    length(parts) == 1 && return Main
    m = peek_function(join(parts[1:end-1], '.'))
    return m isa Module ? m : nothing
end

takes(m::Method, n::Int) = m.isva ? n >= m.nargs - 2 : n == m.nargs - 1

defined_in(m::Method, file::String) = realpath_or_self(String(m.file)) == realpath_or_self(file)

realpath_or_self(path::String) = try realpath(path) catch; path end

"""
    check_function(file, name, role, arity, params, where) -> String

Checks that `name` (as in the spec) is a function with a method taking
`arity` arguments (`params`, as the kernel passes them), defined by the
op's file or a module of its name; `role` ("forward", "backward") and
`where` (the spec line that names it) go into the message.
"""
function check_function(file::String, name::String, role::String, arity::Int, params::String, where::String)
    f = peek_function(name)
    short = split(name, '.')[end]
    signature_text = "$short($params)"
    home = home_module(name)
    if f === nothing
        parts = split(name, '.')
        where_missing = home === nothing ? " (there is no module $(join(parts[1:end-1], '.')) in Main)" : ""
        return "$where: the $role function $name is not defined after including $file$where_missing: " *
               "define `function $signature_text ... end` there, or name the function the file defines " *
               "with @$role in the spec"
    end
    owner = f isa Function ? parentmodule(f) : parentmodule(typeof(f))
    ms = collect(methods(f))
    if owner !== home && !any(m -> defined_in(m, file), ms)
        shown = f isa Function ? "$owner.$(nameof(f))" : "a $(typeof(f))"
        return "$where: the $role function $name resolves to $shown, a function of $owner, not one the " *
               "op's file $file defines: define `function $signature_text ... end` in $file (it then " *
               "makes a new $short of $home, provided nothing in $home used $short before), or name " *
               "a function of the op's own with @$role in the spec"
    end
    applicable_here = any(m -> takes(m, arity), ms)
    applicable_here && return ""
    have = isempty(ms) ? "no methods" :
           "methods taking " * join(sort(unique([m.isva ? "$(m.nargs - 2) or more" : string(m.nargs - 1) for m in ms])), ", ") *
           " arguments (" * join(unique([string(m.file, ":", m.line) for m in ms]), ", ") * ")"
    return "$where: the $role function $name has $have, none taking the $arity arguments the kernel passes, " *
           "$signature_text: give $name a method with these $arity parameters in $file"
end

# ---------------------------------------------------------------- a MethodError against read-only inputs

# What a read-only input reaches Julia as (rank 0 and 1: itself; 2: a Transpose; >= 3: a PermutedDimsArray).
read_only_input(a) = a isa ReadOnlyArray || (a isa Union{Transpose,PermutedDimsArray} && parent(a) isa ReadOnlyArray)

abstract_type_text(a::AbstractArray{T,1}) where {T} = "AbstractVector{$T}"
abstract_type_text(a::AbstractArray{T,2}) where {T} = "AbstractMatrix{$T}"
abstract_type_text(a::AbstractArray{T,N}) where {T,N} = "AbstractArray{$T,$N}"

"""The hint a MethodError gets when some of its arguments are read-only inputs, or ""."""
function method_error_hint(e)
    e isa MethodError || return ""
    args = try collect(e.args) catch; return "" end
    inputs = [a for a in args if read_only_input(a)]
    isempty(inputs) && return ""
    a = first(inputs)
    return "\nHint: an op's inputs arrive as TFBridge.ReadOnlyArray <: AbstractArray (a read-only view of " *
           "TensorFlow's buffer; a matrix as its transpose), not as an Array: annotate them " *
           "$(abstract_type_text(a)) (not $(replace(abstract_type_text(a), "Abstract" => ""))), " *
           "or not at all"
end
