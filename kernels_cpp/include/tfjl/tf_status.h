// The runtime's error kinds (contract.h) and TensorFlow's statuses: the
// table agrees with absl's codes, and each maps to the other.  Part of
// kernel.h's header-only TensorFlow glue (kernel.h includes this).
#ifndef TFJL_TF_STATUS_H_
#define TFJL_TF_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "tfjl/contract.h"

namespace tfjl {

// The error kinds of tfjl/contract.h carry absl's codes.
#define TFJL_CHECK_TF_CODE(name, value, tf_code, from_julia)                                \
  static_assert(static_cast<int>(absl::StatusCode::k##name) == tf_code,                       \
                "tfjl/contract.h: TF_Code " #name " is " #tf_code);
TFJL_ERROR_KINDS(TFJL_CHECK_TF_CODE)
#undef TFJL_CHECK_TF_CODE

// The error kind of a TF status (contract.h, ErrorKindOfTfCode).
inline int ErrorKindOf(const absl::Status& s) { return ErrorKindOfTfCode(static_cast<int>(s.code())); }

// call_julia's error -> a TF status "<op>: Julia function <fn> failed: <text>",
// its code the error kind's (contract.h: InvalidArgument, NotFound, Internal,
// ResourceExhausted; Internal for kOk or an unknown kind).
inline absl::Status ErrorStatus(const std::string& op, const char* function, int kind, const std::string& text) {
  std::string message = (op.empty() ? std::string() : op + ": ") + "Julia function " + function + " failed: " + text;
  const int code = kind != kOk ? ErrorKindTfCode(kind) : ErrorKindTfCode(kInternal);
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace tfjl

#endif  // TFJL_TF_STATUS_H_
