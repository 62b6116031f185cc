// The C++ API of runtime.h.
#include <exception>

#include "julia_thread.h"
#include "python_gil.h"
#include "tfjl/runtime.h"

namespace tfjl {

using detail::JuliaThread;
using detail::Outcome;

bool on_julia_thread() { return JuliaThread::on_julia_thread(); }

std::string run_on_julia_thread_raw(void (*fn)(void*), void* ctx) {
  JuliaThread& julia = JuliaThread::instance();
  if (!julia.ready()) {
    if (std::string err = julia.ensure_started(nullptr); !err.empty()) return err;
  }
  julia.run(fn, ctx);
  return "";
}

std::string call_julia(const char* function, std::vector<Arg>& args, int* kind_out) {
  struct Call {
    const char* function;
    std::vector<Arg>* args;
    Outcome out;
  } call{function, &args, {}};
  try {
    std::string start_error = run_on_julia_thread_raw(
        [](void* p) {
          auto* c = static_cast<Call*>(p);
          detail::GilAcquire gil;
          c->out = JuliaThread::instance().side().call(c->function, *c->args);
        },
        &call);
    if (!start_error.empty()) call.out = {"Julia is not available: " + start_error, kInternal};
  } catch (const std::exception& e) {
    call.out = {std::string("tf-julia-bridge runtime: ") + e.what(), kInternal};
  } catch (...) {
    call.out = {"tf-julia-bridge runtime: unknown C++ exception", kInternal};
  }
  if (kind_out != nullptr) *kind_out = call.out.kind;
  return std::move(call.out.error);
}

namespace {

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
  Outcome out;
  try {
    detail::GilAcquire gil;
    out = JuliaThread::instance().side().call(call->function, *call->args);
  } catch (const std::exception& e) {
    out = {std::string("tf-julia-bridge runtime: ") + e.what(), kInternal};
  } catch (...) {
    out = {"tf-julia-bridge runtime: unknown C++ exception", kInternal};
  }
  complete(call, std::move(out));
}

}  // namespace

void call_julia_async(const char* function, std::vector<Arg>& args, JuliaDone done, void* ctx) {
  auto* call = new AsyncCall{function, &args, done, ctx};
  Outcome failed;
  try {
    JuliaThread& julia = JuliaThread::instance();
    std::string start_error = julia.ready() ? std::string() : julia.ensure_started(nullptr);
    if (start_error.empty()) {
      julia.post(&run_async_call, call);
      return;
    }
    failed = {"Julia is not available: " + start_error, kInternal};
  } catch (const std::exception& e) {
    failed = {std::string("tf-julia-bridge runtime: ") + e.what(), kInternal};
  }
  complete(call, std::move(failed));
}

}  // namespace tfjl
