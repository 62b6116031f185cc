# TFBridge: finding the user's function (included by julia/TFBridge.jl, inside module TFBridge).
#
# An op's function is named from Main: `f`, or `MyModule.f` / `A.B.f` for a
# function in a module that Main reaches (a file defining `module MyModule`,
# a package bound by `using`).  The generic path resolves the name itself
# (resolve_function in kernels_cpp/src/tfjl_julia/invoke.cc); both paths
# explain a miss with `function_not_found`.

"""`name` (`f`, `Mod.f`, `A.B.f`) as it is bound in Main now, or `nothing`."""
function resolve_function(name::AbstractString)
    value = Main
    for part in split(name, '.')
        value isa Module && isdefined(value, Symbol(part)) || return nothing
        value = getfield(value, Symbol(part))
    end
    return value
end

"""
The NotFound failure of calling `name` when it does not resolve: what is
missing, the module on the way (`MyModule` of `MyModule.f`) or the function.
"""
function function_not_found(name::AbstractString)::Failure
    parts = split(name, '.')
    modules, fn = parts[1:end-1], parts[end]
    parent, path = Main, "Main"
    for part in modules
        if !isdefined(parent, Symbol(part))
            return Failure("UndefVarError: $part not defined: $path has no module $part, which should hold " *
                           "the Julia function $name (define the module, e.g. include the file defining it " *
                           "with bridge.julia.include, before the call)", NOT_FOUND)
        end
        value = getfield(parent, Symbol(part))
        if !(value isa Module)
            return Failure("$path.$part is a $(typeof(value)), not a module, so it holds no Julia " *
                           "function $name", NOT_FOUND)
        end
        parent, path = value, "$path.$part"
    end
    isempty(modules) && return Failure("UndefVarError: $fn not defined: no such Julia function in Main " *
                                       "(define it, e.g. with bridge.julia.include, before the call)", NOT_FOUND)
    return Failure("UndefVarError: $fn not defined: module $path has no $fn, so the Julia function $name " *
                   "does not exist (define it in the module before the call)", NOT_FOUND)
end

"""
Whether `parent.name` is still bound to `value`, the module a compiled entry
was compiled against.  Including a file that defines `module M ... end` again
replaces Main.M by a new module, but compiled code keeps the one it saw
(Julia folds constant bindings into it); an entry checks this, a pointer
comparison, before its static call.  The lookup is a ccall, so the compiler
cannot fold it too.
"""
@inline is_bound(parent::Module, name::Symbol, value::Module) =
    ccall(:jl_get_global, Ptr{Cvoid}, (Any, Any), parent, name) == pointer_from_objref(value)

"""
Calls the function `name` resolves to now, for an entry whose modules were
replaced since it was compiled (see `is_bound`): a dynamic call, as on the
generic path.  (The entry already runs in the latest world: its @cfunction
wrapper moves on with the world age.)
"""
function call_resolved(name::String, args...)
    f = resolve_function(name)
    f === nothing && throw(UndefVarError(Symbol(name)))  # entry_failure says what is missing
    return f(args...)
end

"""
Records why a compiled entry's call of `name` (from Main, as in the spec)
threw, as `protect` would have returned it, and returns the error kind for
the entry to return.  When the name no longer resolves, the failure is the
NotFound one that says what is missing.  Never throws but when Julia has no
memory left even for `UNRECORDED_FAILURE` (then the runtime's guard reports
it: kernels_cpp/src/tfjl_julia/invoke.h, julia_guarded).
"""
function entry_failure(e, bt, name::String)::Cint
    fail = try
        f = resolve_function(name)
        f === nothing ? function_not_found(name) : failure(e, bt, f)
    catch
        try
            failure(e, bt, nothing)
        catch
            UNRECORDED_FAILURE
        end
    end
    LAST_FAILURE[Threads.threadid()] = fail
    return Cint(fail.kind)
end

"""What entry_failure records when formatting the failure threw too (out of memory)."""
const UNRECORDED_FAILURE = Failure("the function threw, and formatting its error threw too " *
                                   "(out of memory?): no message", INTERNAL)
