// Small output buffers for Julia kernels, recycled instead of allocated.
//
// A native element-wise op usually forwards its input's buffer to its output;
// a Julia op cannot (its function may read an input after writing an output),
// so it allocates every output.  TF's CPU allocator spends about 0.15 us on a
// small buffer (with oneDNN on, MklCPUAllocator takes a mutex, updates a hash
// map and calls an aligned malloc), which is half of what a whole native op
// costs in a chain.  Outputs of up to kMaxBytes come from per-size free lists
// instead (measured: 0.03 us for the allocation and the free); larger ones
// keep TF's allocator, whose cost is small next to the work on them.
//
// What TF's allocator would give and this does not: these buffers do not
// appear in TF's allocator statistics or memory logs.  The pool keeps at most
// kMaxFreePerClass free buffers of each size (about 1 MiB in all) and returns
// the rest to the system.
//
// Fortran ops' kernels (templates/fortran_kernel.cc.j2), which link no Julia
// runtime, use it too: they define TFJL_OUTPUT_POOL_STANDALONE before
// including this header, and fresh buffers then come from aligned_alloc
// (without the runtime's test hook, tfjl_set_output_pool_alloc).
#ifndef TFJL_OUTPUT_POOL_H_
#define TFJL_OUTPUT_POOL_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "tensorflow/core/framework/allocator.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"

#ifdef TFJL_OUTPUT_POOL_STANDALONE
namespace tfjl {
using RawAllocFn = void* (*)(size_t alignment, size_t size);
inline RawAllocFn output_pool_alloc() {
  return [](size_t alignment, size_t size) { return std::aligned_alloc(alignment, size); };
}
}  // namespace tfjl
#else
#include "tfjl/runtime.h"
#endif

namespace tfjl {

class OutputPool final : public tensorflow::Allocator {
 public:
  static constexpr size_t kMaxBytes = 4096;
  static constexpr size_t kMaxFreePerClass = 128;

  // One pool per kernel library, never destroyed: a tensor may outlive every
  // kernel (and the session) that made it.
  static OutputPool* Get() {
    static OutputPool* const pool = new OutputPool();
    return pool;
  }

  std::string Name() override { return "tfjl_output_pool"; }

  void* AllocateRaw(size_t alignment, size_t num_bytes) override {
    if (alignment > kAlignment || num_bytes > kMaxBytes) return nullptr;  // AllocateOutput never asks
    const int c = ClassOf(num_bytes);
    SizeClass& sc = classes_[c];
    {
      std::lock_guard<std::mutex> lock(sc.mutex);
      if (FreeBlock* b = sc.head) {
        sc.head = b->next;
        --sc.count;
        return b;
      }
    }
    // A header before each buffer records its size class, so that either
    // form of DeallocateRaw finds its free list.  output_pool_alloc() is
    // aligned_alloc unless a test installed another (runtime.h); a null
    // result makes AllocateOutput fail with ResourceExhausted.
    void* raw = output_pool_alloc()(kAlignment, kAlignment + ClassBytes(c));
    if (raw == nullptr) return nullptr;
    static_cast<Header*>(raw)->size_class = c;
    return static_cast<char*>(raw) + kAlignment;
  }

  void DeallocateRaw(void* ptr) override {
    if (ptr == nullptr) return;
    const int c = HeaderOf(ptr)->size_class;
    SizeClass& sc = classes_[c];
    {
      std::lock_guard<std::mutex> lock(sc.mutex);
      if (sc.count < kMaxFreePerClass) {
        auto* b = static_cast<FreeBlock*>(ptr);
        b->next = sc.head;
        sc.head = b;
        ++sc.count;
        return;
      }
    }
    std::free(HeaderOf(ptr));
  }

 private:
  static constexpr size_t kAlignment = 64;  // TF's Allocator::kAllocatorAlignment
  static constexpr size_t kMinBytes = 64;
  static constexpr int kClasses = 7;  // 64, 128, ..., 4096 bytes

  struct Header {
    int size_class;
  };
  struct FreeBlock {
    FreeBlock* next;
  };
  struct SizeClass {
    std::mutex mutex;
    FreeBlock* head = nullptr;
    size_t count = 0;
  };

  static size_t ClassBytes(int c) { return kMinBytes << c; }
  static int ClassOf(size_t num_bytes) {
    int c = 0;
    while (ClassBytes(c) < num_bytes) ++c;
    return c;
  }
  static Header* HeaderOf(void* ptr) { return reinterpret_cast<Header*>(static_cast<char*>(ptr) - kAlignment); }

  OutputPool() = default;
  SizeClass classes_[kClasses];
};

// ctx->allocate_output, with small numeric outputs taken from the OutputPool.
// `name` (the output's name in the op's spec, or null) names it in errors.
inline absl::Status AllocateOutput(tensorflow::OpKernelContext* ctx, int index, const tensorflow::TensorShape& shape,
                                   tensorflow::Tensor** out, const char* name = nullptr) {
  const tensorflow::DataType dtype = ctx->expected_output_dtype(index);
  const int64_t bytes = shape.num_elements() * static_cast<int64_t>(tensorflow::DataTypeSize(dtype));
  if (dtype == tensorflow::DT_STRING || bytes <= 0 || bytes > static_cast<int64_t>(OutputPool::kMaxBytes)) {
    return ctx->allocate_output(index, shape, out);
  }
  tensorflow::Tensor t(OutputPool::Get(), dtype, shape);
  if (!t.IsInitialized()) {
    const std::string which = name != nullptr ? "'" + std::string(name) + "'" : std::to_string(index);
    return absl::ResourceExhaustedError("out of memory for output " + which + " (" + std::to_string(bytes) +
                                        " bytes)");
  }
  ctx->set_output(index, t);
  *out = ctx->mutable_output(index);
  return absl::OkStatus();
}

}  // namespace tfjl

#endif  // TFJL_OUTPUT_POOL_H_
