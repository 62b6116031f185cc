// tfjl's dtypes (contract.h) and TensorFlow's: the table agrees with TF's
// headers, and each maps to the other.  Part of kernel.h's header-only
// TensorFlow glue; generated kernels include kernel.h, which includes this.
#ifndef TFJL_TF_DTYPE_H_
#define TFJL_TF_DTYPE_H_

#include "tensorflow/core/framework/types.h"
#include "tfjl/contract.h"

namespace tfjl {

// The table of tfjl/contract.h agrees with TensorFlow's headers.
#define TFJL_CHECK_TF_DTYPE(name, code, tf_name, tf_enum, size)                  \
  static_assert(static_cast<int>(tensorflow::tf_name) == tf_enum,                             \
                "tfjl/contract.h: tfjl::DType::" #name " is " #tf_name " = " #tf_enum);
TFJL_DTYPES(TFJL_CHECK_TF_DTYPE)
#undef TFJL_CHECK_TF_DTYPE

// The tfjl dtype of a TF dtype; false for types Julia ops do not support.
inline bool DTypeFromTF(tensorflow::DataType dt, DType* out) {
  switch (dt) {
#define TFJL_FROM_TF(name, code, tf_name, tf_enum, size) \
  case tensorflow::tf_name:                                        \
    *out = DType::name;                                            \
    return true;
    TFJL_DTYPES(TFJL_FROM_TF)
#undef TFJL_FROM_TF
    default: return false;
  }
}

// The TF dtype of a tfjl dtype (DT_INVALID for none).
inline tensorflow::DataType DTypeToTF(DType dtype) {
#define TFJL_TO_TF(name, code, tf_name, tf_enum, size) \
  if (dtype == DType::name) return tensorflow::tf_name;
  TFJL_DTYPES(TFJL_TO_TF)
#undef TFJL_TO_TF
  return tensorflow::DT_INVALID;
}

}  // namespace tfjl

#endif  // TFJL_TF_DTYPE_H_
