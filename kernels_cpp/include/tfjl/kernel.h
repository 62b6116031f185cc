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
#ifndef TFJL_KERNEL_H_
#define TFJL_KERNEL_H_

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
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
#include "tfjl/output_pool.h"
#include "tfjl/runtime.h"

namespace tfjl {

// The table of tfjl/contract.h agrees with TensorFlow's headers.
#define TFJL_CHECK_TF_DTYPE(name, code, tf_name, tf_enum, size, jl_type)                  \
  static_assert(static_cast<int>(tensorflow::tf_name) == tf_enum,                             \
                "tfjl/contract.h: tfjl::DType::" #name " is " #tf_name " = " #tf_enum);
TFJL_DTYPES(TFJL_CHECK_TF_DTYPE)
#undef TFJL_CHECK_TF_DTYPE
#define TFJL_CHECK_TF_CODE(name, value, tf_code, from_julia)                                \
  static_assert(static_cast<int>(absl::StatusCode::k##name) == tf_code,                       \
                "tfjl/contract.h: TF_Code " #name " is " #tf_code);
TFJL_ERROR_KINDS(TFJL_CHECK_TF_CODE)
#undef TFJL_CHECK_TF_CODE

// The tfjl dtype of a TF dtype; false for types Julia ops do not support.
inline bool DTypeFromTF(tensorflow::DataType dt, DType* out) {
  switch (dt) {
#define TFJL_FROM_TF(name, code, tf_name, tf_enum, size, jl_type) \
  case tensorflow::tf_name:                                        \
    *out = DType::name;                                            \
    return true;
    TFJL_DTYPES(TFJL_FROM_TF)
#undef TFJL_FROM_TF
    default: return false;
  }
}

namespace kernel_detail {

inline std::vector<int64_t> dims_of(const tensorflow::Tensor& t) {
  std::vector<int64_t> dims(static_cast<size_t>(t.dims()));
  for (int k = 0; k < t.dims(); ++k) dims[static_cast<size_t>(k)] = t.dim_size(k);
  return dims;
}

// Numeric tensors are passed zero-copy: Julia wraps TF's buffer.
inline Arg tensor_arg(Arg::Kind kind, const tensorflow::Tensor& t) {
  Arg a{};
  a.kind = kind;
  const bool supported = DTypeFromTF(t.dtype(), &a.dtype);
  if (!supported) a.dtype = static_cast<DType>(-1);  // call_julia reports it
  a.dims = dims_of(t);
  // tensor_data() aborts for types that are not plain memory: read it only for ours.
  if (supported && a.dtype != DType::String && t.NumElements() > 0) {
    a.data = const_cast<char*>(t.tensor_data().data());
  }
  return a;
}

}  // namespace kernel_detail

// An input tensor: numeric zero-copy; strings copied into Arg::strings (row-major).
inline Arg InputArg(const tensorflow::Tensor& t) {
  Arg a = kernel_detail::tensor_arg(Arg::Input, t);
  if (t.dtype() == tensorflow::DT_STRING) {
    const auto flat = t.flat<tensorflow::tstring>();
    a.strings.reserve(static_cast<size_t>(flat.size()));
    for (int64_t i = 0; i < flat.size(); ++i) a.strings.emplace_back(flat(i).data(), flat(i).size());
  }
  return a;
}

// An output the kernel already allocated: numeric ones are written in place by
// Julia; string ones are filled by the runtime and copied by FinishOutput.
inline Arg OutputArg(tensorflow::Tensor* t) { return kernel_detail::tensor_arg(Arg::Output, *t); }

namespace kernel_detail {

inline int ErrorKindOf(const absl::Status& s) { return ErrorKindOfTfCode(static_cast<int>(s.code())); }

// Arg::allocate of a dynamic output: allocates TF output `a.output_index`
// with the shape of Julia's value and returns its buffer, which the runtime
// fills on Julia's thread during the call (an asynchronous kernel may
// allocate there: its `done` has not run yet).
inline void* AllocateDynamicOutput(Arg& a, std::string* error, int* kind) {
  auto* ctx = static_cast<tensorflow::OpKernelContext*>(a.allocate_ctx);
  tensorflow::TensorShape shape;
  tensorflow::Tensor* out = nullptr;
  absl::Status s = tensorflow::TensorShape::BuildTensorShape(a.result_dims, &shape);
  if (s.ok()) s = AllocateOutput(ctx, a.output_index, shape, &out);
  if (!s.ok()) {
    *error = std::string(s.message());
    *kind = ErrorKindOf(s);
    return nullptr;
  }
  return out->NumElements() > 0 ? const_cast<char*>(out->tensor_data().data()) : nullptr;
}

}  // namespace kernel_detail

// An output whose shape only the Julia function knows, TF output `index` of
// `ctx`.  `expected`: the shape the spec promises, -1 for unknown dimensions
// (empty: no check).  Numeric values are written straight into the output,
// which the runtime allocates during the call; strings are copied in by
// FinishOutput after it.
inline Arg DynamicOutputArg(tensorflow::OpKernelContext* ctx, int index, DType dtype,
                            std::vector<int64_t> expected = {}) {
  Arg a{};
  a.kind = Arg::DynamicOutput;
  a.dtype = dtype;
  a.dims = std::move(expected);
  a.output_index = index;
  if (ctx != nullptr && dtype != DType::String) {
    a.allocate = &kernel_detail::AllocateDynamicOutput;
    a.allocate_ctx = ctx;
  }
  return a;
}

// The same without an allocator: the runtime copies a numeric value into
// Arg::result_bytes, and FinishOutput allocates the output and copies it again.
inline Arg DynamicOutputArg(DType dtype, std::vector<int64_t> expected = {}) {
  return DynamicOutputArg(nullptr, -1, dtype, std::move(expected));
}

// Attribute values.  TF stores a spec's `double` attr as a float attr: pass
// DType::Float64 to hand it to Julia as Float64.
// An attribute Arg of `dtype`, its value still to be set.
inline Arg AttrOfType(DType dtype) {
  Arg a{};
  a.kind = Arg::AttrValue;
  a.dtype = dtype;
  return a;
}

inline Arg AttrArg(double v, DType dtype = DType::Float64) {
  Arg a = AttrOfType(dtype);
  a.f = v;
  return a;
}

inline Arg AttrArg(float v, DType dtype = DType::Float32) { return AttrArg(static_cast<double>(v), dtype); }

inline Arg AttrArg(int64_t v) {
  Arg a = AttrOfType(DType::Int64);
  a.i = v;
  return a;
}

inline Arg AttrArg(int v) { return AttrArg(static_cast<int64_t>(v)); }

inline Arg AttrArg(bool v) {
  Arg a = AttrOfType(DType::Bool);
  a.b = v;
  return a;
}

inline Arg AttrArg(std::string v) {
  Arg a = AttrOfType(DType::String);
  a.s = std::move(v);
  return a;
}

inline Arg AttrArg(const char* v) { return AttrArg(std::string(v)); }  // not the bool overload

// call_julia's error -> a TF status "<op>: Julia function <fn> failed: <text>",
// its code the error kind's (contract.h: InvalidArgument, NotFound, Internal,
// ResourceExhausted; Internal for kOk or an unknown kind).
inline absl::Status ErrorStatus(const std::string& op, const char* function, int kind, const std::string& text) {
  std::string message = (op.empty() ? std::string() : op + ": ") + "Julia function " + function + " failed: " + text;
  const int code = kind != kOk ? ErrorKindTfCode(kind) : ErrorKindTfCode(kInternal);
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

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

namespace kernel_detail {

// How errors name output `index`: by its name in the spec ('y'), else by index.
inline std::string OutputName(int index, const Arg& a) {
  return a.name != nullptr ? "'" + std::string(a.name) + "'" : std::to_string(index);
}

}  // namespace kernel_detail

// Copies the strings the runtime collected for String Output `index` into its tensor.
inline absl::Status FinishStringOutput(tensorflow::Tensor* t, int index, const Arg& a) {
  auto flat = t->flat<tensorflow::tstring>();
  if (static_cast<size_t>(flat.size()) != a.strings.size()) {
    return absl::InternalError("string output " + kernel_detail::OutputName(index, a) + ": " +
                               std::to_string(a.strings.size()) + " strings for " + std::to_string(flat.size()) +
                               " elements");
  }
  for (int64_t i = 0; i < flat.size(); ++i) {
    const std::string& src = a.strings[static_cast<size_t>(i)];
    flat(i).assign(src.data(), src.size());
  }
  return absl::OkStatus();
}

// Allocates output `index` with the shape the Julia function produced and
// copies its data (numeric bytes or strings); nothing left to do for a
// numeric output with an allocator, which the runtime filled during the call.
inline absl::Status FinishDynamicOutput(tensorflow::OpKernelContext* ctx, int index, const Arg& a) {
  if (a.dtype != DType::String && a.allocate != nullptr) return absl::OkStatus();
  tensorflow::TensorShape shape;
  for (int64_t d : a.result_dims) {
    absl::Status s = shape.AddDimWithStatus(d);
    if (!s.ok()) return s;
  }
  tensorflow::Tensor* out = nullptr;
  absl::Status s = ctx->allocate_output(index, shape, &out);
  if (!s.ok()) return s;
  if (a.dtype == DType::String) return FinishStringOutput(out, index, a);
  const size_t want = static_cast<size_t>(shape.num_elements()) * DTypeSize(a.dtype);
  if (a.result_bytes.size() != want) {
    return absl::InternalError("dynamic output " + kernel_detail::OutputName(index, a) + ": " +
                               std::to_string(a.result_bytes.size()) + " bytes for " + std::to_string(want));
  }
  if (want > 0) std::memcpy(const_cast<char*>(out->tensor_data().data()), a.result_bytes.data(), want);
  return absl::OkStatus();
}

// After CallJulia: a DynamicOutput without an allocator is allocated and
// filled, a string one receives its strings; a String Output (allocated
// before the call) receives its strings; anything else is done.
inline absl::Status FinishOutput(tensorflow::OpKernelContext* ctx, int index, const Arg& a) {
  if (a.kind == Arg::DynamicOutput) return FinishDynamicOutput(ctx, index, a);
  if (a.kind == Arg::Output && a.dtype == DType::String) {
    tensorflow::Tensor* t = ctx->mutable_output(index);
    if (t == nullptr) {
      return absl::InternalError("string output " + kernel_detail::OutputName(index, a) + " was not allocated");
    }
    return FinishStringOutput(t, index, a);
  }
  return absl::OkStatus();
}

// What a kernel passes to Julia, in the calling convention's order
// (CONTRACT.md): filled by Prepare without allocating, then handed over either
// as a compiled entry's three flat arrays (contract.h) or as the Args of
// call_julia.  It refers to the tensors and to string attributes, which must
// outlive the call (the kernel's inputs, outputs and members do).
class CallFrame {
 public:
  // `name` (a literal, or a string that outlives the frame; may be null) is the
  // argument's name in the op's spec, by which errors name it (Arg::name).
  void Output(tensorflow::Tensor* t, const char* name = nullptr) {
    Slot s = TensorSlot(Arg::Output, t);
    s.name = name;
    slots_.push_back(std::move(s));
  }
  // Inputs reach Julia read-only; a write names the input.
  void Input(const tensorflow::Tensor& t, const char* name = nullptr) {
    Slot s = TensorSlot(Arg::Input, &t);
    s.name = name;
    slots_.push_back(std::move(s));
  }
  // An output whose shape only the Julia function knows (see DynamicOutputArg);
  // such a frame always goes through call_julia.  Outputs come first in the
  // calling convention, in TF's order: the k-th Output or DynamicOutput of
  // the frame is TF output k.
  void DynamicOutput(DType dtype, std::vector<int64_t> expected = {}, const char* name = nullptr) {
    Slot s;
    s.kind = Arg::DynamicOutput;
    s.dtype = dtype;
    s.expected = std::move(expected);
    s.name = name;
    slots_.push_back(std::move(s));
  }
  // Attribute values, as AttrArg takes them (a spec's `double` attribute is a
  // TF float attribute handed to Julia as Float64).
  void Attr(double v, DType dtype = DType::Float64) { slots_.push_back(AttrSlot(dtype, v, 0)); }
  void Attr(float v, DType dtype = DType::Float32) { Attr(static_cast<double>(v), dtype); }
  void Attr(int64_t v) { slots_.push_back(AttrSlot(DType::Int64, 0, v)); }
  void Attr(int v) { Attr(static_cast<int64_t>(v)); }
  void Attr(bool v) { slots_.push_back(AttrSlot(DType::Bool, 0, v ? 1 : 0)); }
  void Attr(const std::string& v) {
    Slot s = AttrSlot(DType::String, 0, 0);
    s.text = &v;
    slots_.push_back(std::move(s));
  }
  void Attr(const char*) = delete;  // would bind to Attr(bool): pass a std::string that outlives the call

  // The tensors the call reads or writes: a call that is abandoned keeps
  // their buffers alive until Julia is done with them.
  template <class Out>
  void CollectTensors(Out* out) const {
    for (const Slot& s : slots_) {
      if (s.tensor != nullptr) out->push_back(*s.tensor);
    }
  }

  // Whether a compiled entry can take the frame: numeric tensors and
  // attributes only (string tensors and dynamic outputs need the runtime's
  // conversions, which only call_julia has).
  bool EntryCompatible() const {
    for (const Slot& s : slots_) {
      if (s.kind == Arg::DynamicOutput) return false;
      if ((s.kind == Arg::Input || s.kind == Arg::Output) && (!s.supported || s.dtype == DType::String)) return false;
    }
    return true;
  }

  // The entry's arrays (contract.h, EntryArgs): per tensor, its buffer in
  // `data` and its rank and TF shape in `ints`; per attribute what
  // EntryAttrOf(dtype) says (Float64/Float32 in `floats`, Int64 and Bool in
  // `ints`, String as bytes in `data` and length in `ints`).  The generated
  // entries read them in the same order (CONTRACT.md).
  EntryArgs ToEntryArgs() {
    data_.clear();
    ints_.clear();
    floats_.clear();
    for (const Slot& s : slots_) {
      if (s.kind == Arg::AttrValue) {
        switch (EntryAttrOf(s.dtype)) {
          case EntryAttr::kFloat: floats_.push_back(s.f); break;
          case EntryAttr::kInt: ints_.push_back(s.i); break;
          case EntryAttr::kBytes:
            data_.push_back(const_cast<char*>(s.text->data()));
            ints_.push_back(static_cast<int64_t>(s.text->size()));
            break;
        }
        continue;
      }
      const tensorflow::Tensor& t = *s.tensor;
      // An empty tensor may have no buffer; Julia still wants an aligned address.
      void* buffer = t.NumElements() > 0 ? const_cast<char*>(t.tensor_data().data()) : nullptr;
      data_.push_back(buffer != nullptr ? buffer : empty_buffer_);
      ints_.push_back(t.dims());
      for (int k = 0; k < t.dims(); ++k) ints_.push_back(t.dim_size(k));
    }
    return EntryArgs{data_.data(), ints_.data(), floats_.data()};
  }

  // The same arguments for call_julia; dynamic outputs are allocated in `ctx`
  // (null: copied in by FinishOutput instead).
  std::vector<Arg> ToArgs(tensorflow::OpKernelContext* ctx = nullptr) const {
    std::vector<Arg> args;
    args.reserve(slots_.size());
    int output = 0;  // TF's index of the next output
    for (const Slot& s : slots_) {
      switch (s.kind) {
        case Arg::Input:
          args.push_back(InputArg(*s.tensor));
          args.back().name = s.name;
          break;
        case Arg::Output:
          args.push_back(OutputArg(const_cast<tensorflow::Tensor*>(s.tensor)));
          args.back().name = s.name;
          ++output;
          break;
        case Arg::DynamicOutput:
          args.push_back(DynamicOutputArg(ctx, output++, s.dtype, s.expected));
          args.back().name = s.name;
          break;
        case Arg::AttrValue: {
          // The runtime reads the field of the dtype (contract.h, TFJL_NUMERIC_DTYPES).
          Arg a{};
          a.kind = Arg::AttrValue;
          a.dtype = s.dtype;
          a.f = s.f;
          a.i = s.i;
          a.b = s.i != 0;
          if (s.text != nullptr) a.s = *s.text;
          args.push_back(std::move(a));
          break;
        }
      }
    }
    return args;
  }

 private:
  struct Slot {
    Arg::Kind kind = Arg::Input;
    DType dtype = DType::Float64;
    bool supported = true;                       // a dtype Julia ops take
    const tensorflow::Tensor* tensor = nullptr;  // Input / Output
    const char* name = nullptr;                  // Input, Output, DynamicOutput: the spec's name
    double f = 0;                                // float attributes
    int64_t i = 0;                               // int and bool attributes
    const std::string* text = nullptr;           // string attributes
    std::vector<int64_t> expected;               // DynamicOutput (empty: no check)
  };

  static Slot TensorSlot(Arg::Kind kind, const tensorflow::Tensor* t) {
    Slot s;
    s.kind = kind;
    s.tensor = t;
    s.supported = DTypeFromTF(t->dtype(), &s.dtype);
    return s;
  }

  static Slot AttrSlot(DType dtype, double f, int64_t i) {
    Slot s;
    s.kind = Arg::AttrValue;
    s.dtype = dtype;
    s.f = f;
    s.i = i;
    return s;
  }

  // Real ops have a handful of arguments: these stay on the stack.
  absl::InlinedVector<Slot, 8> slots_;
  absl::InlinedVector<void*, 8> data_;
  absl::InlinedVector<int64_t, 24> ints_;
  absl::InlinedVector<double, 4> floats_;

  alignas(64) static inline char empty_buffer_[64] = {};
};

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
    if (status.ok()) status = Prepare(ctx, &frame);
    if (status.ok()) status = Call(ctx, frame);
    if (status.ok()) status = Abandoned();  // its outputs are not wanted: stop the run here
    if (!status.ok()) ctx->SetStatus(status);
  }

  void ComputeAsync(tensorflow::OpKernelContext* ctx, DoneCallback done) override {
    if (on_julia_thread()) {  // an asynchronous kernel can still be run here (inline executors)
      Compute(ctx);
      done();
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
    absl::Status status = Prepare(ctx, &pending->frame);
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
      tensorflow::DataType dt = tensorflow::DT_INVALID;
#define TFJL_TO_TF(name, code, tf_name, tf_enum, size, jl_type) \
  if (a.dtype == DType::name) dt = tensorflow::tf_name;
      TFJL_DTYPES(TFJL_TO_TF)
#undef TFJL_TO_TF
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
      absl::Status status = absl::OkStatus();
      if (!error.empty() || kind != kOk) {
        status = ErrorStatus(p->kernel->type_string(), p->kernel->function_, kind, error);
      } else if (p->generic) {
        status = p->kernel->Finish(p->ctx, p->args);
      }
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
