// TF tensors and attributes -> the runtime's call arguments (tfjl::Arg,
// runtime.h), and the call's results -> TF outputs: InputArg, OutputArg,
// DynamicOutputArg, AttrArg, FinishOutput.  Part of kernel.h's header-only
// TensorFlow glue (kernel.h includes this; CallFrame builds these Args).
#ifndef TFJL_ARGS_H_
#define TFJL_ARGS_H_

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tfjl/output_pool.h"
#include "tfjl/runtime.h"
#include "tfjl/tf_dtype.h"
#include "tfjl/tf_status.h"

namespace tfjl {

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

}  // namespace tfjl

#endif  // TFJL_ARGS_H_
