// Generated from bridge/julia/contract.py by `make contract`; do not edit.
//
// The Julia-op contract (kernels_cpp/include/tfjl/CONTRACT.md): the dtypes a
// Julia op takes, the error kinds a call reports, and the arguments of a
// compiled entry.  Python (the spec parser, the code generator, bridge.julia)
// and Julia (julia/contract.jl, included by TFBridge.jl) use the same table.
// No TensorFlow or Julia header is needed: the X-macros name TF's and
// Julia's symbols as tokens, for code that includes those headers to expand.
#ifndef TFJL_CONTRACT_H_
#define TFJL_CONTRACT_H_

#include <complex>
#include <cstddef>
#include <cstdint>

// X(Name, code, tensorflow::DataType, its TF_DataType value, element bytes
// (0: not plain memory)).  Julia's element type of each is TFBridge.DTYPES[code + 1]
// (julia/contract.jl), which libtfjl_julia.so reads at start-up
#define TFJL_DTYPES(X) \
  X(Float64, 0, DT_DOUBLE, 2, 8) \
  X(Float32, 1, DT_FLOAT, 1, 4) \
  X(Int32, 2, DT_INT32, 3, 4) \
  X(Int64, 3, DT_INT64, 9, 8) \
  X(Bool, 4, DT_BOOL, 10, 1) \
  X(String, 5, DT_STRING, 7, 0) \
  X(ComplexF32, 6, DT_COMPLEX64, 8, 8) \
  X(ComplexF64, 7, DT_COMPLEX128, 18, 16)

// X(Name, C++ element type, the tfjl::Arg field holding a scalar of it): the
// plain-memory dtypes a scalar (an attribute) crosses as
#define TFJL_SCALAR_DTYPES(X) \
  X(Float64, double, f) \
  X(Float32, float, f) \
  X(Int32, int32_t, i) \
  X(Int64, int64_t, i) \
  X(Bool, bool, b)

// X(Name, value, TF_Code (= absl::StatusCode) of the status, TFBridge.Failure may carry it)
#define TFJL_ERROR_KINDS(X) \
  X(Ok, 0, 0, 0) \
  X(InvalidArgument, 1, 3, 1) \
  X(NotFound, 2, 5, 1) \
  X(Internal, 3, 13, 1) \
  X(ResourceExhausted, 4, 8, 1) \
  X(FailedPrecondition, 5, 9, 0)

namespace tfjl {

// A Julia op's dtypes (tfjl_arg.dtype in the C API holds the code).
enum class DType : int { Float64 = 0, Float32 = 1, Int32 = 2, Int64 = 3, Bool = 4, String = 5, ComplexF32 = 6, ComplexF64 = 7 };

constexpr int kNumDTypes = 8;

// Bytes per element in a TF buffer; 0 for strings (not plain memory).
constexpr size_t DTypeSize(DType d) {
  switch (d) {
    case DType::Float64: return 8;
    case DType::Float32: return 4;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::String: return 0;
    case DType::ComplexF32: return 8;
    case DType::ComplexF64: return 16;
  }
  return 0;
}

// What a call into Julia came to (call_julia's kind_out, the C API's status):
//   kOk: success
//   kInvalidArgument: ArgumentError, DimensionMismatch, DomainError, BoundsError, a MethodError on
//     the called function, a write into an input, or arguments and dynamic outputs the runtime
//     cannot pass
//   kNotFound: the Julia function is not defined
//   kInternal: anything else, or Julia could not start
//   kResourceExhausted: out of memory: Julia's OutOfMemoryError (in the function, or while the
//     runtime wraps its arguments), or an output's allocator
//   kFailedPrecondition: Julia cannot run in this process: it was forked from one that runs Julia
enum ErrorKind : int { kOk = 0, kInvalidArgument = 1, kNotFound = 2, kInternal = 3, kResourceExhausted = 4, kFailedPrecondition = 5 };

// The TF_Code (absl::StatusCode) of a kernel's status for an error kind; an
// unknown kind is Internal.
constexpr int ErrorKindTfCode(int kind) {
  switch (kind) {
    case kOk: return 0;
    case kInvalidArgument: return 3;
    case kNotFound: return 5;
    case kInternal: return 13;
    case kResourceExhausted: return 8;
    case kFailedPrecondition: return 9;
  }
  return 13;
}

// The error kind of a TF_Code (a status from TensorFlow); Internal for any other.
constexpr int ErrorKindOfTfCode(int code) {
  switch (code) {
    case 0: return kOk;
    case 3: return kInvalidArgument;
    case 5: return kNotFound;
    case 13: return kInternal;
    case 8: return kResourceExhausted;
    case 9: return kFailedPrecondition;
  }
  return kInternal;
}

// The kinds a TFBridge.Failure may carry (anything else read from Julia is Internal).
constexpr bool IsJuliaErrorKind(int64_t kind) {
  return kind == kInvalidArgument || kind == kNotFound || kind == kInternal || kind == kResourceExhausted;
}

// A compiled entry (templates/entries.jl.j2, made C-callable by Julia's @cfunction):
// the calling convention's arguments in three flat arrays:
//   data: per tensor its buffer; per string attribute its bytes
//   ints: per tensor its rank, then its TF (row-major) shape; per int or bool attribute its value;
//     per string attribute its length
//   floats: per float attribute its value
// It returns kOk or the ErrorKind it recorded in TFBridge.LAST_FAILURE.
using EntryFn = int (*)(void* const* data, const int64_t* ints, const double* floats);

// The three arrays of one entry call; they must outlive the call.
struct EntryArgs {
  void* const* data;
  const int64_t* ints;
  const double* floats;
};

// How a compiled entry receives an attribute of each dtype: kFloat one double in
// `floats`, kInt one int64 in `ints`, kBytes a pointer in `data` and a length in `ints`.
enum class EntryAttr : int { kFloat, kInt, kBytes };

constexpr EntryAttr EntryAttrOf(DType d) {
  switch (d) {
    case DType::Float64: return EntryAttr::kFloat;
    case DType::Float32: return EntryAttr::kFloat;
    case DType::Int32: return EntryAttr::kInt;
    case DType::Int64: return EntryAttr::kInt;
    case DType::Bool: return EntryAttr::kInt;
    case DType::String: return EntryAttr::kBytes;
    case DType::ComplexF32: return EntryAttr::kInt;
    case DType::ComplexF64: return EntryAttr::kInt;
  }
  return EntryAttr::kInt;
}

// The most Julia threads the runtime starts and tracks: serving_threads() caps
// TFBRIDGE_JULIA_THREADS there, and its per-thread tables (which threads are Julia's, each one's
// running and interrupted call) have that many rows.
constexpr int kMaxJuliaThreads = 255;

// The table's sizes hold for this compiler.
static_assert(sizeof(double) == 8, "tfjl::DType::Float64 is 8-byte double");
static_assert(sizeof(float) == 4, "tfjl::DType::Float32 is 4-byte float");
static_assert(sizeof(int32_t) == 4, "tfjl::DType::Int32 is 4-byte int32_t");
static_assert(sizeof(int64_t) == 8, "tfjl::DType::Int64 is 8-byte int64_t");
static_assert(sizeof(bool) == 1, "tfjl::DType::Bool is 1-byte bool");
static_assert(sizeof(std::complex<float>) == 8, "tfjl::DType::ComplexF32 is 8-byte std::complex<float>");
static_assert(sizeof(std::complex<double>) == 16, "tfjl::DType::ComplexF64 is 16-byte std::complex<double>");

}  // namespace tfjl

#endif  // TFJL_CONTRACT_H_
