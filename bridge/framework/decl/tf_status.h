/* tensorflow/c/tf_status.h: TF_Status: codes and messages. Prototypes as exported by the TF wheel. */
TF_Status* TF_NewStatus(void);
void TF_DeleteStatus(TF_Status*);
void TF_SetStatus(TF_Status* s, TF_Code code, const char* msg);
void TF_SetPayload(TF_Status* s, const char* key, const char* value);
void TF_SetStatusFromIOError(TF_Status* s, int error_code, const char* context);
TF_Code TF_GetCode(const TF_Status* s);
const char* TF_Message(const TF_Status* s);
