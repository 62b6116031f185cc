/* tensorflow/c/tf_tensor.h: TF_Tensor: dense tensors. Prototypes as exported by the TF wheel. */
TF_Tensor* TF_NewTensor( TF_DataType, const int64_t* dims, int num_dims, void* data, size_t len, void (*deallocator)(void* data, size_t len, void* arg), void* deallocator_arg);
size_t TF_TensorDefaultAlignment();
TF_Tensor* TF_AllocateTensor(TF_DataType, const int64_t* dims, int num_dims, size_t len);
TF_Tensor* TF_TensorMaybeMove(TF_Tensor* tensor);
void TF_DeleteTensor(TF_Tensor*);
TF_DataType TF_TensorType(const TF_Tensor*);
void TF_SetShape(TF_Tensor* tensor, const int64_t* dims, int num_dims);
int TF_NumDims(const TF_Tensor*);
int64_t TF_Dim(const TF_Tensor* tensor, int dim_index);
size_t TF_TensorByteSize(const TF_Tensor*);
void* TF_TensorData(const TF_Tensor*);
int64_t TF_TensorElementCount(const TF_Tensor* tensor);
void TF_TensorBitcastFrom(const TF_Tensor* from, TF_DataType type, TF_Tensor* to, const int64_t* new_dims, int num_new_dims, TF_Status* status);
bool TF_TensorIsAligned(const TF_Tensor*);
