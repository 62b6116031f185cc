// The extern "C" API of capi.h (Python's entry points, through cffi).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <type_traits>

#include "julia_thread.h"
#include "python_gil.h"
#include "tfjl/capi.h"
#include "tfjl/runtime.h"

using tfjl::Arg;
using tfjl::DType;
using tfjl::detail::JuliaThread;
using tfjl::detail::Outcome;

namespace {

char* dup_string(const std::string& s) noexcept {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// tfjl::run_on_julia_thread for a Python caller, which polls for the result
// before it sleeps (JuliaThread::Wait::kPollFirst).
template <class F>
std::string run_here_or_polling(F&& f) {
  JuliaThread& julia = JuliaThread::instance();
  if (!julia.ready()) {
    if (std::string err = julia.ensure_started(nullptr); !err.empty()) return err;
  }
  using Fn = std::remove_reference_t<F>;
  julia.run([](void* p) { (*static_cast<Fn*>(p))(); }, &f, JuliaThread::Wait::kPollFirst);
  return "";
}

// Runs body(side) -> Outcome on Julia's thread (starting Julia if needed)
// and maps the outcome to the C convention: 0, or the error kind with *err set.
template <class Body>
int run_capi(char** err, Body&& body) {
  if (err != nullptr) *err = nullptr;
  Outcome out;
  try {
    std::string start_error = run_here_or_polling([&] {
      tfjl::detail::GilAcquire gil;
      out = body(JuliaThread::instance().side());
    });
    if (!start_error.empty()) {
      out = {"Julia is not available: " + start_error,
             tfjl::detail::forked_from_julia() ? tfjl::kFailedPrecondition : tfjl::kInternal};
    }
  } catch (const std::bad_alloc& e) {
    out = {std::string("tf-julia-bridge runtime: out of memory (") + e.what() + ")", tfjl::kResourceExhausted};
  } catch (const std::exception& e) {
    out = {std::string("tf-julia-bridge runtime: ") + e.what(), tfjl::kInternal};
  } catch (...) {
    out = {"tf-julia-bridge runtime: unknown C++ exception", tfjl::kInternal};
  }
  if (out.error.empty()) return 0;
  if (err != nullptr) *err = dup_string(out.error);
  return out.kind != tfjl::kOk ? out.kind : tfjl::kInternal;
}

bool to_arg(const tfjl_arg& in, Arg* out, std::string* err) {
  if (in.dtype < 0 || in.dtype >= tfjl::kNumDTypes) {
    *err = "unknown dtype code " + std::to_string(in.dtype);
    return false;
  }
  out->dtype = static_cast<DType>(in.dtype);
  if (in.kind == TFJL_ARG_ARRAY) {
    if (out->dtype == DType::String || in.ndims < 0 || (in.ndims > 0 && in.dims == nullptr)) {
      *err = "arrays must be numeric with ndims >= 0 and dims";
      return false;
    }
    out->kind = Arg::Input;
    out->writable = true;  // bridge.julia.call: Julia's in-place writes show in the numpy array
    out->data = in.data;
    out->dims.assign(in.dims, in.dims + in.ndims);
    return true;
  }
  if (in.kind == TFJL_ARG_SCALAR) {
    out->kind = Arg::AttrValue;
    out->f = in.f;
    out->i = in.i;
    out->b = in.i != 0;
    if (out->dtype == DType::String) {
      if (in.s == nullptr) {
        *err = "string scalar without data";
        return false;
      }
      out->s.assign(in.s, in.len);
    }
    return true;
  }
  *err = "unknown argument kind " + std::to_string(in.kind);
  return false;
}

}  // namespace

extern "C" {

int tfjl_init(const char* bindir, const char* image, const char* bridge_jl, char* err, size_t errlen) {
  std::string message;
  if (bindir == nullptr || image == nullptr) {
    message = "tfjl_init: bindir and image are required";
  } else {
    try {
      tfjl::detail::InitParams params{bindir, image, bridge_jl != nullptr ? bridge_jl : ""};
      message = JuliaThread::instance().ensure_started(&params);
    } catch (const std::exception& e) {
      message = std::string("tfjl_init: ") + e.what();
    } catch (...) {
      message = "tfjl_init: unknown C++ exception";
    }
  }
  if (message.empty()) return 0;
  if (err != nullptr && errlen > 0) {
    const size_t n = std::min(message.size(), errlen - 1);
    std::memcpy(err, message.data(), n);
    err[n] = '\0';
  }
  return tfjl::kInternal;
}

int tfjl_is_initialized(void) { return JuliaThread::instance().ready() ? 1 : 0; }

int tfjl_on_julia_thread(void) { return JuliaThread::on_julia_thread() ? 1 : 0; }

int tfjl_eval(const char* code, char** result_repr, char** err) {
  if (result_repr != nullptr) *result_repr = nullptr;
  char* repr = nullptr;
  const int status = run_capi(err, [&](const tfjl::detail::JuliaSide& side) {
    return side.eval_repr(code != nullptr ? code : "", &repr);
  });
  if (result_repr != nullptr) {
    *result_repr = repr;
  } else {
    std::free(repr);
  }
  return status;
}

int tfjl_eval_value(const char* code, tfjl_value* out, char** err) {
  *out = tfjl_value{};
  return run_capi(err, [&](const tfjl::detail::JuliaSide& side) {
    return side.eval_value(code != nullptr ? code : "", out);
  });
}

int tfjl_include(const char* path, char** err) {
  return run_capi(err, [&](const tfjl::detail::JuliaSide& side) { return side.include(path != nullptr ? path : ""); });
}

int tfjl_call_value(const char* function, const tfjl_arg* args, int nargs, tfjl_value* out, char** err) {
  *out = tfjl_value{};
  return run_capi(err, [&](const tfjl::detail::JuliaSide& side) {
    std::vector<Arg> converted(static_cast<size_t>(nargs > 0 ? nargs : 0));
    for (size_t i = 0; i < converted.size(); ++i) {
      std::string why;
      if (!to_arg(args[i], &converted[i], &why)) {
        return Outcome{"argument " + std::to_string(i + 1) + ": " + why, tfjl::kInvalidArgument};
      }
    }
    return side.call_value(function != nullptr ? function : "", converted, out);
  });
}

void tfjl_value_free(tfjl_value* v) {
  if (v == nullptr) return;
  std::free(v->text);
  std::free(v->data);
  std::free(v->dims);
  *v = tfjl_value{};
}

void tfjl_free(void* p) { std::free(p); }

void tfjl_call_counts(uint64_t* direct, uint64_t* handed_over) {
  const JuliaThread& julia = JuliaThread::instance();
  if (direct != nullptr) *direct = julia.direct_calls();
  if (handed_over != nullptr) *handed_over = julia.handed_over_calls();
}

void tfjl_register_entry(const char* op_type, void* entry) {
  tfjl::entry_slot(op_type)->store(reinterpret_cast<tfjl::EntryFn>(entry), std::memory_order_release);
}

uint64_t tfjl_entry_calls(void) { return tfjl::detail::entry_calls(); }

void tfjl_set_output_pool_alloc(void* (*alloc)(size_t alignment, size_t size)) {
  tfjl::detail::g_output_pool_alloc.store(alloc, std::memory_order_release);
}

int tfjl_gil_acquire(void) {
  // Waiting for the GIL must not hold up a collection another Julia thread
  // starts meanwhile: wait GC-safe.
  tfjl::detail::JuliaThread& julia = tfjl::detail::JuliaThread::instance();
  const bool in_julia = julia.ready() && tfjl::detail::JuliaThread::on_julia_thread();
  const int gc_state = in_julia ? julia.side().idle_begin() : 0;
  const int token = tfjl::detail::gil_acquire();
  if (in_julia) julia.side().idle_end(gc_state);
  return token;
}

void tfjl_gil_release(int token) { tfjl::detail::gil_release(token); }

namespace {

// A julia_thread session's run, handed to a Julia thread as a detachable
// task: it holds copies of TF_SessionRun's arguments, whose targets the
// Python caller keeps alive until the run is over (bridge/framework/session.py).
struct SessionRun {
  tfjl_session_run_fn session_run;
  void* session;
  const void* run_options;
  const void* inputs;
  void* const* input_values;
  int ninputs;
  const void* outputs;
  void** output_values;
  int noutputs;
  const void* const* targets;
  int ntargets;
  void* run_metadata;
  void* status;

  void operator()() const {
    session_run(session, run_options, inputs, input_values, ninputs, outputs, output_values, noutputs, targets,
                ntargets, run_metadata, status);
  }
};

}  // namespace

int tfjl_session_run_on_julia_thread(void* tf_session_run, void* session, const void* run_options,
                                     const void* inputs, void* const* input_values, int ninputs,
                                     const void* outputs, void** output_values, int noutputs,
                                     const void* const* targets, int ntargets, void* run_metadata, void* status,
                                     int64_t timeout_us, void** pending) {
  // *pending is written only as this returns: a caller that set it to a
  // value of its own before the call can tell whether the call returned
  // (bridge/framework/session.py registers the run before it starts).
  const SessionRun run{reinterpret_cast<tfjl_session_run_fn>(tf_session_run), session, run_options, inputs,
                       input_values, ninputs, outputs, output_values, noutputs, targets, ntargets, run_metadata,
                       status};
  JuliaThread& julia = JuliaThread::instance();
  if (!julia.ready() && !julia.ensure_started(nullptr).empty()) {
    // Without Julia the run still happens, on this thread: its Julia ops then
    // fail with the start error in `status`, which this function cannot set.
    run();
    *pending = nullptr;
    return 0;
  }
  if (JuliaThread::on_julia_thread()) {  // nothing to hand over, nobody to time out
    run();
    *pending = nullptr;
    return 0;
  }
  tfjl::detail::ensure_sigint_hook();
  auto* task = new tfjl::detail::Task();
  task->ctx = new SessionRun(run);
  task->fn = [](void* p) {
    // TF's own work outside Julia's heap: another Julia thread may collect
    // meanwhile (each Julia op of the run enters Julia for its call).
    tfjl::detail::OutsideJulia outside;
    (*static_cast<const SessionRun*>(p))();
  };
  task->release = [](void* p) { delete static_cast<SessionRun*>(p); };
  julia.submit_detachable(task);
  const JuliaThread::WaitResult result = julia.wait_detached(task, timeout_us);
  switch (result) {
    case JuliaThread::WaitResult::kDone:
      JuliaThread::release(task);
      *pending = nullptr;
      return 0;
    case JuliaThread::WaitResult::kDoneAfterDeadline:
    case JuliaThread::WaitResult::kDoneAfterInterrupt: {
      const bool deadline = result == JuliaThread::WaitResult::kDoneAfterDeadline;
      JuliaThread::release(task);
      *pending = nullptr;
      return deadline ? 3 : 4;
    }
    case JuliaThread::WaitResult::kDeadline:
      *pending = task;
      return 1;
    case JuliaThread::WaitResult::kInterrupted:
      *pending = task;
      return 2;
  }
  *pending = nullptr;  // not reached
  return 0;
}

int tfjl_run_is_done(void* pending) {
  return static_cast<tfjl::detail::Task*>(pending)->finished.load(std::memory_order_acquire) ? 1 : 0;
}

void tfjl_run_wait(void* pending) { JuliaThread::wait_done(static_cast<tfjl::detail::Task*>(pending)); }

void tfjl_run_release(void* pending) { JuliaThread::release(static_cast<tfjl::detail::Task*>(pending)); }

int tfjl_interrupt(const char* why) {
  if (!JuliaThread::instance().ready()) return 0;
  return JuliaThread::instance().interrupt_all(why != nullptr && *why != '\0' ? why : "interrupted");
}

int tfjl_wait_idle(int64_t timeout_us) {
  if (!JuliaThread::instance().ready()) return 0;
  return JuliaThread::instance().wait_idle(timeout_us);
}

void tfjl_ensure_sigint_hook(void) {
  if (JuliaThread::instance().ready()) tfjl::detail::ensure_sigint_hook();
}

}  // extern "C"
