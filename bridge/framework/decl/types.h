/* Types of the TensorFlow C API, mirrored from tensorflow/c/{tf_datatype,
   tf_status,tf_buffer,tf_tensor,tf_tstring,tf_attrtype,c_api}.h for cffi.
   Opaque handles stay opaque; only structs Python reads or fills are spelled out. */

typedef enum TF_DataType {
  TF_FLOAT = 1, TF_DOUBLE = 2, TF_INT32 = 3, TF_UINT8 = 4, TF_INT16 = 5,
  TF_INT8 = 6, TF_STRING = 7, TF_COMPLEX64 = 8, TF_INT64 = 9, TF_BOOL = 10,
  TF_QINT8 = 11, TF_QUINT8 = 12, TF_QINT32 = 13, TF_BFLOAT16 = 14,
  TF_QINT16 = 15, TF_QUINT16 = 16, TF_UINT16 = 17, TF_COMPLEX128 = 18,
  TF_HALF = 19, TF_RESOURCE = 20, TF_VARIANT = 21, TF_UINT32 = 22,
  TF_UINT64 = 23, TF_FLOAT8_E5M2 = 24, TF_FLOAT8_E4M3FN = 25,
  TF_FLOAT8_E4M3FNUZ = 26, TF_FLOAT8_E4M3B11FNUZ = 27, TF_FLOAT8_E5M2FNUZ = 28,
  TF_INT4 = 29, TF_UINT4 = 30, TF_INT2 = 31, TF_UINT2 = 32, TF_FLOAT4_E2M1FN = 33
} TF_DataType;

typedef enum TF_Code {
  TF_OK = 0, TF_CANCELLED = 1, TF_UNKNOWN = 2, TF_INVALID_ARGUMENT = 3,
  TF_DEADLINE_EXCEEDED = 4, TF_NOT_FOUND = 5, TF_ALREADY_EXISTS = 6,
  TF_PERMISSION_DENIED = 7, TF_UNAUTHENTICATED = 16, TF_RESOURCE_EXHAUSTED = 8,
  TF_FAILED_PRECONDITION = 9, TF_ABORTED = 10, TF_OUT_OF_RANGE = 11,
  TF_UNIMPLEMENTED = 12, TF_INTERNAL = 13, TF_UNAVAILABLE = 14, TF_DATA_LOSS = 15
} TF_Code;

typedef enum TF_AttrType {
  TF_ATTR_STRING = 0, TF_ATTR_INT = 1, TF_ATTR_FLOAT = 2, TF_ATTR_BOOL = 3,
  TF_ATTR_TYPE = 4, TF_ATTR_SHAPE = 5, TF_ATTR_TENSOR = 6,
  TF_ATTR_PLACEHOLDER = 7, TF_ATTR_FUNC = 8
} TF_AttrType;

typedef enum TF_TString_Type {
  TF_TSTR_SMALL = 0, TF_TSTR_LARGE = 1, TF_TSTR_OFFSET = 2, TF_TSTR_VIEW = 3
} TF_TString_Type;

/* 24 bytes, 8-aligned (tsl/platform/ctstring_internal.h); only used through
   the exported TF_String* functions. */
typedef struct TF_TString { uint64_t _opaque[3]; } TF_TString;

typedef struct TSL_Status TF_Status;
typedef struct TF_Buffer {
  const void* data;
  size_t length;
  void (*data_deallocator)(void* data, size_t length);
} TF_Buffer;
typedef struct TF_Tensor TF_Tensor;
typedef struct TF_StringView { const char* data; size_t len; } TF_StringView;

typedef struct TF_SessionOptions TF_SessionOptions;
typedef struct TF_Graph TF_Graph;
typedef struct TF_OperationDescription TF_OperationDescription;
typedef struct TF_Operation TF_Operation;
typedef struct TF_Input { TF_Operation* oper; int index; } TF_Input;
typedef struct TF_Output { TF_Operation* oper; int index; } TF_Output;
typedef struct TF_Function TF_Function;
typedef struct TF_FunctionOptions TF_FunctionOptions;
typedef struct TF_AttrMetadata {
  unsigned char is_list;
  int64_t list_size;
  TF_AttrType type;
  int64_t total_size;
} TF_AttrMetadata;
typedef struct TF_ImportGraphDefOptions TF_ImportGraphDefOptions;
typedef struct TF_ImportGraphDefResults TF_ImportGraphDefResults;
typedef struct TF_WhileParams {
  const int ninputs;
  TF_Graph* const cond_graph;
  const TF_Output* const cond_inputs;
  TF_Output cond_output;
  TF_Graph* const body_graph;
  const TF_Output* const body_inputs;
  TF_Output* const body_outputs;
  const char* name;
} TF_WhileParams;
typedef struct TF_Session TF_Session;
typedef struct TF_DeprecatedSession TF_DeprecatedSession;
typedef struct TF_DeviceList TF_DeviceList;
typedef struct TF_Library TF_Library;
typedef struct TF_ApiDefMap TF_ApiDefMap;
typedef struct TF_Server TF_Server;
