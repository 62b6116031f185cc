! tf_model: a SavedModel or a GraphDef with its session, loaded from
! Fortran; and custom op libraries.  Running it (run, run_tensors) and its
! checkpoints are in the submodule tf_bridge_run.
!
! A tf_model is a handle, reference counted as tf_tensor's are: assignment
! shares the session, close (or loading another model into the variable, or
! the variable's end) drops one hold, and the last one closes the session and
! deletes the graph.  A tf_trainer holds its model too.
module tf_bridge_model
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  use tf_bridge_pb
  use tf_bridge_status
  use tf_bridge_tensor
  use tf_bridge_objects, only: restore_objects
  implicit none
  private
  public :: tf_model, tf_signature, tf_tensor_info, tf_saver_def, TF_NAME_LEN
  public :: tf_load_library, tf_load_julia_op, tf_load_saved_model, tf_load_graph_def
  public :: resolve, feed_fits, signature_feeds, saver_run

  type :: tf_model
    type(c_ptr) :: graph = c_null_ptr, session = c_null_ptr
    integer, pointer, private :: refs => null()       ! how many tf_models (and tf_trainers) hold them
    character(len=:), allocatable :: path
    type(tf_signature), allocatable :: signatures(:)
    type(tf_saver_def) :: saver
    character(len=TF_NAME_LEN), allocatable :: trainable(:)   ! its trainable_variables collection ("op:0")
    integer :: objects_restored = 0                   ! variables only the object graph restored (TF2, Keras 3)
  contains
    procedure :: run => model_run
    procedure :: run_tensors => model_run_tensors
    procedure :: signature_index => model_signature_index
    procedure :: save_checkpoint => model_save_checkpoint
    procedure :: restore_checkpoint => model_restore_checkpoint
    procedure :: close => model_close
    procedure, private :: model_assign
    generic :: assignment(=) => model_assign
    final :: model_final
  end type

  interface         ! tf_bridge_run
    ! Runs the graph: feeds the tensors named in feeds ("op:index") with inputs,
    ! fetches those named in fetches into outputs (what an earlier run left there
    ! is released first) and runs the target operations.
    module subroutine model_run_tensors(self, feeds, inputs, fetches, outputs, st, targets)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: feeds(:), fetches(:)
      type(tf_tensor), intent(in) :: inputs(:)
      type(tf_tensor), intent(inout) :: outputs(:)
      type(tf_status), intent(out) :: st
      character(*), intent(in), optional :: targets(:)
    end subroutine
    ! Runs a signature: the inputs by key, the outputs by key, checked before running.
    module subroutine model_run(self, signature, input_keys, inputs, output_keys, outputs, st)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: signature, input_keys(:), output_keys(:)
      type(tf_tensor), intent(in) :: inputs(:)
      type(tf_tensor), intent(inout) :: outputs(:)
      type(tf_status), intent(out) :: st
    end subroutine
    ! The position of the signature in self%signatures, 0 when it has none of that name.
    integer module function model_signature_index(self, name)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: name
    end function
    ! The graph's tensor names of a signature's inputs, each input checked
    ! (key, dtype, shape); .false. with st set when one does not fit.
    logical module function signature_feeds(self, signature, input_keys, inputs, feeds, who, st) result(ok)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: signature, input_keys(:), who
      type(tf_tensor), intent(in) :: inputs(:)
      character(len=TF_NAME_LEN), intent(out) :: feeds(:)
      type(tf_status), intent(inout) :: st
    end function
    ! "op:index" (or "op", index 0) -> TF_Output; .false. with st set when absent.
    logical module function resolve(self, name, out, who, st) result(ok)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: name, who
      type(tf_output_c), intent(out) :: out
      type(tf_status), intent(inout) :: st
    end function
    ! The feed's dtype and shape against the graph's.
    logical module function feed_fits(self, name, out, t, st) result(ok)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: name
      type(tf_output_c), intent(in) :: out
      type(tf_tensor), intent(in) :: t
      type(tf_status), intent(inout) :: st
    end function
    ! Runs a SaverDef's op: save (feeds the prefix, fetches the save tensor) or restore.
    module subroutine saver_run(self, saver, prefix, save, who, st)
      class(tf_model), intent(in) :: self
      type(tf_saver_def), intent(in) :: saver
      character(*), intent(in) :: prefix, who
      logical, intent(in) :: save
      type(tf_status), intent(out) :: st
    end subroutine
    ! Writes the variables' values into a V2 checkpoint at prefix (prefix.index, prefix.data-*).
    module subroutine model_save_checkpoint(self, prefix, st)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: prefix
      type(tf_status), intent(out) :: st
    end subroutine
    module subroutine model_restore_checkpoint(self, prefix, st)
      class(tf_model), intent(in) :: self
      character(*), intent(in) :: prefix
      type(tf_status), intent(out) :: st
    end subroutine
  end interface

contains

  ! Loads a custom op library (a Julia op's, a C++ op's) into TensorFlow's
  ! registry: before loading a model whose graph uses its ops.
  subroutine tf_load_library(path, st)
    character(*), intent(in) :: path
    type(tf_status), intent(out) :: st
    type(c_ptr) :: s, lib
    logical :: ok
    if (.not. ensure_tf(st)) return
    s = TF_NewStatus()
    lib = TF_LoadLibrary(c_string(path), s)   ! the handle stays: the ops must stay registered
    ok = take_status(st, s, "tf_load_library('" // trim(path) // "')")
    call TF_DeleteStatus(s)
  end subroutine

  ! Loads a Julia op's library (lib<Op>.so, which `tfbridge customop build`
  ! made) and includes its Julia file in Main: Julia starts in this process
  ! (on the first call into it; TensorFlow's libraries are loaded privately,
  ! so its LLVM and Julia's stay apart).  Packages of the op's own
  ! environment are not activated: its Julia file must find what it uses.
  subroutine tf_load_julia_op(library, julia_file, st)
    character(*), intent(in) :: library, julia_file
    type(tf_status), intent(out) :: st
    character(len=:), allocatable :: message
    integer :: code
    call tf_load_library(library, st)
    if (.not. st%ok()) return
    call julia_include(library, julia_file, code, message)
    if (code /= 0) call set_status(st, code, "tf_load_julia_op('" // trim(library) // "', '" &
         // trim(julia_file) // "'): " // message)
  end subroutine

  subroutine session_options(opts, config, st, ok)
    type(c_ptr), intent(out) :: opts
    integer(c_int8_t), intent(in), optional, target :: config(:)
    type(tf_status), intent(inout) :: st
    logical, intent(out) :: ok
    type(c_ptr) :: s
    opts = TF_NewSessionOptions()
    ok = .true.
    if (.not. present(config)) return
    if (size(config) == 0) return
    s = TF_NewStatus()
    call TF_SetConfig(opts, c_loc(config), int(size(config), c_size_t), s)
    ok = take_status(st, s, "session config (a serialized ConfigProto)")
    call TF_DeleteStatus(s)
  end subroutine

  ! Loads a SavedModel (TF1 or TF2, tags default "serve") and reads its
  ! signatures; a TF2 model's variables that only its object graph restores
  ! are restored too (tf_bridge_objects).  config: a serialized ConfigProto.
  subroutine tf_load_saved_model(model, export_dir, st, tags, config)
    type(tf_model), intent(inout) :: model
    character(*), intent(in) :: export_dir
    type(tf_status), intent(out) :: st
    character(*), intent(in), optional :: tags(:)
    integer(c_int8_t), intent(in), optional :: config(:)
    character(kind=c_char), allocatable, target :: tagbuf(:)
    type(c_ptr), allocatable :: tagptr(:)
    type(c_ptr) :: s, opts, meta
    type(tf_buffer_c), pointer :: buf
    integer(c_int8_t), pointer :: bytes(:)
    integer :: i, j, at, code
    logical :: ok
    character(len=:), allocatable :: what, message
    call model%close()
    if (.not. ensure_tf(st)) return
    what = "tf_load_saved_model('" // trim(export_dir) // "')"
    if (present(tags)) then
      allocate(tagbuf(size(tags) * (len(tags) + 1)), tagptr(size(tags)))
      at = 1
      do i = 1, size(tags)
        tagptr(i) = c_loc(tagbuf(at))
        do j = 1, len_trim(tags(i))
          tagbuf(at) = tags(i)(j:j)
          at = at + 1
        end do
        tagbuf(at) = c_null_char
        at = at + 1
      end do
    else
      allocate(tagbuf(6), tagptr(1))
      tagbuf = ["s", "e", "r", "v", "e", c_null_char]
      tagptr(1) = c_loc(tagbuf(1))
    end if
    call session_options(opts, config, st, ok)
    if (.not. ok) then
      call TF_DeleteSessionOptions(opts)
      return
    end if
    s = TF_NewStatus()
    meta = TF_NewBuffer()
    call start_model(model)
    model%session = TF_LoadSessionFromSavedModel(opts, c_null_ptr, c_string(export_dir), tagptr, &
         int(size(tagptr), c_int), model%graph, meta, s)
    ok = take_status(st, s, what)
    call TF_DeleteStatus(s)
    call TF_DeleteSessionOptions(opts)
    if (ok) then
      call c_f_pointer(meta, buf)
      call c_f_pointer(buf%data, bytes, [buf%length])
      call parse_meta_graph(bytes, model%signatures, model%saver, model%trainable, ok)
      if (.not. ok) call set_status(st, TF_INTERNAL, what // ": its MetaGraphDef could not be read")
    end if
    if (ok) then
      ! TF2: the variables the signatures read get their objects' values
      ! (the SaverDef's restore may have filled copies of them instead).
      call restore_objects(model%graph, model%session, bytes, export_dir, model%saver%restore_op, code, message, &
           model%objects_restored)
      if (code /= TF_OK) call set_status(st, code, what // ": " // message)
    end if
    call TF_DeleteBuffer(meta)
    if (.not. st%ok()) then
      call model%close()
      return
    end if
    model%path = export_dir
  end subroutine

  ! Loads a binary GraphDef (.pb) and opens a session on it.
  subroutine tf_load_graph_def(model, path, st, config)
    type(tf_model), intent(inout) :: model
    character(*), intent(in) :: path
    type(tf_status), intent(out) :: st
    integer(c_int8_t), intent(in), optional :: config(:)
    integer(c_int8_t), allocatable, target :: bytes(:)
    type(c_ptr) :: s, opts, buf, iopts
    integer :: unit, ios, n
    logical :: ok
    character(len=256) :: msg
    character(len=:), allocatable :: what
    call model%close()
    if (.not. ensure_tf(st)) return
    what = "tf_load_graph_def('" // trim(path) // "')"
    open(newunit=unit, file=path, access="stream", form="unformatted", status="old", action="read", &
         iostat=ios, iomsg=msg)
    if (ios /= 0) then
      call set_status(st, TF_NOT_FOUND, what // ": " // trim(msg))
      return
    end if
    inquire(unit=unit, size=n)
    allocate(bytes(max(n, 1)))
    if (n > 0) read(unit, iostat=ios) bytes(1:n)
    close(unit)
    if (ios /= 0) then
      call set_status(st, TF_INTERNAL, what // ": could not read the file")
      return
    end if
    call session_options(opts, config, st, ok)
    if (ok) then
      s = TF_NewStatus()
      buf = TF_NewBufferFromString(c_loc(bytes), int(n, c_size_t))
      iopts = TF_NewImportGraphDefOptions()
      call start_model(model)
      call TF_GraphImportGraphDef(model%graph, buf, iopts, s)
      ok = take_status(st, s, what)
      call TF_DeleteImportGraphDefOptions(iopts)
      call TF_DeleteBuffer(buf)
      if (ok) then
        model%session = TF_NewSession(model%graph, opts, s)
        ok = take_status(st, s, what // ", opening a session")
      end if
      call TF_DeleteStatus(s)
    end if
    call TF_DeleteSessionOptions(opts)
    if (.not. ok) then
      call model%close()
      return
    end if
    allocate(model%signatures(0))
    model%path = path
  end subroutine

  ! A new graph in model (which holds nothing), its only holder.
  subroutine start_model(model)
    type(tf_model), intent(inout) :: model
    model%graph = TF_NewGraph()
    allocate(model%refs)
    model%refs = 1
    call count_live(TF_LIVE_MODELS, 1)
  end subroutine

  ! Drops this variable's hold on the model; the last holder (a copy, a
  ! tf_trainer of it) closes the session and deletes the graph.
  subroutine model_close(self)
    class(tf_model), intent(inout) :: self
    type(c_ptr) :: s
    if (associated(self%refs)) then
      self%refs = self%refs - 1
      if (self%refs == 0) then
        if (c_associated(self%session)) then
          s = TF_NewStatus()
          call TF_CloseSession(self%session, s)
          call TF_DeleteSession(self%session, s)
          call TF_DeleteStatus(s)
        end if
        if (c_associated(self%graph)) call TF_DeleteGraph(self%graph)
        deallocate(self%refs)
        call count_live(TF_LIVE_MODELS, -1)
      end if
    end if
    nullify(self%refs)
    self%session = c_null_ptr
    self%graph = c_null_ptr
    if (allocated(self%signatures)) deallocate(self%signatures)
    if (allocated(self%trainable)) deallocate(self%trainable)
    if (allocated(self%path)) deallocate(self%path)
    self%saver = tf_saver_def()
    self%objects_restored = 0
  end subroutine

  impure elemental subroutine model_final(self)
    type(tf_model), intent(inout) :: self
    call self%close()
  end subroutine

  ! lhs = rhs: lhs drops the model it held and shares rhs's (self-assignment safe).
  impure elemental subroutine model_assign(lhs, rhs)
    class(tf_model), intent(inout) :: lhs
    type(tf_model), intent(in) :: rhs
    integer, pointer :: refs
    type(c_ptr) :: graph, session
    character(len=:), allocatable :: path
    type(tf_signature), allocatable :: signatures(:)
    character(len=TF_NAME_LEN), allocatable :: trainable(:)
    type(tf_saver_def) :: saver
    integer :: objects_restored
    refs => rhs%refs        ! (copied first: lhs may be rhs)
    graph = rhs%graph
    session = rhs%session
    if (allocated(rhs%path)) path = rhs%path
    if (allocated(rhs%signatures)) signatures = rhs%signatures
    if (allocated(rhs%trainable)) trainable = rhs%trainable
    saver = rhs%saver
    objects_restored = rhs%objects_restored
    if (associated(refs)) refs = refs + 1
    call lhs%close()
    lhs%refs => refs
    lhs%graph = graph
    lhs%session = session
    if (allocated(path)) call move_alloc(path, lhs%path)
    if (allocated(signatures)) call move_alloc(signatures, lhs%signatures)
    if (allocated(trainable)) call move_alloc(trainable, lhs%trainable)
    lhs%saver = saver
    lhs%objects_restored = objects_restored
  end subroutine
end module tf_bridge_model
