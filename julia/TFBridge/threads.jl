# TFBridge: Julia's threads (included by julia/TFBridge.jl, inside module TFBridge).
#
# Every Julia thread serves the calls other threads hand to Julia
# (docs/internals/kernels-cpp.md, "Threads"): thread 1 in its root task, the others
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
    # Compile what every thread runs here, on this thread, before the others
    # start: Julia 1.5's compiler is fragile when several threads compile at once.
    for W in (Nothing, Base.AsyncCondition)
        precompile(serve_forever, (Ptr{Cvoid}, W))
        precompile(serve_once, (Ptr{Cvoid}, W))
    end
    for tid in 2:Threads.nthreads()
        task = Task(() -> serve_forever(serve, nothing), SERVING_STACK_BYTES)
        task.sticky = true
        ccall(:jl_set_task_tid, Cvoid, (Any, Cint), task, tid - 1)
        schedule(task)
    end
    serve_forever(serve, Base.AsyncCondition())
end

function serve_forever(serve::Ptr{Cvoid}, wake::Union{Base.AsyncCondition, Nothing})
    while true
        # The runtime fails a call whose Julia exception no `try` of the call
        # caught (julia_guarded, kernels_cpp/src/tfjl_julia/invoke.h), so none
        # should come here; one that does anyway is reported, and the thread
        # serves on rather than stop serving for the rest of the process.
        try
            serve_once(serve, wake)
        catch e
            e isa InterruptException && continue  # a Ctrl-C meant for nobody here (thread 1 only)
            try
                Core.println("tf-julia-bridge: Julia's thread $(Threads.threadid()), serving calls, caught ",
                             sprint(showerror, e), "; it serves on")
            catch
            end
        end
    end
end

function serve_once(serve::Ptr{Cvoid}, wake::Union{Base.AsyncCondition, Nothing})
    ccall(serve, Cvoid, (Cint, Cint), SERVING_WAIT_US, Threads.threadid() - 1)
    # yield() would resume this pinned task before any task that is
    # not pinned (Julia 1.5's scheduler looks at a thread's own queue
    # first); a wait on a libuv event leaves the queue empty meanwhile.
    # The event needs thread 1's event loop, so only thread 1 waits so.
    # One AsyncCondition, signalled here, not sleep(0): each Timer's
    # handle comes from ccall(:malloc) and libjulia free()s it, two
    # different mallocs under glibc's heap checker (docs/internals/kernels-cpp.md, "glibc's heap checker").
    if wake === nothing
        yield()
    else
        ccall(:uv_async_send, Cint, (Ptr{Cvoid},), wake)
        wait(wake)
    end
    return nothing
end
