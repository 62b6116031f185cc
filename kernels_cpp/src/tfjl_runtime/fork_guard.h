// Julia in a forked child: a child of a process that started Julia inherits
// Julia's memory but none of its threads, so every call handed to them would
// wait forever.  Once Julia starts, the runtime marks such children (a
// pthread_atfork handler, so forks made by C code count too), and every
// entry into Julia then fails at once, naming fork and what to use instead.
// docs/internals/kernels-cpp.md, "Fork".
#ifndef TFJL_SRC_TFJL_RUNTIME_FORK_GUARD_H_
#define TFJL_SRC_TFJL_RUNTIME_FORK_GUARD_H_

#include <atomic>
#include <string>

namespace tfjl {
namespace detail {

extern std::atomic<bool> g_forked;  // set in the child only; read on every entry

// This process was forked from one that had started Julia (or a descendant
// of such a child): Julia cannot run here.
inline bool forked_from_julia() { return g_forked.load(std::memory_order_relaxed); }

// Called when this process starts Julia: from then on its children are marked.
void mark_children_at_fork();

// Why Julia cannot run in this process (valid once forked_from_julia()).
std::string fork_error();

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_RUNTIME_FORK_GUARD_H_
