// The C++ API of runtime.h.
#include <exception>

#include "julia_thread.h"
#include "python_gil.h"
#include "tfjl/runtime.h"

namespace tfjl {

using detail::JuliaThread;
using detail::Outcome;

namespace {

// "" once Julia is running, else why it cannot start.
std::string start_julia(JuliaThread& julia) { return julia.ready() ? std::string() : julia.ensure_started(nullptr); }

Outcome unavailable(const std::string& start_error) { return {"Julia is not available: " + start_error, kInternal}; }

// Runs body() (which fills an Outcome); a C++ exception becomes an internal error.
template <class Body>
Outcome guarded(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return {std::string("tf-julia-bridge runtime: ") + e.what(), kInternal};
  } catch (...) {
    return {"tf-julia-bridge runtime: unknown C++ exception", kInternal};
  }
}

// The call itself, on Julia's thread, with the GIL held.
Outcome call_here(const char* function, std::vector<Arg>& args) {
  detail::GilAcquire gil;
  return JuliaThread::instance().side().call(function, args);
}

struct AsyncCall {
  const char* function;
  std::vector<Arg>* args;
  JuliaDone done;
  void* ctx;
};

// Frees the call before `done`, which may well end the kernel that owns args.
void complete(AsyncCall* call, Outcome out) {
  const AsyncCall c = *call;
  delete call;
  c.done(c.ctx, std::move(out.error), out.kind);
}

void run_async_call(void* p) {
  auto* call = static_cast<AsyncCall*>(p);
  complete(call, guarded([call] { return call_here(call->function, *call->args); }));
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
  struct Call {
    const char* function;
    std::vector<Arg>* args;
    Outcome out;
  } call{function, &args, {}};
  Outcome out = guarded([&call] {
    std::string start_error = run_on_julia_thread_raw(
        [](void* p) {
          auto* c = static_cast<Call*>(p);
          c->out = call_here(c->function, *c->args);
        },
        &call);
    return start_error.empty() ? std::move(call.out) : unavailable(start_error);
  });
  if (kind_out != nullptr) *kind_out = out.kind;
  return std::move(out.error);
}

void call_julia_async(const char* function, std::vector<Arg>& args, JuliaDone done, void* ctx) {
  auto* call = new AsyncCall{function, &args, done, ctx};
  Outcome failed = guarded([call] {
    JuliaThread& julia = JuliaThread::instance();
    std::string start_error = start_julia(julia);
    if (!start_error.empty()) return unavailable(start_error);
    julia.post(&run_async_call, call);
    return Outcome{};
  });
  // Posted: Julia's thread owns the call now (and may have finished it already).
  if (failed.error.empty() && failed.kind == kOk) return;
  complete(call, std::move(failed));
}

}  // namespace tfjl
