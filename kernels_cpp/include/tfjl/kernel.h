// Header-only TensorFlow glue for kernels that call Julia (generated from
// templates/, or hand-written): TF tensors -> the call's arguments, the call,
// and the error / dynamic-output / string-output handling around it.
//
// A kernel derives from tfjl::JuliaKernel and says what to pass and what to
// do with the results:
//
//   class MyOp : public tfjl::JuliaKernel {
//    public:
//     explicit MyOp(OpKernelConstruction* ctx) : JuliaKernel(ctx, "my_op!") {}
//     absl::Status Prepare(OpKernelContext* ctx, tfjl::CallFrame* frame) override {
//       Tensor* y = nullptr;
//       TF_RETURN_IF_ERROR(tfjl::AllocateOutput(ctx, 0, ctx->input(0).shape(), &y));
//       frame->Output(y);                 // outputs, inputs, attrs: CONTRACT.md
//       frame->Input(ctx->input(0));
//       return absl::OkStatus();
//     }
//     absl::Status Finish(OpKernelContext* ctx, std::vector<tfjl::Arg>& args) override {
//       return tfjl::FinishOutput(ctx, 0, args[0]);  // string outputs (numeric dynamic
//                                                    // ones are written during the call)
//     }
//   };
//
// (Not OP_REQUIRES: TF aborts when it fails in an asynchronous kernel.)
//
// Or, in a kernel of its own, call tfjl::CallJulia(ctx, "my_op!", args).
//
// Build: include folders kernels_cpp/include and TF's include; link the
// runtime (bridge.julia.runtime.link_args()) and libtensorflow_framework.
//
// This header holds CallJulia and JuliaKernel (the call, synchronous or
// handed over, and its cancellation); it includes the rest of the glue, so a
// kernel includes only it: tf_dtype.h (tfjl's dtypes <-> TF's), tf_status.h
// (error kinds <-> TF statuses, ErrorStatus), args.h (TF tensors and
// attributes -> tfjl::Arg, and FinishOutput) and call_frame.h (CallFrame).
#ifndef TFJL_KERNEL_H_
#define TFJL_KERNEL_H_

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "tensorflow/core/framework/cancellation.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/threadpool.h"
#include "tfjl/args.h"
#include "tfjl/call_frame.h"
#include "tfjl/output_pool.h"
#include "tfjl/runtime.h"
#include "tfjl/tf_dtype.h"
#include "tfjl/tf_status.h"

namespace tfjl {

// Calls the Julia function; the error status names the kernel's op type.
inline absl::Status CallJulia(tensorflow::OpKernelContext* ctx, const char* function, std::vector<Arg>& args) {
  int kind = kOk;
  std::string err = call_julia(function, args, &kind);
  if (err.empty() && kind == kOk) return absl::OkStatus();
  return ErrorStatus(ctx != nullptr ? ctx->op_kernel().type_string() : std::string(), function, kind, err);
}

// The same without a context: the message starts with the function name.
inline absl::Status CallJulia(const char* function, std::vector<Arg>& args) {
  return CallJulia(nullptr, function, args);
}

// The base of a kernel whose work is one call of a Julia function.
//
// A kernel created on Julia's thread (a Session(julia_thread=True), which
// runs its graph there) is synchronous and calls Julia directly.  Anywhere
// else it is asynchronous: TF's pool thread prepares the call, queues it for
// Julia's thread and returns to the pool; Julia's thread makes the call,
// finishes the outputs and tells TF the op is done.  So no pool thread waits
// for Julia, and a run of consecutive Julia ops is not paying for two thread
// wake-ups each.  TFBRIDGE_JULIA_ASYNC=0 makes every kernel synchronous
// (pool threads then hand each call over and sleep until it is done).
//
// A call handed over can be abandoned: when TF cancels the step (a
// RunOptions deadline, a closed session) or an interrupt comes (Ctrl-C,
// bridge.julia.interrupt), the kernel ends at once with Cancelled while the
// Julia code finishes on its own (it is told: TFBridge.checkinterrupt); the
// kernel keeps the call's tensors alive until then and discards its outputs.
//
// The call goes through the op type's compiled entry when one is registered
// (bridge.customop.load does) and the frame allows it, else through
// call_julia, which looks the function up and calls it with jl_call.
class JuliaKernel : public tensorflow::AsyncOpKernel {
 public:
  JuliaKernel(tensorflow::OpKernelConstruction* ctx, const char* function)
      : AsyncOpKernel(ctx),
        function_(function),
        async_(!on_julia_thread() && AsyncEnabled()),
        entry_(entry_slot(ctx->def().op().c_str())) {}

  // TF's executor asks this once, when it builds the kernel into a graph.
  tensorflow::AsyncOpKernel* AsAsync() override { return async_ ? this : nullptr; }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    if (!on_julia_thread()) {  // TFBRIDGE_JULIA_ASYNC=0: hand the call over and wait for it
      std::mutex mutex;
      std::condition_variable cv;
      bool over = false;
      Start(ctx, [&] {
        std::lock_guard<std::mutex> lock(mutex);
        over = true;
        cv.notify_one();  // under the lock: the waiter's stack frame may go once it is released
      }, /*done_inline=*/true);
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return over; });
      return;
    }
    // On Julia's thread (a julia_thread session's inline executor): call directly.
    // Not OP_REQUIRES: TF forbids it in asynchronous kernels, and this one may be.
    absl::Status status = Abandoned();
    CallFrame frame;
    if (status.ok()) status = Guarded([&] { return Prepare(ctx, &frame); });
    if (status.ok()) status = Guarded([&] { return Call(ctx, frame); });
    if (status.ok()) status = Abandoned();  // its outputs are not wanted: stop the run here
    if (!status.ok()) ctx->SetStatus(status);
  }

  void ComputeAsync(tensorflow::OpKernelContext* ctx, DoneCallback done) override {
    if (on_julia_thread()) {  // an asynchronous kernel can still be run here (inline executors)
      Compute(ctx);
      done();
      return;
    }
    if (ctx->run_all_kernels_inline()) {
      // The thread of a run executed inline (RunOptions.inter_op_thread_pool
      // = -1, as a Session runs small graphs: in the thread calling it).
      // Once this returns, that thread has nothing left to do but sleep in
      // TF_SessionRun until Julia's thread, which runs the rest of the step
      // from `done`, finishes it; the wake-up then costs 50-100 us on the
      // VMs measured, which every call longer than the caller's way back to
      // its wait paid (a Julia op on 10,000 doubles: 108 us, native Mul 25).
      // So it looks for the end of `done` first, for the runtime's poll time
      // (docs/performance.md: one Julia op by size).
      auto over = std::make_shared<std::atomic<bool>>(false);
      Start(ctx, [done = std::move(done), over] {
        done();
        over->store(true, std::memory_order_release);
      }, false);
      poll_until(*over);
      return;
    }
    Start(ctx, std::move(done), false);
  }

 protected:
  // Validates the inputs, allocates the outputs of known shape and fills
  // `frame` (Julia's calling convention: CONTRACT.md).
  virtual absl::Status Prepare(tensorflow::OpKernelContext* ctx, CallFrame* frame) = 0;
  // After a successful call_julia: outputs sized by Julia, strings, checks.
  // (Frames with dynamic or string outputs never take a compiled entry.)
  virtual absl::Status Finish(tensorflow::OpKernelContext* /*ctx*/, std::vector<Arg>& /*args*/) {
    return absl::OkStatus();
  }

 private:
  struct Pending;

  // Hands the call over to Julia's threads; done() runs when it is over or abandoned.
  void Start(tensorflow::OpKernelContext* ctx, DoneCallback done, bool done_inline) {
    auto pending = std::make_shared<Pending>(this, ctx, std::move(done));
    pending->done_inline = done_inline;
    absl::Status status = Guarded([&] { return Prepare(ctx, &pending->frame); });
    if (!status.ok()) {
      ctx->SetStatus(status);
      pending->state = Pending::kOver;
      DoneCallback done_now = std::move(pending->done);
      done_now();
      return;
    }
    pending->frame.CollectTensors(&pending->keep);
    if (!pending->Watch()) return;  // the step is cancelled already
    Pending& p = *pending;
    p.runtime_ref = std::move(pending);  // the runtime's reference, dropped by Called
    if (EntryFn entry = EntryFor(p.frame)) {
      call_entry_async(entry, p.frame.ToEntryArgs(), &Pending::Called, &p, &Pending::Interrupted);
      return;
    }
    p.generic = true;
    p.args = p.frame.ToArgs(ctx);
    for (Arg& a : p.args) {
      if (a.allocate == nullptr) continue;
      a.allocate = &Pending::Allocate;  // dynamic outputs: allocated through Pending
      a.allocate_ctx = &p;
    }
    call_julia_async(function_, p.args, &Pending::Called, &p, &Pending::Interrupted);
  }

  // One call handed over to Julia, shared by the runtime (until Called), the
  // step's cancellation callback and the kernel.  `ctx` and `done` belong to
  // whoever moves `state` from kRunning: Called (the call is over) or Abandon
  // (TF cancelled the step, or an interrupt came); after Abandon the call's
  // results go nowhere and nothing touches ctx again.
  struct Pending : std::enable_shared_from_this<Pending> {
    enum State { kRunning, kOver };
    Pending(JuliaKernel* k, tensorflow::OpKernelContext* c, DoneCallback d)
        : kernel(k), ctx(c), done(std::move(d)) {}

    JuliaKernel* kernel;
    tensorflow::OpKernelContext* ctx;
    DoneCallback done;
    bool done_inline = false;  // done only wakes a waiting Compute: Abandon may call it itself
    CallFrame frame;
    bool generic = false;  // through call_julia, with args (else the compiled entry)
    std::vector<Arg> args;
    absl::InlinedVector<tensorflow::Tensor, 8> keep;  // the call's buffers
    std::mutex mutex;  // guards state, and ctx while the call allocates outputs
    State state = kRunning;
    std::shared_ptr<Pending> runtime_ref;  // keeps it alive until the runtime is done with it (Called)
    tensorflow::CancellationManager* cm = nullptr;
    tensorflow::CancellationToken token = tensorflow::CancellationManager::kInvalidToken;

    // Registers for the step's cancellation; false if it is cancelled
    // already (the kernel is then done, with Cancelled).
    bool Watch() {
      cm = ctx->cancellation_manager();
      if (cm == nullptr) return true;
      token = cm->get_cancellation_token();
      // The callback keeps the Pending alive: it may run after the call is over.
      std::weak_ptr<Pending> self = weak_from_this();
      if (cm->RegisterCallback(token, [self] {
            if (auto p = self.lock()) p->Abandon("the step was cancelled (a deadline passed or the session closed)", true);
          })) {
        return true;
      }
      cm = nullptr;
      ctx->SetStatus(absl::CancelledError(kernel->type_string() + ": the step was cancelled before the Julia call"));
      state = kOver;
      DoneCallback done_now = std::move(done);
      done_now();
      return false;
    }

    // Ends the kernel now with Cancelled; the call goes on without it.
    void Abandon(const char* why, bool from_cancellation) {
      DoneCallback done_now;
      tensorflow::thread::ThreadPool* pool = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (state != kRunning) return;
        state = kOver;
        // Deregistered here unless TF is running it right now (then it
        // finds the state over and returns).
        if (cm != nullptr && !from_cancellation) cm->TryDeregisterCallback(token);
        ctx->SetStatus(absl::CancelledError(kernel->type_string() + ": Julia function " + kernel->function_ +
                                            " abandoned: " + why + "; its outputs are discarded"));
        if (!done_inline) {
          if (auto* workers = ctx->device()->tensorflow_cpu_worker_threads()) pool = workers->workers;
        }
        done_now = std::move(done);
      }
      // The runtime's own interrupts flag the call themselves (and hold its lock).
      if (from_cancellation) abandon_call(this);
      // Not inline: an interrupt abandons under the runtime's lock, and done
      // may run the rest of the step.
      if (pool != nullptr) {
        pool->Schedule(std::move(done_now));
      } else {
        done_now();
      }
    }

    // The runtime's cancel (an interrupt); see runtime.h, JuliaCancel.
    static void Interrupted(void* self, const char* why) { static_cast<Pending*>(self)->Abandon(why, false); }

    // A dynamic output's allocator: TF's output while the kernel waits, a
    // scratch tensor once it has been abandoned.
    static void* Allocate(Arg& a, std::string* error, int* kind) {
      auto* p = static_cast<Pending*>(a.allocate_ctx);
      std::lock_guard<std::mutex> lock(p->mutex);
      if (p->state == kRunning) {
        a.allocate_ctx = p->ctx;
        void* buffer = kernel_detail::AllocateDynamicOutput(a, error, kind);
        a.allocate_ctx = p;
        if (buffer != nullptr) p->keep.push_back(*p->ctx->mutable_output(a.output_index));
        return buffer;
      }
      tensorflow::TensorShape shape;
      const tensorflow::DataType dt = DTypeToTF(a.dtype);
      absl::Status s = tensorflow::TensorShape::BuildTensorShape(a.result_dims, &shape);
      if (!s.ok()) {
        *error = std::string(s.message());
        *kind = kInternal;
        return nullptr;
      }
      p->keep.emplace_back(dt, shape);
      const tensorflow::Tensor& scratch = p->keep.back();
      return scratch.NumElements() > 0 ? const_cast<char*>(scratch.tensor_data().data()) : nullptr;
    }

    // Runs on Julia's thread once the call is over (outside the GIL).
    static void Called(void* self, std::string error, int kind) {
      std::shared_ptr<Pending> p = std::move(static_cast<Pending*>(self)->runtime_ref);
      {
        std::lock_guard<std::mutex> lock(p->mutex);
        if (p->state != kRunning) return;  // abandoned: the kernel is over; drop the results
        p->state = kOver;
      }
      // Waits for a cancellation callback that is running, which then finds
      // the state over; afterwards none runs.
      if (p->cm != nullptr) p->cm->DeregisterCallback(p->token);
      // On a Julia thread, in its serving loop: the op fails, whatever Finish throws.
      absl::Status status = p->kernel->Guarded([&] {
        if (!error.empty() || kind != kOk) return ErrorStatus(p->kernel->type_string(), p->kernel->function_, kind, error);
        return p->generic ? p->kernel->Finish(p->ctx, p->args) : absl::OkStatus();
      });
      if (!status.ok()) p->ctx->SetStatus(status);
      DoneCallback done = std::move(p->done);
      p.reset();  // the buffers may go before the step moves on
      done();
    }
  };

  // The compiled entry to call for this frame, or null for call_julia.
  EntryFn EntryFor(const CallFrame& frame) const {
    EntryFn entry = entry_->load(std::memory_order_acquire);
    return entry != nullptr && frame.EntryCompatible() ? entry : nullptr;
  }

  absl::Status Call(tensorflow::OpKernelContext* ctx, CallFrame& frame) {
    if (EntryFn entry = EntryFor(frame)) {
      int kind = kOk;
      std::string error = call_entry(entry, frame.ToEntryArgs(), &kind);
      if (error.empty() && kind == kOk) return absl::OkStatus();
      return ErrorStatus(type_string(), function_, kind, error);
    }
    std::vector<Arg> args = frame.ToArgs(ctx);
    absl::Status status = CallJulia(ctx, function_, args);
    return status.ok() ? Finish(ctx, args) : status;
  }

  // f() -> absl::Status, with a C++ exception (std::bad_alloc from a string
  // or a vector of Prepare or Finish) as the op's error rather than loose in
  // TF's executor or in a Julia thread's serving loop.
  template <class F>
  absl::Status Guarded(F&& f) const {
    try {
      return f();
    } catch (const std::bad_alloc& e) {
      return absl::ResourceExhaustedError(type_string() + ": out of memory (" + e.what() + ")");
    } catch (const std::exception& e) {
      return absl::InternalError(type_string() + ": " + e.what());
    } catch (...) {
      return absl::InternalError(type_string() + ": an unknown C++ exception");
    }
  }

  // Cancelled if the julia_thread run this kernel runs in was abandoned.
  absl::Status Abandoned() const {
    if (!call_abandoned()) return absl::OkStatus();
    return absl::CancelledError(type_string() + ": the run was abandoned (a deadline passed or an interrupt came)");
  }

  static bool AsyncEnabled() {
    const char* v = std::getenv("TFBRIDGE_JULIA_ASYNC");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }

  const char* const function_;
  const bool async_;
  std::atomic<EntryFn>* const entry_;  // this op type's registry slot (runtime.h)
};

}  // namespace tfjl

#endif  // TFJL_KERNEL_H_
