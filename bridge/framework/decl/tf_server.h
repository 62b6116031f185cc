/* tensorflow/c/c_api.h, "In-process TensorFlow server": TF_Server (TensorFlow's distributed runtime; gRPC). Prototypes as exported by the TF wheel's libtensorflow_cc.so.2. */
typedef struct TF_Server TF_Server;
TF_Server* TF_NewServer(const void* proto, size_t proto_len, TF_Status* status);
void TF_ServerStart(TF_Server* server, TF_Status* status);
void TF_ServerStop(TF_Server* server, TF_Status* status);
void TF_ServerJoin(TF_Server* server, TF_Status* status);
const char* TF_ServerTarget(TF_Server* server);
void TF_DeleteServer(TF_Server* server);
