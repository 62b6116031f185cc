// C++ API of libtfjl_runtime.so: what generated TensorFlow kernels call.
//
// No TensorFlow and no Julia header is needed to use it: kernels include this
// file (usually through tfjl/kernel.h) and link the runtime library, which
// owns Julia.  See CONTRACT.md for the calling convention and
// docs/internals/kernels-cpp.md for the thread design.  The dtypes, error kinds and compiled-entry types come
// from tfjl/contract.h, generated from bridge/julia/contract.py.
#ifndef TFJL_RUNTIME_H_
#define TFJL_RUNTIME_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tfjl/capi.h"
#include "tfjl/contract.h"

#pragma GCC visibility push(default)

namespace tfjl {

struct Arg;

// A numeric DynamicOutput's allocator (args.h: ctx->allocate_output).  The
// runtime calls it on Julia's thread, during the call, once `arg.result_dims`
// holds the shape of Julia's value (and matched `arg.dims`); it returns the
// output's row-major buffer of that many elements, into which the runtime
// then writes the value (null is fine for zero elements), or null with
// *error and *kind (an ErrorKind) set.
using AllocateFn = void* (*)(Arg& arg, std::string* error, int* kind);

struct Arg {
  enum Kind { Input, Output, DynamicOutput, AttrValue } kind;
  DType dtype;
  void* data = nullptr;             // numeric Input/Output: the TF buffer (zero-copy)
  const char* name = nullptr;       // Input/Output/DynamicOutput: its name in the spec, by which errors name
                                    //   it (may be null: then by its position)
  bool writable = false;            // numeric Input: Julia may write it (bridge.julia.call); a kernel's
                                    //   inputs are TF's buffers and reach Julia read-only
  std::vector<int64_t> dims;        // TF (row-major) shape of Input/Output; DynamicOutput:
                                    //   optional expected shape (-1 = any size), checked after the call
  std::vector<std::string> strings; // String Input (filled by glue) / String Output (filled by runtime)
  std::vector<int64_t> result_dims; // DynamicOutput: the TF shape of Julia's value, set by the runtime
  AllocateFn allocate = nullptr;    // numeric DynamicOutput: where its data goes (see AllocateFn), with
  void* allocate_ctx = nullptr;     //   the allocator's context (args.h: the OpKernelContext)
  int output_index = -1;            //   and the output's index (args.h: the TF output)
  std::vector<char> result_bytes;   // DynamicOutput without `allocate`: row-major bytes (numeric);
                                    //   string results go to `strings`
  double f = 0; int64_t i = 0; bool b = false; std::string s;  // AttrValue (by dtype)
};

// Calls Main.<function>(args...) on Julia's thread; returns an empty string on
// success, else "<ExceptionType>: <message>\n<backtrace>". kind_out (optional)
// receives an ErrorKind (contract.h): kInvalidArgument (ArgumentError,
// DimensionMismatch, DomainError, BoundsError, MethodError on the named
// function, or arguments the runtime cannot pass), kNotFound (function
// undefined), kInternal (anything else, or Julia could not be initialised),
// kResourceExhausted (Julia's OutOfMemoryError, also while the runtime wraps
// the arguments, or a DynamicOutput's allocator ran out of memory).
// Initialises Julia on first use if nobody called tfjl_init (see
// docs/internals/kernels-cpp.md, "Lazy start").
std::string call_julia(const char* function, std::vector<Arg>& args, int* kind_out);

// The same without blocking the caller: the call is queued for Julia's
// thread (or made at once on it), and done(ctx, error, kind) runs afterwards
// on Julia's thread, outside the GIL (or on the caller's thread if Julia
// could not start).  `function` and `args` must stay valid until done runs.
// `done` must not throw.
//
// An interrupt (Ctrl-C, bridge.julia.interrupt) may ask the caller to give
// up on the call: cancel(ctx, why) runs at most once, on any thread, before
// done; it must return at once and must not call into the runtime (it runs
// under the runtime's queue lock).  done still follows, once the Julia code
// returns (it is told, see TFBridge.checkinterrupt), or at once if it had
// not started.  docs/internals/kernels-cpp.md, "Interrupts and deadlines".
using JuliaDone = void (*)(void* ctx, std::string error, int kind);
using JuliaCancel = void (*)(void* ctx, const char* why);
void call_julia_async(const char* function, std::vector<Arg>& args, JuliaDone done, void* ctx,
                      JuliaCancel cancel = nullptr);

// ---------------------------------------------------------------- compiled entries
//
// A compiled entry is Julia code generated for one op type from its spec
// (templates/entries.jl.j2), made C-callable with @cfunction: it wraps the
// buffers and calls the user's function with argument types fixed at
// generation time, so a call needs neither jl_call nor dispatch.  Its type
// (EntryFn) and its three flat arrays (EntryArgs), filled in
// calling-convention order, are in contract.h (CONTRACT.md, "Compiled
// entries"); it returns 0, or an ErrorKind with the failure recorded in
// TFBridge.LAST_FAILURE, which call_entry reads back.

// The registry slot of an op type: created on first request, never freed, so
// a kernel can keep the pointer and load the entry on every call (null until
// bridge.customop.load registers one; the kernel then uses call_julia).
std::atomic<EntryFn>* entry_slot(const char* op_type);

// call_julia for a compiled entry: on Julia's thread (directly, or handed
// over while the caller waits), holding the GIL.
std::string call_entry(EntryFn entry, const EntryArgs& args, int* kind_out);

// call_julia_async for a compiled entry.
void call_entry_async(EntryFn entry, const EntryArgs& args, JuliaDone done, void* ctx,
                      JuliaCancel cancel = nullptr);

// The caller of call_julia_async / call_entry_async with this ctx gave up
// on the call (TF cancelled the step): the call is skipped if it has not
// started, else its Julia code is told (TFBridge.checkinterrupt).  done
// still follows.  Not from within a JuliaCancel.
void abandon_call(void* ctx);

// True on the thread that owns Julia.
bool on_julia_thread();

// On a Julia thread: whether the call it is running (a julia_thread
// session's run, say) has been abandoned by a deadline or an interrupt, so
// that a kernel running inline there stops the run instead of going on.
bool call_abandoned();

// Spins until `flag` is set or the runtime's poll time has passed
// (TFBRIDGE_JULIA_POLL_US, 50 us by default; 0: returns at once), as the
// runtime's own waiters do before they sleep: a thread that will wait for a
// short call anyway looks for its result first, since waking a sleeping
// thread costs 30-100 us on the VMs measured (docs/internals/kernels-cpp.md, "Waiting for work").
void poll_until(const std::atomic<bool>& flag);

// What tfjl::OutputPool (output_pool.h) calls for a fresh buffer when a free
// list is empty: std::aligned_alloc, or the allocator a test installed with
// tfjl_set_output_pool_alloc (capi.h).  Process-wide; never null.
using RawAllocFn = void* (*)(size_t alignment, size_t size);
RawAllocFn output_pool_alloc();

// Runs fn(ctx) on Julia's thread: directly when already there, otherwise
// handed over while the caller blocks.  A C++ exception thrown by fn is
// rethrown in the caller.  Returns an empty string, or why Julia could not be
// started (fn did not run).
std::string run_on_julia_thread_raw(void (*fn)(void*), void* ctx);

// The same for any callable, without allocating.
template <class F>
std::string run_on_julia_thread(F&& f) {
  using Fn = std::remove_reference_t<F>;
  return run_on_julia_thread_raw([](void* p) { (*static_cast<Fn*>(p))(); },
                                 const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace tfjl

#pragma GCC visibility pop

#endif  // TFJL_RUNTIME_H_
