// Fatal signals and stack overflows in Julia code (part of libtfjl_julia.so).
//
// Julia's own signal handlers stay in charge: they turn GC safepoint faults,
// stack overflows, writes to read-only memory and integer division traps
// into Julia's business, and print "signal (N): ..." with a backtrace before
// a fatal signal ends the process.  This file adds two things
// (docs/internals/kernels-cpp.md, "Crashes and stack overflows"):
//
// 1. Stack overflow named as such.  Julia 1.5's SIGSEGV handler calls a
//    fault a stack overflow when its address lies inside the current task's
//    stack (task->stkbuf, bufsz).  For the root task of the thread that calls
//    jl_init it does not ask the thread where its stack is: it assumes
//    RLIMIT_STACK (8 MB) below jl_init's frame, plus a 3 MB margin.  Julia's
//    first thread has a 64 MB stack (tfjl_runtime/julia_thread.cc), and it
//    serves calls in its root task, so unbounded recursion there faults on
//    the thread's guard page, about 53 MB below that range; the guard page is
//    mapped PROT_NONE, the fault is SEGV_ACCERR, and Julia reports
//    ReadOnlyMemoryError().  widen_root_task_stack() records the thread's
//    real stack, guard page included, in the root task.  Tasks with a stack
//    of their own (the serving tasks of the other threads, Threads.@spawn)
//    need nothing: Julia records their whole mapping, guard page included.
//
// 2. A crash dies.  glibc aborts on heap corruption from inside malloc or
//    free, holding the arena's lock; Julia's SIGABRT handler then prints a
//    backtrace, which allocates: a deadlock, and the process hangs at 0% CPU
//    instead of dying.  on_fatal_signal() runs in front of Julia's handler:
//    it tells a watchdog thread (through a pipe: write() is
//    async-signal-safe) that a handler started, calls Julia's handler, and
//    tells the watchdog that the handler returned.  A handler still running
//    after kFatalHandlerSeconds makes the watchdog write a line to stderr and
//    end the process by the original signal's default action (exit status:
//    killed by that signal, as without Julia).
//    Every path on which Julia survives a signal returns from its handler:
//    stack overflow, ReadOnlyMemoryError, DivideError and the faults Julia
//    provokes while it walks a stack (jl_throw_in_ctx rewrites the signal
//    context so that the exception is thrown after the handler returned), so
//    the watchdog never outlives them.  GC safepoint faults, which wait in
//    the handler for a collection for as long as it takes, never arm it.
//    A fatal signal after which Julia's handler returned with the default
//    action restored (its "die" path, meant to re-run the faulting
//    instruction) is raised again at once, so that a SIGILL/SIGSEGV/SIGBUS
//    sent with raise() or kill() ends the process too.  In a process forked
//    from this one Julia's threads (and the watchdog) do not exist: there the
//    signal takes its default action directly.
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <julia.h>

namespace tfjl {
namespace detail {
namespace {

// The signals Julia treats as fatal unless it makes an exception of them.
constexpr int kGuardedSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE, SIGSYS};

struct sigaction g_julia_action[NSIG];  // Julia's handlers, which on_fatal_signal calls
int g_watchdog_pipe[2] = {-1, -1};      // handler -> watchdog: a signal number (started) or 0 (returned)
pid_t g_pid = 0;                        // the process Julia runs in (fork children differ)
uintptr_t g_safepoint_lo = 0;           // Julia's safepoint pages: faults there are GC waits
uintptr_t g_safepoint_hi = 0;

constexpr unsigned char kReturned = 0;

}  // namespace
}  // namespace detail
}  // namespace tfjl

// How many of Julia's handlers on_fatal_signal started and saw return (GC
// safepoint faults aside), for tests: after a signal Julia survives (a stack
// overflow), the two agree, and Julia's safepoint faults count in neither.
// Read from Julia with cglobal((:tfjl_fatal_handlers_started, "libtfjl_julia.so"), UInt64).
extern "C" __attribute__((visibility("default"))) volatile uint64_t tfjl_fatal_handlers_started = 0;
extern "C" __attribute__((visibility("default"))) volatile uint64_t tfjl_fatal_handlers_returned = 0;

namespace tfjl {
namespace detail {
namespace {

jl_ptls_t this_thread_ptls() {
#if JULIA_VERSION_MAJOR == 1 && JULIA_VERSION_MINOR < 7
  return jl_get_ptls_states();
#else
  return jl_current_task->ptls;
#endif
}

void write_all(int fd, const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

void write_text(const char* text) { write_all(STDERR_FILENO, text, strlen(text)); }

// Decimal digits of a small non-negative number, without snprintf: the
// watchdog runs while another thread may hold malloc's lock.
void write_number(int n) {
  char digits[16];
  int i = sizeof digits;
  do {
    digits[--i] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0 && i > 0);
  write_all(STDERR_FILENO, digits + i, sizeof digits - static_cast<size_t>(i));
}

void tell_watchdog(unsigned char message) {
  if (g_watchdog_pipe[1] >= 0) write_all(g_watchdog_pipe[1], reinterpret_cast<const char*>(&message), 1);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGSYS: return "SIGSYS";
    default: return "a signal";
  }
}

// Ends the process by `sig`'s default action (every guarded signal
// terminates, with a core dump where those are on); async-signal-safe.
[[noreturn]] void die_by(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  raise(sig);
  _exit(128 + sig);  // not reached: the default action of every guarded signal ends the process
}

bool is_safepoint_fault(int sig, const siginfo_t* info) {
  if (sig != SIGSEGV && sig != SIGBUS) return false;
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  return addr >= g_safepoint_lo && addr < g_safepoint_hi;
}

void call_julia_handler(int sig, siginfo_t* info, void* context) {
  const struct sigaction& julia = g_julia_action[sig];
  if (julia.sa_flags & SA_SIGINFO) {
    if (julia.sa_sigaction != nullptr) julia.sa_sigaction(sig, info, context);
  } else if (julia.sa_handler == SIG_DFL) {
    die_by(sig);
  } else if (julia.sa_handler != SIG_IGN) {
    julia.sa_handler(sig);
  }
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const bool safepoint = is_safepoint_fault(sig, info);
  if (!safepoint && getpid() != g_pid) die_by(sig);  // a forked child: no Julia, no watchdog
  if (!safepoint) {
    __atomic_add_fetch(&tfjl_fatal_handlers_started, 1, __ATOMIC_RELAXED);
    tell_watchdog(static_cast<unsigned char>(sig));
  }
  call_julia_handler(sig, info, context);
  if (!safepoint) {
    tell_watchdog(kReturned);
    __atomic_add_fetch(&tfjl_fatal_handlers_returned, 1, __ATOMIC_RELAXED);
  }
  // Julia's handler restores the default action when it gives up (its
  // sigdie_handler, which then returns for the faulting instruction to run
  // again): die now, also when nothing would fault again (raise, kill).
  struct sigaction now;
  if (sigaction(sig, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL) {
    die_by(sig);
  }
  errno = saved_errno;
}

[[noreturn]] void end_stuck_process(int sig) {
  write_text("\ntf-julia-bridge: fatal signal ");
  write_number(sig);
  write_text(" (");
  write_text(signal_name(sig));
  write_text(") in this process, and Julia's handler of it has not finished after ");
  write_number(kFatalHandlerSeconds);
  write_text(" s: it is stuck (after heap corruption glibc aborts inside malloc, holding malloc's lock, "
             "which printing the backtrace then waits for). Ending the process with ");
  write_text(signal_name(sig));
  write_text(".\n");
  die_by(sig);
}

double now_seconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Counts the handlers running (started minus returned); ends the process
// when the first of them has run for kFatalHandlerSeconds.  Allocates nothing
// and takes no lock (malloc's may be the one that is stuck).
void* watchdog_main(void*) {
  int running = 0;
  int first_signal = 0;
  double deadline = 0;
  for (;;) {
    int timeout_ms = -1;
    if (running > 0) {
      const double left = deadline - now_seconds();
      if (left <= 0) end_stuck_process(first_signal);
      timeout_ms = static_cast<int>(left * 1000) + 1;
    }
    struct pollfd in = {g_watchdog_pipe[0], POLLIN, 0};
    if (poll(&in, 1, timeout_ms) <= 0) continue;  // a timeout (checked above) or EINTR
    unsigned char messages[64];
    const ssize_t got = read(g_watchdog_pipe[0], messages, sizeof messages);
    if (got == 0) return nullptr;  // the pipe is gone: nothing can start a handler's clock any more
    for (ssize_t i = 0; i < got; ++i) {
      if (messages[i] == kReturned) {
        if (running > 0) --running;
      } else if (running++ == 0) {
        first_signal = messages[i];
        deadline = now_seconds() + kFatalHandlerSeconds;
      }
    }
  }
}

void warn(const char* what, int error) {
  write_text("tf-julia-bridge: ");
  write_text(what);
  write_text(" (");
  write_text(strerror(error));
  write_text("): a crash in Julia code may hang instead of ending the process\n");
}

bool start_watchdog() {
  if (pipe2(g_watchdog_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    warn("could not create the crash watchdog's pipe", errno);
    return false;
  }
  // The watchdog takes no signal: process-directed ones go to other threads.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 << 10);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, &watchdog_main, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (rc != 0) {
    warn("could not start the crash watchdog's thread", rc);
    close(g_watchdog_pipe[0]);
    close(g_watchdog_pipe[1]);
    g_watchdog_pipe[0] = g_watchdog_pipe[1] = -1;
    return false;
  }
  return true;
}

// Julia's three safepoint pages (jl_safepoint_init, jl_addr_is_safepoint),
// found from this thread's safepoint address (jl_init_threadtls): thread 0's
// is the start of the second page, every other thread's lies in the third.
void find_safepoint_pages() {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  jl_ptls_t ptls = this_thread_ptls();
  const auto safepoint = reinterpret_cast<uintptr_t>(ptls->safepoint);
  if (safepoint == 0) return;
  const uintptr_t first = (safepoint & ~(page - 1)) - (ptls->tid == 0 ? 1 : 2) * page;
  g_safepoint_lo = first;
  g_safepoint_hi = first + 3 * page;
}

void chain_fatal_signals() {
  g_pid = getpid();
  find_safepoint_pages();
  if (!start_watchdog()) return;
  for (int sig : kGuardedSignals) {
    struct sigaction julia;
    if (sigaction(sig, nullptr, &julia) != 0) continue;
    g_julia_action[sig] = julia;
    struct sigaction ours = julia;  // Julia's mask and flags: SA_ONSTACK for SIGSEGV (stack overflows)
    ours.sa_sigaction = &on_fatal_signal;
    ours.sa_flags |= SA_SIGINFO;
    sigaction(sig, &ours, nullptr);
  }
}

// See the file's comment, 1.  Only ever widens the range Julia knew.
void widen_root_task_stack() {
  jl_task_t* task = jl_current_task;
  if (task == nullptr || task->copy_stack || task->stkbuf == nullptr) return;  // JULIA_COPY_STACKS: Julia's own
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* lowest = nullptr;
  size_t size = 0;
  size_t guard = 0;
  const bool known =
      pthread_attr_getstack(&attr, &lowest, &size) == 0 && pthread_attr_getguardsize(&attr, &guard) == 0;
  pthread_attr_destroy(&attr);
  if (!known || lowest == nullptr) return;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // glibc reports the usable stack; its guard page(s) lie just below it.
  char* const low = static_cast<char*>(lowest) - (guard > page ? guard : page);
  char* const high = static_cast<char*>(lowest) + size;
  char* const old_low = static_cast<char*>(task->stkbuf);
  char* const old_high = old_low + task->bufsz;
  char* const new_low = low < old_low ? low : old_low;
  char* const new_high = high > old_high ? high : old_high;
  task->stkbuf = new_low;
  task->bufsz = static_cast<size_t>(new_high - new_low);
}

}  // namespace

void install_signal_guards() {
  widen_root_task_stack();
  chain_fatal_signals();
}

}  // namespace detail
}  // namespace tfjl
