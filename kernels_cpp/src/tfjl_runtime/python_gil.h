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

// Holds the GIL for the guard's lifetime when Python is present, on
// whatever thread enters Julia, if TFBRIDGE_JULIA_GIL=1: for Julia code that
// uses Python objects without TFBridge.with_gil (below).  By default entries
// into Julia do not hold it, so Python threads run while Julia computes.  It
// cannot deadlock against a caller waiting for a Julia thread, because every
// such wait runs under GilRelease.  A no-op without Python, or while the
// interpreter finalises (a thread taking the GIL then would be terminated).
class GilAcquire : ScopeGuard {
 public:
  GilAcquire();
  ~GilAcquire();

 private:
  bool counted_ = false;  // Python was there: this guard counts in the thread's nesting depth
  bool held_ = false;     // this guard took the GIL (the outermost one on its thread)
};

// Python's GIL for Julia code that calls into Python (TFBridge.with_gil,
// through tfjl_gil_acquire / tfjl_gil_release): PyGILState_Ensure and
// Release, nestable, on any thread.  Returns the token for gil_release; -1
// (nothing taken) without Python or while it finalises.
int gil_acquire();
void gil_release(int token);

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_RUNTIME_PYTHON_GIL_H_
