// Julia's threads: the thread that initialises Julia and the others Julia
// starts, all of which serve the calls other threads hand to Julia (Julia
// 1.5 cannot be entered from threads it did not start).
// docs/internals/kernels-cpp.md, "Threads", draws who owns what.
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
#include "tfjl/contract.h"

namespace tfjl {
namespace detail {

// One unit of work handed to Julia's thread.  Three kinds:
//  - waited: the caller sleeps until it is done; the task lives on the
//    caller's stack, so queueing allocates nothing;
//  - posted (kernel calls): nobody waits; post() allocates it and deletes it
//    after `finish`;
//  - detachable (julia_thread session runs): the caller waits until it is
//    done or until a deadline or an interrupt, and may then leave it running
//    (docs/internals/kernels-cpp.md, "Interrupts and deadlines"); shared by the
//    caller and the server through `refs`.
// A task is in the in-flight list from enqueue until its call is over, which
// is what interrupt_all() walks.
struct Task {
  enum Kind { kWaited, kPosted, kDetachable };
  void (*fn)(void*) = nullptr;
  void* ctx = nullptr;
  Kind kind = kWaited;
  // Posted: runs after fn, or instead of it (ran = false) when the task was
  // abandoned before a server took it; the task is out of the in-flight
  // list by then.
  void (*finish)(void* ctx, bool ran) = nullptr;
  // Posted: asks the call's owner to give up on it (interrupt_all).  Called
  // at most once, under the queue lock, never after `finish` began: it must
  // return at once and not call into the runtime.
  void (*cancel)(void* ctx, const char* why) = nullptr;
  // Posted: who asked for the call (call_*_async's ctx), for abandon_posted.
  void* owner = nullptr;
  // Detachable: what to do with ctx once nobody needs the task (its last ref).
  void (*release)(void* ctx) = nullptr;

  uint64_t id = 0;                  // for the interrupt slots (tfjl_running_call)
  std::atomic<int> tid{-1};         // the Julia thread running it, once started
  std::atomic<bool> abandoned{false};
  std::atomic<int> refs{1};         // detachable: caller + server
  const char* abandon_reason = nullptr;  // detachable: why the caller stopped waiting

  Task* next = nullptr;             // the queue
  Task* prev_in_flight = nullptr;   // the in-flight list
  Task* next_in_flight = nullptr;

  std::exception_ptr error;
  std::mutex mutex;  // guards done and abandon_reason's hand-over
  std::condition_variable cv;
  bool done = false;
  bool skipped = false;  // done without running: abandoned before a server took it
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
  // when already there); finish(ctx, ran) follows it (Task says when).
  // cancel (may be null) lets interrupt_all() abandon the call.  fn and
  // finish must not throw.  Julia must be ready.
  void post(void (*fn)(void*), void* ctx, void (*finish)(void*, bool), void (*cancel)(void*, const char*),
            void* owner);
  // The owner of a posted call gave up on it (runtime.h, abandon_call):
  // mark it abandoned (skipped if not started) and tell its Julia code.
  void abandon_posted(void* owner);

  // A detachable task (see Task): queued with refs = 2; the caller then
  // waits with wait_detached and drops its reference with release().
  void submit_detachable(Task* task);
  // kDoneAfterDeadline / kDoneAfterInterrupt: the run ended, but a deadline
  // or an interrupt had abandoned it first; its result stands if it
  // succeeded, and an error it ended with is the abandon's doing (its Julia
  // code threw InterruptException, or an inline kernel stopped the run).
  enum class WaitResult { kDone, kDeadline, kInterrupted, kDoneAfterDeadline, kDoneAfterInterrupt };
  // Waits for a detachable task until it is done, `deadline` passes
  // (timeout_us < 0: none), or an interrupt abandons it.  On kDeadline the
  // task is abandoned here: Julia code that checks (TFBridge.checkinterrupt)
  // gets InterruptException, and kernels running inline stop the run.
  WaitResult wait_detached(Task* task, int64_t timeout_us);
  // Waits until a detachable task's call is over, however long that takes.
  static void wait_done(Task* task);
  static void release(Task* task);

  // Abandons every call in flight (Ctrl-C, bridge.julia.interrupt): posted
  // calls are cancelled (their kernels end with Cancelled), detachable ones
  // return kInterrupted to their callers, and the Julia code of each running
  // call sees TFBridge.checkinterrupt() throw InterruptException.  Returns
  // how many calls it reached.
  // Only calls submitted before the one numbered `before_id`: a Ctrl-C the
  // watcher thread acts on late must not reach a run that started after it.
  int interrupt_all(const char* why, uint64_t before_id = UINT64_MAX);
  // Waits up to timeout_us for the calls in flight to finish; how many remain.
  int wait_idle(int64_t timeout_us);
  // The number the next submitted call will get; async-signal-safe (one atomic load).
  uint64_t next_task_id() const { return next_id_.load(std::memory_order_seq_cst); }

  // Whether the call running on this Julia thread has been abandoned (a
  // kernel running inline in an abandoned julia_thread run stops it).
  static bool current_call_abandoned();

  uint64_t direct_calls() const { return direct_calls_.load(std::memory_order_relaxed); }
  uint64_t handed_over_calls() const { return handed_over_calls_.load(std::memory_order_relaxed); }

 private:
  enum State : int { kNotStarted, kStarting, kReady, kFailed };

  JuliaThread() = default;
  static void* thread_main(void* self);
  // A serving thread's loop, called by Julia (TFBridge.serve_forever): runs
  // queued tasks until none has come for max_wait_us, then returns so that
  // the thread's other Julia tasks get their turn.
  static void serve(int max_wait_us, int julia_tid);
  void register_thread();
  void execute(Task* task, int julia_tid);
  void enqueue(Task* task);
  // Under queue_mutex_: marks the task abandoned and tells whoever needs to know.
  void abandon_locked(Task* task, const char* why);
  // The oldest queued task, or null after max_wait_us without one; the
  // poller (*polling, true if this server holds poller_) polls briefly
  // before sleeping (docs/internals/kernels-cpp.md, "Waiting for work").
  Task* take_task(int max_wait_us, bool* polling);
  void wait_for(Task& task, Wait wait);

  std::atomic<int> state_{kNotStarted};
  std::mutex init_mutex_;  // guards the start and init_error_
  std::condition_variable init_cv_;
  std::string init_error_;
  InitParams params_;
  const JuliaSide* side_ = nullptr;

  std::mutex queue_mutex_;  // guards head_, tail_, sleeping_ and the in-flight list
  std::condition_variable queue_cv_;
  Task* head_ = nullptr;
  Task* tail_ = nullptr;
  Task* in_flight_ = nullptr;  // queued or running tasks (Task::next_in_flight)
  std::atomic<uint64_t> next_id_{1};
  int sleeping_ = 0;                  // serving threads waiting on queue_cv_: enqueue wakes one
  std::atomic<bool> pending_{false};  // head_ != nullptr, readable without the lock while polling
  // A server is polling for work (at most one; cleared under queue_mutex_):
  // enqueue leaves it the task instead of waking a sleeping server.
  std::atomic<bool> poller_{false};

  // Julia's threads seen so far (its first thread, then each server as it
  // starts): entries [0, n_threads_) are set, and never change.
  std::mutex threads_mutex_;  // serialises registrations
  std::atomic<pthread_t> threads_[kMaxJuliaThreads] = {};  // the Julia threads on_julia_thread() knows
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

// Spins until `flag` is set or the poll time (TFBRIDGE_JULIA_POLL_US, 50 us
// by default) has passed: how a waiting thread looks for a result before it
// sleeps (julia_thread.cc; docs/internals/kernels-cpp.md, "Waiting for work").
void poll_for(const std::atomic<bool>& flag);

// Installs the SIGINT handler that abandons the calls in flight in front of
// the current one, unless it is there already (sigint.cc).
void ensure_sigint_hook();

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
