! Interfaces to the parts of TensorFlow's C API (tensorflow/c/c_api.h,
! tf_tensor.h, tf_status.h, tf_tstring.h) that tf_bridge uses.  Every
! function is called directly through ISO_C_BINDING: none of them is
! variadic or takes a struct that Fortran cannot describe, so no C shim.
module tf_bridge_c
  use, intrinsic :: iso_c_binding
  implicit none
  private :: c_ptr, c_int, c_size_t, c_char, c_int64_t, c_funptr

  ! TF_DataType values (tensorflow/c/tf_datatype.h)
  integer(c_int), parameter :: TF_FLOAT = 1, TF_DOUBLE = 2, TF_INT32 = 3, TF_STRING = 7, &
       TF_INT64 = 9, TF_BOOL = 10
  ! TF_Code values used here (tensorflow/c/tf_status.h)
  integer(c_int), parameter :: TF_OK = 0, TF_INVALID_ARGUMENT = 3, TF_NOT_FOUND = 5, &
       TF_FAILED_PRECONDITION = 9, TF_UNIMPLEMENTED = 12, TF_INTERNAL = 13

  type, bind(c) :: tf_output_c          ! TF_Output
    type(c_ptr) :: oper
    integer(c_int) :: index
  end type

  type, bind(c) :: tf_buffer_c          ! TF_Buffer
    type(c_ptr) :: data
    integer(c_size_t) :: length
    type(c_funptr) :: data_deallocator
  end type

  interface
    function TF_NewStatus() bind(c, name="TF_NewStatus")
      import :: c_ptr
      type(c_ptr) :: TF_NewStatus
    end function
    subroutine TF_DeleteStatus(s) bind(c, name="TF_DeleteStatus")
      import :: c_ptr
      type(c_ptr), value :: s
    end subroutine
    function TF_GetCode(s) bind(c, name="TF_GetCode")
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int) :: TF_GetCode
    end function
    function TF_Message(s) bind(c, name="TF_Message")
      import :: c_ptr
      type(c_ptr), value :: s
      type(c_ptr) :: TF_Message
    end function

    function TF_NewGraph() bind(c, name="TF_NewGraph")
      import :: c_ptr
      type(c_ptr) :: TF_NewGraph
    end function
    subroutine TF_DeleteGraph(g) bind(c, name="TF_DeleteGraph")
      import :: c_ptr
      type(c_ptr), value :: g
    end subroutine
    function TF_GraphOperationByName(g, name) bind(c, name="TF_GraphOperationByName")
      import :: c_ptr, c_char
      type(c_ptr), value :: g
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr) :: TF_GraphOperationByName
    end function
    function TF_OperationNumOutputs(op) bind(c, name="TF_OperationNumOutputs")
      import :: c_ptr, c_int
      type(c_ptr), value :: op
      integer(c_int) :: TF_OperationNumOutputs
    end function
    function TF_OperationOutputType(out) bind(c, name="TF_OperationOutputType")
      import :: tf_output_c, c_int
      type(tf_output_c), value :: out
      integer(c_int) :: TF_OperationOutputType
    end function
    function TF_GraphGetTensorNumDims(g, out, s) bind(c, name="TF_GraphGetTensorNumDims")
      import :: c_ptr, c_int, tf_output_c
      type(c_ptr), value :: g, s
      type(tf_output_c), value :: out
      integer(c_int) :: TF_GraphGetTensorNumDims
    end function
    subroutine TF_GraphGetTensorShape(g, out, dims, n, s) bind(c, name="TF_GraphGetTensorShape")
      import :: c_ptr, c_int, c_int64_t, tf_output_c
      type(c_ptr), value :: g, s
      type(tf_output_c), value :: out
      integer(c_int64_t) :: dims(*)
      integer(c_int), value :: n
    end subroutine

    function TF_NewBufferFromString(proto, n) bind(c, name="TF_NewBufferFromString")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: proto
      integer(c_size_t), value :: n
      type(c_ptr) :: TF_NewBufferFromString
    end function
    function TF_NewBuffer() bind(c, name="TF_NewBuffer")
      import :: c_ptr
      type(c_ptr) :: TF_NewBuffer
    end function
    subroutine TF_DeleteBuffer(b) bind(c, name="TF_DeleteBuffer")
      import :: c_ptr
      type(c_ptr), value :: b
    end subroutine
    function TF_NewImportGraphDefOptions() bind(c, name="TF_NewImportGraphDefOptions")
      import :: c_ptr
      type(c_ptr) :: TF_NewImportGraphDefOptions
    end function
    subroutine TF_DeleteImportGraphDefOptions(o) bind(c, name="TF_DeleteImportGraphDefOptions")
      import :: c_ptr
      type(c_ptr), value :: o
    end subroutine
    subroutine TF_GraphImportGraphDef(g, def, opts, s) bind(c, name="TF_GraphImportGraphDef")
      import :: c_ptr
      type(c_ptr), value :: g, def, opts, s
    end subroutine

    function TF_NewSessionOptions() bind(c, name="TF_NewSessionOptions")
      import :: c_ptr
      type(c_ptr) :: TF_NewSessionOptions
    end function
    subroutine TF_DeleteSessionOptions(o) bind(c, name="TF_DeleteSessionOptions")
      import :: c_ptr
      type(c_ptr), value :: o
    end subroutine
    subroutine TF_SetConfig(o, proto, n, s) bind(c, name="TF_SetConfig")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: o, proto, s
      integer(c_size_t), value :: n
    end subroutine
    function TF_NewSession(g, o, s) bind(c, name="TF_NewSession")
      import :: c_ptr
      type(c_ptr), value :: g, o, s
      type(c_ptr) :: TF_NewSession
    end function
    function TF_LoadSessionFromSavedModel(o, run_options, export_dir, tags, ntags, g, meta, s) &
         bind(c, name="TF_LoadSessionFromSavedModel")
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: o, run_options, g, meta, s
      character(kind=c_char), intent(in) :: export_dir(*)
      type(c_ptr), intent(in) :: tags(*)
      integer(c_int), value :: ntags
      type(c_ptr) :: TF_LoadSessionFromSavedModel
    end function
    subroutine TF_CloseSession(sess, s) bind(c, name="TF_CloseSession")
      import :: c_ptr
      type(c_ptr), value :: sess, s
    end subroutine
    subroutine TF_DeleteSession(sess, s) bind(c, name="TF_DeleteSession")
      import :: c_ptr
      type(c_ptr), value :: sess, s
    end subroutine
    subroutine TF_SessionRun(sess, run_options, inputs, input_values, ninputs, outputs, output_values, &
         noutputs, targets, ntargets, run_metadata, s) bind(c, name="TF_SessionRun")
      import :: c_ptr, c_int, tf_output_c
      type(c_ptr), value :: sess, run_options, run_metadata, s
      type(tf_output_c), intent(in) :: inputs(*), outputs(*)
      type(c_ptr), intent(in) :: input_values(*), targets(*)
      type(c_ptr), intent(inout) :: output_values(*)
      integer(c_int), value :: ninputs, noutputs, ntargets
    end subroutine

    function TF_LoadLibrary(filename, s) bind(c, name="TF_LoadLibrary")
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: filename(*)
      type(c_ptr), value :: s
      type(c_ptr) :: TF_LoadLibrary
    end function

    function TF_NewTensor(dtype, dims, ndims, data, n, deallocator, arg) bind(c, name="TF_NewTensor")
      import :: c_ptr, c_int, c_int64_t, c_size_t, c_funptr
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), intent(in) :: dims(*)
      type(c_ptr), value :: data, arg
      integer(c_size_t), value :: n
      type(c_funptr), value :: deallocator
      type(c_ptr) :: TF_NewTensor
    end function
    function TF_AllocateTensor(dtype, dims, ndims, n) bind(c, name="TF_AllocateTensor")
      import :: c_ptr, c_int, c_int64_t, c_size_t
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), intent(in) :: dims(*)
      integer(c_size_t), value :: n
      type(c_ptr) :: TF_AllocateTensor
    end function
    subroutine TF_DeleteTensor(t) bind(c, name="TF_DeleteTensor")
      import :: c_ptr
      type(c_ptr), value :: t
    end subroutine
    function TF_TensorType(t) bind(c, name="TF_TensorType")
      import :: c_ptr, c_int
      type(c_ptr), value :: t
      integer(c_int) :: TF_TensorType
    end function
    function TF_NumDims(t) bind(c, name="TF_NumDims")
      import :: c_ptr, c_int
      type(c_ptr), value :: t
      integer(c_int) :: TF_NumDims
    end function
    function TF_Dim(t, i) bind(c, name="TF_Dim")
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: t
      integer(c_int), value :: i
      integer(c_int64_t) :: TF_Dim
    end function
    function TF_TensorByteSize(t) bind(c, name="TF_TensorByteSize")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: t
      integer(c_size_t) :: TF_TensorByteSize
    end function
    function TF_TensorData(t) bind(c, name="TF_TensorData")
      import :: c_ptr
      type(c_ptr), value :: t
      type(c_ptr) :: TF_TensorData
    end function
    function TF_TensorDefaultAlignment() bind(c, name="TF_TensorDefaultAlignment")
      import :: c_size_t
      integer(c_size_t) :: TF_TensorDefaultAlignment
    end function

    subroutine TF_StringInit(t) bind(c, name="TF_StringInit")
      import :: c_ptr
      type(c_ptr), value :: t
    end subroutine
    subroutine TF_StringCopy(t, src, n) bind(c, name="TF_StringCopy")
      import :: c_ptr, c_char, c_size_t
      type(c_ptr), value :: t
      character(kind=c_char), intent(in) :: src(*)
      integer(c_size_t), value :: n
    end subroutine

    function c_strlen(s) bind(c, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function
    subroutine c_memcpy(dst, src, n) bind(c, name="memcpy")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: n
    end subroutine
  end interface
end module tf_bridge_c
