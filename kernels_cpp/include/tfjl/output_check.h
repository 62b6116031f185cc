// TFBRIDGE_JULIA_CHECK=1: outputs the Julia function never wrote are errors.
//
// An output is TensorFlow's buffer (or a recycled one, output_pool.h), so an
// element the function forgot (or a `y = ...` that rebound the name instead
// of writing, `y .= ...`) returns whatever the memory held, with no error.
// In check mode a generated kernel fills each output of known shape with a
// pattern before the call (a signalling NaN for floats and complex numbers,
// which no arithmetic produces; 0xA5 bytes for the rest) and, after the call,
// refuses an output where the pattern is left, naming it.  Only the generic
// path runs Finish, so bridge.customop.load registers no compiled entries
// in check mode.
#ifndef TFJL_OUTPUT_CHECK_H_
#define TFJL_OUTPUT_CHECK_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"

namespace tfjl {

// Read once per kernel library: switching mid-process would check outputs
// filled without the pattern.
inline bool CheckOutputs() {
  static const bool on = [] {
    const char* v = std::getenv("TFBRIDGE_JULIA_CHECK");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

namespace output_check {

constexpr uint64_t kDoubleNaN = 0x7FF4DEADBEEFCAFEull;  // signalling: quiet bit clear, payload set
constexpr uint32_t kFloatNaN = 0x7FA5DEADu;
constexpr unsigned char kByte = 0xA5;

// The pattern of one element of `dtype` (at most 16 bytes), and its size.
inline size_t Pattern(tensorflow::DataType dtype, unsigned char out[16]) {
  switch (dtype) {
    case tensorflow::DT_DOUBLE:
    case tensorflow::DT_COMPLEX128:
      std::memcpy(out, &kDoubleNaN, 8);
      std::memcpy(out + 8, &kDoubleNaN, 8);
      return dtype == tensorflow::DT_DOUBLE ? 8 : 16;
    case tensorflow::DT_FLOAT:
    case tensorflow::DT_COMPLEX64:
      std::memcpy(out, &kFloatNaN, 4);
      std::memcpy(out + 4, &kFloatNaN, 4);
      return dtype == tensorflow::DT_FLOAT ? 4 : 8;
    default: {
      const size_t size = tensorflow::DataTypeSize(dtype);
      std::memset(out, kByte, size < 16 ? size : 16);
      return size <= 16 ? size : 0;
    }
  }
}

inline const char* Described(tensorflow::DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_DOUBLE:
    case tensorflow::DT_FLOAT:
    case tensorflow::DT_COMPLEX64:
    case tensorflow::DT_COMPLEX128:
      return "a signalling NaN";
    default:
      return "0xA5 bytes (a value that also happens to be written this way counts as unwritten)";
  }
}

}  // namespace output_check

// Fills `t` with the pattern (in check mode; numeric dtypes only).
inline void FillUnwritten(tensorflow::Tensor* t) {
  if (!CheckOutputs() || t == nullptr || t->dtype() == tensorflow::DT_STRING) return;
  unsigned char pattern[16];
  const size_t size = output_check::Pattern(t->dtype(), pattern);
  if (size == 0) return;
  char* data = const_cast<char*>(t->tensor_data().data());
  const int64_t n = t->NumElements();
  for (int64_t i = 0; i < n; ++i) std::memcpy(data + i * size, pattern, size);
}

// After the call: an error naming output `name` of `op` if `function` left
// any element of `t` holding the pattern.
inline absl::Status CheckWritten(const tensorflow::Tensor* t, const char* op, const char* name,
                                 const char* function) {
  if (!CheckOutputs() || t == nullptr || t->dtype() == tensorflow::DT_STRING) return absl::OkStatus();
  unsigned char pattern[16];
  const size_t size = output_check::Pattern(t->dtype(), pattern);
  if (size == 0) return absl::OkStatus();
  const char* data = t->tensor_data().data();
  const int64_t n = t->NumElements();
  int64_t unwritten = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(data + i * size, pattern, size) == 0) {
      if (first < 0) first = i;
      ++unwritten;
    }
  }
  if (unwritten == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      op, ": output '", name, "' has ", unwritten, " of ", n, " elements that ", function,
      " never wrote (the first at flat index ", first, ", in TF's row-major order): TFBRIDGE_JULIA_CHECK=1 filled "
      "the output with ", output_check::Described(t->dtype()), " before the call; write every element, in "
      "place: `", name, " .= ...` writes into the output, `", name, " = ...` only rebinds the name"));
}

}  // namespace tfjl

#endif  // TFJL_OUTPUT_CHECK_H_
