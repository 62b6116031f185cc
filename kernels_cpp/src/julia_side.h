// The boundary between the two libraries of the runtime, whose sources are
// the folders of their names: the one header both include.
//
// libtfjl_runtime.so (src/tfjl_runtime/: what kernels and Python link) owns
// Julia's thread and the hand-over, and never touches Julia.
// libtfjl_julia.so (src/tfjl_julia/) holds everything that calls jl_*; it
// links libjulia and the runtime dlopens it, on its own, when Julia starts.  The split is about symbol scopes, not tidiness: a
// kernel library that TF_LoadLibrary loads has libtensorflow_framework in
// its dependency scope, and if libjulia (and its libLLVM) arrived in that
// same scope, LLVM's static initialisers would bind to the LLVM inside TF
// and crash.  Opened by itself, libtfjl_julia.so's scope holds only Julia's
// libraries (see docs/internals/kernels-cpp.md, "Two libraries").
//
// Every function of the table runs on Julia's thread.
#ifndef TFJL_SRC_JULIA_SIDE_H_
#define TFJL_SRC_JULIA_SIDE_H_

#include <string>
#include <vector>

#include "tfjl/capi.h"
#include "tfjl/runtime.h"

namespace tfjl {
namespace detail {

// Where Julia lives; either given to tfjl_init or found at lazy start.
struct InitParams {
  std::string bindir;     // Sys.BINDIR of the Julia installation
  std::string image;      // absolute path of the system image (sys.so)
  std::string bridge_jl;  // TFBridge.jl to load, empty: the copy built into libtfjl_julia.so
  int servers = 1;        // Julia threads, all of which serve calls (Julia caps it at the CPUs)
};

// What a call into Julia came to.
struct Outcome {
  std::string error;  // empty on success
  int kind = kOk;
};

// Bumped whenever the table changes: both libraries come from one build, so
// a mismatch means a stale file next to the runtime.
constexpr int kJuliaSideAbi = 5;

struct JuliaSide {
  int abi;
  // jl_init_with_image + TFBridge.jl + cached handles; "" or why not.
  std::string (*initialise)(const InitParams& params);
  // call_julia's work: Main.<function>(args...) with outputs copied back.
  Outcome (*call)(const char* function, std::vector<Arg>& args);
  // A compiled entry (runtime.h); a failure is read from TFBridge.LAST_FAILURE.
  Outcome (*call_entry)(EntryFn entry, const EntryArgs& args);
  // Main.<function>(args...) with the value converted for Python.
  Outcome (*call_value)(const char* function, std::vector<Arg>& args, tfjl_value* out);
  Outcome (*eval_value)(const char* code, tfjl_value* out);
  Outcome (*eval_repr)(const char* code, char** repr);
  Outcome (*include)(const char* path);
  // Brackets a time a Julia thread spends outside Julia (waiting for work,
  // in TF_SessionRun, in a kernel's done callback): a GC-safe region, so
  // the other Julia threads can collect meanwhile.  Every other entry point
  // of this table takes the thread back to the GC-unsafe state for its call.
  int (*idle_begin)();
  void (*idle_end)(int state);
  // Julia's first thread, once Julia is initialised: every Julia thread
  // (this one included, in its root task) calls serve(max wait in
  // microseconds, its jl_threadid()) in a loop, yielding to Julia's
  // scheduler in between.  Returns only on failure, with the reason.
  std::string (*serve_forever)(void (*serve)(int max_wait_us, int julia_tid));
};

}  // namespace detail
}  // namespace tfjl

// Exported by libtfjl_julia.so; the runtime finds it with dlsym.
extern "C" const tfjl::detail::JuliaSide* tfjl_julia_side();

#define TFJL_JULIA_LIBRARY_NAME "libtfjl_julia.so"
#define TFJL_JULIA_SIDE_SYMBOL "tfjl_julia_side"

#endif  // TFJL_SRC_JULIA_SIDE_H_
