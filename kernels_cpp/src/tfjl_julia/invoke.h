// One call into Julia, on Julia's thread: wrap the arguments (zero-copy for
// numeric buffers), call `entry(f, wrapped...)` through jl_call, turn a
// TFBridge.Failure into error text, and copy string / dynamic outputs back.
#ifndef TFJL_SRC_TFJL_JULIA_INVOKE_H_
#define TFJL_SRC_TFJL_JULIA_INVOKE_H_

#include <julia.h>

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

// The argument wrapping and output copying, with the GC frame that roots
// every Julia value of the call.
class Invocation {
 public:
  explicit Invocation(std::vector<Arg>& args) : args_(args) {}

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
  // How errors call args_[i]: by its name ("input 'x'", "dynamic output 'p'"),
  // else by its position ("output (argument 2)").
  std::string describe(size_t i) const;
  // After a successful call: copy String results into args_, and each
  // DynamicOutput into the buffer its allocator gives (Arg::allocate; else
  // into Arg::result_bytes), once.
  Outcome collect_outputs(jl_value_t* const* values);
  Outcome collect_dynamic(size_t i, jl_value_t* ref);

  std::vector<Arg>& args_;
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
    if (std::string err = wrap(i, &values[i + 1], &keeps[i]); !err.empty()) {
      return {(args_[i].name != nullptr ? describe(i) : "argument " + std::to_string(i + 1)) + ": " + err,
              kInvalidArgument};
    }
  }
  jl_value_t*& result = roots[2 * n + 1];
  result = jl_call(entry, values, static_cast<int32_t>(n + 1));
  Outcome out = outcome_of(result);
  if (!out.error.empty()) return out;
  out = collect_outputs(values + 1);
  if (!out.error.empty()) return out;
  on_value(result);
  return out;
}

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_JULIA_INVOKE_H_
