! tf_tensor: a TensorFlow tensor held from Fortran, and the type-free code
! behind the typed procedures of tf_bridge_{from,to,view,alloc} (the bytes,
! the shapes and the dtype checks).
!
! Order of dimensions: TensorFlow is row-major, Fortran column-major.  The
! same memory read with the dimensions reversed is the same array, so a
! Fortran array of shape (n1,...,nk) is, without a copy, a TF tensor of shape
! [nk,...,n1] (the default).  transpose=.true. copies instead, into a TF
! tensor of shape [n1,...,nk] holding the same elements at the same indices.
!
! Handles are reference counted: assignment (b = a) shares the TF_Tensor and
! counts one more holder; delete, making another tensor into the variable,
! and the variable's end (its scope, deallocate: the final procedure) each
! drop one, and the last one deletes the TF_Tensor.  So a program that never
! calls delete leaks nothing, and one that copies a handle cannot delete the
! tensor under the copy.
module tf_bridge_tensor
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  use tf_bridge_status
  implicit none
  private
  public :: tf_tensor, adopt_tensor, make_tensor, read_tensor, tensor_view, alloc_tensor, check_tensor

  ! A tensor owned by TensorFlow (or, made zero-copy, a view of a Fortran array).
  type :: tf_tensor
    type(c_ptr) :: handle = c_null_ptr                ! the TF_Tensor*, shared by copies
    integer, pointer, private :: refs => null()       ! how many tf_tensors hold it
  contains
    procedure :: delete => tensor_delete
    procedure :: dtype => tensor_dtype
    procedure :: rank => tensor_rank
    procedure :: shape => tensor_shape                ! TensorFlow's order
    procedure :: data => tensor_data                  ! TensorFlow's buffer
    procedure, private :: tensor_assign
    generic :: assignment(=) => tensor_assign
    final :: tensor_final
  end type

contains

  ! --- handles --------------------------------------------------------------------

  ! t holds handle (a new TF_Tensor, or null) and nothing else: what it held is released.
  subroutine adopt_tensor(t, handle)
    type(tf_tensor), intent(inout) :: t
    type(c_ptr), intent(in) :: handle
    call t%delete()
    if (.not. c_associated(handle)) return
    allocate(t%refs)
    t%refs = 1
    t%handle = handle
    call count_live(TF_LIVE_TENSORS, 1)
  end subroutine

  ! Drops this variable's hold on the tensor; the last holder deletes it.
  subroutine tensor_delete(self)
    class(tf_tensor), intent(inout) :: self
    if (associated(self%refs)) then
      self%refs = self%refs - 1
      if (self%refs == 0) then
        call TF_DeleteTensor(self%handle)
        deallocate(self%refs)
        call count_live(TF_LIVE_TENSORS, -1)
      end if
    end if
    nullify(self%refs)
    self%handle = c_null_ptr
  end subroutine

  impure elemental subroutine tensor_final(self)
    type(tf_tensor), intent(inout) :: self
    call self%delete()
  end subroutine

  ! lhs = rhs: lhs drops what it held and shares rhs's tensor (self-assignment safe).
  impure elemental subroutine tensor_assign(lhs, rhs)
    class(tf_tensor), intent(inout) :: lhs
    type(tf_tensor), intent(in) :: rhs
    integer, pointer :: refs
    type(c_ptr) :: handle
    refs => rhs%refs
    handle = rhs%handle
    if (associated(refs)) refs = refs + 1
    call lhs%delete()
    lhs%refs => refs
    lhs%handle = handle
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
  ! TensorFlow calls this when it no longer uses the array.
  subroutine keep_fortran_memory(data, n, arg) bind(c)
    type(c_ptr), value :: data, arg
    integer(c_size_t), value :: n
    call count_live(TF_LIVE_BORROWED, -1)
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
    type(c_ptr) :: handle
    call t%delete()
    st%message = ""
    if (.not. ensure_tf(st)) return
    dims = tf_dims(fshape, transpose)
    nbytes = int(product(fshape), c_size_t) * elsize
    if (.not. (transpose .or. copy) .and. nbytes > 0) then
      call count_live(TF_LIVE_BORROWED, 1)    ! until TensorFlow calls keep_fortran_memory
      handle = TF_NewTensor(int(dtype, c_int), dims, int(size(fshape), c_int), ptr, nbytes, &
           c_funloc(keep_fortran_memory), c_null_ptr)
    else
      handle = TF_AllocateTensor(int(dtype, c_int), dims, int(size(fshape), c_int), nbytes)
      if (nbytes > 0 .and. c_associated(handle)) then
        if (transpose .and. size(fshape) > 1) then
          call permute_copy(ptr, TF_TensorData(handle), fshape, elsize, .true.)
        else
          call c_memcpy(TF_TensorData(handle), ptr, nbytes)
        end if
      end if
    end if
    call adopt_tensor(t, handle)
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
    call adopt_tensor(t, TF_AllocateTensor(int(dtype, c_int), dims, int(size(fshape), c_int), &
         int(product(fshape), c_size_t) * elsize))
    if (c_associated(t%handle)) then
      ptr = TF_TensorData(t%handle)
    else
      call set_status(st, TF_INTERNAL, "tf_allocate: TensorFlow could not allocate " // shape_text(fshape))
    end if
  end subroutine

end module tf_bridge_tensor
