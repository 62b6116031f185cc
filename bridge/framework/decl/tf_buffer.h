/* tensorflow/c/tf_buffer.h: TF_Buffer: byte buffers (serialized protos). Prototypes as exported by the TF wheel. */
TF_Buffer* TF_NewBufferFromString(const void* proto, size_t proto_len);
TF_Buffer* TF_NewBuffer(void);
void TF_DeleteBuffer(TF_Buffer*);
TF_Buffer TF_GetBuffer(TF_Buffer* buffer);
