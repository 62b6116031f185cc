! The signatures and the SaverDef of a MetaGraphDef, read from the bytes
! TF_LoadSessionFromSavedModel returns.  The C API has no accessor for
! SignatureDefs (TF's C++ loader keeps them in a protobuf), so this module
! reads the protobuf wire format itself: varints and length-delimited
! fields, the only two kinds these messages use, every other kind skipped.
! Field numbers (tensorflow/core/protobuf/meta_graph.proto, saver.proto):
!   MetaGraphDef: saver_def 3, signature_def 5 (map<string, SignatureDef>)
!   SignatureDef: inputs 1, outputs 2 (map<string, TensorInfo>), method_name 3
!   TensorInfo:   name 1, dtype 2, tensor_shape 3 (sparse 4, composite 5)
!   TensorShapeProto: dim 2 {size 1}, unknown_rank 3
!   SaverDef: filename_tensor_name 1, save_tensor_name 2, restore_op_name 3
!   MetaGraphDef: collection_def 4 (map<string, CollectionDef>)
!   CollectionDef: bytes_list 2 {value 1};  VariableDef: variable_name 1
module tf_bridge_pb
  use, intrinsic :: iso_c_binding, only: c_int8_t
  use, intrinsic :: iso_fortran_env, only: int64
  implicit none
  private
  public :: tf_tensor_info, tf_signature, tf_saver_def, parse_meta_graph
  public :: span, next_field, read_varint          ! for tf_bridge_objects

  integer, parameter, public :: TF_NAME_LEN = 256

  type :: tf_tensor_info
    character(len=TF_NAME_LEN) :: key = ""    ! the signature's key for it
    character(len=TF_NAME_LEN) :: name = ""   ! the graph's tensor, "op:index" (empty: sparse/composite)
    integer :: dtype = 0                      ! TF_DataType
    integer :: rank = -1                      ! -1: unknown rank
    integer(int64) :: dims(8) = -1            ! TF's (row-major) order; -1: unknown size
  end type

  type :: tf_signature
    character(len=TF_NAME_LEN) :: name = ""
    character(len=TF_NAME_LEN) :: method_name = ""
    type(tf_tensor_info), allocatable :: inputs(:), outputs(:)
  end type

  type :: tf_saver_def
    character(len=TF_NAME_LEN) :: filename_tensor = ""
    character(len=TF_NAME_LEN) :: save_tensor = ""
    character(len=TF_NAME_LEN) :: restore_op = ""
  end type

  type :: span          ! a length-delimited field: bytes first..last of the buffer
    integer(int64) :: first = 1, last = 0
  end type

contains

  ! Reads the varint at pos (advanced past it); .false. when it runs past last.
  logical function read_varint(buf, pos, last, val) result(ok)
    integer(c_int8_t), intent(in) :: buf(:)
    integer(int64), intent(inout) :: pos
    integer(int64), intent(in) :: last
    integer(int64), intent(out) :: val
    integer(int64) :: byte
    integer :: shift
    val = 0
    shift = 0
    ok = .false.
    do while (pos <= last .and. shift < 64)
      byte = iand(int(buf(pos), int64), 255_int64)
      pos = pos + 1
      val = ior(val, ishft(iand(byte, 127_int64), shift))
      if (byte < 128) then
        ok = .true.
        return
      end if
      shift = shift + 7
    end do
  end function

  ! The next field of the message in pos..last: its number, and its value
  ! (a varint in val, or the span of a length-delimited field); wire_type
  ! tells them apart where a field may be either (packed repeated fields).
  logical function next_field(buf, pos, last, number, val, sp, wire_type) result(ok)
    integer(c_int8_t), intent(in) :: buf(:)
    integer(int64), intent(inout) :: pos
    integer(int64), intent(in) :: last
    integer, intent(out) :: number
    integer(int64), intent(out) :: val
    type(span), intent(out) :: sp
    integer, intent(out), optional :: wire_type
    integer(int64) :: tag
    integer :: wire
    ok = .false.
    number = 0
    val = 0
    if (pos > last) return
    if (.not. read_varint(buf, pos, last, tag)) return
    number = int(ishft(tag, -3))
    wire = int(iand(tag, 7_int64))
    if (present(wire_type)) wire_type = wire
    select case (wire)
    case (0)
      if (.not. read_varint(buf, pos, last, val)) return
    case (1)
      pos = pos + 8
    case (2)
      if (.not. read_varint(buf, pos, last, val)) return
      sp%first = pos
      sp%last = pos + val - 1
      pos = pos + val
    case (5)
      pos = pos + 4
    case default
      return            ! groups (3, 4) are not in these messages
    end select
    ok = pos <= last + 1
  end function

  function text(buf, sp) result(s)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: sp
    character(len=TF_NAME_LEN) :: s
    integer(int64) :: i
    s = ""
    do i = sp%first, min(sp%last, sp%first + TF_NAME_LEN - 1)
      s(i - sp%first + 1:i - sp%first + 1) = achar(iand(int(buf(i)), 255))
    end do
  end function

  subroutine parse_shape(buf, whole, info)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: whole
    type(tf_tensor_info), intent(inout) :: info
    integer(int64) :: pos, pos2, val, val2
    integer :: number, number2
    type(span) :: sp, sp2
    info%rank = 0
    pos = whole%first
    do while (next_field(buf, pos, whole%last, number, val, sp))
      if (number == 3 .and. val /= 0) then
        info%rank = -1
        return
      else if (number == 2) then
        info%rank = info%rank + 1
        pos2 = sp%first
        do while (next_field(buf, pos2, sp%last, number2, val2, sp2))
          if (number2 == 1 .and. info%rank <= size(info%dims)) info%dims(info%rank) = val2
        end do
      end if
    end do
  end subroutine

  ! A map<string, TensorInfo> entry.
  subroutine parse_tensor_entry(buf, whole, info)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: whole
    type(tf_tensor_info), intent(out) :: info
    integer(int64) :: pos, pos2, val, val2
    integer :: number, number2
    type(span) :: sp, sp2
    pos = whole%first
    do while (next_field(buf, pos, whole%last, number, val, sp))
      if (number == 1) info%key = text(buf, sp)
      if (number /= 2) cycle
      pos2 = sp%first
      do while (next_field(buf, pos2, sp%last, number2, val2, sp2))
        select case (number2)
        case (1)
          info%name = text(buf, sp2)
        case (2)
          info%dtype = int(val2)
        case (3)
          call parse_shape(buf, sp2, info)
        end select
      end do
    end do
  end subroutine

  subroutine append(list, info)
    type(tf_tensor_info), allocatable, intent(inout) :: list(:)
    type(tf_tensor_info), intent(in) :: info
    type(tf_tensor_info), allocatable :: grown(:)
    allocate(grown(size(list) + 1))
    grown(1:size(list)) = list
    grown(size(grown)) = info
    call move_alloc(grown, list)
  end subroutine

  ! A map<string, SignatureDef> entry.
  subroutine parse_signature_entry(buf, whole, sig)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: whole
    type(tf_signature), intent(out) :: sig
    integer(int64) :: pos, pos2, val, val2
    integer :: number, number2
    type(span) :: sp, sp2
    type(tf_tensor_info) :: info
    allocate(sig%inputs(0), sig%outputs(0))
    pos = whole%first
    do while (next_field(buf, pos, whole%last, number, val, sp))
      if (number == 1) sig%name = text(buf, sp)
      if (number /= 2) cycle
      pos2 = sp%first
      do while (next_field(buf, pos2, sp%last, number2, val2, sp2))
        select case (number2)
        case (1)
          call parse_tensor_entry(buf, sp2, info)
          call append(sig%inputs, info)
        case (2)
          call parse_tensor_entry(buf, sp2, info)
          call append(sig%outputs, info)
        case (3)
          sig%method_name = text(buf, sp2)
        end select
      end do
    end do
  end subroutine

  ! The signatures (in the order the file holds them; TF writes map entries
  ! sorted by key), the SaverDef, and the variables of the collection
  ! "trainable_variables" ("op:0" names; not allocated without that collection)
  ! of a serialized MetaGraphDef.
  subroutine parse_meta_graph(buf, signatures, saver, trainable, ok)
    integer(c_int8_t), intent(in) :: buf(:)
    type(tf_signature), allocatable, intent(out) :: signatures(:)
    type(tf_saver_def), intent(out) :: saver
    character(len=TF_NAME_LEN), allocatable, intent(out) :: trainable(:)
    logical, intent(out) :: ok
    type(tf_signature), allocatable :: grown(:)
    integer(int64) :: pos, pos2, val, val2, last
    integer :: number, number2
    type(span) :: sp, sp2
    allocate(signatures(0))
    last = size(buf, kind=int64)
    pos = 1
    do while (next_field(buf, pos, last, number, val, sp))
      if (number == 5) then
        allocate(grown(size(signatures) + 1))
        grown(1:size(signatures)) = signatures
        call parse_signature_entry(buf, sp, grown(size(grown)))
        call move_alloc(grown, signatures)
      else if (number == 3) then
        pos2 = sp%first
        do while (next_field(buf, pos2, sp%last, number2, val2, sp2))
          if (number2 == 1) saver%filename_tensor = text(buf, sp2)
          if (number2 == 2) saver%save_tensor = text(buf, sp2)
          if (number2 == 3) saver%restore_op = text(buf, sp2)
        end do
      else if (number == 4) then
        call parse_trainable(buf, sp, trainable)
      end if
    end do
    ok = pos == last + 1
  end subroutine

  ! A map<string, CollectionDef> entry: when its key is "trainable_variables",
  ! the variable_name of each VariableDef of its bytes_list.
  subroutine parse_trainable(buf, whole, names)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: whole
    character(len=TF_NAME_LEN), allocatable, intent(inout) :: names(:)
    character(len=TF_NAME_LEN), allocatable :: grown(:)
    integer(int64) :: pos, pos2, pos3, val
    integer :: number
    type(span) :: sp, sp2, sp3, value
    logical :: wanted
    wanted = .false.
    value%first = 0
    pos = whole%first
    do while (next_field(buf, pos, whole%last, number, val, sp))
      if (number == 1) wanted = text(buf, sp) == "trainable_variables"
      if (number == 2) value = sp
    end do
    if (.not. wanted .or. value%first == 0) return
    if (.not. allocated(names)) allocate(names(0))
    pos = value%first
    do while (next_field(buf, pos, value%last, number, val, sp))
      if (number /= 2) cycle                            ! bytes_list
      pos2 = sp%first
      do while (next_field(buf, pos2, sp%last, number, val, sp2))
        if (number /= 1) cycle                          ! a VariableDef
        pos3 = sp2%first
        do while (next_field(buf, pos3, sp2%last, number, val, sp3))
          if (number /= 1) cycle                        ! its variable_name
          allocate(grown(size(names) + 1))
          grown(1:size(names)) = names
          grown(size(grown)) = text(buf, sp3)
          call move_alloc(grown, names)
        end do
      end do
    end do
  end subroutine
end module tf_bridge_pb
