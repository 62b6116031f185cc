/* tensorflow/c/tf_tstring.h: TF_TString: the elements of string tensors. Prototypes as exported by the TF wheel. */
void TF_StringInit(TF_TString *t);
void TF_StringCopy(TF_TString *dst, const char *src, size_t size);
void TF_StringAssignView(TF_TString *dst, const char *src, size_t size);
const char *TF_StringGetDataPointer( const TF_TString *tstr);
TF_TString_Type TF_StringGetType(const TF_TString *str);
size_t TF_StringGetSize(const TF_TString *tstr);
size_t TF_StringGetCapacity(const TF_TString *str);
void TF_StringDealloc(TF_TString *tstr);
