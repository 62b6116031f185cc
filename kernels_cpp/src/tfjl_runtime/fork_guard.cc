// See fork_guard.h.
#include "fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "tfjl/capi.h"

namespace tfjl {
namespace detail {

std::atomic<bool> g_forked{false};

namespace {

pid_t g_julia_pid = 0;  // the process that started Julia
// The message, written once in the child (snprintf into static storage: an
// atfork child handler should not allocate).
char g_fork_message[640];

void on_fork_child() {
  std::snprintf(g_fork_message, sizeof g_fork_message,
                "this process (pid %d) was forked from process %d, which runs Julia, and Julia's threads do not "
                "survive fork(): Julia cannot run here. Start processes that use Julia with multiprocessing's "
                "\"spawn\" start method (multiprocessing.get_context(\"spawn\"), or "
                "ProcessPoolExecutor(mp_context=multiprocessing.get_context(\"spawn\"))), or fork before Julia "
                "starts",
                static_cast<int>(getpid()), static_cast<int>(g_julia_pid));
  g_forked.store(true, std::memory_order_relaxed);
}

}  // namespace

void mark_children_at_fork() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_julia_pid = getpid();
    pthread_atfork(nullptr, nullptr, &on_fork_child);
  });
}

std::string fork_error() { return g_fork_message; }

}  // namespace detail
}  // namespace tfjl

extern "C" const char* tfjl_forked(void) {
  return tfjl::detail::forked_from_julia() ? tfjl::detail::g_fork_message : nullptr;
}
