! tf_bridge's types and everything that does not depend on an array's type
! and rank: the status, tensors as TensorFlow holds them, models (a
! SavedModel or a GraphDef with its session) and the byte-level copies that
! the typed procedures of tf_bridge_arrays call.
!
! Order of dimensions: TensorFlow is row-major, Fortran column-major.  The
! same memory read with the dimensions reversed is the same array, so a
! Fortran array of shape (n1,...,nk) is, without a copy, a TF tensor of shape
! [nk,...,n1] (the default).  transpose=.true. copies instead, into a TF
! tensor of shape [n1,...,nk] holding the same elements at the same indices.
module tf_bridge_core
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  use tf_bridge_pb
  use tf_bridge_objects, only: restore_objects
  implicit none
  private
  public :: tf_status, tf_tensor, tf_model, tf_signature, tf_tensor_info, tf_saver_def
  public :: tf_load_library, tf_load_julia_op, tf_load_saved_model, tf_load_graph_def, tf_dtype_name
  public :: TF_FLOAT, TF_DOUBLE, TF_INT32, TF_INT64, TF_BOOL, TF_STRING, TF_OK, &
       TF_INVALID_ARGUMENT, TF_NOT_FOUND, TF_FAILED_PRECONDITION
  public :: set_status, make_tensor, read_tensor, tensor_view, alloc_tensor, shape_text

  type :: tf_status
    integer :: code = TF_OK                           ! TF_Code: 0 is OK
    character(len=:), allocatable :: message
  contains
    procedure :: ok => status_ok
  end type

  ! A tensor owned by TensorFlow (or, made zero-copy, a view of a Fortran
  ! array).  Copying the derived type copies the handle, not the tensor:
  ! call delete once per tensor.
  type :: tf_tensor
    type(c_ptr) :: handle = c_null_ptr
  contains
    procedure :: delete => tensor_delete
    procedure :: dtype => tensor_dtype
    procedure :: rank => tensor_rank
    procedure :: shape => tensor_shape                ! TensorFlow's order
    procedure :: data => tensor_data                  ! TensorFlow's buffer
  end type

  type :: tf_model
    type(c_ptr) :: graph = c_null_ptr, session = c_null_ptr
    character(len=:), allocatable :: path
    type(tf_signature), allocatable :: signatures(:)
    type(tf_saver_def) :: saver
    integer :: objects_restored = 0                   ! variables only the object graph restored (TF2, Keras 3)
  contains
    procedure :: run => model_run
    procedure :: run_tensors => model_run_tensors
    procedure :: signature_index => model_signature_index
    procedure :: save_checkpoint => model_save_checkpoint
    procedure :: restore_checkpoint => model_restore_checkpoint
    procedure :: close => model_close
  end type

contains

  logical function status_ok(self)
    class(tf_status), intent(in) :: self
    status_ok = self%code == TF_OK
  end function

  subroutine set_status(st, code, message)
    type(tf_status), intent(inout) :: st
    integer, intent(in) :: code
    character(*), intent(in) :: message
    st%code = code
    st%message = message
  end subroutine

  function c_string(s) result(c)
    character(*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function

  function f_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function

  ! Loads TensorFlow's C API on first use (tf_bridge_c); .false. with st set when it cannot.
  logical function ensure_tf(st) result(ok)
    type(tf_status), intent(inout) :: st
    character(len=:), allocatable :: message
    call load_tensorflow(ok, message)
    if (.not. ok) call set_status(st, TF_FAILED_PRECONDITION, message)
  end function

  ! st <- the TF_Status, its message prefixed by what was being done; true when it is OK.
  logical function take_status(st, s, context) result(ok)
    type(tf_status), intent(inout) :: st
    type(c_ptr), intent(in) :: s
    character(*), intent(in) :: context
    ok = TF_GetCode(s) == TF_OK
    if (ok) then
      st%code = TF_OK
      if (.not. allocated(st%message)) st%message = ""
    else
      call set_status(st, int(TF_GetCode(s)), context // ": " // f_string(TF_Message(s)))
    end if
  end function

  function tf_dtype_name(dtype) result(name)
    integer, intent(in) :: dtype
    character(len=:), allocatable :: name
    select case (dtype)
    case (TF_FLOAT); name = "float32 (real(c_float))"
    case (TF_DOUBLE); name = "float64 (real(c_double))"
    case (TF_INT32); name = "int32 (integer(c_int32_t))"
    case (TF_INT64); name = "int64 (integer(c_int64_t))"
    case (TF_BOOL); name = "bool (logical)"
    case (TF_STRING); name = "string"
    case default
      name = "TF_DataType " // itoa(int(dtype, int64))
    end select
  end function

  function itoa(i) result(s)
    integer(int64), intent(in) :: i
    character(len=:), allocatable :: s
    character(len=24) :: buf
    write(buf, '(i0)') i
    s = trim(buf)
  end function

  function shape_text(dims) result(s)
    integer(int64), intent(in) :: dims(:)
    character(len=:), allocatable :: s
    integer :: i
    s = "["
    do i = 1, size(dims)
      if (i > 1) s = s // ","
      if (dims(i) < 0) then
        s = s // "?"
      else
        s = s // itoa(dims(i))
      end if
    end do
    s = s // "]"
  end function

  ! --- tensors ------------------------------------------------------------------

  subroutine tensor_delete(self)
    class(tf_tensor), intent(inout) :: self
    if (c_associated(self%handle)) call TF_DeleteTensor(self%handle)
    self%handle = c_null_ptr
  end subroutine

  integer function tensor_dtype(self)
    class(tf_tensor), intent(in) :: self
    tensor_dtype = 0
    if (c_associated(self%handle)) tensor_dtype = TF_TensorType(self%handle)
  end function

  integer function tensor_rank(self)
    class(tf_tensor), intent(in) :: self
    tensor_rank = -1
    if (c_associated(self%handle)) tensor_rank = TF_NumDims(self%handle)
  end function

  function tensor_shape(self) result(dims)
    class(tf_tensor), intent(in) :: self
    integer(int64), allocatable :: dims(:)
    integer :: i
    allocate(dims(max(0, self%rank())))
    do i = 1, size(dims)
      dims(i) = TF_Dim(self%handle, i - 1)
    end do
  end function

  type(c_ptr) function tensor_data(self)
    class(tf_tensor), intent(in) :: self
    tensor_data = c_null_ptr
    if (c_associated(self%handle)) tensor_data = TF_TensorData(self%handle)
  end function

  ! A zero-copy tensor does not own its memory: the Fortran array does.
  subroutine keep_fortran_memory(data, n, arg) bind(c)
    type(c_ptr), value :: data, arg
    integer(c_size_t), value :: n
  end subroutine

  ! Element k (0-based, column-major over fshape) <-> its row-major offset.
  subroutine permute_copy(src, dst, fshape, elsize, to_row_major)
    type(c_ptr), intent(in) :: src, dst
    integer(int64), intent(in) :: fshape(:)
    integer(c_size_t), intent(in) :: elsize
    logical, intent(in) :: to_row_major
    integer(c_int8_t), pointer :: s(:), d(:)
    integer(int64) :: k, n, rest, off, idx(size(fshape)), e
    integer :: r
    n = product(fshape)
    e = int(elsize, int64)
    call c_f_pointer(src, s, [n * e])
    call c_f_pointer(dst, d, [n * e])
    do k = 0, n - 1
      rest = k
      do r = 1, size(fshape)
        idx(r) = mod(rest, fshape(r))
        rest = rest / fshape(r)
      end do
      off = 0
      do r = 1, size(fshape)
        off = off * fshape(r) + idx(r)
      end do
      if (to_row_major) then
        d(off * e + 1:off * e + e) = s(k * e + 1:k * e + e)
      else
        d(k * e + 1:k * e + e) = s(off * e + 1:off * e + e)
      end if
    end do
  end subroutine

  function tf_dims(fshape, transpose) result(dims)
    integer(int64), intent(in) :: fshape(:)
    logical, intent(in) :: transpose
    integer(c_int64_t) :: dims(max(1, size(fshape)))
    integer :: i, r
    r = size(fshape)
    dims = 0
    do i = 1, r
      if (transpose) then
        dims(i) = fshape(i)
      else
        dims(i) = fshape(r + 1 - i)
      end if
    end do
  end function

  ! The tensor of a Fortran array at ptr: zero-copy unless copy or transpose.
  subroutine make_tensor(t, dtype, ptr, fshape, elsize, transpose, copy, st)
    type(tf_tensor), intent(inout) :: t
    integer, intent(in) :: dtype
    type(c_ptr), intent(in) :: ptr
    integer(int64), intent(in) :: fshape(:)
    integer(c_size_t), intent(in) :: elsize
    logical, intent(in) :: transpose, copy
    type(tf_status), intent(out) :: st
    integer(c_int64_t) :: dims(max(1, size(fshape)))
    integer(c_size_t) :: nbytes
    call t%delete()
    st%message = ""
    if (.not. ensure_tf(st)) return
    dims = tf_dims(fshape, transpose)
    nbytes = int(product(fshape), c_size_t) * elsize
    if (.not. (transpose .or. copy) .and. nbytes > 0) then
      t%handle = TF_NewTensor(int(dtype, c_int), dims, int(size(fshape), c_int), ptr, nbytes, &
           c_funloc(keep_fortran_memory), c_null_ptr)
    else
      t%handle = TF_AllocateTensor(int(dtype, c_int), dims, int(size(fshape), c_int), nbytes)
      if (nbytes > 0 .and. c_associated(t%handle)) then
        if (transpose .and. size(fshape) > 1) then
          call permute_copy(ptr, TF_TensorData(t%handle), fshape, elsize, .true.)
        else
          call c_memcpy(TF_TensorData(t%handle), ptr, nbytes)
        end if
      end if
    end if
    if (.not. c_associated(t%handle)) call set_status(st, TF_INTERNAL, &
         "tf_tensor_from: TensorFlow could not make a " // tf_dtype_name(dtype) // " tensor of shape " &
         // shape_text(int(dims(1:size(fshape)), int64)))
  end subroutine

  ! Checks that t has the dtype and the shape of a Fortran array of shape fshape.
  logical function check_tensor(t, dtype, fshape, transpose, who, st) result(ok)
    type(tf_tensor), intent(in) :: t
    integer, intent(in) :: dtype
    integer(int64), intent(in) :: fshape(:)
    logical, intent(in) :: transpose
    character(*), intent(in) :: who
    type(tf_status), intent(inout) :: st
    integer(int64), allocatable :: have(:)
    integer(c_int64_t) :: want(max(1, size(fshape)))
    ok = .false.
    if (.not. c_associated(t%handle)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the tensor is empty (never made, or deleted)")
      return
    end if
    if (t%dtype() /= dtype) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the tensor is " // tf_dtype_name(t%dtype()) &
           // " but the Fortran array is " // tf_dtype_name(dtype))
      return
    end if
    have = t%shape()
    want = tf_dims(fshape, transpose)
    if (size(have) /= size(fshape)) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the tensor has rank " // itoa(size(have, kind=int64)) &
           // " (shape " // shape_text(have) // ") but the Fortran array has rank " // itoa(size(fshape, kind=int64)))
      return
    end if
    if (any(have /= want(1:size(fshape)))) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the tensor's shape is " // shape_text(have) &
           // " (TensorFlow's order) but the Fortran array's shape " // shape_text(fshape) // " means " &
           // shape_text(int(want(1:size(fshape)), int64)) // trim(merge(" (transpose=.true.)           ", &
           " (reversed: transpose=.false.)", transpose)))
      return
    end if
    ok = .true.
  end function

  ! Copies the tensor into the Fortran array at ptr (shape fshape).
  subroutine read_tensor(t, dtype, ptr, fshape, elsize, transpose, st)
    type(tf_tensor), intent(in) :: t
    integer, intent(in) :: dtype
    type(c_ptr), intent(in) :: ptr
    integer(int64), intent(in) :: fshape(:)
    integer(c_size_t), intent(in) :: elsize
    logical, intent(in) :: transpose
    type(tf_status), intent(out) :: st
    integer(c_size_t) :: nbytes
    st%message = ""
    if (.not. check_tensor(t, dtype, fshape, transpose, "tf_to_array", st)) return
    nbytes = int(product(fshape), c_size_t) * elsize
    if (nbytes == 0) return
    if (transpose .and. size(fshape) > 1) then
      call permute_copy(TF_TensorData(t%handle), ptr, fshape, elsize, .false.)
    else
      call c_memcpy(ptr, TF_TensorData(t%handle), nbytes)
    end if
  end subroutine

  ! The buffer of t and its Fortran shape (TF's reversed), for a pointer of the given rank.
  subroutine tensor_view(t, dtype, rank, ptr, fshape, st)
    type(tf_tensor), intent(in) :: t
    integer, intent(in) :: dtype, rank
    type(c_ptr), intent(out) :: ptr
    integer(int64), intent(out) :: fshape(rank)
    type(tf_status), intent(out) :: st
    integer(int64), allocatable :: have(:)
    integer :: i
    st%message = ""
    ptr = c_null_ptr
    fshape = 0
    if (.not. c_associated(t%handle)) then
      call set_status(st, TF_FAILED_PRECONDITION, "tf_view: the tensor is empty (never made, or deleted)")
      return
    end if
    have = t%shape()
    if (size(have) /= rank) then
      call set_status(st, TF_INVALID_ARGUMENT, "tf_view: the tensor has rank " // itoa(size(have, kind=int64)) &
           // " (shape " // shape_text(have) // ") but the pointer has rank " // itoa(int(rank, int64)))
      return
    end if
    do i = 1, rank
      fshape(i) = have(rank + 1 - i)
    end do
    if (.not. check_tensor(t, dtype, fshape, .false., "tf_view", st)) return
    ptr = TF_TensorData(t%handle)
  end subroutine

  ! A new TF-owned tensor for a Fortran array of shape fshape (reversed in TF).
  subroutine alloc_tensor(t, dtype, rank, fshape, elsize, ptr, st)
    type(tf_tensor), intent(inout) :: t
    integer, intent(in) :: dtype, rank
    integer(int64), intent(in) :: fshape(:)
    integer(c_size_t), intent(in) :: elsize
    type(c_ptr), intent(out) :: ptr
    type(tf_status), intent(out) :: st
    integer(c_int64_t) :: dims(max(1, size(fshape)))
    call t%delete()
    st%message = ""
    ptr = c_null_ptr
    if (.not. ensure_tf(st)) return
    if (size(fshape) /= rank) then
      call set_status(st, TF_INVALID_ARGUMENT, "tf_allocate: the pointer has rank " // itoa(int(rank, int64)) &
           // " but the shape " // shape_text(fshape) // " has rank " // itoa(size(fshape, kind=int64)))
      return
    end if
    dims = tf_dims(fshape, .false.)
    t%handle = TF_AllocateTensor(int(dtype, c_int), dims, int(size(fshape), c_int), &
         int(product(fshape), c_size_t) * elsize)
    if (c_associated(t%handle)) then
      ptr = TF_TensorData(t%handle)
    else
      call set_status(st, TF_INTERNAL, "tf_allocate: TensorFlow could not allocate " // shape_text(fshape))
    end if
  end subroutine

  include "tf_bridge_model.inc"
end module tf_bridge_core
