// Julia's threads: the thread that initialises Julia and the others Julia
// starts, all of which serve the calls other threads hand to Julia (Julia
// 1.5 cannot be entered from threads it did not start).
// README.md, "Threads", draws who owns what.
#ifndef TFJL_SRC_TFJL_RUNTIME_JULIA_THREAD_H_
#define TFJL_SRC_TFJL_RUNTIME_JULIA_THREAD_H_

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>

#include "fork_guard.h"
#include "julia_side.h"

namespace tfjl {
namespace detail {

// One unit of work handed to Julia's thread.  A waited-for task lives on the
// caller's stack for the duration of the call, so queueing allocates nothing;
// a posted one (nobody waits) is allocated by post() and deleted once run.
struct Task {
  void (*fn)(void*) = nullptr;
  void* ctx = nullptr;
  Task* next = nullptr;
  bool posted = false;
  std::exception_ptr error;
  std::mutex mutex;  // guards done
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> finished{false};  // done, readable without the lock by a polling caller
};

class JuliaThread {
 public:
  // The process-wide instance; never destroyed (Julia's thread outlives
  // static destructors, which run at exit while it waits on these members).
  static JuliaThread& instance();

  // Starts Julia's thread if needed and waits until Julia is initialised.
  // params == nullptr: take them from the environment or the `julia`
  // executable.  Returns "" or the reason Julia is not available.
  std::string ensure_started(const InitParams* params);

  // False in a forked child (fork_guard.h): Julia's threads are not there.
  bool ready() const { return state_.load(std::memory_order_acquire) == kReady && !forked_from_julia(); }

  // The Julia side's entry points (valid once ready()).
  const JuliaSide& side() const { return *side_; }
  // Whether the calling thread is one of Julia's (which call Julia directly).
  static bool on_julia_thread();

  // How a caller waits for a handed-over task.  kSleep: at once (kernels on
  // TF's pool threads: they must not spin).  kPollFirst: look for the result
  // for up to the poll time before sleeping (a Python thread waiting for a
  // whole session run or a host call, which are often over within
  // microseconds, well before a sleeping thread could be woken).
  enum class Wait { kSleep, kPollFirst };

  // Runs fn(ctx) on Julia's thread (directly when already there).  Julia
  // must be ready.  Rethrows a C++ exception thrown by fn.
  void run(void (*fn)(void*), void* ctx, Wait wait = Wait::kSleep);

  // Queues fn(ctx) for Julia's thread and returns at once (runs it directly
  // when already there).  fn must not throw.  Julia must be ready.
  void post(void (*fn)(void*), void* ctx);

  uint64_t direct_calls() const { return direct_calls_.load(std::memory_order_relaxed); }
  uint64_t handed_over_calls() const { return handed_over_calls_.load(std::memory_order_relaxed); }

 private:
  enum State : int { kNotStarted, kStarting, kReady, kFailed };
  static constexpr int kMaxThreads = 256;  // Julia threads on_julia_thread() knows

  JuliaThread() = default;
  static void* thread_main(void* self);
  // A serving thread's loop, called by Julia (TFBridge.serve_forever): runs
  // queued tasks until none has come for max_wait_us, then returns so that
  // the thread's other Julia tasks get their turn.
  static void serve(int max_wait_us);
  void register_thread();
  void execute(Task* task);
  void enqueue(Task* task);
  // The oldest queued task, or null after max_wait_us without one; the
  // poller (*polling, true if this server holds poller_) polls briefly
  // before sleeping (README.md, "Waiting for work").
  Task* take_task(int max_wait_us, bool* polling);
  void wait_for(Task& task, Wait wait);

  std::atomic<int> state_{kNotStarted};
  std::mutex init_mutex_;  // guards the start and init_error_
  std::condition_variable init_cv_;
  std::string init_error_;
  InitParams params_;
  const JuliaSide* side_ = nullptr;

  std::mutex queue_mutex_;  // guards head_, tail_ and sleeping_
  std::condition_variable queue_cv_;
  Task* head_ = nullptr;
  Task* tail_ = nullptr;
  int sleeping_ = 0;                  // serving threads waiting on queue_cv_: enqueue wakes one
  std::atomic<bool> pending_{false};  // head_ != nullptr, readable without the lock while polling
  // A server is polling for work (at most one; cleared under queue_mutex_):
  // enqueue leaves it the task instead of waking a sleeping server.
  std::atomic<bool> poller_{false};

  // Julia's threads seen so far (its first thread, then each server as it
  // starts): entries [0, n_threads_) are set, and never change.
  std::mutex threads_mutex_;  // serialises registrations
  std::atomic<pthread_t> threads_[kMaxThreads] = {};
  std::atomic<int> n_threads_{0};

  std::atomic<uint64_t> direct_calls_{0};
  std::atomic<uint64_t> handed_over_calls_{0};

  // The process is exiting (an atexit handler of ours): a server that finds
  // no work parks in the runtime instead of going back into Julia, whose
  // libraries exit() is tearing down.
  std::atomic<bool> exiting_{false};
};

// A time a Julia thread spends outside Julia (an inline TF_SessionRun, a
// kernel's done callback running TF's executor): a GC-safe region, so that
// a collection another Julia thread starts need not wait for it.  The Julia
// side takes the thread back to the GC-unsafe state for each call into
// Julia.  A no-op on other threads.
class OutsideJulia {
 public:
  OutsideJulia();
  ~OutsideJulia();
  OutsideJulia(const OutsideJulia&) = delete;
  OutsideJulia& operator=(const OutsideJulia&) = delete;

 private:
  bool active_ = false;
  int gc_state_ = 0;
};

// Calls made through compiled entries (api.cc).
uint64_t entry_calls();
// The allocator tfjl_set_output_pool_alloc installed (null: aligned_alloc).
extern std::atomic<RawAllocFn> g_output_pool_alloc;

// Implemented in locate.cc.  Fills params from TFBRIDGE_JULIA_BINDIR /
// TFBRIDGE_JULIA_IMAGE / TFBRIDGE_JULIA_BRIDGE_JL or by asking `julia`.
std::string params_from_environment(InitParams* params);
std::string check_params(const InitParams& params);
// Opens libtfjl_julia.so (beside this library) and returns its entry table.
std::string load_julia_side(const JuliaSide** side);

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_RUNTIME_JULIA_THREAD_H_
