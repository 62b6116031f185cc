# Julia side of tf-julia-bridge.
#
# The C++ runtime (kernels_cpp/) loads this module into Main once, on Julia's
# thread, and calls only the functions below through jl_call.  Everything the
# runtime calls is wrapped in `protect`/`protect_value`, which never let a
# Julia exception escape: failures come back as a `Failure` value holding the
# formatted error and its coarse kind, so the C++ side needs no longjmp-aware
# code and the runtime stays usable after any error.
module TFBridge

using LinearAlgebra
using LinearAlgebra: Transpose

# Values the C++ runtime caches by pointer (helper functions, types, view
# types) are pushed here so they stay rooted for the life of the process.
const ROOTS = Any[]

# The contract shared with the C++ runtime and the code generator: dtypes,
# error kinds (INVALID_ARGUMENT, ...), the compiled entries' parameter types.
# Generated from bridge/julia/contract.py; the copy of this module built
# into libtfjl_julia.so has the file pasted in place of this line.
include(joinpath(@__DIR__, "contract.jl"))

# ---------------------------------------------------------------- errors

"""A call that threw: `text` is "<ExceptionType>: <message>\\n<backtrace>"."""
struct Failure
    text::String
    kind::Int   # INVALID_ARGUMENT, NOT_FOUND or INTERNAL (contract.jl)
end

# MethodError counts as a bad argument only when it is about the function the
# caller named (wrong arity or argument types); deeper MethodErrors are bugs
# inside that function and stay internal.
function error_kind(e, f)
    e isa LoadError && return error_kind(e.error, f)
    e isa ReadOnlyInputError && return INVALID_ARGUMENT
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
    e = something(read_only_cause(e, f), e)
    # Formatting runs user show methods; it must not be able to throw out.
    text = try
        t = error_text(e)
        b = backtrace_text(bt)
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

# ---------------------------------------------------------------- compiled entries
#
# A compiled entry (generated per op from its spec, templates/entries.jl.j2)
# is called from C through @cfunction with TF's buffers as raw pointers and
# shapes.  It wraps them with `tensor` below, exactly as the C++ runtime does
# for jl_call (CONTRACT.md), calls the user's function with argument types
# fixed at generation time, and reports a failure through LAST_FAILURE,
# since nothing may be thrown back into C.

"""
Per Julia thread (`LAST_FAILURE[Threads.threadid()]`), the failure of the
last compiled entry that failed on it, which the runtime reads back on the
same thread right after the entry returns.
"""
const LAST_FAILURE = Any[nothing for _ in 1:Threads.nthreads()]

"""
    tensor(T, Val(N), data, k, ints, d, name)

The output `name` of TF dtype `T` and rank `N` whose buffer is `data[k]` and
whose rank and TF shape are `ints[d]`, `ints[d+1:d+N]`: a zero-copy view in TF
index order (rank 0: a 0-dimensional Array, 1: a Vector, 2: a `Transpose`,
>= 3: a reversed `PermutedDimsArray`), the same values the runtime builds for
jl_call.
"""
@inline tensor(::Type{T}, v::Val{N}, data::EntryData, k::Int, ints::EntryInts, d::Int, name::Symbol) where {T,N} =
    tf_view(buffer_array(T, v, data, k, ints, d, "output", name))

"""
    input_tensor(T, Val(N), data, k, ints, d, name)

`tensor`, read-only: the input `name` of the op, whose buffer belongs to
TensorFlow (a fed numpy array, a Const, another op's output).
"""
@inline input_tensor(::Type{T}, v::Val{N}, data::EntryData, k::Int, ints::EntryInts, d::Int,
                     name::Symbol) where {T,N} =
    tf_view(ReadOnlyArray(buffer_array(T, v, data, k, ints, d, "input", name), name))

# The column-major Array over TF's row-major buffer: TF's shape reversed.
# `role` and `name` ("input", :x) name the argument in errors.
@inline function buffer_array(::Type{T}, ::Val{N}, data::EntryData, k::Int, ints::EntryInts,
                              d::Int, role::String, name::Symbol) where {T,N}
    rank = unsafe_load(ints, d)
    rank == N || throw(ArgumentError("$role '$name' has rank $rank where the op's spec says $N"))
    p = Ptr{T}(unsafe_load(data, k))
    # An integer length takes jl_ptr_to_array_1d, which needs no boxed dims tuple.
    N == 1 && return unsafe_wrap(Array, p, unsafe_load(ints, d + 1))
    return unsafe_wrap(Array, p, ntuple(i -> unsafe_load(ints, d + N + 1 - i), Val(N)))
end

# TF's index order over a column-major array of the reversed shape.
@inline function tf_view(A::AbstractArray{T,N}) where {T,N}
    N <= 1 && return A
    N == 2 && return transpose(A)
    return PermutedDimsArray(A, ntuple(i -> N + 1 - i, Val(N)))
end

# ---------------------------------------------------------------- read-only inputs
#
# An op's inputs are TensorFlow's buffers: a numpy array fed by the user, a
# Const read by every later run, another op's output read by other ops.  They
# reach Julia as a ReadOnlyArray, which reads like the Array it wraps (it is a
# DenseArray: broadcasting, BLAS and LAPACK read it in place) and refuses
# every write with a ReadOnlyInputError naming the input.

"""Thrown when a Julia op writes into its input `name`."""
struct ReadOnlyInputError <: Exception
    name::Symbol
end

function Base.showerror(io::IO, e::ReadOnlyInputError)
    print(io, "ReadOnlyInputError: input '", e.name, "' is read-only: a Julia op must not write into its ",
          "inputs (they are TensorFlow's buffers, shared with fed arrays, constants and other ops); ",
          "write into an output, or into a copy (copy(", e.name, "))")
end

"""An input of a Julia op: TensorFlow's buffer, readable in place, never writable."""
struct ReadOnlyArray{T,N} <: DenseArray{T,N}
    parent::Array{T,N}
    name::Symbol
end

Base.parent(A::ReadOnlyArray) = A.parent
Base.size(A::ReadOnlyArray) = size(A.parent)
Base.length(A::ReadOnlyArray) = length(A.parent)
Base.IndexStyle(::Type{<:ReadOnlyArray}) = IndexLinear()
Base.@propagate_inbounds Base.getindex(A::ReadOnlyArray, i::Int) = A.parent[i]
Base.setindex!(A::ReadOnlyArray, v, i::Int...) = refuse(A)
Base.unsafe_convert(::Type{Ptr{T}}, A::ReadOnlyArray{T}) where {T} = Base.unsafe_convert(Ptr{T}, A.parent)
Base.elsize(::Type{<:ReadOnlyArray{T}}) where {T} = Base.elsize(Array{T})
Base.strides(A::ReadOnlyArray) = strides(A.parent)
Base.similar(A::ReadOnlyArray, ::Type{S}, dims::Dims) where {S} = similar(A.parent, S, dims)
Base.dataids(A::ReadOnlyArray) = Base.dataids(A.parent)
# An empty input and an empty output may have one address: `y .= 2 .* x` copies x then.
Base.unaliascopy(A::ReadOnlyArray) = ReadOnlyArray(copy(A.parent), A.name)
Base.copy(A::ReadOnlyArray) = copy(A.parent)
Base.unsafe_copyto!(A::ReadOnlyArray, args...) = refuse(A)

refuse(A::ReadOnlyArray) = throw(ReadOnlyInputError(A.name))
refuse(A::AbstractArray) = refuse(parent(A))

# LinearAlgebra's in-place functions write a StridedArray through its pointer,
# past setindex!: refuse the ones whose destination is an input.  Calls these
# do not catch end in a MethodError (ambiguous), which `failure` reports as
# the read-only error too (read_only_cause).
const _Strided{T} = Union{StridedVecOrMat{T}, LinearAlgebra.Transpose{<:Any,<:StridedVecOrMat{T}},
                          LinearAlgebra.Adjoint{<:Any,<:StridedVecOrMat{T}}}
# An input, or a reshaped or sliced vector or matrix of one (still strided,
# so still written through its pointer); one method each, with the rank
# fixed, as a Union or a free rank would lose to LinearAlgebra's own, more
# specific, StridedVector and StridedMatrix methods.
for D in (:(ReadOnlyArray{T}),
          :(Base.ReshapedArray{T,1,<:ReadOnlyArray{T}}), :(Base.ReshapedArray{T,2,<:ReadOnlyArray{T}}),
          :(SubArray{T,1,<:ReadOnlyArray{T}}), :(SubArray{T,2,<:ReadOnlyArray{T}}))
    @eval begin
        LinearAlgebra.mul!(C::$D, A::_Strided{T}, B::_Strided{T}, α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.mul!(C::$D, A::StridedVecOrMat{T}, B::StridedVector{T}, α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
        LinearAlgebra.mul!(C::$D, A::StridedVecOrMat{T}, B::StridedVecOrMat{T}, α::Number, β::Number) where {T<:LinearAlgebra.BlasFloat} = refuse(C)
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
        a isa ReadOnlyArray && return ReadOnlyInputError(a.name)
    end
    return nothing
end

"""The string attribute whose bytes are at `data[k]` and whose length is `ints[d]`."""
@inline string_attr(data::EntryData, k::Int, ints::EntryInts, d::Int) =
    unsafe_string(Ptr{UInt8}(unsafe_load(data, k)), unsafe_load(ints, d))

# ---------------------------------------------------------------- finding the user's function
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
NotFound one that says what is missing.  Never throws: `failure` guards its
own formatting.
"""
function entry_failure(e, bt, name::String)::Cint
    fail = try
        f = resolve_function(name)
        f === nothing ? function_not_found(name) : failure(e, bt, f)
    catch
        failure(e, bt, nothing)
    end
    LAST_FAILURE[Threads.threadid()] = fail
    return Cint(fail.kind)
end

# ---------------------------------------------------------------- Julia's threads
#
# Every Julia thread serves the calls other threads hand to Julia
# (kernels_cpp/README.md, "Threads"): thread 1 in its root task, the others
# in a task pinned to each.  After a while without calls each lets Julia's
# scheduler run the thread's other work: thread 1 runs libuv's events and the
# tasks any thread may take (Threads.@spawn's), the others the tasks pinned
# to them (Threads.@threads').

# Ops run on the serving tasks' stacks: TF's inline executor (a julia_thread
# session runs a whole graph there) and deep Julia recursion need room.
# (Thread 1's root task has the runtime's 64 MB thread stack.)
const SERVING_STACK_BYTES = 64 * 1024 * 1024

# How long a serving thread waits in the runtime for a call before it lets
# the other tasks of its thread run: the latency of Julia's own timers and
# I/O while no call comes, and of tasks pinned there (Threads.@threads').
const SERVING_WAIT_US = 10_000

"""
    serve_on_threads(serve)

Called by the runtime on Julia's first thread once Julia is up: starts a
serving task on each other thread, then serves on this one.
`serve(max_wait_us, tid)` (a C function of the runtime) runs the calls queued
for Julia until none has come for `max_wait_us`.  Never returns.
"""
function serve_on_threads(serve::Ptr{Cvoid})
    for tid in 2:Threads.nthreads()
        task = Task(() -> serve_forever(serve, nothing), SERVING_STACK_BYTES)
        task.sticky = true
        ccall(:jl_set_task_tid, Cvoid, (Any, Cint), task, tid - 1)
        schedule(task)
    end
    serve_forever(serve, Base.AsyncCondition())
end

function serve_forever(serve::Ptr{Cvoid}, wake::Union{Base.AsyncCondition, Nothing})
    try
        while true
            ccall(serve, Cvoid, (Cint, Cint), SERVING_WAIT_US, Threads.threadid() - 1)
            # yield() would resume this pinned task before any task that is
            # not pinned (Julia 1.5's scheduler looks at a thread's own queue
            # first); a wait on a libuv event leaves the queue empty meanwhile.
            # The event needs thread 1's event loop, so only thread 1 waits so.
            # One AsyncCondition, signalled here, not sleep(0): each Timer's
            # handle comes from ccall(:malloc) and libjulia free()s it, two
            # different mallocs under glibc's heap checker (kernels_cpp/README.md).
            if wake === nothing
                yield()
            else
                ccall(:uv_async_send, Cint, (Ptr{Cvoid},), wake)
                wait(wake)
            end
        end
    catch e
        # The runtime catches every failure of a call: this is a bug.
        Core.println("tf-julia-bridge: the serving task of Julia's thread $(Threads.threadid()) stopped: ",
                     sprint(showerror, e))
        rethrow()
    end
end

# ---------------------------------------------------------------- interrupts

# Per Julia thread, the id of the call it runs and of the last call abandoned
# (a deadline, Ctrl-C, bridge.julia.interrupt()): the runtime's
# tfjl_running_call / tfjl_interrupted_call, indexed by threadid() - 1.
const RUNNING_CALL = Ref{Ptr{Int64}}(C_NULL)
const INTERRUPTED_CALL = Ref{Ptr{Int64}}(C_NULL)

function interrupt_slots()
    if RUNNING_CALL[] == C_NULL
        INTERRUPTED_CALL[] = cglobal((:tfjl_interrupted_call, RUNTIME_LIBRARY), Int64)
        RUNNING_CALL[] = cglobal((:tfjl_running_call, RUNTIME_LIBRARY), Int64)
    end
    return RUNNING_CALL[], INTERRUPTED_CALL[]
end

"""
    interrupted() -> Bool

Whether the op (or bridge.julia call) running on this thread has been
abandoned: its session run passed its deadline (`RunOptions.timeout_in_ms`,
`Session.run(timeout=...)`), or Ctrl-C or `bridge.julia.interrupt()` came.
Its outputs will be discarded, so a long loop may as well stop.  A few
nanoseconds.
"""
function interrupted()
    running, interrupted = interrupt_slots()
    tid = Threads.threadid()
    id = unsafe_load(running, tid)
    return id != 0 && unsafe_load(interrupted, tid) == id
end

"""
    checkinterrupt()

Throw `InterruptException()` if the op running on this thread has been
abandoned (see `interrupted`).  Call it in long loops: Julia 1.5 delivers
Ctrl-C to its first thread only and cannot stop a running task from outside,
so this is how a deadline or an interrupt stops an op's Julia code on any
thread.  (An op that never calls it runs to its end; its outputs are
discarded all the same.)
"""
checkinterrupt() = interrupted() ? throw(InterruptException()) : nothing

# ---------------------------------------------------------------- Python host

# The runtime (kernels_cpp/src/tfjl_runtime), found by its soname: it is
# loaded in every process that runs this module.
const RUNTIME_LIBRARY = "libtfjl_runtime.so"

"""
    with_gil(f)

Call `f()` holding Python's global interpreter lock, and return its value.
Julia code that calls into Python's C API (a `ccall` of a `Py*` function, a
Python bridge package) must do it inside `with_gil`: Julia ops and
`bridge.julia` calls do not hold the lock (unless TFBRIDGE_JULIA_GIL=1), so
that Python threads keep running while Julia computes.  Without Python in
the process it just calls `f()`.  Nestable.
"""
function with_gil(f)
    token = ccall((:tfjl_gil_acquire, RUNTIME_LIBRARY), Cint, ())
    try
        return f()
    finally
        ccall((:tfjl_gil_release, RUNTIME_LIBRARY), Cvoid, (Cint,), token)
    end
end

"""Evaluate every top-level expression of `code` in Main; the last value."""
eval_code(code::String) = include_string(Main, code, "bridge.julia.eval")

eval_repr(code::String) = Base.invokelatest(repr, eval_code(code))

function include_file(path::String)
    Base.include(Main, path)
    return nothing
end

# What the C side converts to Python objects; anything else becomes PyRepr.
struct PyRepr
    text::String
end

struct PyBigInt
    decimal::String
end

"""A numeric array copied into row-major (TF/numpy index) order."""
struct PyArray
    typestr::String        # numpy dtype string, e.g. "<f8"
    dims::Vector{Int64}    # TF index order
    data::Array            # contiguous, elements in row-major order
    nbytes::Int
end

numpy_typestr(::Type) = nothing
for (T, s) in ((Float64, "<f8"), (Float32, "<f4"), (Float16, "<f2"),
               (Int8, "|i1"), (Int16, "<i2"), (Int32, "<i4"), (Int64, "<i8"),
               (UInt8, "|u1"), (UInt16, "<u2"), (UInt32, "<u4"), (UInt64, "<u8"),
               (Bool, "|b1"), (ComplexF32, "<c8"), (ComplexF64, "<c16"))
    @eval numpy_typestr(::Type{$T}) = $s
end

py_value(x) = PyRepr(repr(x))
py_value(::Nothing) = nothing
py_value(x::Bool) = x
py_value(x::Integer) = typemin(Int64) <= x <= typemax(Int64) ? Int64(x) : PyBigInt(string(x))
py_value(x::AbstractFloat) = Float64(x)
py_value(x::AbstractString) = String(x)

function py_value(x::AbstractArray{T,N}) where {T,N}
    typestr = numpy_typestr(T)
    typestr === nothing && return PyRepr(repr(x))
    data = row_major(x)
    return PyArray(typestr, collect(Int64, size(x)), data, sizeof(data))
end

"""A fresh contiguous Array whose memory lists `x` in row-major order."""
row_major(x::AbstractArray{T,N}) where {T,N} =
    N <= 1 ? collect(x) : permutedims(x, ntuple(i -> N + 1 - i, N))

# ---------------------------------------------------------------- kernels

"""
The zero-copy view type of a column-major buffer holding a TF tensor of rank N
(N >= 2), over an Array, or over a ReadOnlyArray for an input.
"""
function view_type(::Type{T}, N::Int, input::Bool) where {T}
    parent = Array{T,N}(undef, ntuple(_ -> 0, N))
    return typeof(tf_view(input ? ReadOnlyArray(parent, :input) : parent))
end

readonly_type(::Type{T}, N::Int) where {T} = ReadOnlyArray{T,N}

dims_tuple_type(N::Int) = NTuple{N,Int}

# ---------------------------------------------------------------- dynamic outputs
#
# A dynamic output's value goes straight into TF's output buffer, copied
# once.  The runtime (collect_dynamic in kernels_cpp/src/tfjl_julia/invoke.cc) asks
# `dynamic_result` for the value's shape, has the kernel allocate the TF
# output of that shape, and then either copies `source` with one memcpy (the
# value's memory already lists its elements in TF's row-major order: a
# Vector, a transposed Matrix, an input) or calls `store_dynamic!`, one pass
# from Julia's column-major value into the row-major buffer.  The value stays
# rooted throughout: nothing is copied twice, nothing converted element by
# element through dynamic dispatch.

"""
A dynamic output as the Julia function receives it: a `Ref{Any}` that the
function assigns, `p[] = A`.  Its size is the array's, so nothing exists to
write into before that: `p .= ...`, `p[i] = v`, `copyto!(p, ...)` and
`fill!(p, v)` throw an ArgumentError that says so, naming the output.  The
runtime creates it (invoke.cc: `name` is the output's name in the spec, `what`
how errors call it) and reads `x` after the call (`dynamic_result`).
"""
mutable struct DynamicOutput <: Ref{Any}
    name::Symbol    # the output's name in the spec (:o when the kernel gave none)
    what::String    # "dynamic output 'p'", or "dynamic output (argument 2)" without a name
    x::Any          # the value assigned: undefined until then (so the constructor leaves it out)
    DynamicOutput(name::Symbol, what::String) = new(name, what)
end

function Base.getindex(r::DynamicOutput)
    isdefined(r, :x) || throw(ArgumentError(
        "$(r.what) has no value yet: the function assigns it, `$(r.name)[] = A`, before reading it"))
    return r.x
end
Base.setindex!(r::DynamicOutput, value) = (r.x = value; r)

function written_in_place(r::DynamicOutput)
    throw(ArgumentError("$(r.what) is assigned, not written in place: `$(r.name)[] = A` sets it to the " *
                        "array A, whose size becomes the output's (TensorFlow allocates it after the call, so " *
                        "`$(r.name) .= ...`, `$(r.name)[i] = ...`, copyto! and fill! have nothing to write into)"))
end
Base.setindex!(r::DynamicOutput, value, i...) = written_in_place(r)
Base.copyto!(r::DynamicOutput, src) = written_in_place(r)
Base.fill!(r::DynamicOutput, value) = written_in_place(r)
Base.Broadcast.materialize!(r::DynamicOutput, value) = written_in_place(r)
Base.Broadcast.materialize!(r::DynamicOutput, bc::Base.Broadcast.Broadcasted) = written_in_place(r)

"""What the runtime needs of a dynamic output's value; fields boxed, so C reads them without allocating."""
struct DynamicValue
    value::Any           # numeric: an AbstractArray in TF index order; strings: a row-major Array{String}
    dims::Vector{Int64}  # its TF shape
    source::Any          # an Array{T} listing its elements in row-major order (memcpy), or nothing
end

not_convertible(x, ::Type{T}, r::DynamicOutput) where {T} = ArgumentError(
    "$(r.what) holds a $(typeof(x)), which does not convert to an Array{$T}")

"""
What the dynamic output `r` held after the call, as a `DynamicValue`.  `T`
is the output's element type.  Numeric arrays are not copied here; strings
are collected into row-major order.
"""
function dynamic_result(r::DynamicOutput, ::Type{T}) where {T}
    x = isdefined(r, :x) ? r.x : nothing
    x === nothing && throw(ArgumentError(
        "$(r.what) was not assigned: the function must set it, e.g. `$(r.name)[] = A`"))
    A = if x isa AbstractArray
        x
    else
        fill(try convert(T, x) catch; throw(not_convertible(x, T, r)) end)
    end
    dims = collect(Int64, size(A))
    if T === String
        B = try convert(Array{T}, A) catch; throw(not_convertible(x, T, r)) end
        S = row_major(B)
        return DynamicValue(S, dims, S)
    end
    return DynamicValue(A, dims, row_major_source(A, T))
end

"""An Array whose memory lists the elements of `A` (of type `T`) in TF's row-major order, or nothing."""
row_major_source(A::AbstractArray, ::Type{T}) where {T} = nothing  # other element types: store_dynamic! converts
function row_major_source(A::AbstractArray{T,N}, ::Type{T}) where {T,N}
    M = dense_memory(A)
    # Column-major order is row-major order when at most one dimension exceeds 1.
    M !== nothing && count(>(1), size(A)) <= 1 && return M
    return reversed_memory(A)
end

# A view in TF's index order of a column-major array of the reversed shape
# (a transpose, a reversed PermutedDimsArray: how inputs arrive) has TF's
# row-major order in that array's memory.
reversed_memory(A) = nothing
reversed_memory(A::Union{LinearAlgebra.Transpose{T,<:AbstractVecOrMat{T}},
                         LinearAlgebra.Adjoint{T,<:AbstractVecOrMat{T}}}) where {T<:Real} = dense_memory(parent(A))
function reversed_memory(A::PermutedDimsArray{T,N,perm}) where {T,N,perm}
    perm == ntuple(i -> N + 1 - i, Val(N)) || return nothing
    return dense_memory(parent(A))
end

"""The Array holding the memory of `A`: `A` itself, or what a dense wrapper of the same size and memory wraps (an input's read-only array); or nothing."""
dense_memory(A) = nothing
dense_memory(A::Array) = A
function dense_memory(A::DenseArray)
    P = parent(A)
    (P !== A && P isa DenseArray && size(P) == size(A) && Base.dataids(P) == Base.dataids(A)) || return nothing
    return dense_memory(P)
end

"""
    store_dynamic!(p, nbytes, T, A, r)

Writes the dynamic output `A` (TF index order) into TF's row-major buffer at
`p`, `nbytes` bytes of elements of type `T`, in one pass: the buffer is the
column-major array of TF's shape reversed, filled by `copyto!` (rank <= 1),
`transpose!` (rank 2, cache-blocked) or a reversing `permutedims!`.
Elements convert to `T` on the way; `r` is the DynamicOutput, for messages.
"""
function store_dynamic!(p::Ptr{Cvoid}, nbytes::Int, ::Type{T}, A::AbstractArray{S,N},
                        r::DynamicOutput) where {T,S,N}
    length(A) * sizeof(T) == nbytes || throw(ErrorException(
        "$(r.what) has $(length(A)) elements for a buffer of $nbytes bytes"))
    dest = unsafe_wrap(Array, Ptr{T}(p), reverse(size(A)))
    try
        if N <= 1
            copyto!(dest, A)
        elseif N == 2
            LinearAlgebra.transpose!(dest, A)
        else
            permutedims!(dest, A, ntuple(i -> N + 1 - i, Val(N)))
        end
    catch
        throw(not_convertible(A, T, r))
    end
    return nothing
end

# ---------------------------------------------------------------- package environments
#
# Where Julia finds packages.  Julia reads JULIA_DEPOT_PATH, JULIA_LOAD_PATH
# and JULIA_PROJECT itself when it starts, embedded as on the command line
# (Base.__init__), so those keep their meaning here.  The bridge adds two
# things, and changes nothing else:
# - TFBRIDGE_JULIA_DEPOT: a read-only depot appended after the user's depots
#   (the first one must stay writable: Julia writes precompiled files there),
#   and its environments/v<major>.<minor> appended to the load path.  Done
#   when this module loads, so both ways Julia starts (bridge.julia.init and
#   a kernel's lazy start) see it.
# - op environments: customop.load stacks an op folder holding a
#   Project.toml on the load path (use_op_environment), after the user's
#   entries and before the extra depot's environment, so the op's own
#   Manifest.toml wins over that fallback.  Before the op's Julia file runs,
#   every package it imports at top level is looked up as `using` would, so a
#   missing one refuses the load before any of the op's code runs.

const EXTRA_DEPOT_VARIABLE = "TFBRIDGE_JULIA_DEPOT"

"""Load path entries added for the extra depot; op environments go before them."""
const EXTRA_ENVIRONMENTS = String[]

"""The environment folder of depot `depot` for this Julia (`environments/v1.5`)."""
depot_environment(depot::AbstractString) =
    joinpath(depot, "environments", "v$(VERSION.major).$(VERSION.minor)")

"""
Make the depot paths absolute (Julia resolves packages and precompiled files
against them; a relative one would change meaning with the working folder)
and append the depot named by TFBRIDGE_JULIA_DEPOT, once.
"""
function add_extra_depot!(value::AbstractString = get(ENV, EXTRA_DEPOT_VARIABLE, ""))
    map!(d -> abspath(expanduser(d)), DEPOT_PATH, DEPOT_PATH)
    isempty(value) && return nothing
    depot = abspath(expanduser(value))
    isdir(depot) || throw(ArgumentError(
        "$EXTRA_DEPOT_VARIABLE=$value: $depot is not a folder (expected a Julia depot, holding packages/)"))
    depot in DEPOT_PATH || push!(DEPOT_PATH, depot)
    env = depot_environment(depot)
    if isdir(env) && !(env in LOAD_PATH)
        push!(LOAD_PATH, env)
        push!(EXTRA_ENVIRONMENTS, env)
    end
    return nothing
end

has_project(dir::AbstractString) = any(name -> isfile(joinpath(dir, name)), ("JuliaProject.toml", "Project.toml"))

"""
Put the environment of op folder `dir` on LOAD_PATH (before the extra
depot's environment; once); true if it was added now.
"""
function add_op_environment!(dir::String)
    dir in LOAD_PATH && return false
    at = findfirst(in(EXTRA_ENVIRONMENTS), LOAD_PATH)
    insert!(LOAD_PATH, at === nothing ? length(LOAD_PATH) + 1 : at, dir)
    return true
end

"""The packages (first names of `using`/`import` paths) the parsed code `ex` imports unconditionally."""
function imported_packages!(names::Vector{String}, ex)
    ex isa Expr || return names
    if ex.head in (:using, :import)
        for arg in ex.args
            path = arg isa Expr && arg.head === :(:) ? arg.args[1] : arg   # `using A: f`
            path isa Expr && path.head === :. && !isempty(path.args) || continue
            root = path.args[1]
            # `.Local` is a module of the file's own; Base and Core are always there.
            root isa Symbol && !(root in (:., :Base, :Core, :Main)) && push!(names, String(root))
        end
    elseif ex.head in (:toplevel, :block)
        foreach(a -> imported_packages!(names, a), ex.args)
    elseif ex.head === :module
        imported_packages!(names, ex.args[3])
    end
    # Imports under `if`, `try`, functions... may be meant to fail: the file decides.
    return names
end

"""Why `using name` in Main would fail, or "" if it would not: Base.require's own two lookups."""
function package_problem(name::String)
    id = Base.identify_package(name)
    id === nothing && return "no environment on the load path lists it"
    haskey(Base.loaded_modules, id) && return ""
    Base.locate_package(id) === nothing &&
        return "an environment lists it ($(id.uuid)), but no Manifest.toml on the load path resolves it " *
               "to a copy in a depot (not installed, or its environment not instantiated)"
    return ""
end

"""
Stack the environment of op folder `dir`, if it has a Project.toml, and look
up the packages the Julia file `source` imports at top level.  Returns ""
when all of them load, else one line per missing package, "Name: why", and
then LOAD_PATH is left as it was.  Nothing of `source` is run (a syntax error
is left for `include` to report).
"""
function use_op_environment(dir::String, source::String)
    added = has_project(dir) && add_op_environment!(dir)
    ex = Base.parse_input_line(read(source, String); filename = source)
    lines = String[]
    for name in unique!(imported_packages!(String[], ex))
        why = package_problem(name)
        isempty(why) || push!(lines, "$name: $why")
    end
    isempty(lines) || !added || filter!(!=(dir), LOAD_PATH)
    return join(lines, "\n")
end

uuid_in(text::AbstractString, pattern::Regex) = (m = match(pattern, text); m === nothing ? "" : String(m[1]))

readdir_or_empty(dir::AbstractString) = isdir(dir) ? readdir(dir) : String[]

"""
The UUID of package `name`, from what this Julia can see: an environment on
the load path, the standard library, a registry or an installed copy in a
depot.  Also whether `using` could load it as things stand (a manifest on the
load path resolves it to an installed copy).  Returns "uuid loadable"
(loadable is true or false), or "" if Julia knows no such package.
"""
function package_uuid(name::String)
    Base.isidentifier(name) || return ""
    id = Base.identify_package(name)
    uuid = id === nothing || id.uuid === nothing ? "" : string(id.uuid)
    if isempty(uuid)
        stdlib = joinpath(Sys.STDLIB, name, "Project.toml")
        isfile(stdlib) && (uuid = uuid_in(read(stdlib, String), r"(?m)^uuid\s*=\s*\"([0-9a-f-]{36})\""))
    end
    for depot in DEPOT_PATH
        isempty(uuid) || break
        # An installed copy: packages/<name>/<slug>/Project.toml.
        for slug in readdir_or_empty(joinpath(depot, "packages", name))
            project = joinpath(depot, "packages", name, slug, "Project.toml")
            isfile(project) || continue
            uuid = uuid_in(read(project, String), r"(?m)^uuid\s*=\s*\"([0-9a-f-]{36})\"")
            isempty(uuid) || break
        end
        # A registry (a git clone, as Julia 1.5's Pkg keeps them): `<uuid> = { name = "<name>", ... }`.
        for registry in readdir_or_empty(joinpath(depot, "registries"))
            isempty(uuid) || break
            file = joinpath(depot, "registries", registry, "Registry.toml")
            isfile(file) || continue
            pattern = Regex("(?m)^\\s*([0-9a-f-]{36})\\s*=\\s*\\{\\s*name\\s*=\\s*\"" * name * "\"")
            uuid = uuid_in(read(file, String), pattern)
        end
    end
    isempty(uuid) && return ""
    loadable = Base.locate_package(Base.PkgId(Base.UUID(uuid), name)) !== nothing
    return "$uuid $loadable"
end

add_extra_depot!()

end # module TFBridge
