// Julia values the runtime looks up once and reuses on every call: the
// TFBridge helper functions, the types it constructs, and per-(dtype, rank)
// array and view types.  Julia's threads all read them: the handles are set
// once at start-up, the type caches fill under a lock (init.cc); everything
// cached is pushed onto TFBridge.ROOTS so the GC keeps it.
#ifndef TFJL_SRC_TFJL_JULIA_JULIA_HANDLES_H_
#define TFJL_SRC_TFJL_JULIA_JULIA_HANDLES_H_

#include <julia.h>

#include <string>

#include "julia_side.h"
#include "tfjl/runtime.h"

namespace tfjl {
namespace detail {

// Highest tensor rank the runtime wraps (TF's own limit is 254; nobody
// reaches this one, and it keeps the type caches small fixed tables).
// The caches have one row per dtype (kNumDTypes, tfjl/contract.h).
constexpr int kMaxRank = 32;

struct Handles {
  jl_module_t* tfbridge = nullptr;
  jl_array_t* roots = nullptr;  // TFBridge.ROOTS

  jl_function_t* protect = nullptr;
  jl_function_t* protect_value = nullptr;
  jl_function_t* eval_code = nullptr;
  jl_function_t* eval_repr = nullptr;
  jl_function_t* include_file = nullptr;
  jl_function_t* dynamic_result = nullptr;
  jl_function_t* store_dynamic = nullptr;  // TFBridge.store_dynamic!
  jl_function_t* function_not_found = nullptr;
  jl_function_t* view_type = nullptr;
  jl_function_t* readonly_type = nullptr;
  jl_function_t* dims_tuple_type = nullptr;

  jl_datatype_t* failure = nullptr;   // TFBridge.Failure
  jl_datatype_t* py_repr = nullptr;   // TFBridge.PyRepr
  jl_datatype_t* py_bigint = nullptr; // TFBridge.PyBigInt
  jl_datatype_t* py_array = nullptr;  // TFBridge.PyArray
  jl_datatype_t* dynamic_output = nullptr;  // TFBridge.DynamicOutput, a Ref{Any}
  jl_value_t* empty_string = nullptr;
  jl_array_t* last_failures = nullptr;  // TFBridge.LAST_FAILURE: per Julia thread, what an entry recorded
  jl_function_t* serve_on_threads = nullptr;

  // Julia's element type of each dtype: TFBridge.DTYPES (julia/contract.jl), read at start-up.
  jl_value_t* element_types[kNumDTypes] = {};

  // Filled on first use; see the accessors below.
  jl_value_t* array_types[kNumDTypes][kMaxRank + 1] = {};
  jl_value_t* view_types[kNumDTypes][kMaxRank + 1] = {};
  jl_value_t* input_view_types[kNumDTypes][kMaxRank + 1] = {};  // over a ReadOnlyArray
  jl_value_t* readonly_types[kNumDTypes][kMaxRank + 1] = {};    // TFBridge.ReadOnlyArray{T,N}
  jl_datatype_t* dims_tuples[kMaxRank + 1] = {};
};

// Julia's per-thread state: Julia 1.7 replaced jl_get_ptls_states() by the
// current task's ptls (only 1.5 is tested here).
inline jl_ptls_t current_ptls() {
#if JULIA_VERSION_MAJOR == 1 && JULIA_VERSION_MINOR < 7
  return jl_get_ptls_states();
#else
  return jl_current_task->ptls;
#endif
}

// Julia code runs GC-unsafe.  A Julia thread may arrive from a GC-safe
// region (an inline TF_SessionRun, a kernel's done callback, both outside
// Julia so that a collection on another thread need not wait for them):
// every entry point of the Julia side holds one of these for its call.
class InJulia {
 public:
  InJulia() : ptls_(current_ptls()), state_(jl_gc_unsafe_enter(ptls_)) {}
  ~InJulia() { jl_gc_unsafe_leave(ptls_, state_); }
  InJulia(const InJulia&) = delete;
  InJulia& operator=(const InJulia&) = delete;

 private:
  jl_ptls_t ptls_;
  int8_t state_;
};

// jl_init_with_image, then TFBridge.jl and the handles (init.cc).
std::string initialise_julia(const InitParams& params);

// The process's handles (valid once initialise_julia succeeded).
Handles& handles();

// Loads the handles from Main.TFBridge; "" or what is missing.
std::string load_handles();

// Keeps v alive for the life of the process.
void keep_forever(jl_value_t* v);

// The Julia element type of a dtype (contract.h's table); nullptr for an unknown code.
jl_value_t* element_type(DType dtype);
// Array{T,rank}; Transpose / PermutedDimsArray view type (rank >= 2, numeric)
// over an Array, or over a ReadOnlyArray for an input; ReadOnlyArray{T,rank};
// NTuple{rank,Int}.  nullptr only if Julia failed to build the type.
jl_value_t* array_type(DType dtype, int rank);
jl_value_t* view_type(DType dtype, int rank, bool input);
jl_value_t* readonly_type(DType dtype, int rank);
jl_datatype_t* dims_tuple_type(int rank);

// "<ExceptionType>: <message>" of a Julia exception caught by jl_call, with
// no help from TFBridge (used before it is loaded and as a last resort).
std::string describe_exception(jl_value_t* exception);

// Pops the frame pushed by JL_GC_PUSHARGS in the same scope, on every exit
// path (including C++ exceptions).
struct GcFramePop {
  GcFramePop() = default;
  GcFramePop(const GcFramePop&) = delete;
  GcFramePop& operator=(const GcFramePop&) = delete;
  ~GcFramePop() { JL_GC_POP(); }
};

// Roots `n` zeroed slots in the current scope: `var` points at them.
#define TFJL_GC_ROOTS(var, n)  \
  jl_value_t** var = nullptr;  \
  JL_GC_PUSHARGS(var, (n));    \
  ::tfjl::detail::GcFramePop var##_frame_pop

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_JULIA_JULIA_HANDLES_H_
