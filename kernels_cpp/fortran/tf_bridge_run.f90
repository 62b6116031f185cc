! Running a tf_model (a signature by keys, or tensors by name) and its
! checkpoints through the SaverDef the SavedModel holds.
submodule (tf_bridge_model) tf_bridge_run
  implicit none

contains

  module procedure resolve
    integer :: colon, index, ios
    character(len=:), allocatable :: op
    ok = .false.
    op = trim(name)
    index = 0
    colon = index_of_colon(op)
    if (colon > 0) then
      read(op(colon + 1:), *, iostat=ios) index
      if (ios /= 0) index = -1
      op = op(1:colon - 1)
    end if
    out%oper = TF_GraphOperationByName(self%graph, c_string(op))
    out%index = int(index, c_int)
    if (.not. c_associated(out%oper)) then
      call set_status(st, TF_NOT_FOUND, who // ": the graph of " // self%path // " has no operation '" // op &
           // "' (tensor '" // trim(name) // "')")
      return
    end if
    if (index < 0 .or. index >= TF_OperationNumOutputs(out%oper)) then
      call set_status(st, TF_NOT_FOUND, who // ": operation '" // op // "' has no output " // trim(name))
      return
    end if
    ok = .true.
  contains
    integer function index_of_colon(s)
      character(*), intent(in) :: s
      index_of_colon = scan(s, ":", back=.true.)
    end function
  end procedure

  ! (TensorFlow aborts the process on some kernels fed a tensor of the wrong
  ! rank, rather than failing.)
  module procedure feed_fits
    integer(c_int64_t), allocatable :: want(:)
    integer(int64), allocatable :: have(:)
    integer(c_int) :: rank
    type(c_ptr) :: s
    logical :: bad
    ok = .false.
    if (TF_OperationOutputType(out) /= t%dtype()) then
      call set_status(st, TF_INVALID_ARGUMENT, "run: '" // trim(name) // "' is " &
           // tf_dtype_name(int(TF_OperationOutputType(out))) // "; it cannot be fed " // tf_dtype_name(t%dtype()))
      return
    end if
    s = TF_NewStatus()
    rank = TF_GraphGetTensorNumDims(self%graph, out, s)
    allocate(want(max(0, rank)))
    if (rank > 0) call TF_GraphGetTensorShape(self%graph, out, want, rank, s)
    call TF_DeleteStatus(s)
    have = t%shape()
    if (rank >= 0) then
      ! Fortran may evaluate both sides of .or.: compare the dimensions only when the ranks agree.
      bad = size(have) /= rank
      if (.not. bad) bad = any(want >= 0 .and. want /= have)
      if (bad) then
        call set_status(st, TF_INVALID_ARGUMENT, "run: '" // trim(name) // "' has the shape " &
             // shape_text(int(want, int64)) // " (TensorFlow's order, ? any size); it cannot be fed " &
             // shape_text(have) // "; a Fortran array has its dimensions reversed in TensorFlow unless " &
             // "transpose=.true.")
        return
      end if
    end if
    ok = .true.
  end procedure

  module procedure model_run_tensors
    type(tf_output_c) :: fin(max(1, size(feeds))), fout(max(1, size(fetches)))
    type(c_ptr) :: vin(max(1, size(feeds))), vout(max(1, size(fetches))), s
    type(c_ptr), allocatable :: ops(:)
    integer :: i, ntargets
    logical :: ok
    st%message = ""
    if (.not. c_associated(self%session)) then
      call set_status(st, TF_FAILED_PRECONDITION, "run: the model is not loaded (or was closed)")
      return
    end if
    if (size(feeds) /= size(inputs) .or. size(fetches) /= size(outputs)) then
      call set_status(st, TF_INVALID_ARGUMENT, "run: " // itoa(size(feeds, kind=int64)) // " feed names for " &
           // itoa(size(inputs, kind=int64)) // " inputs, " // itoa(size(fetches, kind=int64)) &
           // " fetch names for " // itoa(size(outputs, kind=int64)) // " outputs")
      return
    end if
    do i = 1, size(feeds)
      if (.not. resolve(self, feeds(i), fin(i), "run", st)) return
      if (.not. c_associated(inputs(i)%handle)) then
        call set_status(st, TF_FAILED_PRECONDITION, "run: the input for '" // trim(feeds(i)) // "' is an empty tensor")
        return
      end if
      if (.not. feed_fits(self, feeds(i), fin(i), inputs(i), st)) return
      vin(i) = inputs(i)%handle
    end do
    do i = 1, size(fetches)
      if (.not. resolve(self, fetches(i), fout(i), "run", st)) return
    end do
    ntargets = 0
    if (present(targets)) ntargets = size(targets)
    allocate(ops(max(1, ntargets)))
    do i = 1, ntargets        ! operations, by name (a train op has no outputs)
      ops(i) = TF_GraphOperationByName(self%graph, c_string(targets(i)))
      if (.not. c_associated(ops(i))) then
        call set_status(st, TF_NOT_FOUND, "run: the graph of " // self%path // " has no operation '" &
             // trim(targets(i)) // "' (a target)")
        return
      end if
    end do
    do i = 1, size(outputs)
      call outputs(i)%delete()
    end do
    vout = c_null_ptr
    s = TF_NewStatus()
    call TF_SessionRun(self%session, c_null_ptr, fin, vin, int(size(feeds), c_int), fout, vout, &
         int(size(fetches), c_int), ops, int(ntargets, c_int), c_null_ptr, s)
    ok = take_status(st, s, "run on " // self%path)
    call TF_DeleteStatus(s)
    do i = 1, size(outputs)
      call adopt_tensor(outputs(i), vout(i))
    end do
  end procedure

  module procedure model_signature_index
    integer :: i
    model_signature_index = 0
    if (.not. allocated(self%signatures)) return
    do i = 1, size(self%signatures)
      if (self%signatures(i)%name == name) model_signature_index = i
    end do
  end procedure

  function key_list(infos) result(s)
    type(tf_tensor_info), intent(in) :: infos(:)
    character(len=:), allocatable :: s
    integer :: i
    s = ""
    do i = 1, size(infos)
      if (i > 1) s = s // ", "
      s = s // "'" // trim(infos(i)%key) // "'"
    end do
  end function

  integer function find_key(infos, key)
    type(tf_tensor_info), intent(in) :: infos(:)
    character(*), intent(in) :: key
    integer :: i
    find_key = 0
    do i = 1, size(infos)
      if (infos(i)%key == key) find_key = i
    end do
  end function

  subroutine no_signature(self, signature, who, st)
    class(tf_model), intent(in) :: self
    character(*), intent(in) :: signature, who
    type(tf_status), intent(inout) :: st
    character(len=:), allocatable :: names
    integer :: i
    names = ""
    do i = 1, size(self%signatures)
      if (i > 1) names = names // ", "
      names = names // "'" // trim(self%signatures(i)%name) // "'"
    end do
    call set_status(st, TF_NOT_FOUND, who // ": " // self%path // " has no signature '" // trim(signature) &
         // "'; its signatures are: " // names)
  end subroutine

  module procedure signature_feeds
    integer(int64), allocatable :: have(:)
    logical :: shape_ok
    integer :: i, k, j
    ok = .false.
    if (.not. c_associated(self%session)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the model is not loaded (or was closed)")
      return
    end if
    k = self%signature_index(signature)
    if (k == 0) then
      call no_signature(self, signature, who, st)
      return
    end if
    associate (sig => self%signatures(k))
      if (size(input_keys) /= size(inputs)) then
        call set_status(st, TF_INVALID_ARGUMENT, who // ": " // itoa(size(input_keys, kind=int64)) &
             // " input keys for " // itoa(size(inputs, kind=int64)) // " inputs")
        return
      end if
      do i = 1, size(input_keys)
        if (find_key(sig%inputs, input_keys(i)) == 0) then
          call set_status(st, TF_INVALID_ARGUMENT, who // ": the signature has no input '" &
               // trim(input_keys(i)) // "'; its inputs are " // key_list(sig%inputs))
          return
        end if
      end do
      do i = 1, size(sig%inputs)
        if (.not. any(input_keys == sig%inputs(i)%key)) then
          call set_status(st, TF_INVALID_ARGUMENT, who // ": the input '" // trim(sig%inputs(i)%key) &
               // "' is missing; the signature's inputs are " // key_list(sig%inputs))
          return
        end if
      end do
      do i = 1, size(input_keys)
        j = find_key(sig%inputs, input_keys(i))
        if (.not. c_associated(inputs(i)%handle)) then
          call set_status(st, TF_FAILED_PRECONDITION, who // ": the input '" // trim(input_keys(i)) &
               // "' is an empty tensor")
          return
        end if
        associate (info => sig%inputs(j))
          if (inputs(i)%dtype() /= info%dtype) then
            call set_status(st, TF_INVALID_ARGUMENT, who // ": the input '" // trim(input_keys(i)) // "' must be " &
                 // tf_dtype_name(info%dtype) // ", not " // tf_dtype_name(inputs(i)%dtype()))
            return
          end if
          have = inputs(i)%shape()
          if (info%rank >= 0) then
            ! Nested, not .or.: Fortran may evaluate fits() on arrays of different sizes.
            shape_ok = size(have) == info%rank
            if (shape_ok) shape_ok = fits(have, info%dims(1:info%rank))
            if (.not. shape_ok) then
              call set_status(st, TF_INVALID_ARGUMENT, who // ": the input '" // trim(input_keys(i)) &
                   // "' must have the shape " // shape_text(info%dims(1:max(0, info%rank))) &
                   // " (TensorFlow's order, ? any size), not " // shape_text(have) &
                   // "; a Fortran array has its dimensions reversed in TensorFlow unless transpose=.true.")
              return
            end if
          end if
          feeds(i) = info%name
        end associate
      end do
    end associate
    ok = .true.
  contains
    logical function fits(have, want)
      integer(int64), intent(in) :: have(:), want(:)
      fits = all(want < 0 .or. want == have)
    end function
  end procedure

  module procedure model_run
    character(len=TF_NAME_LEN) :: feeds(size(input_keys)), fetches(size(output_keys))
    character(len=:), allocatable :: who
    integer :: i, j, k
    st%message = ""
    if (.not. c_associated(self%session)) then
      call set_status(st, TF_FAILED_PRECONDITION, "run: the model is not loaded (or was closed)")
      return
    end if
    if (self%signature_index(signature) == 0) then
      call no_signature(self, signature, "run", st)
      return
    end if
    who = "run('" // trim(signature) // "')"
    if (.not. signature_feeds(self, signature, input_keys, inputs, feeds, who, st)) return
    if (size(output_keys) /= size(outputs)) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": " // itoa(size(output_keys, kind=int64)) &
           // " output keys for " // itoa(size(outputs, kind=int64)) // " outputs")
      return
    end if
    k = self%signature_index(signature)
    do i = 1, size(output_keys)
      j = find_key(self%signatures(k)%outputs, output_keys(i))
      if (j == 0) then
        call set_status(st, TF_INVALID_ARGUMENT, who // ": the signature has no output '" &
             // trim(output_keys(i)) // "'; its outputs are " // key_list(self%signatures(k)%outputs))
        return
      end if
      fetches(i) = self%signatures(k)%outputs(j)%name
    end do
    call self%run_tensors(feeds, inputs, fetches, outputs, st)
  end procedure

  module procedure saver_run
    type(tf_tensor) :: name(1), written(1)
    integer(c_int64_t) :: dims(1)
    if (.not. c_associated(self%session)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the model is not loaded (or was closed)")
      return
    end if
    dims = 0
    call adopt_tensor(name(1), TF_AllocateTensor(TF_STRING, dims, 0_c_int, 24_c_size_t))   ! sizeof(TF_TString)
    call TF_StringInit(TF_TensorData(name(1)%handle))
    call TF_StringCopy(TF_TensorData(name(1)%handle), c_string(prefix), int(len_trim(prefix), c_size_t))
    if (save) then
      call self%run_tensors([saver%filename_tensor], name, [saver%save_tensor], written, st)
    else
      call self%run_tensors([saver%filename_tensor], name, [character(len=1) ::], written(1:0), st, &
           targets=[saver%restore_op])
    end if
    if (.not. st%ok()) st%message = who // ": " // st%message
  end procedure

  ! Whether the model's own SaverDef can serve a checkpoint (else st says why).
  logical function saver_serves(self, who, save, st) result(ok)
    class(tf_model), intent(in) :: self
    character(*), intent(in) :: who
    logical, intent(in) :: save
    type(tf_status), intent(inout) :: st
    ok = .false.
    if (.not. c_associated(self%session)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the model is not loaded (or was closed)")
      return
    end if
    if (len_trim(self%saver%filename_tensor) == 0) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": " // self%path &
           // " has no Saver (no SaverDef in its MetaGraphDef: a GraphDef, or a model without variables)")
      return
    end if
    if (self%objects_restored > 0) then
      ! Its SaverDef saves and restores other copies of those variables than the ones the signatures read.
      call set_status(st, TF_UNIMPLEMENTED, who // ": " // self%path // " is a TF2 export (Keras 3 or " &
           // "tf.saved_model.save) whose variables only its object graph restores; its SaverDef would " &
           // trim(merge("save   ", "restore", save)) // " other copies of them. Checkpoints of such a model: " &
           // "tf.train.Checkpoint in Python")
      return
    end if
    ok = .true.
  end function

  module procedure model_save_checkpoint
    character(len=:), allocatable :: who
    who = "save_checkpoint('" // trim(prefix) // "')"
    st%message = ""
    if (saver_serves(self, who, .true., st)) call saver_run(self, self%saver, prefix, .true., who, st)
  end procedure

  module procedure model_restore_checkpoint
    character(len=:), allocatable :: who
    who = "restore_checkpoint('" // trim(prefix) // "')"
    st%message = ""
    if (saver_serves(self, who, .false., st)) call saver_run(self, self%saver, prefix, .false., who, st)
  end procedure
end submodule tf_bridge_run
