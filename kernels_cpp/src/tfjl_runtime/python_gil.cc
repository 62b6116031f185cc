#include "python_gil.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>


namespace tfjl {
namespace detail {
namespace {

// The CPython entry points, resolved once; all null without Python.
struct PythonApi {
  int (*is_initialized)() = nullptr;          // Py_IsInitialized
  int (*gil_check)() = nullptr;               // PyGILState_Check
  void* (*this_thread_state)() = nullptr;     // PyGILState_GetThisThreadState
  void* (*save_thread)() = nullptr;           // PyEval_SaveThread
  void (*restore_thread)(void*) = nullptr;    // PyEval_RestoreThread
  int (*gil_ensure)() = nullptr;               // PyGILState_Ensure
  void (*gil_release)(int) = nullptr;          // PyGILState_Release
  int (*is_finalizing)() = nullptr;            // Py_IsFinalizing (3.13+) or _Py_IsFinalizing

  bool complete() const {
    return is_initialized && gil_check && this_thread_state && save_thread && restore_thread && gil_ensure &&
           gil_release && is_finalizing;
  }
};

template <class F>
void resolve(F*& out, const char* name) {
  out = reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
}

const PythonApi& python_api() {
  static const PythonApi api = [] {
    PythonApi a;
    resolve(a.is_initialized, "Py_IsInitialized");
    resolve(a.gil_check, "PyGILState_Check");
    resolve(a.this_thread_state, "PyGILState_GetThisThreadState");
    resolve(a.save_thread, "PyEval_SaveThread");
    resolve(a.restore_thread, "PyEval_RestoreThread");
    resolve(a.gil_ensure, "PyGILState_Ensure");
    resolve(a.gil_release, "PyGILState_Release");
    resolve(a.is_finalizing, "Py_IsFinalizing");
    if (a.is_finalizing == nullptr) resolve(a.is_finalizing, "_Py_IsFinalizing");
    return a.complete() ? a : PythonApi{};
  }();
  return api;
}

// TFBRIDGE_JULIA_GIL=1: every entry into Julia holds the GIL (GilAcquire).
bool acquire_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TFBRIDGE_JULIA_GIL");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return enabled;
}

}  // namespace

// The thread state each thread that enters Julia keeps for its lifetime
// (in practice only Julia's thread), and how deeply it is inside guards.
// PyGILState_Ensure/Release per call would create and delete a PyThreadState
// every time (about 0.7 us); keeping one makes each entry a bare lock
// hand-off (PyEval_RestoreThread / PyEval_SaveThread).
thread_local void* t_thread_state = nullptr;
thread_local int t_depth = 0;

GilAcquire::GilAcquire() {
  const PythonApi& py = python_api();
  if (!acquire_enabled() || !py.complete() || !py.is_initialized() || py.is_finalizing()) return;
  counted_ = true;
  if (t_depth++ > 0) return;  // an outer guard on this thread holds it (Julia -> Python -> Julia)
  held_ = true;
  if (t_thread_state == nullptr) {
    py.gil_ensure();  // creates this thread's state and takes the GIL; never released with PyGILState_Release
    t_thread_state = py.this_thread_state();
    return;
  }
  py.restore_thread(t_thread_state);
}

GilAcquire::~GilAcquire() {
  if (!counted_) return;  // the constructor found no Python
  --t_depth;
  if (held_) t_thread_state = python_api().save_thread();
}

GilRelease::GilRelease() {
  const PythonApi& py = python_api();
  if (!py.complete() || !py.is_initialized()) return;
  // PyGILState_Check alone answers 1 when its checks are disabled
  // (sub-interpreters); a thread state of our own makes the answer reliable.
  if (py.this_thread_state() != nullptr && py.gil_check() == 1) {
    saved_thread_state_ = py.save_thread();
  }
}

GilRelease::~GilRelease() {
  if (saved_thread_state_ != nullptr) python_api().restore_thread(saved_thread_state_);
}

int gil_acquire() {
  const PythonApi& py = python_api();
  if (!py.complete() || !py.is_initialized() || py.is_finalizing()) return -1;
  return py.gil_ensure();
}

void gil_release(int token) {
  if (token >= 0) python_api().gil_release(token);
}

}  // namespace detail
}  // namespace tfjl
