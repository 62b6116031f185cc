// One call into Julia, on Julia's thread: wrap the arguments (zero-copy for
// numeric buffers), call `entry(f, wrapped...)` through jl_call, turn a
// TFBridge.Failure into error text, and copy string / dynamic outputs back.
#ifndef TFJL_SRC_TFJL_JULIA_INVOKE_H_
#define TFJL_SRC_TFJL_JULIA_INVOKE_H_

#include <julia.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "julia_handles.h"
#include "tfjl/runtime.h"

namespace tfjl {
namespace detail {

// Main.<name>, or Mod.Sub.name walked from Main; nullptr if undefined.
jl_value_t* resolve_function(const char* name);

// The NotFound outcome of a name resolve_function did not find, saying what
// is missing (TFBridge.function_not_found).
Outcome not_found(const char* name);

// What a call is doing, kept by julia_guarded's caller (outside its
// JL_TRY) so that a Julia exception thrown anywhere in the call can say
// where.  Plain data: the longjmp to the catch skips no destructor of it.
struct CallStage {
  const char* step = "preparing the call";  // a literal; "%" stands for the argument
  const std::vector<Arg>* args = nullptr;
  size_t arg = SIZE_MAX;  // the argument `step` is about
};

// The failed call's Outcome for a Julia exception that no Julia `try`
// caught: its type and message and what the runtime was doing (`stage`);
// OutOfMemoryError is ResourceExhausted, anything else Internal.
Outcome escaped_exception(jl_value_t* exception, const CallStage& stage);

// Runs body() -> Outcome under a Julia `try`.  The runtime's own jl_* calls
// (allocating argument wrappers, Strings, boxes, types) run outside the
// user function's `try`, as does a compiled entry's `catch`; a Julia
// exception there (OutOfMemoryError) would otherwise unwind past every C++
// frame into the Julia thread's serving loop and end it, the call never
// finishing.  It fails the call instead (escaped_exception).  The catch
// restores Julia's GC frames and GC state, so the caller holds InJulia and
// body() may push frames; the C++ frames it skips hold no resource but heap
// strings of an error message (leaked once per such failure).  A C++
// exception of body() is rethrown once the Julia handler is gone.
template <class Body>
Outcome julia_guarded(CallStage& stage, Body&& body) {
  Outcome out;
  std::exception_ptr cxx_error;
  JL_TRY {
    // Nothing may leave this block but by its end: the handler would stay installed.
    try {
      out = body();
    } catch (...) {
      cxx_error = std::current_exception();
    }
  }
  JL_CATCH {
    out = escaped_exception(jl_current_exception(), stage);
  }
  if (cxx_error) std::rethrow_exception(cxx_error);
  return out;
}

// How errors call args[i]: by its name ("input 'x'", "dynamic output 'p'"),
// else by its position ("output (argument 2)").
std::string describe_arg(const std::vector<Arg>& args, size_t i);

// The argument wrapping and output copying, with the GC frame that roots
// every Julia value of the call.  `stage` (julia_guarded's) follows the call.
class Invocation {
 public:
  Invocation(std::vector<Arg>& args, CallStage* stage) : args_(args), stage_(stage) { stage_->args = &args_; }

  // Calls entry(function, args...) (entry is TFBridge.protect or
  // protect_value).  On success, on_value(result) runs while the result is
  // still rooted.  OnValue: void(jl_value_t*).
  template <class OnValue>
  Outcome call(jl_function_t* entry, jl_value_t* function, OnValue&& on_value);

 private:
  // Wraps args_[i]: *value is what Julia receives, *keep roots a helper
  // object (the parent array of a view, a dims tuple).  "" or why not.
  std::string wrap(size_t i, jl_value_t** value, jl_value_t** keep);
  std::string wrap_numeric(const Arg& a, jl_value_t** value, jl_value_t** keep);
  std::string wrap_strings(const Arg& a, bool fill_empty, jl_value_t** value, jl_value_t** keep);
  std::string describe(size_t i) const { return describe_arg(args_, i); }
  void at(const char* step, size_t arg = SIZE_MAX) {
    stage_->step = step;
    stage_->arg = arg;
  }
  // After a successful call: copy String results into args_, and each
  // DynamicOutput into the buffer its allocator gives (Arg::allocate; else
  // into Arg::result_bytes), once.
  Outcome collect_outputs(jl_value_t* const* values);
  Outcome collect_dynamic(size_t i, jl_value_t* ref);

  std::vector<Arg>& args_;
  CallStage* stage_;
};

// Failure / missing result of an entry call -> Outcome; {} if `result` is a value.
Outcome outcome_of(jl_value_t* result);

template <class OnValue>
Outcome Invocation::call(jl_function_t* entry, jl_value_t* function, OnValue&& on_value) {
  const size_t n = args_.size();
  // [0] function, [1..n] wrapped args (contiguous: they are jl_call's argv),
  // [n+1..2n] helpers kept alive, [2n+1] the result.
  TFJL_GC_ROOTS(roots, 2 * n + 2);
  jl_value_t** values = roots;
  jl_value_t** keeps = roots + n + 1;
  values[0] = function;
  for (size_t i = 0; i < n; ++i) {
    at("wrapping % for Julia, before the function ran", i);
    if (std::string err = wrap(i, &values[i + 1], &keeps[i]); !err.empty()) {
      return {(args_[i].name != nullptr ? describe(i) : "argument " + std::to_string(i + 1)) + ": " + err,
              kInvalidArgument};
    }
  }
  jl_value_t*& result = roots[2 * n + 1];
  at("calling the function");
  result = jl_call(entry, values, static_cast<int32_t>(n + 1));
  at("reading the call's result");
  Outcome out = outcome_of(result);
  if (!out.error.empty()) return out;
  out = collect_outputs(values + 1);
  if (!out.error.empty()) return out;
  at("converting the function's result");
  on_value(result);
  return out;
}

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_JULIA_INVOKE_H_
