! The parts of TensorFlow's C API (tensorflow/c/c_api.h, tf_tensor.h,
! tf_status.h, tf_tstring.h) that tf_bridge uses, called through
! ISO_C_BINDING: none is variadic or takes a struct Fortran cannot describe,
! so there is no C shim.
!
! The library is not linked against TensorFlow: load_tensorflow opens it with
! dlopen(RTLD_LOCAL|RTLD_NOW) and binds each function to a procedure pointer
! of the same name, as bridge/framework/_lib.py does.  TensorFlow bundles an
! LLVM whose symbols clash with Julia's: linked normally, its symbols are
! global, and a Julia op starting Julia in the process segfaults in Julia's
! LLVM initialisers (measured).  The folder is TFBRIDGE_LIBTENSORFLOW when
! set; else, for the copy `pip install .` puts in the package, the tensorflow
! package beside it (found from this library's own file through dladdr: pip
! builds in an isolated environment, so no TensorFlow path known then is
! worth keeping); else the folder the cache's build was configured with.
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

  integer(c_int), parameter :: RTLD_NOW = 2       ! RTLD_LOCAL is 0
  include "tf_bridge_paths.inc"                   ! TF_LIBRARY_DIR, TF_LIBRARY_RELATIVE, written by cmake

  type, bind(c) :: dl_info_c            ! Dl_info (dlfcn.h)
    type(c_ptr) :: dli_fname, dli_fbase, dli_sname, dli_saddr
  end type

  type, bind(c) :: tf_output_c          ! TF_Output
    type(c_ptr) :: oper
    integer(c_int) :: index
  end type

  type, bind(c) :: tf_buffer_c          ! TF_Buffer
    type(c_ptr) :: data
    integer(c_size_t) :: length
    type(c_funptr) :: data_deallocator
  end type

  abstract interface
    function TF_NewStatus_t() bind(c)
      import :: c_ptr
      type(c_ptr) :: TF_NewStatus_t
    end function
    subroutine TF_DeleteStatus_t(s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: s
    end subroutine
    function TF_GetCode_t(s) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int) :: TF_GetCode_t
    end function
    function TF_Message_t(s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: s
      type(c_ptr) :: TF_Message_t
    end function
    function TF_NewGraph_t() bind(c)
      import :: c_ptr
      type(c_ptr) :: TF_NewGraph_t
    end function
    subroutine TF_DeleteGraph_t(g) bind(c)
      import :: c_ptr
      type(c_ptr), value :: g
    end subroutine
    function TF_GraphOperationByName_t(g, name) bind(c)
      import :: c_ptr, c_char
      type(c_ptr), value :: g
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr) :: TF_GraphOperationByName_t
    end function
    function TF_OperationNumOutputs_t(op) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: op
      integer(c_int) :: TF_OperationNumOutputs_t
    end function
    function TF_OperationOutputType_t(out) bind(c)
      import :: tf_output_c, c_int
      type(tf_output_c), value :: out
      integer(c_int) :: TF_OperationOutputType_t
    end function
    function TF_GraphGetTensorNumDims_t(g, out, s) bind(c)
      import :: c_ptr, c_int, tf_output_c
      type(c_ptr), value :: g, s
      type(tf_output_c), value :: out
      integer(c_int) :: TF_GraphGetTensorNumDims_t
    end function
    subroutine TF_GraphGetTensorShape_t(g, out, dims, n, s) bind(c)
      import :: c_ptr, c_int, c_int64_t, tf_output_c
      type(c_ptr), value :: g, s
      type(tf_output_c), value :: out
      integer(c_int64_t) :: dims(*)
      integer(c_int), value :: n
    end subroutine
    function TF_NewBufferFromString_t(proto, n) bind(c)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: proto
      integer(c_size_t), value :: n
      type(c_ptr) :: TF_NewBufferFromString_t
    end function
    function TF_NewBuffer_t() bind(c)
      import :: c_ptr
      type(c_ptr) :: TF_NewBuffer_t
    end function
    subroutine TF_DeleteBuffer_t(b) bind(c)
      import :: c_ptr
      type(c_ptr), value :: b
    end subroutine
    function TF_NewImportGraphDefOptions_t() bind(c)
      import :: c_ptr
      type(c_ptr) :: TF_NewImportGraphDefOptions_t
    end function
    subroutine TF_DeleteImportGraphDefOptions_t(o) bind(c)
      import :: c_ptr
      type(c_ptr), value :: o
    end subroutine
    subroutine TF_GraphImportGraphDef_t(g, def, opts, s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: g, def, opts, s
    end subroutine
    function TF_NewSessionOptions_t() bind(c)
      import :: c_ptr
      type(c_ptr) :: TF_NewSessionOptions_t
    end function
    subroutine TF_DeleteSessionOptions_t(o) bind(c)
      import :: c_ptr
      type(c_ptr), value :: o
    end subroutine
    subroutine TF_SetConfig_t(o, proto, n, s) bind(c)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: o, proto, s
      integer(c_size_t), value :: n
    end subroutine
    function TF_NewSession_t(g, o, s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: g, o, s
      type(c_ptr) :: TF_NewSession_t
    end function
    function TF_LoadSessionFromSavedModel_t(o, run_options, export_dir, tags, ntags, g, meta, s) &
         bind(c)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: o, run_options, g, meta, s
      character(kind=c_char), intent(in) :: export_dir(*)
      type(c_ptr), intent(in) :: tags(*)
      integer(c_int), value :: ntags
      type(c_ptr) :: TF_LoadSessionFromSavedModel_t
    end function
    subroutine TF_CloseSession_t(sess, s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: sess, s
    end subroutine
    subroutine TF_DeleteSession_t(sess, s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: sess, s
    end subroutine
    subroutine TF_SessionRun_t(sess, run_options, inputs, input_values, ninputs, outputs, output_values, &
         noutputs, targets, ntargets, run_metadata, s) bind(c)
      import :: c_ptr, c_int, tf_output_c
      type(c_ptr), value :: sess, run_options, run_metadata, s
      type(tf_output_c), intent(in) :: inputs(*), outputs(*)
      type(c_ptr), intent(in) :: input_values(*), targets(*)
      type(c_ptr), intent(inout) :: output_values(*)
      integer(c_int), value :: ninputs, noutputs, ntargets
    end subroutine
    function TF_LoadLibrary_t(filename, s) bind(c)
      import :: c_ptr, c_char
      character(kind=c_char), intent(in) :: filename(*)
      type(c_ptr), value :: s
      type(c_ptr) :: TF_LoadLibrary_t
    end function
    function TF_NewTensor_t(dtype, dims, ndims, data, n, deallocator, arg) bind(c)
      import :: c_ptr, c_int, c_int64_t, c_size_t, c_funptr
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), intent(in) :: dims(*)
      type(c_ptr), value :: data, arg
      integer(c_size_t), value :: n
      type(c_funptr), value :: deallocator
      type(c_ptr) :: TF_NewTensor_t
    end function
    function TF_AllocateTensor_t(dtype, dims, ndims, n) bind(c)
      import :: c_ptr, c_int, c_int64_t, c_size_t
      integer(c_int), value :: dtype, ndims
      integer(c_int64_t), intent(in) :: dims(*)
      integer(c_size_t), value :: n
      type(c_ptr) :: TF_AllocateTensor_t
    end function
    subroutine TF_DeleteTensor_t(t) bind(c)
      import :: c_ptr
      type(c_ptr), value :: t
    end subroutine
    function TF_TensorType_t(t) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: t
      integer(c_int) :: TF_TensorType_t
    end function
    function TF_NumDims_t(t) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: t
      integer(c_int) :: TF_NumDims_t
    end function
    function TF_Dim_t(t, i) bind(c)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: t
      integer(c_int), value :: i
      integer(c_int64_t) :: TF_Dim_t
    end function
    function TF_TensorByteSize_t(t) bind(c)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: t
      integer(c_size_t) :: TF_TensorByteSize_t
    end function
    function TF_TensorData_t(t) bind(c)
      import :: c_ptr
      type(c_ptr), value :: t
      type(c_ptr) :: TF_TensorData_t
    end function
    function TF_TensorDefaultAlignment_t() bind(c)
      import :: c_size_t
      integer(c_size_t) :: TF_TensorDefaultAlignment_t
    end function
    subroutine TF_StringInit_t(t) bind(c)
      import :: c_ptr
      type(c_ptr), value :: t
    end subroutine
    subroutine TF_StringCopy_t(t, src, n) bind(c)
      import :: c_ptr, c_char, c_size_t
      type(c_ptr), value :: t
      character(kind=c_char), intent(in) :: src(*)
      integer(c_size_t), value :: n
    end subroutine
    ! Graph walking and building: the object graph restore (tf_bridge_objects).
    function TF_GraphNextOperation_t(g, pos) bind(c)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: g
      integer(c_size_t), intent(inout) :: pos
      type(c_ptr) :: TF_GraphNextOperation_t
    end function
    function TF_OperationText_t(op) bind(c)      ! TF_OperationName, TF_OperationOpType
      import :: c_ptr
      type(c_ptr), value :: op
      type(c_ptr) :: TF_OperationText_t
    end function
    function TF_OperationNumInputs_t(op) bind(c)
      import :: c_ptr, c_int
      type(c_ptr), value :: op
      integer(c_int) :: TF_OperationNumInputs_t
    end function
    function TF_OperationInput_t(input) bind(c)  ! TF_Input has TF_Output's layout
      import :: tf_output_c
      type(tf_output_c), value :: input
      type(tf_output_c) :: TF_OperationInput_t
    end function
    subroutine TF_OperationGetAttrValueProto_t(op, name, buf, s) bind(c)
      import :: c_ptr, c_char
      type(c_ptr), value :: op, buf, s
      character(kind=c_char), intent(in) :: name(*)
    end subroutine
    function TF_NewOperation_t(g, op_type, name) bind(c)
      import :: c_ptr, c_char
      type(c_ptr), value :: g
      character(kind=c_char), intent(in) :: op_type(*), name(*)
      type(c_ptr) :: TF_NewOperation_t
    end function
    subroutine TF_AddInput_t(desc, input) bind(c)
      import :: c_ptr, tf_output_c
      type(c_ptr), value :: desc
      type(tf_output_c), value :: input
    end subroutine
    subroutine TF_SetAttrType_t(desc, name, dtype) bind(c)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: desc
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
    end subroutine
    subroutine TF_SetAttrTypeList_t(desc, name, dtypes, n) bind(c)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: desc
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), intent(in) :: dtypes(*)
      integer(c_int), value :: n
    end subroutine
    subroutine TF_SetAttrShape_t(desc, name, dims, n) bind(c)
      import :: c_ptr, c_char, c_int, c_int64_t
      type(c_ptr), value :: desc
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), intent(in) :: dims(*)
      integer(c_int), value :: n
    end subroutine
    subroutine TF_SetAttrTensor_t(desc, name, t, s) bind(c)
      import :: c_ptr, c_char
      type(c_ptr), value :: desc, t, s
      character(kind=c_char), intent(in) :: name(*)
    end subroutine
    function TF_FinishOperation_t(desc, s) bind(c)
      import :: c_ptr
      type(c_ptr), value :: desc, s
      type(c_ptr) :: TF_FinishOperation_t
    end function
    function TF_StringGetDataPointer_t(t) bind(c)
      import :: c_ptr
      type(c_ptr), value :: t
      type(c_ptr) :: TF_StringGetDataPointer_t
    end function
    function TF_StringGetSize_t(t) bind(c)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: t
      integer(c_size_t) :: TF_StringGetSize_t
    end function
  end interface

  procedure(TF_NewStatus_t), pointer :: TF_NewStatus => null()
  procedure(TF_DeleteStatus_t), pointer :: TF_DeleteStatus => null()
  procedure(TF_GetCode_t), pointer :: TF_GetCode => null()
  procedure(TF_Message_t), pointer :: TF_Message => null()
  procedure(TF_NewGraph_t), pointer :: TF_NewGraph => null()
  procedure(TF_DeleteGraph_t), pointer :: TF_DeleteGraph => null()
  procedure(TF_GraphOperationByName_t), pointer :: TF_GraphOperationByName => null()
  procedure(TF_OperationNumOutputs_t), pointer :: TF_OperationNumOutputs => null()
  procedure(TF_OperationOutputType_t), pointer :: TF_OperationOutputType => null()
  procedure(TF_GraphGetTensorNumDims_t), pointer :: TF_GraphGetTensorNumDims => null()
  procedure(TF_GraphGetTensorShape_t), pointer :: TF_GraphGetTensorShape => null()
  procedure(TF_NewBufferFromString_t), pointer :: TF_NewBufferFromString => null()
  procedure(TF_NewBuffer_t), pointer :: TF_NewBuffer => null()
  procedure(TF_DeleteBuffer_t), pointer :: TF_DeleteBuffer => null()
  procedure(TF_NewImportGraphDefOptions_t), pointer :: TF_NewImportGraphDefOptions => null()
  procedure(TF_DeleteImportGraphDefOptions_t), pointer :: TF_DeleteImportGraphDefOptions => null()
  procedure(TF_GraphImportGraphDef_t), pointer :: TF_GraphImportGraphDef => null()
  procedure(TF_NewSessionOptions_t), pointer :: TF_NewSessionOptions => null()
  procedure(TF_DeleteSessionOptions_t), pointer :: TF_DeleteSessionOptions => null()
  procedure(TF_SetConfig_t), pointer :: TF_SetConfig => null()
  procedure(TF_NewSession_t), pointer :: TF_NewSession => null()
  procedure(TF_LoadSessionFromSavedModel_t), pointer :: TF_LoadSessionFromSavedModel => null()
  procedure(TF_CloseSession_t), pointer :: TF_CloseSession => null()
  procedure(TF_DeleteSession_t), pointer :: TF_DeleteSession => null()
  procedure(TF_SessionRun_t), pointer :: TF_SessionRun => null()
  procedure(TF_LoadLibrary_t), pointer :: TF_LoadLibrary => null()
  procedure(TF_NewTensor_t), pointer :: TF_NewTensor => null()
  procedure(TF_AllocateTensor_t), pointer :: TF_AllocateTensor => null()
  procedure(TF_DeleteTensor_t), pointer :: TF_DeleteTensor => null()
  procedure(TF_TensorType_t), pointer :: TF_TensorType => null()
  procedure(TF_NumDims_t), pointer :: TF_NumDims => null()
  procedure(TF_Dim_t), pointer :: TF_Dim => null()
  procedure(TF_TensorByteSize_t), pointer :: TF_TensorByteSize => null()
  procedure(TF_TensorData_t), pointer :: TF_TensorData => null()
  procedure(TF_TensorDefaultAlignment_t), pointer :: TF_TensorDefaultAlignment => null()
  procedure(TF_StringInit_t), pointer :: TF_StringInit => null()
  procedure(TF_StringCopy_t), pointer :: TF_StringCopy => null()
  procedure(TF_GraphNextOperation_t), pointer :: TF_GraphNextOperation => null()
  procedure(TF_OperationText_t), pointer :: TF_OperationName => null()
  procedure(TF_OperationText_t), pointer :: TF_OperationOpType => null()
  procedure(TF_OperationNumInputs_t), pointer :: TF_OperationNumInputs => null()
  procedure(TF_OperationInput_t), pointer :: TF_OperationInput => null()
  procedure(TF_OperationGetAttrValueProto_t), pointer :: TF_OperationGetAttrValueProto => null()
  procedure(TF_NewOperation_t), pointer :: TF_NewOperation => null()
  procedure(TF_AddInput_t), pointer :: TF_AddInput => null()
  procedure(TF_SetAttrType_t), pointer :: TF_SetAttrType => null()
  procedure(TF_SetAttrTypeList_t), pointer :: TF_SetAttrTypeList => null()
  procedure(TF_SetAttrShape_t), pointer :: TF_SetAttrShape => null()
  procedure(TF_SetAttrTensor_t), pointer :: TF_SetAttrTensor => null()
  procedure(TF_FinishOperation_t), pointer :: TF_FinishOperation => null()
  procedure(TF_StringGetDataPointer_t), pointer :: TF_StringGetDataPointer => null()
  procedure(TF_StringGetSize_t), pointer :: TF_StringGetSize => null()

  interface
    function c_dlopen(file, mode) bind(c, name="dlopen")   ! (not PRIVATE: gfortran warns on bound names)
      import :: c_ptr, c_char, c_int
      character(kind=c_char), intent(in) :: file(*)
      integer(c_int), value :: mode
      type(c_ptr) :: c_dlopen
    end function
    function c_dlsym(handle, name) bind(c, name="dlsym")
      import :: c_ptr, c_char, c_funptr
      type(c_ptr), value :: handle
      character(kind=c_char), intent(in) :: name(*)
      type(c_funptr) :: c_dlsym
    end function
    function c_dladdr(addr, info) bind(c, name="dladdr")
      import :: c_ptr, c_int, dl_info_c
      type(c_ptr), value :: addr
      type(dl_info_c), intent(out) :: info
      integer(c_int) :: c_dladdr
    end function
    function c_dlerror() bind(c, name="dlerror")
      import :: c_ptr
      type(c_ptr) :: c_dlerror
    end function
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

  logical, private, save :: loaded = .false.
  type(c_ptr), private, save :: handle = c_null_ptr
  character(len=:), allocatable, private, save :: missing
  integer(c_int), target, private, save :: anchor = 0   ! an address inside this library, for dladdr

contains

  ! Opens TensorFlow's C API (once) and binds the procedure pointers; on
  ! failure, message says which file or symbol.  Call it before any TF_*.
  subroutine load_tensorflow(ok, message)
    logical, intent(out) :: ok
    character(len=:), allocatable, intent(out) :: message
    character(len=4096) :: folder
    character(len=:), allocatable :: tried, found
    integer :: length, status
    message = ""
    ok = loaded
    if (loaded) return
    found = ""
    call get_environment_variable("TFBRIDGE_LIBTENSORFLOW", folder, length, status)
    if (status == 0 .and. length > 0) then     ! named by the user: that folder only
      if (.not. open_tensorflow(trim(folder), message)) then
        message = message // new_line("a") // "  (TFBRIDGE_LIBTENSORFLOW names this folder: set it to the one " &
             // "holding libtensorflow_framework.so.2, or unset it)"
        return
      end if
      found = trim(folder)
    else
      tried = ""
      if (len(TF_LIBRARY_RELATIVE) > 0) call try(library_dir(), TF_LIBRARY_RELATIVE)
      if (len(found) == 0 .and. len(TF_LIBRARY_DIR) > 0) call try(TF_LIBRARY_DIR, "")
      if (len(found) == 0) then
        message = "tf_bridge: cannot find TensorFlow's C API; tried:" // tried // new_line("a") &
             // "  set TFBRIDGE_LIBTENSORFLOW to the folder holding libtensorflow_framework.so.2 " &
             // "(the tensorflow package folder in site-packages)"
        return
      end if
    end if
    missing = ""
    call c_f_procpointer(symbol("TF_NewStatus"), TF_NewStatus)
    call c_f_procpointer(symbol("TF_DeleteStatus"), TF_DeleteStatus)
    call c_f_procpointer(symbol("TF_GetCode"), TF_GetCode)
    call c_f_procpointer(symbol("TF_Message"), TF_Message)
    call c_f_procpointer(symbol("TF_NewGraph"), TF_NewGraph)
    call c_f_procpointer(symbol("TF_DeleteGraph"), TF_DeleteGraph)
    call c_f_procpointer(symbol("TF_GraphOperationByName"), TF_GraphOperationByName)
    call c_f_procpointer(symbol("TF_OperationNumOutputs"), TF_OperationNumOutputs)
    call c_f_procpointer(symbol("TF_OperationOutputType"), TF_OperationOutputType)
    call c_f_procpointer(symbol("TF_GraphGetTensorNumDims"), TF_GraphGetTensorNumDims)
    call c_f_procpointer(symbol("TF_GraphGetTensorShape"), TF_GraphGetTensorShape)
    call c_f_procpointer(symbol("TF_NewBufferFromString"), TF_NewBufferFromString)
    call c_f_procpointer(symbol("TF_NewBuffer"), TF_NewBuffer)
    call c_f_procpointer(symbol("TF_DeleteBuffer"), TF_DeleteBuffer)
    call c_f_procpointer(symbol("TF_NewImportGraphDefOptions"), TF_NewImportGraphDefOptions)
    call c_f_procpointer(symbol("TF_DeleteImportGraphDefOptions"), TF_DeleteImportGraphDefOptions)
    call c_f_procpointer(symbol("TF_GraphImportGraphDef"), TF_GraphImportGraphDef)
    call c_f_procpointer(symbol("TF_NewSessionOptions"), TF_NewSessionOptions)
    call c_f_procpointer(symbol("TF_DeleteSessionOptions"), TF_DeleteSessionOptions)
    call c_f_procpointer(symbol("TF_SetConfig"), TF_SetConfig)
    call c_f_procpointer(symbol("TF_NewSession"), TF_NewSession)
    call c_f_procpointer(symbol("TF_LoadSessionFromSavedModel"), TF_LoadSessionFromSavedModel)
    call c_f_procpointer(symbol("TF_CloseSession"), TF_CloseSession)
    call c_f_procpointer(symbol("TF_DeleteSession"), TF_DeleteSession)
    call c_f_procpointer(symbol("TF_SessionRun"), TF_SessionRun)
    call c_f_procpointer(symbol("TF_LoadLibrary"), TF_LoadLibrary)
    call c_f_procpointer(symbol("TF_NewTensor"), TF_NewTensor)
    call c_f_procpointer(symbol("TF_AllocateTensor"), TF_AllocateTensor)
    call c_f_procpointer(symbol("TF_DeleteTensor"), TF_DeleteTensor)
    call c_f_procpointer(symbol("TF_TensorType"), TF_TensorType)
    call c_f_procpointer(symbol("TF_NumDims"), TF_NumDims)
    call c_f_procpointer(symbol("TF_Dim"), TF_Dim)
    call c_f_procpointer(symbol("TF_TensorByteSize"), TF_TensorByteSize)
    call c_f_procpointer(symbol("TF_TensorData"), TF_TensorData)
    call c_f_procpointer(symbol("TF_TensorDefaultAlignment"), TF_TensorDefaultAlignment)
    call c_f_procpointer(symbol("TF_StringInit"), TF_StringInit)
    call c_f_procpointer(symbol("TF_StringCopy"), TF_StringCopy)
    call c_f_procpointer(symbol("TF_GraphNextOperation"), TF_GraphNextOperation)
    call c_f_procpointer(symbol("TF_OperationName"), TF_OperationName)
    call c_f_procpointer(symbol("TF_OperationOpType"), TF_OperationOpType)
    call c_f_procpointer(symbol("TF_OperationNumInputs"), TF_OperationNumInputs)
    call c_f_procpointer(symbol("TF_OperationInput"), TF_OperationInput)
    call c_f_procpointer(symbol("TF_OperationGetAttrValueProto"), TF_OperationGetAttrValueProto)
    call c_f_procpointer(symbol("TF_NewOperation"), TF_NewOperation)
    call c_f_procpointer(symbol("TF_AddInput"), TF_AddInput)
    call c_f_procpointer(symbol("TF_SetAttrType"), TF_SetAttrType)
    call c_f_procpointer(symbol("TF_SetAttrTypeList"), TF_SetAttrTypeList)
    call c_f_procpointer(symbol("TF_SetAttrShape"), TF_SetAttrShape)
    call c_f_procpointer(symbol("TF_SetAttrTensor"), TF_SetAttrTensor)
    call c_f_procpointer(symbol("TF_FinishOperation"), TF_FinishOperation)
    call c_f_procpointer(symbol("TF_StringGetDataPointer"), TF_StringGetDataPointer)
    call c_f_procpointer(symbol("TF_StringGetSize"), TF_StringGetSize)
    if (len(missing) > 0) then
      message = "tf_bridge: TensorFlow's C API in " // found // " lacks" // missing
      return
    end if
    loaded = .true.
    ok = .true.
  contains
    ! Opens TensorFlow from base/relative (base alone when relative is ""), noting a failure in tried.
    subroutine try(base, relative)
      character(*), intent(in) :: base, relative
      character(len=:), allocatable :: candidate, why
      if (len(base) == 0) then
        tried = tried // new_line("a") // "  beside this library: dladdr could not name its file"
        return
      end if
      candidate = base
      if (len(relative) > 0) candidate = base // "/" // relative
      if (open_tensorflow(candidate, why)) then
        found = candidate
      else
        tried = tried // new_line("a") // "  " // why
      end if
    end subroutine
  end subroutine

  ! Base.include(Main, julia_file) through the Julia runtime a Julia op
  ! library links (tfjl_include in kernels_cpp/include/tfjl/capi.h), which
  ! starts Julia on first use.  library: the op library, loaded already.
  subroutine julia_include(library, julia_file, code, message)
    character(*), intent(in) :: library, julia_file
    integer, intent(out) :: code
    character(len=:), allocatable, intent(out) :: message
    abstract interface
      function include_t(path, err) bind(c)
        import :: c_char, c_ptr, c_int
        character(kind=c_char), intent(in) :: path(*)
        type(c_ptr), intent(out) :: err
        integer(c_int) :: include_t
      end function
      subroutine free_t(p) bind(c)
        import :: c_ptr
        type(c_ptr), value :: p
      end subroutine
    end interface
    procedure(include_t), pointer :: include_fn
    procedure(free_t), pointer :: free_fn
    type(c_ptr) :: lib, err
    type(c_funptr) :: fn, fr
    integer(c_int), parameter :: RTLD_NOLOAD = 4
    code = 0
    message = ""
    lib = c_dlopen(trim(library) // c_null_char, ior(RTLD_NOW, RTLD_NOLOAD))
    if (.not. c_associated(lib)) then
      code = 9
      message = "the op library " // trim(library) // " is not loaded: " // dl_message()
      return
    end if
    fn = c_dlsym(lib, "tfjl_include" // c_null_char)
    fr = c_dlsym(lib, "tfjl_free" // c_null_char)
    if (.not. (c_associated(fn) .and. c_associated(fr))) then
      code = 9
      message = trim(library) // " is not a Julia op library (no tfjl_include in it or its dependencies)"
      return
    end if
    call c_f_procpointer(fn, include_fn)
    call c_f_procpointer(fr, free_fn)
    code = include_fn(trim(julia_file) // c_null_char, err)
    if (code /= 0) then
      message = c_text(err)
      call free_fn(err)
    end if
  end subroutine

  ! Opens libtensorflow_framework.so.2 and the C API library from folder;
  ! false, with message naming the file and dlerror, when either fails.
  logical function open_tensorflow(folder, message) result(ok)
    character(*), intent(in) :: folder
    character(len=:), allocatable, intent(out) :: message
    type(c_ptr) :: framework
    ok = .false.
    message = ""
    framework = c_dlopen(folder // "/libtensorflow_framework.so.2" // c_null_char, RTLD_NOW)
    if (.not. c_associated(framework)) then
      message = "tf_bridge: cannot load TensorFlow's libtensorflow_framework.so.2 from " // folder &
           // ": " // dl_message()
      return
    end if
    handle = c_dlopen(folder // "/libtensorflow_cc.so.2" // c_null_char, RTLD_NOW)
    if (.not. c_associated(handle)) handle = c_dlopen(folder // "/libtensorflow.so.2" // c_null_char, RTLD_NOW)
    if (.not. c_associated(handle)) then
      message = "tf_bridge: cannot load TensorFlow's C API (libtensorflow_cc.so.2 or libtensorflow.so.2) from " &
           // folder // ": " // dl_message()
      return
    end if
    ok = .true.
  end function

  ! The folder of this library's file, or "" when dladdr cannot say.
  function library_dir() result(dir)
    character(len=:), allocatable :: dir
    character(len=:), allocatable :: path
    type(dl_info_c) :: info
    integer :: slash
    dir = ""
    if (c_dladdr(c_loc(anchor), info) == 0) return
    path = c_text(info%dli_fname)
    slash = index(path, "/", back=.true.)
    if (slash > 1) dir = path(:slash - 1)
    if (slash == 0 .and. len(path) > 0) dir = "."
  end function

  function c_text(p) result(text)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      text = ""
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: text)
    do i = 1, n
      text(i:i) = chars(i)
    end do
  end function

  type(c_funptr) function symbol(name)
    character(*), intent(in) :: name
    symbol = c_dlsym(handle, name // c_null_char)
    if (.not. c_associated(symbol)) missing = missing // " " // name
  end function

  function dl_message() result(text)
    character(len=:), allocatable :: text
    text = c_text(c_dlerror())
  end function
end module tf_bridge_c
