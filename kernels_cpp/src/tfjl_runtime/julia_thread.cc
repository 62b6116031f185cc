#include "julia_thread.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "python_gil.h"
#include "tfjl/contract.h"

namespace tfjl {
namespace detail {
namespace {

// Julia's first thread runs Julia's initialisation and its root task on
// this stack.  (Ops run on the serving tasks' stacks, TFBridge.jl.)
constexpr size_t kJuliaStackBytes = size_t{64} << 20;

// Julia's threads run this library's code for the rest of the process, so
// it must never be unloaded: a host that dlclose()s it (cffi does so when
// Python exits) would pull the code from under them.
void pin_this_library() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&pin_this_library), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

// A positive integer environment variable, or 0.
int positive_env(const char* name) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  const long n = v != nullptr ? std::strtol(v, &end, 10) : 0;
  return v != nullptr && end != v && *end == '\0' && n > 0 && n < INT_MAX ? static_cast<int>(n) : 0;
}

// How many threads Julia starts with, all serving calls:
// TFBRIDGE_JULIA_THREADS, else JULIA_NUM_THREADS, else one per CPU (Julia 1.5
// caps it at the CPUs anyway).  At most kMaxJuliaThreads (tfjl/contract.h),
// what on_julia_thread() and the interrupt slots can track.
int serving_threads() {
  int n = positive_env("TFBRIDGE_JULIA_THREADS");
  if (n == 0) n = positive_env("JULIA_NUM_THREADS");
  if (n == 0) n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return n < 1 ? 1 : (n > kMaxJuliaThreads ? kMaxJuliaThreads : n);
}

// How long Julia's thread keeps looking for new work, and a Python caller
// for its result, before it sleeps: TFBRIDGE_JULIA_POLL_US microseconds, 50
// by default, 0 to sleep at once.  See docs/internals/kernels-cpp.md, "Waiting for work".
std::chrono::nanoseconds poll_time() {
  const char* v = std::getenv("TFBRIDGE_JULIA_POLL_US");
  char* end = nullptr;
  const long us = v != nullptr ? std::strtol(v, &end, 10) : -1;
  if (v == nullptr || end == v || *end != '\0' || us < 0) return std::chrono::microseconds(50);
  return std::chrono::microseconds(us > 10000 ? 10000 : us);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The Julia thread this thread is (0-based, as jl_threadid()), set when it
// starts serving; -1 elsewhere.  Read only off the hot path.
thread_local int t_julia_tid = -1;

// One slot per Julia thread, and a spare that serve() gives a thread past the
// limit (not reached: serving_threads() keeps to kMaxJuliaThreads).
constexpr int kInterruptSlots = kMaxJuliaThreads + 1;

}  // namespace
}  // namespace detail
}  // namespace tfjl

// Per Julia thread (index jl_threadid()): the id of the call it is running
// (0: none), and the id of the last call abandoned while it ran.
// TFBridge.checkinterrupt() reads both (cglobal) and throws
// InterruptException when they are equal: that is how a deadline or Ctrl-C
// reaches Julia code on any of Julia's threads (Julia 1.5 delivers SIGINT
// to its first thread only).
extern "C" {
__attribute__((visibility("default"))) std::atomic<int64_t> tfjl_running_call[tfjl::detail::kInterruptSlots];
__attribute__((visibility("default"))) std::atomic<int64_t> tfjl_interrupted_call[tfjl::detail::kInterruptSlots];
}

namespace tfjl {
namespace detail {

// Spins until `flag` is set or the poll time (poll_time()) has passed,
// yielding the core every 64 spins (a microsecond or two).  The thread that
// sets `flag` is often runnable on this very core: when the process has only
// one core to itself (the other busy with other work), a plain spin kept it
// off the core for the whole poll, and each hand-over to Julia's thread cost
// both sides' polls, twice TFBRIDGE_JULIA_POLL_US (a Julia op on 10 doubles:
// 93 us more than native Mul with 50 us polls, 2.7 ms with 1,000 us).  With
// a core free, sched_yield returns at once (nothing else to run here).
void poll_for(const std::atomic<bool>& flag) {
  static const std::chrono::nanoseconds poll = poll_time();
  if (poll.count() == 0 || flag.load(std::memory_order_acquire)) return;
  const auto until = std::chrono::steady_clock::now() + poll;
  for (int spins = 0; !flag.load(std::memory_order_acquire); ++spins) {
    cpu_relax();
    if ((spins & 63) == 63) {
      if (std::chrono::steady_clock::now() >= until) return;
      sched_yield();
    }
  }
}

JuliaThread& JuliaThread::instance() {
  static JuliaThread* const self = new JuliaThread();  // deliberately leaked, see header
  return *self;
}

// A scan of a few pthread_t rather than a thread_local: this runs on every
// call, and a thread_local in a dlopen'ed library costs a __tls_get_addr call.
bool JuliaThread::on_julia_thread() {
  const JuliaThread& self = instance();
  const int n = self.n_threads_.load(std::memory_order_acquire);
  const pthread_t me = pthread_self();
  for (int i = 0; i < n; ++i) {
    if (pthread_equal(self.threads_[i].load(std::memory_order_relaxed), me)) return true;
  }
  return false;
}

void JuliaThread::register_thread() {
  if (on_julia_thread()) return;
  std::lock_guard<std::mutex> lock(threads_mutex_);
  const int n = n_threads_.load(std::memory_order_relaxed);
  if (n == kMaxJuliaThreads) return;  // not reached: serving_threads() keeps to it
  threads_[n].store(pthread_self(), std::memory_order_relaxed);
  n_threads_.store(n + 1, std::memory_order_release);
}

std::string JuliaThread::ensure_started(const InitParams* given) {
  if (ready()) return "";
  // Before any lock: another thread of the parent may have held it at the fork.
  if (forked_from_julia()) return fork_error();
  GilRelease unlocked_gil;  // starting Julia takes a while; let Python threads run
  std::unique_lock<std::mutex> lock(init_mutex_);
  if (state_.load(std::memory_order_acquire) == kNotStarted) {
    InitParams params;
    if (given != nullptr) {
      params = *given;
    } else if (std::string err = params_from_environment(&params); !err.empty()) {
      return err;  // nothing started: a later tfjl_init with good paths may still succeed
    }
    if (std::string err = check_params(params); !err.empty()) return err;
    params.servers = serving_threads();
    pin_this_library();
    mark_children_at_fork();
    // Registered after libjulia was loaded, so it runs before libjulia's own
    // exit-time destructors.
    std::atexit([] { instance().exiting_.store(true, std::memory_order_release); });
    if (side_ == nullptr) {
      if (std::string err = load_julia_side(&side_); !err.empty()) return err;
    }
    params_ = params;

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kJuliaStackBytes);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    const int rc = pthread_create(&thread, &attr, &JuliaThread::thread_main, this);
    pthread_attr_destroy(&attr);
    if (rc != 0) return std::string("could not start Julia's thread: ") + std::strerror(rc);
    // Safe after pthread_create: the thread reports under init_mutex_, held until the wait.
    state_.store(kStarting, std::memory_order_release);
  }
  init_cv_.wait(lock, [this] { return state_.load(std::memory_order_acquire) != kStarting; });
  return state_.load(std::memory_order_acquire) == kReady ? std::string() : init_error_;
}

void* JuliaThread::thread_main(void* arg) {
  auto* self = static_cast<JuliaThread*>(arg);
  self->register_thread();
  std::string err;
  try {
    err = self->side_->initialise(self->params_);
  } catch (const std::exception& e) {
    err = std::string("Julia's initialisation failed: ") + e.what();
  } catch (...) {
    err = "Julia's initialisation failed with an unknown exception";
  }
  {
    std::lock_guard<std::mutex> lock(self->init_mutex_);
    self->init_error_ = err;
    // Julia cannot be initialised twice in a process: a failure is final.
    self->state_.store(err.empty() ? kReady : kFailed, std::memory_order_release);
  }
  self->init_cv_.notify_all();
  if (!err.empty()) return nullptr;
  // From here on every Julia thread serves calls, this one included.
  err = self->side_->serve_forever(&JuliaThread::serve);
  std::fprintf(stderr, "tf-julia-bridge: %s; Julia's first thread serves calls instead\n", err.c_str());
  for (;;) serve(INT_MAX, 0);
}

void JuliaThread::serve(int max_wait_us, int julia_tid) {
  JuliaThread& self = instance();
  // Nothing may leave this function but by returning: it is called from
  // Julia (TFBridge.serve_forever), and a C++ exception unwinding into
  // Julia's frames ends the process (std::terminate).  Every task's work and
  // completion catch their own (execute); this catches the rest (a failing
  // mutex), says so and returns to Julia, which calls again.
  try {
    self.register_thread();
    if (julia_tid < 0 || julia_tid >= kInterruptSlots) julia_tid = kInterruptSlots - 1;  // not reached
    t_julia_tid = julia_tid;
    bool polling = false;
    for (;;) {
      while (Task* task = self.take_task(max_wait_us, &polling)) {
        self.execute(task, julia_tid);
        // Poll for the next task before anything else happens: a caller that
        // submits its next run right away then finds a poller and wakes no
        // other server (a woken server would compete for the CPU with this
        // one, which keeps the run's data warm).
        polling = !self.poller_.exchange(true, std::memory_order_acquire);
      }
      if (!self.exiting_.load(std::memory_order_acquire)) return;  // back to Julia's scheduler for a while
      max_wait_us = INT_MAX;  // exiting: calls from atexit handlers are still served, here
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tf-julia-bridge: Julia's thread %d, serving calls, caught %s; it serves on\n",
                 julia_tid + 1, e.what());
  } catch (...) {
    std::fprintf(stderr, "tf-julia-bridge: Julia's thread %d, serving calls, caught an unknown C++ exception; "
                 "it serves on\n", julia_tid + 1);
  }
}

void JuliaThread::execute(Task* task, int julia_tid) {
  // Published before the abandoned check, which abandon_locked() mirrors: either
  // this sees the task abandoned, or interrupt_all sees where it runs.
  tfjl_running_call[julia_tid].store(static_cast<int64_t>(task->id), std::memory_order_seq_cst);
  task->tid.store(julia_tid, std::memory_order_seq_cst);
  const bool ran = !(task->abandoned.load(std::memory_order_seq_cst) && task->kind != Task::kWaited);
  if (ran) {
    try {
      task->fn(task->ctx);
    } catch (...) {
      task->error = std::current_exception();
    }
  }
  tfjl_running_call[julia_tid].store(0, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    (task->prev_in_flight != nullptr ? task->prev_in_flight->next_in_flight : in_flight_) = task->next_in_flight;
    if (task->next_in_flight != nullptr) task->next_in_flight->prev_in_flight = task->prev_in_flight;
  }
  if (task->kind == Task::kPosted) {  // nobody waits for it
    if (task->error) std::fprintf(stderr, "tf-julia-bridge: a posted task threw (it must not)\n");
    // The caller's `done` runs here (TF's executor onwards, for a kernel):
    // whatever it throws stays on this side of the serving loop.
    try {
      task->finish(task->ctx, ran);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tf-julia-bridge: a posted call's completion threw %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "tf-julia-bridge: a posted call's completion threw an unknown C++ exception\n");
    }
    delete task;
    return;
  }
  // Read before the unlock below: a waited task may be gone right after it.
  const bool detachable = task->kind == Task::kDetachable;
  {
    std::lock_guard<std::mutex> lock(task->mutex);
    task->done = true;
    task->skipped = !ran;
    task->finished.store(true, std::memory_order_release);
    task->cv.notify_all();  // while locked: once unlocked the owner may destroy the task
  }
  if (detachable) release(task);
}

Task* JuliaThread::take_task(int max_wait_us, bool* polling) {
  const int gc_state = side_->idle_begin();
  // Waking a sleeping thread costs 5-70 us on the VMs this was measured on
  // (idle vCPUs halt at once), far more than a call; work often follows work
  // within microseconds (the next op of a chain, the next run), so look for
  // it briefly first, as TF's own Eigen pool threads do.  No kernel waits on
  // this: kernels either sleep on their task or have returned (posted tasks).
  // One server polls at a time, usually the one that has just finished a
  // task: the next run of a session then stays on that warm core, rather
  // than every idle server racing for it (on 2 cores, runs alternating
  // between threads took twice as long); a second task meanwhile wakes a
  // sleeping server, so independent work still runs in parallel.
  if (!*polling) *polling = !poller_.exchange(true, std::memory_order_acquire);
  if (*polling) poll_for(pending_);
  std::unique_lock<std::mutex> lock(queue_mutex_);
  if (*polling) poller_.store(false, std::memory_order_relaxed);  // under the lock: see enqueue
  *polling = false;
  if (head_ == nullptr) {
    ++sleeping_;
    queue_cv_.wait_for(lock, std::chrono::microseconds(max_wait_us), [this] { return head_ != nullptr; });
    --sleeping_;
  }
  // One task at a time: the next one is for another server, if one is free.
  Task* task = head_;
  if (task != nullptr) {
    head_ = task->next;
    if (head_ == nullptr) tail_ = nullptr;
    task->next = nullptr;
  }
  pending_.store(head_ != nullptr, std::memory_order_relaxed);
  const bool wake_another = head_ != nullptr && sleeping_ > 0;
  lock.unlock();
  if (wake_another) queue_cv_.notify_one();
  side_->idle_end(gc_state);  // may wait for a collection in progress
  return task;
}

void JuliaThread::enqueue(Task* task) {
  task->id = next_id_.fetch_add(1, std::memory_order_relaxed);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (tail_ != nullptr) {
      tail_->next = task;
    } else {
      head_ = task;
    }
    tail_ = task;
    task->next_in_flight = in_flight_;
    if (in_flight_ != nullptr) in_flight_->prev_in_flight = task;
    in_flight_ = task;
    pending_.store(true, std::memory_order_release);
    // A polling server sees pending_, or finds the task once it takes the
    // lock (it clears poller_ under it), so only without one is a sleeping
    // server woken (a costly futex wake).
    wake = sleeping_ > 0 && !poller_.load(std::memory_order_relaxed);
  }
  if (wake) queue_cv_.notify_one();
}

void JuliaThread::abandon_locked(Task* task, const char* why) {
  if (task->abandoned.exchange(true, std::memory_order_seq_cst)) return;
  const int tid = task->tid.load(std::memory_order_seq_cst);
  if (tid >= 0) tfjl_interrupted_call[tid].store(static_cast<int64_t>(task->id), std::memory_order_release);
  if (task->kind == Task::kPosted) {
    if (task->cancel != nullptr) task->cancel(task->ctx, why);
  } else if (task->kind == Task::kDetachable) {
    std::lock_guard<std::mutex> lock(task->mutex);
    if (task->abandon_reason == nullptr) task->abandon_reason = why;
    task->cv.notify_all();
  }
}

int JuliaThread::interrupt_all(const char* why, uint64_t before_id) {
  int reached = 0;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  for (Task* t = in_flight_; t != nullptr; t = t->next_in_flight) {
    if (t->id >= before_id) continue;  // submitted after the interrupt was asked for
    // A waited call (a bridge.julia call) cannot be left running, since its
    // caller's stack holds its data: its Julia code is told, and may stop.
    if (t->kind == Task::kWaited) {
      const int tid = t->tid.load(std::memory_order_seq_cst);
      if (tid >= 0) tfjl_interrupted_call[tid].store(static_cast<int64_t>(t->id), std::memory_order_release);
    } else {
      abandon_locked(t, why);
    }
    ++reached;
  }
  return reached;
}

int JuliaThread::wait_idle(int64_t timeout_us) {
  GilRelease unlocked_gil;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_us);
  for (;;) {
    int remaining = 0;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      for (Task* t = in_flight_; t != nullptr; t = t->next_in_flight) ++remaining;
    }
    if (remaining == 0 || std::chrono::steady_clock::now() >= until) return remaining;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool JuliaThread::current_call_abandoned() {
  const int tid = t_julia_tid;
  if (tid < 0) return false;
  const int64_t running = tfjl_running_call[tid].load(std::memory_order_relaxed);
  return running != 0 && tfjl_interrupted_call[tid].load(std::memory_order_acquire) == running;
}

void JuliaThread::submit_detachable(Task* task) {
  task->kind = Task::kDetachable;
  task->refs.store(2, std::memory_order_relaxed);
  handed_over_calls_.fetch_add(1, std::memory_order_relaxed);
  enqueue(task);
}

JuliaThread::WaitResult JuliaThread::wait_detached(Task* task, int64_t timeout_us) {
  GilRelease unlocked_gil;
  poll_for(task->finished);
  std::unique_lock<std::mutex> lock(task->mutex);
  auto over = [task] { return task->done || task->abandon_reason != nullptr; };
  bool deadline = false;
  if (timeout_us < 0) {
    task->cv.wait(lock, over);
  } else if (!task->cv.wait_for(lock, std::chrono::microseconds(timeout_us), over)) {
    lock.unlock();
    {
      std::lock_guard<std::mutex> queue_lock(queue_mutex_);
      // Still in flight unless it has just finished.
      for (Task* t = in_flight_; t != nullptr; t = t->next_in_flight) {
        if (t == task) {
          abandon_locked(task, "deadline exceeded");
          break;
        }
      }
    }
    lock.lock();
    deadline = true;
  }
  // A run that finished counts, even if an interrupt came meanwhile (the
  // caller then looks at how it ended); one skipped (abandoned before it
  // started) did not happen.  abandon_reason is set before done can be:
  // abandon_locked holds the queue lock, which execute() takes first.
  if (task->done && !task->skipped) {
    if (task->abandon_reason == nullptr) return WaitResult::kDone;
    return deadline ? WaitResult::kDoneAfterDeadline : WaitResult::kDoneAfterInterrupt;
  }
  return deadline ? WaitResult::kDeadline : WaitResult::kInterrupted;
}

void JuliaThread::wait_done(Task* task) {
  GilRelease unlocked_gil;
  std::unique_lock<std::mutex> lock(task->mutex);
  task->cv.wait(lock, [task] { return task->done; });
}

void JuliaThread::release(Task* task) {
  if (task->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (task->release != nullptr) task->release(task->ctx);
  delete task;
}

void JuliaThread::run(void (*fn)(void*), void* ctx, Wait wait) {
  if (on_julia_thread()) {
    direct_calls_.fetch_add(1, std::memory_order_relaxed);
    fn(ctx);
    // On Julia >= 1.9 a foreign thread could instead adopt itself
    // (jl_adopt_thread) and take this branch; see docs/internals/kernels-cpp.md, "Julia >= 1.9".
    return;
  }
  handed_over_calls_.fetch_add(1, std::memory_order_relaxed);
  Task task;
  task.fn = fn;
  task.ctx = ctx;
  enqueue(&task);
  wait_for(task, wait);
  if (task.error) std::rethrow_exception(task.error);
}

void JuliaThread::post(void (*fn)(void*), void* ctx, void (*finish)(void*, bool),
                       void (*cancel)(void*, const char*), void* owner) {
  if (on_julia_thread()) {
    direct_calls_.fetch_add(1, std::memory_order_relaxed);
    fn(ctx);
    finish(ctx, true);
    return;
  }
  handed_over_calls_.fetch_add(1, std::memory_order_relaxed);
  auto* task = new Task();
  task->fn = fn;
  task->ctx = ctx;
  task->kind = Task::kPosted;
  task->finish = finish;
  task->cancel = cancel;
  task->owner = owner;
  enqueue(task);
}

void JuliaThread::abandon_posted(void* owner) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  for (Task* t = in_flight_; t != nullptr; t = t->next_in_flight) {
    if (t->kind != Task::kPosted || t->owner != owner) continue;
    if (t->abandoned.exchange(true, std::memory_order_seq_cst)) return;
    const int tid = t->tid.load(std::memory_order_seq_cst);
    if (tid >= 0) tfjl_interrupted_call[tid].store(static_cast<int64_t>(t->id), std::memory_order_release);
    return;
  }
}

void JuliaThread::wait_for(Task& task, Wait wait) {
  GilRelease unlocked_gil;
  if (wait == Wait::kPollFirst) poll_for(task.finished);
  // Taken even when polling saw the task finished: the server may still hold
  // the mutex, and the task must outlive its last use there.
  std::unique_lock<std::mutex> lock(task.mutex);
  task.cv.wait(lock, [&task] { return task.done; });
}

OutsideJulia::OutsideJulia() {
  JuliaThread& julia = JuliaThread::instance();
  active_ = julia.ready() && JuliaThread::on_julia_thread();
  if (active_) gc_state_ = julia.side().idle_begin();
}

OutsideJulia::~OutsideJulia() {
  if (active_) JuliaThread::instance().side().idle_end(gc_state_);
}

}  // namespace detail
}  // namespace tfjl
