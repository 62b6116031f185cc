// Hand-written TensorFlow ops over tfjl/kernel.h, for tests/julia/test_runtime_threads.py.
// Each op names its Julia function in the `fn` attribute, so one op type
// serves many independent test functions.
//
//   JlRtApply    fn(y, x)                            y: same shape and type as x
//   JlRtAttrs    fn(y, x, alpha, n, flag, label)     double; alpha passed as Float64
//   JlRtDynamic  fn(o, x)                            o: Ref{Any}, assigned a vector
//   JlRtDynamicAny fn(o, x)                          o: Ref{Any}, any rank, x's type; `direct`:
//                                                    allocated by the runtime (else copied after)
//   JlRtStrings  fn(y, x)                            string tensors, same shape
#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tfjl/kernel.h"

namespace tensorflow {
namespace {

REGISTER_OP("JlRtApply")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {double, float, int32, int64, bool}")
    .Attr("fn: string")
    .SetShapeFn(shape_inference::UnchangedShape);

REGISTER_OP("JlRtAttrs")
    .Input("x: double")
    .Output("y: double")
    .Attr("fn: string")
    .Attr("alpha: float")
    .Attr("n: int")
    .Attr("flag: bool")
    .Attr("label: string")
    .SetShapeFn(shape_inference::UnchangedShape);

REGISTER_OP("JlRtDynamic")
    .Input("x: double")
    .Output("y: double")
    .Attr("fn: string")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

REGISTER_OP("JlRtDynamicAny")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {double, float, int32, int64, bool}")
    .Attr("fn: string")
    .Attr("direct: bool = true")
    .SetShapeFn(shape_inference::UnknownShape);

REGISTER_OP("JlRtStrings")
    .Input("x: string")
    .Output("y: string")
    .Attr("fn: string")
    .SetShapeFn(shape_inference::UnchangedShape);

// Base: reads `fn` once; the Julia function is looked up on every call, so
// redefining it in Julia takes effect at the next run.
class JuliaKernel : public OpKernel {
 public:
  explicit JuliaKernel(OpKernelConstruction* ctx) : OpKernel(ctx) { OP_REQUIRES_OK(ctx, ctx->GetAttr("fn", &fn_)); }

 protected:
  std::string fn_;
};

class ApplyOp : public JuliaKernel {
 public:
  using JuliaKernel::JuliaKernel;

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    std::vector<tfjl::Arg> args;
    args.reserve(2);
    args.push_back(tfjl::OutputArg(y));
    args.push_back(tfjl::InputArg(x));
    OP_REQUIRES_OK(ctx, tfjl::CallJulia(ctx, fn_.c_str(), args));
  }
};

class AttrsOp : public JuliaKernel {
 public:
  explicit AttrsOp(OpKernelConstruction* ctx) : JuliaKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("alpha", &alpha_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("n", &n_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("flag", &flag_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("label", &label_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    std::vector<tfjl::Arg> args;
    args.reserve(6);
    args.push_back(tfjl::OutputArg(y));
    args.push_back(tfjl::InputArg(x));
    args.push_back(tfjl::AttrArg(alpha_, tfjl::DType::Float64));
    args.push_back(tfjl::AttrArg(n_));
    args.push_back(tfjl::AttrArg(flag_));
    args.push_back(tfjl::AttrArg(label_));
    OP_REQUIRES_OK(ctx, tfjl::CallJulia(ctx, fn_.c_str(), args));
  }

 private:
  float alpha_ = 0;
  int64_t n_ = 0;
  bool flag_ = false;
  std::string label_;
};

class DynamicOp : public JuliaKernel {
 public:
  using JuliaKernel::JuliaKernel;

  void Compute(OpKernelContext* ctx) override {
    std::vector<tfjl::Arg> args;
    args.reserve(2);
    args.push_back(tfjl::DynamicOutputArg(ctx, 0, tfjl::DType::Float64, {-1}));
    args.push_back(tfjl::InputArg(ctx->input(0)));
    OP_REQUIRES_OK(ctx, tfjl::CallJulia(ctx, fn_.c_str(), args));
    OP_REQUIRES_OK(ctx, tfjl::FinishOutput(ctx, 0, args[0]));
  }
};

// A dynamic output of x's dtype and of any shape (no expected shape), written
// by the runtime into the output it allocates during the call (direct), or
// (not direct: the allocator-less form) copied in by FinishOutput afterwards.
class DynamicAnyOp : public JuliaKernel {
 public:
  explicit DynamicAnyOp(OpKernelConstruction* ctx) : JuliaKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("direct", &direct_));
  }

  void Compute(OpKernelContext* ctx) override {
    tfjl::DType dtype;
    OP_REQUIRES(ctx, tfjl::DTypeFromTF(ctx->input(0).dtype(), &dtype), absl::InvalidArgumentError("unsupported dtype"));
    std::vector<tfjl::Arg> args;
    args.reserve(2);
    args.push_back(direct_ ? tfjl::DynamicOutputArg(ctx, 0, dtype) : tfjl::DynamicOutputArg(dtype));
    args.push_back(tfjl::InputArg(ctx->input(0)));
    OP_REQUIRES_OK(ctx, tfjl::CallJulia(ctx, fn_.c_str(), args));
    OP_REQUIRES_OK(ctx, tfjl::FinishOutput(ctx, 0, args[0]));
  }

 private:
  bool direct_ = true;
};

class StringsOp : public JuliaKernel {
 public:
  using JuliaKernel::JuliaKernel;

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    std::vector<tfjl::Arg> args;
    args.reserve(2);
    args.push_back(tfjl::OutputArg(y));
    args.push_back(tfjl::InputArg(x));
    OP_REQUIRES_OK(ctx, tfjl::CallJulia(ctx, fn_.c_str(), args));
    OP_REQUIRES_OK(ctx, tfjl::FinishOutput(ctx, 0, args[0]));
  }
};

REGISTER_KERNEL_BUILDER(Name("JlRtApply").Device(DEVICE_CPU), ApplyOp);
REGISTER_KERNEL_BUILDER(Name("JlRtAttrs").Device(DEVICE_CPU), AttrsOp);
REGISTER_KERNEL_BUILDER(Name("JlRtDynamic").Device(DEVICE_CPU), DynamicOp);
REGISTER_KERNEL_BUILDER(Name("JlRtDynamicAny").Device(DEVICE_CPU), DynamicAnyOp);
REGISTER_KERNEL_BUILDER(Name("JlRtStrings").Device(DEVICE_CPU), StringsOp);

}  // namespace
}  // namespace tensorflow
