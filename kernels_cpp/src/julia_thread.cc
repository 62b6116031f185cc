#include "julia_thread.h"

#include <chrono>
#include <cstdio>
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

thread_local bool t_on_julia_thread = false;

}  // namespace

JuliaThread& JuliaThread::instance() {
  static JuliaThread* const self = new JuliaThread();  // deliberately leaked, see header
  return *self;
}

bool JuliaThread::on_julia_thread() { return t_on_julia_thread; }

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
  t_on_julia_thread = true;
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
    Task* batch = nullptr;
    {
      const int gc_state = side_->idle_begin();
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return head_ != nullptr; });
      batch = head_;  // take everything queued: one lock round trip per burst
      head_ = tail_ = nullptr;
      lock.unlock();
      side_->idle_end(gc_state);  // may wait for a collection in progress
    }
    while (batch != nullptr) {
      Task* task = batch;
      batch = task->next;  // read first: the owner may return as soon as the task is done
      try {
        task->fn(task->ctx);
      } catch (...) {
        task->error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(task->mutex);
      task->done = true;
      task->cv.notify_one();  // while locked: once unlocked the owner may destroy the task
    }
  }
}

void JuliaThread::run(void (*fn)(void*), void* ctx) {
  if (t_on_julia_thread) {
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
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (tail_ != nullptr) {
      tail_->next = &task;
    } else {
      head_ = &task;
    }
    tail_ = &task;
  }
  queue_cv_.notify_one();
  wait_for(task);
  if (task.error) std::rethrow_exception(task.error);
}

void JuliaThread::wait_for(Task& task) {
  GilRelease unlocked_gil;
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
