# TFBridge: errors (included by julia/TFBridge.jl, inside module TFBridge).

"""A call that threw: `text` is "<ExceptionType>: <message>\\n<backtrace>"."""
struct Failure
    text::String
    kind::Int   # INVALID_ARGUMENT, NOT_FOUND, INTERNAL or RESOURCE_EXHAUSTED (contract.jl)
end

# MethodError counts as a bad argument only when it is about the function the
# caller named (wrong arity or argument types); deeper MethodErrors are bugs
# inside that function and stay internal.
function error_kind(e, f)
    e isa LoadError && return error_kind(e.error, f)
    e isa ReadOnlyInputError && return INVALID_ARGUMENT
    e isa OutOfMemoryError && return RESOURCE_EXHAUSTED
    e isa UndefVarError && return NOT_FOUND
    e isa Union{ArgumentError,DimensionMismatch,DomainError,BoundsError} && return INVALID_ARGUMENT
    e isa MethodError && e.f === f && return INVALID_ARGUMENT
    return INTERNAL
end

"""`<ExceptionType>: <message>` for any exception (showerror is not uniform)."""
function error_text(e)
    # include/eval wrap errors in LoadError; the inner error is the news.
    if e isa LoadError
        return error_text(e.error) * "\nin expression starting at $(e.file):$(e.line)"
    end
    T = string(nameof(typeof(e)))
    shown = sprint(showerror, e)
    startswith(shown, T) && return shown
    msg = hasfield(typeof(e), :msg) ? getfield(e, :msg) : nothing
    return T * ": " * (msg isa AbstractString ? String(msg) : shown)
end

const MAX_FRAMES = 40

in_bridge(fr) = fr.linfo isa Core.MethodInstance && fr.linfo.def isa Method && fr.linfo.def.module === TFBridge

# Compiled entries (templates/entries.jl.j2) are Main functions named so.
const ENTRY_PREFIX = "tfbridge_entry_"

# The frame where the bridge called the user's code: protect's, or an entry's.
is_call_frame(fr) = (in_bridge(fr) && fr.func in (:protect, :protect_value)) ||
                    startswith(String(fr.func), ENTRY_PREFIX)

# Base's include machinery between the user's top-level code and the bridge.
const LOADING_FILES = ("loading.jl", "Base.jl", "boot.jl")

# The backtrace from the user's code up to (not including) the bridge's entry
# frame; what lies below it (jl_call, the runtime) and the bridge's and Base's
# include frames just above it are noise.
function backtrace_text(bt)
    frames = Base.StackTraces.stacktrace(bt)
    stop = findfirst(is_call_frame, frames)
    stop === nothing || (frames = frames[1:stop-1])
    filter!(fr -> !fr.from_c, frames)
    # The bridge's own frames where the error was raised (a refused write into an input).
    while !isempty(frames) && in_bridge(frames[1])
        popfirst!(frames)
    end
    while !isempty(frames) && (in_bridge(frames[end]) || basename(String(frames[end].file)) in LOADING_FILES)
        pop!(frames)
    end
    isempty(frames) && return ""
    io = IOBuffer()
    print(io, "Stacktrace:")
    for (i, fr) in enumerate(frames)
        i > MAX_FRAMES && (print(io, "\n ... ", length(frames) - MAX_FRAMES, " more frames"); break)
        print(io, "\n [", i, "] ", fr)
    end
    return String(take!(io))
end

function failure(e, bt, f)
    # read_only_cause calls `parent` on the arguments of a MethodError, which
    # a user's array type may make throw.
    e = something(try read_only_cause(e, f) catch; nothing end, e)
    # Formatting runs user show methods; it must not be able to throw out.
    text = try
        t = error_text(e) * method_error_hint(e)   # checks.jl
        # An abandoned call's InterruptException goes to nobody; symbolising
        # its backtrace held up the run after a Ctrl-C by 0.3-0.9 s on a
        # loaded machine (the stale-interrupt stress, tests/julia/test_interrupts.py).
        b = e isa InterruptException && interrupted() ? "" : backtrace_text(bt)
        isempty(b) ? t : t * "\n" * b
    catch inner
        cause = e isa LoadError ? e.error : e
        "$(typeof(cause)) (its message could not be shown: showing it threw a $(typeof(inner)))"
    end
    kind = try error_kind(e, f) catch; INTERNAL end
    return Failure(text, kind)
end

"""Call `f(args...)`; return its value, or a `Failure` if it threw."""
function protect(f::F, args::Vararg{Any,N}) where {F,N}
    try
        return f(args...)
    catch e
        return failure(e, catch_backtrace(), f)
    end
end

"""Like `protect`, but the value is converted for Python (`py_value`)."""
function protect_value(f::F, args::Vararg{Any,N}) where {F,N}
    try
        return Base.invokelatest(py_value, f(args...))
    catch e
        return failure(e, catch_backtrace(), f)
    end
end
