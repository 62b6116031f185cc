! tf_bridge's status (TF's code and a message naming what failed), the text
! helpers every part uses, and the counts of live handles that
! tf_live_objects reports (tensors, models, trainers the program holds, and
! Fortran arrays TensorFlow still borrows).
module tf_bridge_status
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  implicit none
  private
  public :: tf_status, set_status, take_status, ensure_tf, c_string, f_string, itoa, shape_text, tf_dtype_name
  public :: flag, tf_live_objects, count_live
  public :: TF_LIVE_TENSORS, TF_LIVE_MODELS, TF_LIVE_TRAINERS, TF_LIVE_BORROWED

  type :: tf_status
    integer :: code = TF_OK                           ! TF_Code: 0 is OK
    character(len=:), allocatable :: message
  contains
    procedure :: ok => status_ok
  end type

  ! What tf_live_objects counts: TF_Tensors the program's tf_tensors hold,
  ! sessions its tf_models hold, tf_trainers, and Fortran arrays that
  ! zero-copy tensors lent TensorFlow and TensorFlow has not yet given back
  ! (its deallocator lowers that count: TensorFlow's own word that the
  ! tensor is gone).
  integer, parameter :: TF_LIVE_TENSORS = 1, TF_LIVE_MODELS = 2, TF_LIVE_TRAINERS = 3, TF_LIVE_BORROWED = 4
  ! Not atomic: exact while one thread at a time makes and releases handles.
  integer(int64), save :: live(4) = 0

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

  ! How many objects of one kind (TF_LIVE_*) are alive now: a program that
  ! lets its handles go out of scope (or deletes them) gets back to where it was.
  integer(int64) function tf_live_objects(kind)
    integer, intent(in) :: kind
    tf_live_objects = -1
    if (kind >= 1 .and. kind <= size(live)) tf_live_objects = live(kind)
  end function

  subroutine count_live(kind, change)
    integer, intent(in) :: kind, change
    live(kind) = live(kind) + change
  end subroutine

  logical function flag(value)
    logical, intent(in), optional :: value
    flag = .false.
    if (present(value)) flag = value
  end function

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
    case (TF_INT8); name = "int8 (integer(c_int8_t))"
    case (TF_INT16); name = "int16 (integer(c_int16_t))"
    case (TF_INT32); name = "int32 (integer(c_int32_t))"
    case (TF_INT64); name = "int64 (integer(c_int64_t))"
    case (TF_BOOL); name = "bool (logical)"
    case (TF_STRING); name = "string"
    case (TF_RESOURCE); name = "resource (a variable's handle)"
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
end module tf_bridge_status
