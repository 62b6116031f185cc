! Adding operations to a loaded model's graph through the C API: what the
! object-graph restore (tf_bridge_objects) and tf_trainer (gradients, the
! optimizer's variables and updates, its saver) build.
!
! An op_builder carries one TF_Status through a whole construction: once an
! op fails, every later start_op, setter and finish does nothing and finish
! returns a null operation, so a builder of many ops checks the status once,
! at the end (the first failure's message names its op).
module tf_bridge_graph
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  implicit none
  private
  public :: text_t, op_builder, string_const, restore_v2, out0, op_text

  integer(c_size_t), parameter :: TSTRING_SIZE = 24          ! sizeof(TF_TString)

  type :: text_t
    character(len=:), allocatable :: s
  end type

  type :: op_builder
    type(c_ptr) :: graph = c_null_ptr
    type(c_ptr) :: status = c_null_ptr          ! TF_Status, shared by the ops built
    type(c_ptr), private :: desc = c_null_ptr
  contains
    procedure :: ok => builder_ok
    procedure :: start => builder_start
    procedure :: input => builder_input
    procedure :: inputs => builder_inputs
    procedure :: inputs_each => builder_inputs_each
    procedure :: control => builder_control
    procedure :: attr_type => builder_attr_type
    procedure :: attr_types => builder_attr_types
    procedure :: attr_bool => builder_attr_bool
    procedure :: attr_shape => builder_attr_shape
    procedure :: attr_string => builder_attr_string
    procedure :: attr_tensor => builder_attr_tensor
    procedure :: finish => builder_finish
    procedure :: message => builder_message
  end type

contains

  ! Output 0 of op (a TF_Output).
  type(tf_output_c) function out0(op)
    type(c_ptr), intent(in) :: op
    out0 = tf_output_c(op, 0_c_int)
  end function

  ! TF_OperationName's or TF_OperationOpType's text.
  function op_text(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    s = c_text(p)
  end function

  logical function builder_ok(self)
    class(op_builder), intent(in) :: self
    builder_ok = TF_GetCode(self%status) == TF_OK
  end function

  function builder_message(self) result(s)
    class(op_builder), intent(in) :: self
    character(len=:), allocatable :: s
    s = c_text(TF_Message(self%status))
  end function

  ! Starts an op of type op_type named name (nothing, once the builder failed).
  ! One op at a time: make its inputs first (a builder function called in
  ! the argument list of input, after start, would start another op).
  subroutine builder_start(self, op_type, name)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: op_type, name
    type(c_ptr) :: unfinished
    if (c_associated(self%desc)) then          ! a bug of the caller's: fail, naming both ops
      unfinished = TF_FinishOperation(self%desc, self%status)
      call TF_SetStatus(self%status, TF_INTERNAL, "tf_bridge: '" // name // "' was started while another " &
           // "operation was being built" // c_null_char)
    end if
    self%desc = c_null_ptr
    if (self%ok()) self%desc = TF_NewOperation(self%graph, op_type // c_null_char, name // c_null_char)
  end subroutine

  subroutine builder_input(self, input)
    class(op_builder), intent(inout) :: self
    type(tf_output_c), intent(in) :: input
    if (c_associated(self%desc)) call TF_AddInput(self%desc, input)
  end subroutine

  subroutine builder_inputs(self, inputs)
    class(op_builder), intent(inout) :: self
    type(tf_output_c), intent(in) :: inputs(:)
    if (c_associated(self%desc)) call TF_AddInputList(self%desc, inputs, int(size(inputs), c_int))
  end subroutine

  ! Each of inputs as an input of its own (not one list input).
  subroutine builder_inputs_each(self, inputs)
    class(op_builder), intent(inout) :: self
    type(tf_output_c), intent(in) :: inputs(:)
    integer :: i
    do i = 1, size(inputs)
      call self%input(inputs(i))
    end do
  end subroutine

  subroutine builder_control(self, ops)
    class(op_builder), intent(inout) :: self
    type(c_ptr), intent(in) :: ops(:)
    integer :: i
    if (.not. c_associated(self%desc)) return
    do i = 1, size(ops)
      call TF_AddControlInput(self%desc, ops(i))
    end do
  end subroutine

  subroutine builder_attr_type(self, name, dtype)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: name
    integer, intent(in) :: dtype
    if (c_associated(self%desc)) call TF_SetAttrType(self%desc, name // c_null_char, int(dtype, c_int))
  end subroutine

  subroutine builder_attr_types(self, name, dtypes)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: name
    integer, intent(in) :: dtypes(:)
    if (c_associated(self%desc)) call TF_SetAttrTypeList(self%desc, name // c_null_char, int(dtypes, c_int), &
         int(size(dtypes), c_int))
  end subroutine

  subroutine builder_attr_bool(self, name, value)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: name
    logical, intent(in) :: value
    if (c_associated(self%desc)) call TF_SetAttrBool(self%desc, name // c_null_char, &
         int(merge(1, 0, value), c_signed_char))
  end subroutine

  ! A shape attr: dims in TensorFlow's order (-1 an unknown size); rank -1: unknown rank.
  subroutine builder_attr_shape(self, name, dims, rank)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: name
    integer(c_int64_t), intent(in) :: dims(:)
    integer, intent(in) :: rank
    integer(c_int64_t) :: some(max(1, size(dims)))
    some = 0
    some(1:size(dims)) = dims
    if (c_associated(self%desc)) call TF_SetAttrShape(self%desc, name // c_null_char, some, int(rank, c_int))
  end subroutine

  subroutine builder_attr_string(self, name, value)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: name, value
    character(kind=c_char, len=len(value) + 1), target :: buf
    buf = value // c_null_char
    if (c_associated(self%desc)) call TF_SetAttrString(self%desc, name // c_null_char, c_loc(buf), &
         int(len(value), c_size_t))
  end subroutine

  ! A tensor attr (a Const's value): TensorFlow copies the tensor.
  subroutine builder_attr_tensor(self, name, tensor)
    class(op_builder), intent(inout) :: self
    character(*), intent(in) :: name
    type(c_ptr), intent(in) :: tensor
    if (c_associated(self%desc)) call TF_SetAttrTensor(self%desc, name // c_null_char, tensor, self%status)
  end subroutine

  ! The finished op, or null once the builder failed (TF_FinishOperation frees
  ! the description either way).
  type(c_ptr) function builder_finish(self) result(op)
    class(op_builder), intent(inout) :: self
    op = c_null_ptr
    if (c_associated(self%desc)) op = TF_FinishOperation(self%desc, self%status)
    self%desc = c_null_ptr
    if (.not. self%ok()) op = c_null_ptr
  end function

  ! A Const string tensor: a scalar, or a vector of the values.
  type(c_ptr) function string_const(g, name, values, scalar, s) result(op)
    type(c_ptr), intent(in) :: g, s
    character(*), intent(in) :: name
    type(text_t), intent(in) :: values(:)
    logical, intent(in) :: scalar
    type(c_ptr) :: t, desc, element
    integer(c_int64_t) :: dims(1)
    integer :: i
    dims(1) = size(values)
    t = TF_AllocateTensor(TF_STRING, dims, merge(0_c_int, 1_c_int, scalar), TSTRING_SIZE * size(values))
    do i = 1, size(values)
      element = transfer(transfer(TF_TensorData(t), 0_c_intptr_t) + (i - 1) * TSTRING_SIZE, c_null_ptr)
      call TF_StringInit(element)
      call TF_StringCopy(element, values(i)%s // c_null_char, int(len(values(i)%s), c_size_t))
    end do
    desc = TF_NewOperation(g, "Const" // c_null_char, name // c_null_char)
    call TF_SetAttrTensor(desc, "value" // c_null_char, t, s)
    call TF_SetAttrType(desc, "dtype" // c_null_char, TF_STRING)
    op = TF_FinishOperation(desc, s)      ! (it frees desc, also when it fails)
    call TF_DeleteTensor(t)
  end function

  ! RestoreV2 of keys (whole tensors) from the checkpoint prefix, in g under scope.
  type(c_ptr) function restore_v2(g, scope_name, prefix, keys, dtypes, s) result(op)
    type(c_ptr), intent(in) :: g, s
    character(*), intent(in) :: scope_name, prefix
    type(text_t), intent(in) :: keys(:)
    integer(c_int), intent(in) :: dtypes(:)
    type(text_t) :: blanks(size(keys))
    type(c_ptr) :: desc, inputs(3)
    integer :: i
    op = c_null_ptr
    do i = 1, size(keys)
      blanks(i)%s = ""
    end do
    inputs(1) = string_const(g, scope_name // "prefix", [text_t(prefix)], .true., s)
    if (TF_GetCode(s) == TF_OK) inputs(2) = string_const(g, scope_name // "tensor_names", keys, .false., s)
    if (TF_GetCode(s) == TF_OK) inputs(3) = string_const(g, scope_name // "shape_and_slices", blanks, .false., s)
    if (TF_GetCode(s) /= TF_OK) return
    desc = TF_NewOperation(g, "RestoreV2" // c_null_char, scope_name // "RestoreV2" // c_null_char)
    do i = 1, 3
      call TF_AddInput(desc, tf_output_c(inputs(i), 0_c_int))
    end do
    call TF_SetAttrTypeList(desc, "dtypes" // c_null_char, dtypes, int(size(dtypes), c_int))
    op = TF_FinishOperation(desc, s)
  end function
end module tf_bridge_graph
