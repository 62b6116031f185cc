// The C++ API of runtime.h.
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "julia_thread.h"
#include "python_gil.h"
#include "tfjl/runtime.h"

namespace tfjl {

using detail::JuliaThread;
using detail::Outcome;

namespace {

// "" once Julia is running, else why it cannot start.
std::string start_julia(JuliaThread& julia) { return julia.ready() ? std::string() : julia.ensure_started(nullptr); }

Outcome unavailable(const std::string& start_error) {
  return {"Julia is not available: " + start_error, detail::forked_from_julia() ? kFailedPrecondition : kInternal};
}

// Runs body() (which fills an Outcome); a C++ exception becomes an internal
// error, std::bad_alloc ResourceExhausted.
template <class Body>
Outcome guarded(Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc& e) {
    return {std::string("tf-julia-bridge runtime: out of memory (") + e.what() + ")", kResourceExhausted};
  } catch (const std::exception& e) {
    return {std::string("tf-julia-bridge runtime: ") + e.what(), kInternal};
  } catch (...) {
    return {"tf-julia-bridge runtime: unknown C++ exception", kInternal};
  }
}

// One call into Julia, whatever its form: Main.<function>(args...) through
// jl_call, or a compiled entry.  run() happens on Julia's thread.
struct JuliaCall {
  const char* function = nullptr;  // generic form
  std::vector<Arg>* args = nullptr;
  EntryFn entry = nullptr;         // compiled form
  EntryArgs entry_args{};

  Outcome run() const {
    detail::GilAcquire gil;
    const detail::JuliaSide& side = JuliaThread::instance().side();
    return entry != nullptr ? side.call_entry(entry, entry_args) : side.call(function, *args);
  }
};

std::atomic<uint64_t> g_entry_calls{0};

JuliaCall generic(const char* function, std::vector<Arg>& args) {
  JuliaCall call;
  call.function = function;
  call.args = &args;
  return call;
}

JuliaCall compiled(EntryFn entry, const EntryArgs& args) {
  g_entry_calls.fetch_add(1, std::memory_order_relaxed);
  JuliaCall call;
  call.entry = entry;
  call.entry_args = args;
  return call;
}

// Runs the call on Julia's thread while the caller waits; never throws.
std::string call_and_wait(const JuliaCall& call, int* kind_out) {
  struct Frame {
    const JuliaCall* call;
    Outcome out;
  } frame{&call, {}};
  Outcome out = guarded([&frame] {
    std::string start_error = run_on_julia_thread_raw(
        [](void* p) {
          auto* f = static_cast<Frame*>(p);
          f->out = f->call->run();
        },
        &frame);
    return start_error.empty() ? std::move(frame.out) : unavailable(start_error);
  });
  if (kind_out != nullptr) *kind_out = out.kind;
  return std::move(out.error);
}

struct AsyncCall {
  JuliaCall call;
  JuliaDone done;
  JuliaCancel cancel;
  void* ctx;
  Outcome out;
};

// Frees the call before `done`, which may well end the kernel that owns args.
// `done` runs TF's executor onwards (the ops after this one, when TF runs
// the graph in the thread that finishes it): outside Julia.
void complete(AsyncCall* call, Outcome out) {
  const JuliaDone done = call->done;
  void* const ctx = call->ctx;
  delete call;
  detail::OutsideJulia outside;
  done(ctx, std::move(out.error), out.kind);
}

void run_async_call(void* p) {
  auto* call = static_cast<AsyncCall*>(p);
  call->out = guarded([call] { return call->call.run(); });
}

void finish_async_call(void* p, bool ran) {
  auto* call = static_cast<AsyncCall*>(p);
  Outcome out = ran ? std::move(call->out) : Outcome{"the call was abandoned before it started", kInternal};
  complete(call, std::move(out));
}

void cancel_async_call(void* p, const char* why) {
  auto* call = static_cast<AsyncCall*>(p);
  if (call->cancel != nullptr) call->cancel(call->ctx, why);
}

// Queues the call for Julia's thread (or makes it at once there); `done` runs afterwards.
void call_and_post(const JuliaCall& julia_call, JuliaDone done, void* ctx, JuliaCancel cancel) {
  auto* call = new AsyncCall{julia_call, done, cancel, ctx, {}};
  Outcome failed = guarded([call] {
    JuliaThread& julia = JuliaThread::instance();
    std::string start_error = start_julia(julia);
    if (!start_error.empty()) return unavailable(start_error);
    julia.post(&run_async_call, call, &finish_async_call, &cancel_async_call, call->ctx);
    return Outcome{};
  });
  // Posted: Julia's thread owns the call now (and may have finished it already).
  if (failed.error.empty() && failed.kind == kOk) return;
  complete(call, std::move(failed));
}

}  // namespace

bool on_julia_thread() { return JuliaThread::on_julia_thread(); }

std::string run_on_julia_thread_raw(void (*fn)(void*), void* ctx) {
  JuliaThread& julia = JuliaThread::instance();
  if (std::string err = start_julia(julia); !err.empty()) return err;
  julia.run(fn, ctx);
  return "";
}

std::string call_julia(const char* function, std::vector<Arg>& args, int* kind_out) {
  return call_and_wait(generic(function, args), kind_out);
}

void call_julia_async(const char* function, std::vector<Arg>& args, JuliaDone done, void* ctx,
                      JuliaCancel cancel) {
  call_and_post(generic(function, args), done, ctx, cancel);
}

std::string call_entry(EntryFn entry, const EntryArgs& args, int* kind_out) {
  return call_and_wait(compiled(entry, args), kind_out);
}

void call_entry_async(EntryFn entry, const EntryArgs& args, JuliaDone done, void* ctx, JuliaCancel cancel) {
  call_and_post(compiled(entry, args), done, ctx, cancel);
}

bool call_abandoned() { return JuliaThread::current_call_abandoned(); }

void poll_until(const std::atomic<bool>& flag) { detail::poll_for(flag); }

void abandon_call(void* ctx) {
  JuliaThread& julia = JuliaThread::instance();
  if (julia.ready()) julia.abandon_posted(ctx);
}

std::atomic<EntryFn>* entry_slot(const char* op_type) {
  // Slots are never erased, so the pointers handed out stay valid; a kernel
  // asks once, when it is constructed, so the lock is off the call path.
  static std::mutex mutex;
  static auto* slots = new std::unordered_map<std::string, std::unique_ptr<std::atomic<EntryFn>>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*slots)[op_type != nullptr ? op_type : ""];
  if (slot == nullptr) slot = std::make_unique<std::atomic<EntryFn>>(nullptr);
  return slot.get();
}

namespace detail {
uint64_t entry_calls() { return g_entry_calls.load(std::memory_order_relaxed); }

// tfjl_set_output_pool_alloc's allocator; null: aligned_alloc.  Read only
// when an output pool's free list is empty, never on the pool's fast path.
std::atomic<RawAllocFn> g_output_pool_alloc{nullptr};
}  // namespace detail

RawAllocFn output_pool_alloc() {
  RawAllocFn fn = detail::g_output_pool_alloc.load(std::memory_order_acquire);
  return fn != nullptr ? fn : [](size_t alignment, size_t size) { return std::aligned_alloc(alignment, size); };
}

}  // namespace tfjl
