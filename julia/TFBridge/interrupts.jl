# TFBridge: interrupts (included by julia/TFBridge.jl, inside module TFBridge).
#
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
