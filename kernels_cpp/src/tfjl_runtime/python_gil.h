// Python's GIL, seen from a library that must work with and without Python.
//
// The runtime never links libpython: the few CPython functions it needs are
// looked up with dlsym(RTLD_DEFAULT) once, and every guard is a no-op when
// they are absent or the interpreter is not initialised.
#ifndef TFJL_SRC_TFJL_RUNTIME_PYTHON_GIL_H_
#define TFJL_SRC_TFJL_RUNTIME_PYTHON_GIL_H_

namespace tfjl {
namespace detail {

// A scope guard: what it undoes belongs to its scope, so it is never copied.
struct ScopeGuard {
  ScopeGuard() = default;
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
};

// Releases the GIL for the guard's lifetime if (and only if) the current
// thread holds it.  Used around every blocking wait for Julia's thread: a
// thread that waits while holding the GIL would stall all Python threads, and
// would deadlock against any work on Julia's thread that needs the GIL.
class GilRelease : ScopeGuard {
 public:
  GilRelease();
  ~GilRelease();

 private:
  void* saved_thread_state_ = nullptr;  // PyThreadState* while released
};

// Holds the GIL for the guard's lifetime (PyGILState_Ensure/Release) when
// Python is present, on whatever thread enters Julia: Julia code may then use
// Python objects (PyCall, PythonCall) safely.  It cannot deadlock against a
// caller waiting for Julia's thread, because every such wait runs under
// GilRelease.  A no-op without Python, while the interpreter finalises (a
// thread taking the GIL then would be terminated), or with TFBRIDGE_JULIA_GIL=0.
class GilAcquire : ScopeGuard {
 public:
  GilAcquire();
  ~GilAcquire();

 private:
  bool counted_ = false;  // Python was there: this guard counts in the thread's nesting depth
  bool held_ = false;     // this guard took the GIL (the outermost one on its thread)
};

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_RUNTIME_PYTHON_GIL_H_
