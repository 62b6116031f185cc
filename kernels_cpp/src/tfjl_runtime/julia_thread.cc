#include "julia_thread.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "python_gil.h"

namespace tfjl {
namespace detail {
namespace {

// Julia's root task runs on this stack; TF's inline executor and deep Julia
// recursion both need more than the default 8 MB.
constexpr size_t kJuliaStackBytes = size_t{64} << 20;

// How long a handed-over call waits before it explains a likely deadlock.
constexpr auto kSlowWait = std::chrono::seconds(30);

// How long Julia's thread keeps looking for new work, and a Python caller
// for its result, before it sleeps: TFBRIDGE_JULIA_POLL_US microseconds, 50
// by default, 0 to sleep at once.  See README.md, "Waiting for work".
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

// Spins until `flag` is set or the poll time (poll_time()) has passed.
void poll_for(const std::atomic<bool>& flag) {
  static const std::chrono::nanoseconds poll = poll_time();
  if (poll.count() == 0 || flag.load(std::memory_order_acquire)) return;
  const auto until = std::chrono::steady_clock::now() + poll;
  for (int spins = 0; !flag.load(std::memory_order_acquire); ++spins) {
    cpu_relax();
    if ((spins & 63) == 63 && std::chrono::steady_clock::now() >= until) return;
  }
}

}  // namespace

JuliaThread& JuliaThread::instance() {
  static JuliaThread* const self = new JuliaThread();  // deliberately leaked, see header
  return *self;
}

// pthread_self() rather than a thread_local: this runs on every call, and a
// thread_local in a dlopen'ed library costs a __tls_get_addr call each time.
bool JuliaThread::on_julia_thread() {
  const JuliaThread& self = instance();
  return self.has_thread_.load(std::memory_order_acquire) &&
         pthread_equal(self.thread_.load(std::memory_order_relaxed), pthread_self());
}

std::string JuliaThread::ensure_started(const InitParams* given) {
  if (ready()) return "";
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
  self->thread_.store(pthread_self(), std::memory_order_relaxed);
  self->has_thread_.store(true, std::memory_order_release);
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
  if (err.empty()) self->serve();
  return nullptr;
}

void JuliaThread::serve() {
  for (;;) {
    Task* batch = take_work();
    while (batch != nullptr) {
      Task* task = batch;
      batch = task->next;  // read first: the owner may return as soon as the task is done
      try {
        task->fn(task->ctx);
      } catch (...) {
        task->error = std::current_exception();
      }
      if (task->posted) {  // nobody waits for it
        if (task->error) std::fprintf(stderr, "tf-julia-bridge: a posted task threw (it must not)\n");
        delete task;
        continue;
      }
      std::lock_guard<std::mutex> lock(task->mutex);
      task->done = true;
      task->finished.store(true, std::memory_order_release);
      task->cv.notify_one();  // while locked: once unlocked the owner may destroy the task
    }
  }
}

Task* JuliaThread::take_work() {
  const int gc_state = side_->idle_begin();
  // Waking a sleeping thread costs 5-70 us on these VMs (idle vCPUs halt at
  // once), far more than a call; work often follows work within
  // microseconds (the next op of a chain, the next run), so look for it
  // briefly first, as TF's own Eigen pool threads do.  No kernel waits on
  // this: kernels either sleep on their task or have returned (posted tasks).
  poll_for(pending_);
  std::unique_lock<std::mutex> lock(queue_mutex_);
  if (head_ == nullptr) {
    sleeping_ = true;
    queue_cv_.wait(lock, [this] { return head_ != nullptr; });
    sleeping_ = false;
  }
  Task* batch = head_;  // take everything queued: one lock round trip per burst
  head_ = tail_ = nullptr;
  pending_.store(false, std::memory_order_relaxed);
  lock.unlock();
  side_->idle_end(gc_state);  // may wait for a collection in progress
  return batch;
}

void JuliaThread::enqueue(Task* task) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (tail_ != nullptr) {
      tail_->next = task;
    } else {
      head_ = task;
    }
    tail_ = task;
    pending_.store(true, std::memory_order_release);
    wake = sleeping_;
  }
  // A polling thread sees pending_; only a sleeping one needs the (costly) futex wake.
  if (wake) queue_cv_.notify_one();
}

void JuliaThread::run(void (*fn)(void*), void* ctx, Wait wait) {
  if (on_julia_thread()) {
    direct_calls_.fetch_add(1, std::memory_order_relaxed);
    fn(ctx);
    // On Julia >= 1.9 a foreign thread could instead adopt itself
    // (jl_adopt_thread) and take this branch; see README.md, "Julia >= 1.9".
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

void JuliaThread::post(void (*fn)(void*), void* ctx) {
  if (on_julia_thread()) {
    direct_calls_.fetch_add(1, std::memory_order_relaxed);
    fn(ctx);
    return;
  }
  handed_over_calls_.fetch_add(1, std::memory_order_relaxed);
  auto* task = new Task();
  task->fn = fn;
  task->ctx = ctx;
  task->posted = true;
  enqueue(task);
}

void JuliaThread::wait_for(Task& task, Wait wait) {
  GilRelease unlocked_gil;
  if (wait == Wait::kPollFirst) poll_for(task.finished);
  // Taken even when polling saw the task finished: Julia's thread may still
  // hold the mutex, and the task must outlive its last use there.
  std::unique_lock<std::mutex> lock(task.mutex);
  bool explained = false;
  while (!task.done) {
    if (task.cv.wait_for(lock, kSlowWait) == std::cv_status::timeout && !task.done && !explained &&
        in_session_run_.load(std::memory_order_relaxed) > 0) {
      std::fprintf(stderr,
                   "tf-julia-bridge: a Julia call has waited %lld s for Julia's thread, which is inside "
                   "tfjl_session_run_on_julia_thread. If TensorFlow runs a Julia op of that session on a "
                   "pool thread, this is a deadlock: such sessions need "
                   "inter_op_parallelism_threads = -1.\n",
                   static_cast<long long>(kSlowWait.count()));
      explained = true;
    }
  }
}

}  // namespace detail
}  // namespace tfjl
