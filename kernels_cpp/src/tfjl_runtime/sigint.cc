// Ctrl-C reaches Julia's calls: a SIGINT handler in front of the host's
// (Python's) wakes a watcher thread, which abandons every Julia call in
// flight (JuliaThread::interrupt_all), so that a Session.run blocked in
// TensorFlow on a Julia op returns at once; the host's handler then runs as
// before (Python raises KeyboardInterrupt once the run has returned).
// docs/internals/kernels-cpp.md, "Interrupts and deadlines".
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "julia_thread.h"

namespace tfjl {
namespace detail {
namespace {

int g_wake[2] = {-1, -1};  // the self-pipe: the handler writes, the watcher reads
// The first call number the latest Ctrl-C must not reach: calls submitted
// after it (the next run, started as soon as the interrupted one returned)
// are not the ones it interrupts, however late the watcher thread runs.
std::atomic<uint64_t> g_interrupt_before{0};
struct sigaction g_previous;  // the handler ours runs in front of
std::mutex g_install_mutex;

// Async-signal-safe: a write and the previous handler.
void on_sigint(int sig, siginfo_t* info, void* uc) {
  const struct sigaction previous = g_previous;
  if (previous.sa_handler == SIG_IGN) return;  // the host ignores Ctrl-C: so does Julia
  const int saved_errno = errno;
  g_interrupt_before.store(JuliaThread::instance().next_task_id(), std::memory_order_seq_cst);
  const char byte = 1;
  (void)!write(g_wake[1], &byte, 1);
  errno = saved_errno;
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    previous.sa_sigaction(sig, info, uc);
  } else if (previous.sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);  // the default action: end the process, as without us
    raise(sig);
  } else {
    previous.sa_handler(sig);
  }
}

void* watch(void*) {
  for (;;) {
    char bytes[64];
    const ssize_t n = read(g_wake[0], bytes, sizeof bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return nullptr;
    JuliaThread::instance().interrupt_all("interrupted (SIGINT, Ctrl-C)",
                                          g_interrupt_before.load(std::memory_order_seq_cst));
  }
}

bool start_watcher() {
  if (pipe2(g_wake, O_CLOEXEC) != 0) return false;
  fcntl(g_wake[1], F_SETFL, O_NONBLOCK);  // a burst of Ctrl-Cs must never block the handler
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the watcher takes no signal itself
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const bool ok = pthread_create(&thread, &attr, &watch, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

}  // namespace

void ensure_sigint_hook() {
  struct sigaction current;
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &on_sigint) return;  // the usual case
  std::lock_guard<std::mutex> lock(g_install_mutex);
  static const bool watching = start_watcher();
  if (!watching) return;
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &on_sigint) return;
  struct sigaction ours;
  std::memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = &on_sigint;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | (current.sa_flags & SA_RESTART);
  sigemptyset(&ours.sa_mask);
  // The previous handler is read by on_sigint: block SIGINT while it changes.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  g_previous = current;
  sigaction(SIGINT, &ours, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace detail
}  // namespace tfjl
