! TF2 SavedModels whose signatures read variables that only the object graph
! restores, as bridge/saved_model/objects.py does for the Python loader.
!
! TF_LoadSessionFromSavedModel restores the TF1 way: it runs the SaverDef's
! restore op.  A Keras 3 model saved with tf.saved_model.save holds each
! variable twice: the handles its signatures read and copies that the saved
! restore function fills, so the signatures fail ("Could not find variable
! sequential/dense/kernel").  TF2 restores through objects instead:
! - the MetaGraphDef's object_graph_def (SavedObjectGraph) lists the saved
!   objects, variables among them, and the objects each concrete function
!   captures (bound_inputs: its last inputs, in order);
! - a call of such a function in the graph (a [Stateful]PartitionedCall whose
!   attr f names it: the signatures) passes, as those inputs, the
!   VarHandleOp of each captured variable;
! - the checkpoint's _CHECKPOINTABLE_OBJECT_GRAPH (a TrackableObjectGraph)
!   gives each object's checkpoint keys, matched to the saved objects by
!   walking both graphs from the root along children of the same local name.
! Each handle a call reads that the SaverDef's restore op does not take is
! assigned its object's VARIABLE_VALUE (one RestoreV2 and an
! AssignVariableOp per handle, under restore_saved_objects/, run once).
! Unlike the Python loader this one does not read the checkpoint's index, so
! it cannot skip a value saved in slices (a partitioned variable): RestoreV2
! would read it whole.  Each value passes an EnsureShape of its variable's
! saved shape instead, so such a model fails to load, naming the variable,
! rather than loading a wrong value.  A
! TF1 model (no object graph), a tf.Module's (its calls read the handles the
! restore op fills) and a program without variables are left as they load.
!
! Field numbers (tensorflow/core/protobuf/saved_object_graph.proto,
! trackable_object_graph.proto, attr_value.proto):
!   MetaGraphDef: object_graph_def 7
!   SavedObjectGraph: nodes 1, concrete_functions 2 (map: key 1, value 2)
!   SavedObject: children 1, variable 7 {dtype 1, shape 2}
!   TensorShapeProto: dim 2 {size 1}, unknown_rank 3
!   SavedConcreteFunction: bound_inputs 2 (packed int32)
!   TrackableObjectGraph: nodes 1; TrackableObject: children 1, attributes 2
!   ObjectReference: node_id 1, local_name 2
!   SerializedTensor: name 1, checkpoint_key 3
!   AttrValue: func 10 {name 1}
module tf_bridge_objects
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  use tf_bridge_pb, only: span, next_field, read_varint
  use tf_bridge_graph, only: text_t, string_const, restore_v2
  implicit none
  private
  public :: restore_objects

  character(len=*), parameter :: OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
  character(len=*), parameter :: VARIABLE_VALUE = "VARIABLE_VALUE"
  character(len=*), parameter :: SCOPE = "restore_saved_objects/"

  ! A SavedObjectGraph or a TrackableObjectGraph: node k (1-based) is id k-1;
  ! names and keys are spans of the buffer it was read from.
  type :: object_graph
    integer :: n = 0
    integer, allocatable :: first_child(:), n_children(:), child_id(:)
    type(span), allocatable :: child_name(:)
    integer, allocatable :: dtype(:)                          ! saved: the variable's; 0: not one
    type(span), allocatable :: shape(:)                       ! saved: the variable's TensorShapeProto
    integer, allocatable :: first_attr(:), n_attrs(:)         ! trackable: its attributes
    type(span), allocatable :: attr_name(:), attr_key(:)
    integer :: n_functions = 0                                ! saved: concrete functions
    type(span), allocatable :: fn_name(:)
    integer, allocatable :: fn_first(:), fn_count(:), bound(:)
  end type

contains

  ! Restores the variables that only the object graph restores (see above).
  ! meta: the serialized MetaGraphDef; restore_op: the SaverDef's restore op
  ! ("" when none).  code is TF_OK, or TF's code with message saying why.
  subroutine restore_objects(graph, session, meta, export_dir, restore_op, code, message, assigned)
    type(c_ptr), intent(in) :: graph, session
    integer(c_int8_t), intent(in) :: meta(:)
    character(*), intent(in) :: export_dir, restore_op
    integer, intent(out) :: code
    integer, intent(out) :: assigned                  ! variables given their objects' values here
    character(len=:), allocatable, intent(out) :: message
    type(object_graph) :: saved, trackable
    type(span) :: whole, sp
    integer(c_int8_t), allocatable :: ckpt(:)
    type(c_ptr), allocatable :: handles(:), tf1(:), chosen(:)
    integer, allocatable :: nodes(:), match(:), dtypes(:), chosen_nodes(:)
    type(text_t), allocatable :: keys(:)
    character(len=:), allocatable :: prefix, key
    integer(int64) :: pos, val
    integer :: number, i, j, n
    logical :: found, ok
    code = TF_OK
    message = ""
    assigned = 0
    whole%first = 0
    pos = 1
    do while (next_field(meta, pos, size(meta, kind=int64), number, val, sp))
      if (number == 7) whole = sp
    end do
    if (whole%first == 0) return                      ! TF1: no object graph
    prefix = trim(export_dir) // "/variables/variables"
    inquire(file=prefix // ".index", exist=found)
    if (.not. found) return                           ! a SavedModel without variables
    call parse_objects(meta, whole, .true., saved)
    call bound_handles(graph, meta, saved, nodes, handles)
    call restore_op_handles(graph, restore_op, tf1)
    n = 0
    do i = 1, size(handles)                           ! drop the handles the TF1 restore filled
      if (any([(same_op(handles(i), tf1(j)), j = 1, size(tf1))])) cycle
      n = n + 1
      handles(n) = handles(i)
      nodes(n) = nodes(i)
    end do
    if (n == 0) return
    call read_object_graph(prefix, ckpt, found, code, message)
    if (code /= TF_OK .or. .not. found) return        ! no object graph in the checkpoint: nothing to do
    whole%first = 1
    whole%last = size(ckpt, kind=int64)
    call parse_objects(ckpt, whole, .false., trackable)
    call match_objects(saved, meta, trackable, ckpt, match)
    allocate(keys(0), dtypes(0), chosen(0), chosen_nodes(0))
    do i = 1, n
      key = variable_key(trackable, ckpt, match(nodes(i)))
      if (len(key) == 0) cycle                        ! no value saved: what the TF1 restore left stands
      found = .false.
      do j = 1, size(chosen)
        if (.not. same_op(chosen(j), handles(i))) cycle
        found = .true.
        if (keys(j)%s /= key) then
          code = TF_INVALID_ARGUMENT
          message = "the variable handle '" // c_text(TF_OperationName(handles(i))) &
               // "' stands for two objects ('" // keys(j)%s // "' and '" // key // "')"
          return
        end if
      end do
      if (found) cycle
      call append_text(keys, key)
      dtypes = [dtypes, saved%dtype(nodes(i))]
      chosen = [chosen, handles(i)]
      chosen_nodes = [chosen_nodes, nodes(i)]
    end do
    if (size(chosen) == 0) return
    call assign_restored(graph, session, prefix, chosen, keys, dtypes, saved, meta, chosen_nodes, ok, code, &
         message)
    if (code == TF_OK) assigned = size(chosen)
  end subroutine

  ! --- the object graphs ---------------------------------------------------------

  ! Reads a SavedObjectGraph (saved) or a TrackableObjectGraph: counts, then fills.
  subroutine parse_objects(buf, whole, saved, g)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: whole
    logical, intent(in) :: saved
    type(object_graph), intent(out) :: g
    integer :: pass, nn, nc, na, nf, nb, number, n2, n3, wire
    integer(int64) :: pos, p2, p3, p4, val, v2, v3, id
    type(span) :: sp, s2, s3
    do pass = 1, 2
      nn = 0; nc = 0; na = 0; nf = 0; nb = 0
      pos = whole%first
      do while (next_field(buf, pos, whole%last, number, val, sp))
        if (number == 1) then
          nn = nn + 1
          if (pass == 2) g%first_child(nn) = nc + 1
          if (pass == 2) g%first_attr(nn) = na + 1
          p2 = sp%first
          do while (next_field(buf, p2, sp%last, n2, v2, s2))
            if (n2 == 1) then
              nc = nc + 1
              if (pass == 2) g%child_id(nc) = int(field_varint(buf, s2, 1))
              if (pass == 2) g%child_name(nc) = field_span(buf, s2, 2)
            else if (saved .and. n2 == 7) then
              if (pass == 2) g%dtype(nn) = int(field_varint(buf, s2, 1))
              if (pass == 2) g%shape(nn) = field_span(buf, s2, 2)
            else if (.not. saved .and. n2 == 2) then
              na = na + 1
              if (pass == 2) g%attr_name(na) = field_span(buf, s2, 1)
              if (pass == 2) g%attr_key(na) = field_span(buf, s2, 3)
            end if
          end do
          if (pass == 2) g%n_children(nn) = nc + 1 - g%first_child(nn)
          if (pass == 2) g%n_attrs(nn) = na + 1 - g%first_attr(nn)
        else if (saved .and. number == 2) then
          nf = nf + 1
          if (pass == 2) g%fn_name(nf) = field_span(buf, sp, 1)
          if (pass == 2) g%fn_first(nf) = nb + 1
          p2 = sp%first
          do while (next_field(buf, p2, sp%last, n2, v2, s2))
            if (n2 /= 2) cycle
            p3 = s2%first
            do while (next_field(buf, p3, s2%last, n3, v3, s3, wire))
              if (n3 /= 2) cycle
              if (wire == 0) then                     ! one unpacked element
                nb = nb + 1
                if (pass == 2) g%bound(nb) = int(v3)
              else if (wire == 2) then                ! packed
                p4 = s3%first
                do while (p4 <= s3%last)
                  if (.not. read_varint(buf, p4, s3%last, id)) exit
                  nb = nb + 1
                  if (pass == 2) g%bound(nb) = int(id)
                end do
              end if
            end do
          end do
          if (pass == 2) g%fn_count(nf) = nb + 1 - g%fn_first(nf)
        end if
      end do
      if (pass == 1) then
        g%n = nn
        g%n_functions = nf
        allocate(g%first_child(nn), g%n_children(nn), g%child_id(nc), g%child_name(nc), g%first_attr(nn), &
             g%n_attrs(nn), g%attr_name(na), g%attr_key(na), g%fn_name(nf), g%fn_first(nf), g%fn_count(nf), &
             g%bound(nb))
        allocate(g%dtype(nn), source=0)
        allocate(g%shape(nn))
      end if
    end do
  end subroutine

  ! match(k): the checkpoint node of saved node k (0: none).  Both graphs are
  ! walked from their roots along children of the same local name, each
  ! checkpoint node once (they may have cycles); the root is never restored.
  subroutine match_objects(saved, sbuf, trk, tbuf, match)
    type(object_graph), intent(in) :: saved, trk
    integer(c_int8_t), intent(in) :: sbuf(:), tbuf(:)
    integer, allocatable, intent(out) :: match(:)
    logical, allocatable :: seen(:)
    integer, allocatable :: stack_s(:), stack_t(:)
    integer :: top, s, t, c, k, cid, sc
    allocate(match(saved%n), source=0)
    if (saved%n == 0 .or. trk%n == 0) return
    allocate(seen(trk%n), source=.false.)
    allocate(stack_s(trk%n), stack_t(trk%n))
    seen(1) = .true.
    top = 1
    stack_s(1) = 1
    stack_t(1) = 1
    do while (top > 0)
      s = stack_s(top)
      t = stack_t(top)
      top = top - 1
      if (s /= 1 .and. trk%n_attrs(t) > 0) match(s) = t
      do c = trk%first_child(t), trk%first_child(t) + trk%n_children(t) - 1
        cid = trk%child_id(c) + 1
        if (cid < 1 .or. cid > trk%n) cycle
        if (seen(cid)) cycle
        sc = 0
        do k = saved%first_child(s), saved%first_child(s) + saved%n_children(s) - 1
          if (same_text(sbuf, saved%child_name(k), tbuf, trk%child_name(c))) then
            sc = saved%child_id(k) + 1
            exit
          end if
        end do
        if (sc < 1 .or. sc > saved%n) cycle
        seen(cid) = .true.
        top = top + 1
        stack_s(top) = sc
        stack_t(top) = cid
      end do
    end do
  end subroutine

  ! The checkpoint key of node t's value: its VARIABLE_VALUE, or its only attribute; "" when none.
  function variable_key(trk, buf, t) result(key)
    type(object_graph), intent(in) :: trk
    integer(c_int8_t), intent(in) :: buf(:)
    integer, intent(in) :: t
    character(len=:), allocatable :: key
    integer :: a
    key = ""
    if (t < 1) return
    do a = trk%first_attr(t), trk%first_attr(t) + trk%n_attrs(t) - 1
      if (span_text(buf, trk%attr_name(a)) == VARIABLE_VALUE) then
        key = span_text(buf, trk%attr_key(a))
        return
      end if
    end do
    if (trk%n_attrs(t) == 1) key = span_text(buf, trk%attr_key(trk%first_attr(t)))
  end function

  ! --- the graph's calls and handles ----------------------------------------------

  ! Each (saved variable node, VarHandleOp) that a call of a saved concrete
  ! function passes as one of its bound inputs.  Only [Stateful]PartitionedCall
  ! ops are read: TF2 SavedModels call their functions through those.
  subroutine bound_handles(graph, meta, saved, nodes, handles)
    type(c_ptr), intent(in) :: graph
    integer(c_int8_t), intent(in) :: meta(:)
    type(object_graph), intent(in) :: saved
    integer, allocatable, intent(out) :: nodes(:)
    type(c_ptr), allocatable, intent(out) :: handles(:)
    integer(c_size_t) :: pos
    type(c_ptr) :: op, h
    character(len=:), allocatable :: kind
    integer :: f, k, nin, nb, id, j
    logical :: known
    allocate(nodes(0), handles(0))
    pos = 0
    do
      op = TF_GraphNextOperation(graph, pos)
      if (.not. c_associated(op)) exit
      kind = c_text(TF_OperationOpType(op))
      if (kind /= "StatefulPartitionedCall" .and. kind /= "PartitionedCall") cycle
      f = called_function(op, meta, saved)
      if (f == 0) cycle
      nin = TF_OperationNumInputs(op)
      nb = saved%fn_count(f)
      if (nb == 0 .or. nin < nb) cycle
      do k = 1, nb
        id = saved%bound(saved%fn_first(f) + k - 1) + 1
        if (id < 1 .or. id > saved%n) cycle
        if (saved%dtype(id) == 0) cycle                ! not a variable
        h = variable_source(op, nin - nb + k - 1)
        if (.not. c_associated(h)) cycle
        known = .false.
        do j = 1, size(nodes)
          known = known .or. (nodes(j) == id .and. same_op(handles(j), h))
        end do
        if (known) cycle
        nodes = [nodes, id]
        handles = [handles, h]
      end do
    end do
  end subroutine

  ! The VarHandleOps the SaverDef's restore op takes (what the TF1 restore fills).
  subroutine restore_op_handles(graph, restore_op, handles)
    type(c_ptr), intent(in) :: graph
    character(*), intent(in) :: restore_op
    type(c_ptr), allocatable, intent(out) :: handles(:)
    type(c_ptr) :: op, h
    integer :: k, colon
    allocate(handles(0))
    colon = index(restore_op, ":")
    if (colon == 0) colon = len_trim(restore_op) + 1
    if (colon == 1) return
    op = TF_GraphOperationByName(graph, restore_op(1:colon - 1) // c_null_char)
    if (.not. c_associated(op)) return
    do k = 0, TF_OperationNumInputs(op) - 1
      h = variable_source(op, k)
      if (c_associated(h)) handles = [handles, h]
    end do
  end subroutine

  ! The index of the saved concrete function that op's attr f names (0: none).
  integer function called_function(op, meta, saved) result(f)
    type(c_ptr), intent(in) :: op
    integer(c_int8_t), intent(in) :: meta(:)
    type(object_graph), intent(in) :: saved
    type(c_ptr) :: s, buf
    type(tf_buffer_c), pointer :: b
    integer(c_int8_t), pointer :: bytes(:)
    type(span) :: whole, name
    f = 0
    s = TF_NewStatus()
    buf = TF_NewBuffer()
    call TF_OperationGetAttrValueProto(op, "f" // c_null_char, buf, s)
    if (TF_GetCode(s) == TF_OK) then
      call c_f_pointer(buf, b)
      if (b%length > 0) then
        call c_f_pointer(b%data, bytes, [b%length])
        whole%first = 1
        whole%last = size(bytes, kind=int64)
        name = field_span(bytes, field_span(bytes, whole, 10), 1)
        do f = saved%n_functions, 1, -1
          if (same_text(meta, saved%fn_name(f), bytes, name)) exit
        end do
      end if
    end if
    call TF_DeleteBuffer(buf)
    call TF_DeleteStatus(s)
  end function

  ! The VarHandleOp that input k of op comes from, through Identity and IdentityN (null: none).
  type(c_ptr) function variable_source(op, k) result(h)
    type(c_ptr), intent(in) :: op
    integer, intent(in) :: k
    type(tf_output_c) :: at
    character(len=:), allocatable :: kind
    integer :: steps
    h = c_null_ptr
    at = TF_OperationInput(tf_output_c(op, int(k, c_int)))
    do steps = 1, 10000                          ! (a well-formed graph has no Identity cycle)
      if (.not. c_associated(at%oper)) return
      kind = c_text(TF_OperationOpType(at%oper))
      if (kind == "VarHandleOp") then
        h = at%oper
        return
      else if (kind == "Identity") then
        at = TF_OperationInput(tf_output_c(at%oper, 0_c_int))
      else if (kind == "IdentityN" .and. at%index < TF_OperationNumInputs(at%oper)) then
        at = TF_OperationInput(at)
      else
        return
      end if
    end do
  end function

  logical function same_op(a, b)
    type(c_ptr), intent(in) :: a, b
    same_op = transfer(a, 0_c_intptr_t) == transfer(b, 0_c_intptr_t)
  end function

  ! --- running ------------------------------------------------------------------

  ! The checkpoint's TrackableObjectGraph, read by RestoreV2 in a graph and
  ! session of its own; found is .false. when the checkpoint has none.
  subroutine read_object_graph(prefix, bytes, found, code, message)
    character(*), intent(in) :: prefix
    integer(c_int8_t), allocatable, intent(out) :: bytes(:)
    logical, intent(out) :: found
    integer, intent(inout) :: code
    character(len=:), allocatable, intent(inout) :: message
    type(c_ptr) :: g, s, opts, sess, restore, data, p
    type(c_ptr) :: out(1), none(1)
    type(tf_output_c) :: fetch(1), noin(1)
    integer(c_int8_t), pointer :: chars(:)
    integer(c_size_t) :: n
    found = .false.
    g = TF_NewGraph()
    s = TF_NewStatus()
    opts = TF_NewSessionOptions()
    sess = c_null_ptr
    out = c_null_ptr
    restore = restore_v2(g, "", prefix, [text_t(OBJECT_GRAPH_KEY)], [TF_STRING], s)
    if (TF_GetCode(s) == TF_OK) sess = TF_NewSession(g, opts, s)
    if (TF_GetCode(s) == TF_OK) then
      fetch(1) = tf_output_c(restore, 0_c_int)
      call TF_SessionRun(sess, c_null_ptr, noin, none, 0_c_int, fetch, out, 1_c_int, none, 0_c_int, &
           c_null_ptr, s)
    end if
    if (TF_GetCode(s) == TF_OK .and. c_associated(out(1))) then
      data = TF_TensorData(out(1))
      p = TF_StringGetDataPointer(data)
      n = TF_StringGetSize(data)
      allocate(bytes(n))
      if (n > 0) then
        call c_f_pointer(p, chars, [n])
        bytes = chars
      end if
      found = .true.
    else if (TF_GetCode(s) /= TF_NOT_FOUND) then     ! NOT_FOUND: a checkpoint without objects
      code = TF_GetCode(s)
      message = "reading the object graph of the checkpoint " // prefix // ": " // c_text(TF_Message(s))
    end if
    if (c_associated(out(1))) call TF_DeleteTensor(out(1))
    if (c_associated(sess)) then
      call TF_CloseSession(sess, s)
      call TF_DeleteSession(sess, s)
    end if
    call TF_DeleteSessionOptions(opts)
    call TF_DeleteStatus(s)
    call TF_DeleteGraph(g)
  end subroutine

  ! Adds, under restore_saved_objects/, one RestoreV2 of the keys and an
  ! AssignVariableOp per handle to the model's graph, and runs the assigns.
  subroutine assign_restored(graph, session, prefix, handles, keys, dtypes, saved, meta, nodes, ok, code, message)
    type(c_ptr), intent(in) :: graph, session
    character(*), intent(in) :: prefix
    type(c_ptr), intent(in) :: handles(:)
    type(text_t), intent(in) :: keys(:)
    integer, intent(in) :: dtypes(:), nodes(:)
    type(object_graph), intent(in) :: saved
    integer(c_int8_t), intent(in) :: meta(:)
    logical, intent(out) :: ok
    integer, intent(inout) :: code
    character(len=:), allocatable, intent(inout) :: message
    type(c_ptr) :: s, restore, desc, checked, assigns(size(handles)), none(1)
    type(tf_output_c) :: noin(1)
    character(len=:), allocatable :: name
    integer(c_int64_t), allocatable :: dims(:)
    integer :: i, rank
    s = TF_NewStatus()
    restore = restore_v2(graph, SCOPE, prefix, keys, int(dtypes, c_int), s)
    do i = 1, size(handles)
      if (TF_GetCode(s) /= TF_OK) exit
      name = SCOPE // c_text(TF_OperationName(handles(i)))     ! errors name the variable
      call shape_dims(meta, saved%shape(nodes(i)), dims, rank)
      desc = TF_NewOperation(graph, "EnsureShape" // c_null_char, name // c_null_char)
      call TF_AddInput(desc, tf_output_c(restore, int(i - 1, c_int)))
      call TF_SetAttrShape(desc, "shape" // c_null_char, dims, int(rank, c_int))
      call TF_SetAttrType(desc, "T" // c_null_char, int(dtypes(i), c_int))
      checked = TF_FinishOperation(desc, s)
      if (TF_GetCode(s) /= TF_OK) exit
      desc = TF_NewOperation(graph, "AssignVariableOp" // c_null_char, name // "/Assign" // c_null_char)
      call TF_AddInput(desc, tf_output_c(handles(i), 0_c_int))
      call TF_AddInput(desc, tf_output_c(checked, 0_c_int))
      call TF_SetAttrType(desc, "dtype" // c_null_char, int(dtypes(i), c_int))
      assigns(i) = TF_FinishOperation(desc, s)
    end do
    if (TF_GetCode(s) /= TF_OK) then
      code = TF_GetCode(s)
      message = "restoring through the object graph: adding the restore of '" // keys(min(i, size(keys)))%s &
           // "' into '" // c_text(TF_OperationName(handles(min(i, size(keys))))) // "' from " // prefix &
           // ": " // c_text(TF_Message(s))
    else
      call TF_SessionRun(session, c_null_ptr, noin, none, 0_c_int, noin, none, 0_c_int, assigns, &
           int(size(assigns), c_int), c_null_ptr, s)
      if (TF_GetCode(s) /= TF_OK) then           ! TF's message names the op, restore_saved_objects/<variable>
        code = TF_GetCode(s)
        message = "restoring " // itoa(size(keys)) // " variable(s) through the object graph from " // prefix &
             // ": " // c_text(TF_Message(s))
      end if
    end if
    ok = TF_GetCode(s) == TF_OK
    call TF_DeleteStatus(s)
  end subroutine

  ! A TensorShapeProto's dims (-1: unknown size) and rank (-1: unknown rank).
  subroutine shape_dims(buf, sp, dims, rank)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: sp
    integer(c_int64_t), allocatable, intent(out) :: dims(:)
    integer, intent(out) :: rank
    integer(int64) :: pos, val
    integer :: n
    type(span) :: s
    allocate(dims(0))
    rank = 0
    pos = sp%first
    do while (next_field(buf, pos, sp%last, n, val, s))
      if (n == 3 .and. val /= 0) then
        rank = -1
        return
      end if
      if (n /= 2) cycle
      rank = rank + 1
      dims = [dims, int(field_varint(buf, s, 1), c_int64_t)]
    end do
    if (rank == 0) dims = [0_c_int64_t]          ! (TF_SetAttrShape reads none of it)
  end subroutine

  function itoa(i) result(s)
    integer, intent(in) :: i
    character(len=:), allocatable :: s
    character(len=12) :: buf
    write(buf, '(i0)') i
    s = trim(buf)
  end function

  subroutine append_text(list, value)
    type(text_t), allocatable, intent(inout) :: list(:)
    character(*), intent(in) :: value
    type(text_t), allocatable :: grown(:)
    integer :: i
    allocate(grown(size(list) + 1))
    do i = 1, size(list)
      call move_alloc(list(i)%s, grown(i)%s)
    end do
    grown(size(grown))%s = value
    call move_alloc(grown, list)
  end subroutine

  ! --- spans --------------------------------------------------------------------

  ! The last field `number` (length-delimited) of the message in sp; empty when none.
  type(span) function field_span(buf, sp, number) result(out)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: sp
    integer, intent(in) :: number
    integer(int64) :: pos, val
    integer :: n
    type(span) :: s
    out = span(1, 0)
    pos = sp%first
    do while (next_field(buf, pos, sp%last, n, val, s))
      if (n == number) out = s
    end do
  end function

  integer(int64) function field_varint(buf, sp, number) result(out)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: sp
    integer, intent(in) :: number
    integer(int64) :: pos, val
    integer :: n
    type(span) :: s
    out = 0
    pos = sp%first
    do while (next_field(buf, pos, sp%last, n, val, s))
      if (n == number) out = val
    end do
  end function

  logical function same_text(a, sa, b, sb)
    integer(c_int8_t), intent(in) :: a(:), b(:)
    type(span), intent(in) :: sa, sb
    same_text = sa%last - sa%first == sb%last - sb%first
    if (same_text .and. sa%last >= sa%first) same_text = all(a(sa%first:sa%last) == b(sb%first:sb%last))
  end function

  function span_text(buf, sp) result(s)
    integer(c_int8_t), intent(in) :: buf(:)
    type(span), intent(in) :: sp
    character(len=:), allocatable :: s
    integer(int64) :: i
    allocate(character(len=max(0_int64, sp%last - sp%first + 1)) :: s)
    do i = sp%first, sp%last
      s(i - sp%first + 1:i - sp%first + 1) = achar(iand(int(buf(i)), 255))
    end do
  end function
end module tf_bridge_objects
