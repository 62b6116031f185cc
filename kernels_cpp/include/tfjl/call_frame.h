// tfjl::CallFrame: what a kernel passes to Julia, filled by the kernel's
// Prepare and handed over either as a compiled entry's arrays or as
// call_julia's Args.  Part of kernel.h's header-only TensorFlow glue
// (kernel.h includes this).
#ifndef TFJL_CALL_FRAME_H_
#define TFJL_CALL_FRAME_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tfjl/args.h"
#include "tfjl/contract.h"
#include "tfjl/runtime.h"
#include "tfjl/tf_dtype.h"

namespace tfjl {

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
          // The runtime reads the field of the dtype (contract.h, TFJL_SCALAR_DTYPES).
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

}  // namespace tfjl

#endif  // TFJL_CALL_FRAME_H_
