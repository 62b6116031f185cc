! What tf_trainer_create adds to the model's graph, under a scope of its own
! (tf_trainer, tf_trainer_1, ...):
!   target, mse          a built loss: Mean(Square(Sub(output, target)), all axes)
!   gradients/...        TF_AddGradientsWithPrefix of the loss with respect to
!                        each read (ReadVariableOp) of each variable it trains;
!                        a variable read several times gets the AddN of them
!   learning_rate        a float32 placeholder each step feeds
!   <var>/Adam, ...      Adam's slots and beta powers (VarHandleOps), set by init
!   update_<k>, train    the optimizer's kernels, and the NoOp a step runs
!   save/...             a SaveV2 and a RestoreV2 of every variable, under TF's names
! The variables are those the loss reads through ReadVariableOp of a
! VarHandleOp (TF1 exports, the bridge's): a TF2 export reads its variables
! inside function calls, where TF_AddGradients does not go, and is refused.
submodule (tf_bridge_train) tf_bridge_train_build
  use tf_bridge_graph
  implicit none

  ! A variable the trainer updates or saves.
  type :: variable_t
    type(c_ptr) :: handle = c_null_ptr               ! its VarHandleOp
    character(len=TF_NAME_LEN) :: name = ""          ! that op's name
    character(len=TF_NAME_LEN) :: key = ""           ! its checkpoint key
    integer :: dtype = 0
    type(tf_output_c), allocatable :: reads(:)       ! its ReadVariableOps on the loss's path
    type(tf_output_c) :: grad = tf_output_c(c_null_ptr, 0_c_int)
  end type

contains

  module procedure build_trainer
    type(op_builder) :: b
    type(tf_output_c) :: loss
    type(variable_t), allocatable :: vars(:), state(:)
    type(c_ptr) :: init
    type(tf_tensor) :: nothing(1)
    character(len=:), allocatable :: scope
    ok = .false.
    b%graph = self%model%graph
    b%status = TF_NewStatus()
    scope = free_scope(b%graph)
    if (add_loss(self, b, scope, who, loss, st)) then
      if (find_variables(self, loss, who, only, vars, st)) then
        if (add_gradients(b, scope, loss, vars, who, st)) then
          call add_updates(self, b, scope, vars, state, init)
          call add_saver(self, b, scope, [vars, state])
          if (b%ok()) then
            ok = .true.
            self%variables = vars%name
            if (c_associated(init)) then      ! the optimizer's variables get their first values
              call self%model%run_tensors([character(len=1) ::], nothing(1:0), [character(len=1) ::], &
                   nothing(1:0), st, targets=[scope // "/init"])
              ok = st%ok()
              if (.not. ok) st%message = who // ": initialising the optimizer's variables: " // st%message
            end if
          else
            call set_status(st, TF_GetCode(b%status), who // ": adding the optimizer's operations: " // b%message())
          end if
        end if
      end if
    end if
    call TF_DeleteStatus(b%status)
  end procedure

  ! tf_trainer, else tf_trainer_1, ...: a scope no operation of the graph is in
  ! (a trainer that failed half-way leaves its first operations there).
  function free_scope(graph) result(scope)
    type(c_ptr), intent(in) :: graph
    character(len=:), allocatable :: scope, name
    integer(c_size_t) :: pos
    type(c_ptr) :: op
    integer :: k
    character(len=16) :: suffix
    scope = "tf_trainer"
    k = 0
    pos = 0
    do
      op = TF_GraphNextOperation(graph, pos)
      if (.not. c_associated(op)) exit
      name = op_text(TF_OperationName(op))
      if (name /= scope .and. index(name, scope // "/") /= 1) cycle
      k = k + 1                        ! taken: try the next one, from the first operation again
      write(suffix, '(a,i0)') "_", k
      scope = "tf_trainer" // trim(suffix)
      pos = 0
    end do
  end function

  ! The loss: a scalar float output of the signature, or the mse of an output against a new placeholder.
  logical function add_loss(self, b, scope, who, loss, st) result(ok)
    type(tf_trainer), intent(inout) :: self
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: scope, who
    type(tf_output_c), intent(out) :: loss
    type(tf_status), intent(inout) :: st
    character(len=TF_NAME_LEN) :: key
    type(tf_output_c) :: out
    type(c_ptr) :: target, square, axes, mean
    integer(c_int64_t), allocatable :: dims(:)
    integer :: k, j, dtype, rank, i
    ok = .false.
    k = self%model%signature_index(self%signature)
    if (k == 0) then
      call set_status(st, TF_NOT_FOUND, who // ": " // self%model%path // " has no signature '" &
           // trim(self%signature) // "'")
      return
    end if
    key = merge(self%output, self%loss, len_trim(self%output) > 0)
    j = 0
    do i = 1, size(self%model%signatures(k)%outputs)
      if (self%model%signatures(k)%outputs(i)%key == key) j = i
    end do
    if (j == 0) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the signature has no output '" // trim(key) // "'")
      return
    end if
    if (.not. resolve(self%model, self%model%signatures(k)%outputs(j)%name, out, who, st)) return
    dtype = TF_OperationOutputType(out)
    if (dtype /= TF_FLOAT .and. dtype /= TF_DOUBLE) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the output '" // trim(key) // "' is " &
           // tf_dtype_name(dtype) // "; a loss is float32 or float64")
      return
    end if
    rank = TF_GraphGetTensorNumDims(b%graph, out, b%status)
    allocate(dims(max(rank, 0)))
    if (rank > 0) call TF_GraphGetTensorShape(b%graph, out, dims, int(rank, c_int), b%status)
    if (len_trim(self%output) == 0) then
      if (rank > 0) then
        call set_status(st, TF_INVALID_ARGUMENT, who // ": the output '" // trim(key) // "' has the shape " &
             // shape_text(int(dims, int64)) // "; a loss is a scalar")
        return
      end if
      loss = out
      self%loss_tensor = self%model%signatures(k)%outputs(j)%name
      ok = .true.
      return
    end if
    if (rank < 0) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the output '" // trim(key) // "' has no known rank: " &
           // "'mse' averages over all its axes")
      return
    end if
    call b%start("Placeholder", scope // "/target")
    call b%attr_type("dtype", dtype)
    call b%attr_shape("shape", dims, rank)
    target = b%finish()
    square = unary(b, "Square", scope // "/mse/Square", out0(binary(b, "Sub", scope // "/mse/sub", out, &
         out0(target))))
    axes = int32_range(b, scope // "/mse/axes", rank)
    mean = binary(b, "Mean", scope // "/mse", out0(square), out0(axes))
    if (.not. b%ok()) then
      call set_status(st, TF_GetCode(b%status), who // ": building the loss: " // b%message())
      return
    end if
    loss = out0(mean)
    self%target = scope // "/target:0"
    self%loss_tensor = scope // "/mse:0"
    ok = .true.
  end function

  ! The variables the loss reads (ReadVariableOp of a VarHandleOp), by name:
  ! trainable ones (the model's collection, when it has one) or those in only.
  logical function find_variables(self, loss, who, only, vars, st) result(ok)
    type(tf_trainer), intent(in) :: self
    type(tf_output_c), intent(in) :: loss
    character(*), intent(in) :: who
    character(*), intent(in), optional :: only(:)
    type(variable_t), allocatable, intent(out) :: vars(:)
    type(tf_status), intent(inout) :: st
    type(c_ptr), allocatable :: stack(:), seen(:)
    type(c_ptr) :: op
    type(tf_output_c) :: src
    character(len=:), allocatable :: op_type
    integer :: n_stack, n_seen, i, k
    logical :: calls_read
    ok = .false.
    allocate(vars(0), stack(16), seen(64))
    n_stack = 1
    stack(1) = loss%oper
    n_seen = 0
    calls_read = .false.
    do while (n_stack > 0)
      op = stack(n_stack)
      n_stack = n_stack - 1
      if (any([(c_associated(op, seen(i)), i = 1, n_seen)])) cycle
      if (n_seen == size(seen)) seen = [seen, seen]
      n_seen = n_seen + 1
      seen(n_seen) = op
      op_type = op_text(TF_OperationOpType(op))
      do i = 0, TF_OperationNumInputs(op) - 1
        src = TF_OperationInput(tf_output_c(op, int(i, c_int)))
        if (op_text(TF_OperationOpType(src%oper)) == "VarHandleOp") then
          if (op_type == "ReadVariableOp") call add_read(vars, src%oper, out0(op))
          if (index(op_type, "PartitionedCall") > 0) calls_read = .true.
        end if
        if (n_stack == size(stack)) stack = [stack, stack]
        n_stack = n_stack + 1
        stack(n_stack) = src%oper
      end do
    end do
    call sort_by_name(vars)
    if (present(only)) then
      do i = 1, size(only)
        if (.not. any(vars%name == only(i))) then
          call set_status(st, TF_INVALID_ARGUMENT, who // ": the loss reads no variable '" // trim(only(i)) &
               // "'" // read_list(vars))
          return
        end if
      end do
      vars = pack(vars, [(any(only == vars(k)%name), k = 1, size(vars))])
    else if (allocated(self%model%trainable)) then
      vars = pack(vars, [(any(self%model%trainable == trim(vars(k)%name) // ":0"), k = 1, size(vars))])
    end if
    if (size(vars) == 0) then
      if (calls_read) then
        call set_status(st, TF_UNIMPLEMENTED, who // ": " // self%model%path // " reads its variables inside " &
             // "function calls (a TF2 export: tf.saved_model.save, Keras); tf_trainer trains graphs that read " &
             // "them directly (TF1 exports, bridge.saved_model.save), as TensorFlow's C++ gradients cannot " &
             // "go into a function call")
      else
        call set_status(st, TF_INVALID_ARGUMENT, who // ": the loss reads no trainable variable")
      end if
      return
    end if
    do k = 1, size(vars)
      vars(k)%dtype = TF_OperationOutputType(vars(k)%reads(1))
      if (vars(k)%dtype /= TF_FLOAT .and. vars(k)%dtype /= TF_DOUBLE) then
        call set_status(st, TF_INVALID_ARGUMENT, who // ": the variable '" // trim(vars(k)%name) // "' is " &
             // tf_dtype_name(vars(k)%dtype) // "; tf_trainer trains float32 and float64 variables")
        return
      end if
    end do
    ok = .true.
  end function

  subroutine add_read(vars, handle, read)
    type(variable_t), allocatable, intent(inout) :: vars(:)
    type(c_ptr), intent(in) :: handle
    type(tf_output_c), intent(in) :: read
    type(variable_t) :: new
    integer :: k
    do k = 1, size(vars)
      if (c_associated(vars(k)%handle, handle)) then
        vars(k)%reads = [vars(k)%reads, read]
        return
      end if
    end do
    new%handle = handle
    new%name = op_text(TF_OperationName(handle))
    new%key = new%name                     ! as TF's Saver keys a variable
    new%reads = [read]
    vars = [vars, new]
  end subroutine

  function read_list(vars) result(s)
    type(variable_t), intent(in) :: vars(:)
    character(len=:), allocatable :: s
    integer :: k
    s = "; it reads:"
    if (size(vars) == 0) s = "; it reads none"
    do k = 1, size(vars)
      s = s // " '" // trim(vars(k)%name) // "'"
    end do
  end function

  subroutine sort_by_name(vars)
    type(variable_t), intent(inout) :: vars(:)
    type(variable_t) :: held
    integer :: i, j
    do i = 2, size(vars)
      held = vars(i)
      j = i - 1
      do while (j >= 1)
        if (vars(j)%name <= held%name) exit
        vars(j + 1) = vars(j)
        j = j - 1
      end do
      vars(j + 1) = held
    end do
  end subroutine

  ! Each variable's gradient: d loss / d (each of its reads), summed.
  logical function add_gradients(b, scope, loss, vars, who, st) result(ok)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: scope, who
    type(tf_output_c), intent(in) :: loss
    type(variable_t), allocatable, intent(inout) :: vars(:)
    type(tf_status), intent(inout) :: st
    type(tf_output_c) :: y(1), dx(1)
    type(tf_output_c), allocatable :: x(:), dy(:), got(:)
    integer :: k, first, i, n
    logical, allocatable :: keep(:)
    ok = .false.
    y(1) = loss
    dx(1) = out0(unary(b, "OnesLike", scope // "/loss_seed", loss))
    allocate(x(sum([(size(vars(k)%reads), k = 1, size(vars))])))
    allocate(dy(size(x)), got(size(x)), keep(size(vars)))
    first = 1
    do k = 1, size(vars)
      x(first:first + size(vars(k)%reads) - 1) = vars(k)%reads
      first = first + size(vars(k)%reads)
    end do
    if (b%ok()) call TF_AddGradientsWithPrefix(b%graph, scope // "/gradients" // c_null_char, y, 1_c_int, x, &
         int(size(x), c_int), dx, b%status, dy)
    if (.not. b%ok()) then
      call set_status(st, TF_GetCode(b%status), who // ": TensorFlow's gradients of the loss: " // b%message())
      return
    end if
    first = 1
    do k = 1, size(vars)
      n = 0                          ! the gradients TensorFlow gave for its reads (null: none)
      do i = first, first + size(vars(k)%reads) - 1
        if (.not. c_associated(dy(i)%oper)) cycle
        n = n + 1
        got(n) = dy(i)
      end do
      first = first + size(vars(k)%reads)
      keep(k) = n > 0
      if (n == 1) vars(k)%grad = got(1)
      if (n > 1) then
        call b%start("AddN", scope // "/gradients_sum/" // trim(vars(k)%name))
        call b%inputs(got(1:n))
        vars(k)%grad = out0(b%finish())
      end if
    end do
    vars = pack(vars, keep)
    if (size(vars) == 0) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the loss has no gradient with respect to any variable")
      return
    end if
    ok = .true.
  end function

  ! The learning rate, the optimizer's variables (state, with their init op)
  ! and updates, and the train op.
  subroutine add_updates(self, b, scope, vars, state, init)
    type(tf_trainer), intent(inout) :: self
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: scope
    type(variable_t), intent(in) :: vars(:)
    type(variable_t), allocatable, intent(out) :: state(:)
    type(c_ptr), intent(out) :: init
    type(c_ptr) :: rate, beta1, beta2, epsilon, updates(size(vars)), finish(2), inits(2 + 2 * size(vars))
    type(variable_t) :: powers(2)
    type(tf_output_c) :: inputs(6)
    character(len=TF_NAME_LEN + 64) :: at
    integer :: k
    allocate(state(0))
    init = c_null_ptr
    call b%start("Placeholder", scope // "/learning_rate")
    call b%attr_type("dtype", TF_FLOAT)
    call b%attr_shape("shape", [integer(c_int64_t) ::], 0)
    rate = b%finish()
    self%rate_feed = scope // "/learning_rate:0"
    if (self%optimizer%name == "sgd") then
      do k = 1, size(vars)
        at = scope // "/update_" // trim(vars(k)%name)
        inputs(1) = cast(b, rate, vars(k)%dtype, trim(at) // "/Cast")    ! (before start: one op at a time)
        call b%start("ResourceApplyGradientDescent", trim(at) // "/ResourceApplyGradientDescent")
        call b%input(out0(vars(k)%handle))
        call b%input(inputs(1))
        call b%input(vars(k)%grad)
        updates(k) = b%finish()
      end do
      call no_op(b, scope // "/train", updates)
      self%train_op = scope // "/train"
      return
    end if
    beta1 = float_const(b, scope // "/beta1", self%optimizer%beta1)
    beta2 = float_const(b, scope // "/beta2", self%optimizer%beta2)
    epsilon = float_const(b, scope // "/epsilon", self%optimizer%epsilon)
    ! As TF: the beta powers first (float32, starting at beta1 and beta2), then m and v of each variable.
    powers(1) = new_variable(b, scope, "beta1_power", TF_FLOAT, [variable_t ::])
    powers(2) = new_variable(b, scope, "beta2_power", TF_FLOAT, [powers(1)])
    inits(1) = assign(b, scope // "/init/beta1_power", powers(1)%handle, beta1, [c_ptr ::])
    inits(2) = assign(b, scope // "/init/beta2_power", powers(2)%handle, beta2, [c_ptr ::])
    state = powers
    do k = 1, size(vars)
      ! m and v: both "<var>/Adam" made unique, as TF names slots (so v is <var>/Adam_1 in a fresh graph)
      state = [state, new_variable(b, scope, trim(vars(k)%name) // "/Adam", vars(k)%dtype, state, vars(k)%reads(1))]
      state = [state, new_variable(b, scope, trim(vars(k)%name) // "/Adam", vars(k)%dtype, state, vars(k)%reads(1))]
      inits(1 + 2 * k) = assign(b, scope // "/init/" // trim(state(size(state) - 1)%key), &
           state(size(state) - 1)%handle, unary(b, "ZerosLike", scope // "/init/zeros_" // trim(vars(k)%name) &
           // "_m", vars(k)%reads(1)), [c_ptr ::])
      inits(2 + 2 * k) = assign(b, scope // "/init/" // trim(state(size(state))%key), &
           state(size(state))%handle, unary(b, "ZerosLike", scope // "/init/zeros_" // trim(vars(k)%name) &
           // "_v", vars(k)%reads(1)), [c_ptr ::])
      at = scope // "/update_" // trim(vars(k)%name)
      inputs(1) = cast(b, read(b, trim(at) // "/beta1_power", powers(1)%handle, TF_FLOAT, [c_ptr ::]), &
           vars(k)%dtype, trim(at) // "/Cast")
      inputs(2) = cast(b, read(b, trim(at) // "/beta2_power", powers(2)%handle, TF_FLOAT, [c_ptr ::]), &
           vars(k)%dtype, trim(at) // "/Cast_1")
      inputs(3) = cast(b, rate, vars(k)%dtype, trim(at) // "/Cast_2")
      inputs(4) = cast(b, beta1, vars(k)%dtype, trim(at) // "/Cast_3")
      inputs(5) = cast(b, beta2, vars(k)%dtype, trim(at) // "/Cast_4")
      inputs(6) = cast(b, epsilon, vars(k)%dtype, trim(at) // "/Cast_5")
      call b%start("ResourceApplyAdam", trim(at) // "/ResourceApplyAdam")
      call b%input(out0(vars(k)%handle))
      call b%input(out0(state(size(state) - 1)%handle))
      call b%input(out0(state(size(state))%handle))
      call b%inputs_each(inputs(1:6))
      call b%input(vars(k)%grad)
      updates(k) = b%finish()
    end do
    ! TF's _finish: after every update, beta1_power *= beta1 and beta2_power *= beta2.
    finish(1) = assign(b, scope // "/update_beta1_power", powers(1)%handle, binary(b, "Mul", scope &
         // "/update_beta1_power/mul", out0(read(b, scope // "/update_beta1_power/read", powers(1)%handle, &
         TF_FLOAT, updates)), out0(beta1)), updates)
    finish(2) = assign(b, scope // "/update_beta2_power", powers(2)%handle, binary(b, "Mul", scope &
         // "/update_beta2_power/mul", out0(read(b, scope // "/update_beta2_power/read", powers(2)%handle, &
         TF_FLOAT, updates)), out0(beta2)), updates)
    call no_op(b, scope // "/train", [updates, finish])
    self%train_op = scope // "/train"
    call no_op(b, scope // "/init", inits)
    init = TF_GraphOperationByName(b%graph, scope // "/init" // c_null_char)
  end subroutine

  ! A new VarHandleOp <scope>/<name>, its checkpoint key <name> made unique
  ! against the graph's operations and taken (as TF's unique_name: name_1, ...),
  ! of the shape of the tensor shape_of (default: a scalar).
  type(variable_t) function new_variable(b, scope, name, dtype, taken, shape_of) result(v)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: scope, name
    integer, intent(in) :: dtype
    type(variable_t), intent(in) :: taken(:)
    type(tf_output_c), intent(in), optional :: shape_of
    integer(c_int64_t), allocatable :: dims(:)
    integer :: k, rank
    character(len=16) :: suffix
    rank = 0
    if (present(shape_of)) rank = TF_GraphGetTensorNumDims(b%graph, shape_of, b%status)
    allocate(dims(max(rank, 0)))
    if (rank > 0) call TF_GraphGetTensorShape(b%graph, shape_of, dims, int(rank, c_int), b%status)
    v%key = name
    k = 0
    do while (c_associated(TF_GraphOperationByName(b%graph, trim(v%key) // c_null_char)) .or. &
         any(taken%key == v%key))
      k = k + 1
      write(suffix, '(a,i0)') "_", k
      v%key = name // trim(suffix)
    end do
    v%name = scope // "/" // trim(v%key)
    v%dtype = dtype
    call b%start("VarHandleOp", trim(v%name))
    call b%attr_type("dtype", dtype)
    call b%attr_shape("shape", dims, rank)
    call b%attr_string("shared_name", trim(v%name))
    v%handle = b%finish()
  end function

  ! A SaveV2 and a RestoreV2 (with an AssignVariableOp each) of every variable,
  ! fed the checkpoint's prefix: self%saver, as a SaverDef names them.
  subroutine add_saver(self, b, scope, all)
    type(tf_trainer), intent(inout) :: self
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: scope
    type(variable_t), intent(in) :: all(:)
    type(c_ptr) :: filename, names, slices, saved, restore, assigns(size(all))
    type(tf_output_c) :: reads(size(all))
    type(text_t) :: keys(size(all)), blanks(size(all))
    integer :: k
    call b%start("Placeholder", scope // "/save/filename")
    call b%attr_type("dtype", TF_STRING)
    call b%attr_shape("shape", [integer(c_int64_t) ::], 0)
    filename = b%finish()
    do k = 1, size(all)
      keys(k)%s = trim(all(k)%key)
      blanks(k)%s = ""
      reads(k) = out0(read(b, scope // "/save/read_" // trim(all(k)%key), all(k)%handle, all(k)%dtype, [c_ptr ::]))
    end do
    if (.not. b%ok()) return
    names = string_const(b%graph, scope // "/save/tensor_names", keys, .false., b%status)
    if (b%ok()) slices = string_const(b%graph, scope // "/save/shape_and_slices", blanks, .false., b%status)
    call b%start("SaveV2", scope // "/save/SaveV2")
    call b%input(out0(filename))
    call b%input(out0(names))
    call b%input(out0(slices))
    call b%inputs(reads)
    saved = b%finish()
    call b%start("Identity", scope // "/save/control_dependency")
    call b%input(out0(filename))
    call b%control([saved])
    saved = b%finish()
    call b%start("RestoreV2", scope // "/save/RestoreV2")
    call b%input(out0(filename))
    call b%input(out0(names))
    call b%input(out0(slices))
    call b%attr_types("dtypes", all%dtype)
    restore = b%finish()
    do k = 1, size(all)
      assigns(k) = assign(b, scope // "/save/assign_" // trim(all(k)%key), all(k)%handle, &
           restore, [c_ptr ::], int(k - 1))
    end do
    call no_op(b, scope // "/save/restore_all", assigns)
    self%saver = tf_saver_def(scope // "/save/filename:0", scope // "/save/control_dependency:0", &
         scope // "/save/restore_all")
    self%keys = [character(len=TF_NAME_LEN) :: (keys(k)%s, k = 1, size(all))]
  end subroutine

  ! --- one op each ---------------------------------------------------------------------

  type(c_ptr) function unary(b, op_type, name, x) result(op)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: op_type, name
    type(tf_output_c), intent(in) :: x
    call b%start(op_type, name)
    call b%input(x)
    op = b%finish()
  end function

  type(c_ptr) function binary(b, op_type, name, x, y) result(op)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: op_type, name
    type(tf_output_c), intent(in) :: x, y
    call b%start(op_type, name)
    call b%input(x)
    call b%input(y)
    op = b%finish()
  end function

  ! x (a float32 op) as dtype: x itself when it is float32 (tf.cast's rule).
  type(tf_output_c) function cast(b, x, dtype, name)
    type(op_builder), intent(inout) :: b
    type(c_ptr), intent(in) :: x
    integer, intent(in) :: dtype
    character(*), intent(in) :: name
    cast = out0(x)
    if (dtype == TF_FLOAT) return
    call b%start("Cast", name)
    call b%input(out0(x))
    call b%attr_type("DstT", dtype)
    cast = out0(b%finish())
  end function

  type(c_ptr) function read(b, name, handle, dtype, after) result(op)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: name
    type(c_ptr), intent(in) :: handle, after(:)
    integer, intent(in) :: dtype
    call b%start("ReadVariableOp", name)
    call b%input(out0(handle))
    call b%attr_type("dtype", dtype)
    call b%control(after)
    op = b%finish()
  end function

  ! AssignVariableOp(handle, output index of value) after the ops in after.
  type(c_ptr) function assign(b, name, handle, value, after, index) result(op)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: name
    type(c_ptr), intent(in) :: handle, value, after(:)
    integer, intent(in), optional :: index
    integer :: i
    i = 0
    if (present(index)) i = index
    call b%start("AssignVariableOp", name)
    call b%input(out0(handle))
    call b%input(tf_output_c(value, int(i, c_int)))
    call b%control(after)
    op = b%finish()
  end function

  subroutine no_op(b, name, after)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: name
    type(c_ptr), intent(in) :: after(:)
    type(c_ptr) :: op
    call b%start("NoOp", name)
    call b%control(after)
    op = b%finish()
  end subroutine

  ! A float32 scalar Const of value (rounded to float32, as TF makes a Python float).
  type(c_ptr) function float_const(b, name, value) result(op)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: name
    real(c_double), intent(in) :: value
    type(c_ptr) :: t
    real(c_float), pointer :: p
    integer(c_int64_t) :: dims(1)
    dims = 0
    t = TF_AllocateTensor(TF_FLOAT, dims, 0_c_int, 4_c_size_t)
    call c_f_pointer(TF_TensorData(t), p)
    p = real(value, c_float)
    call b%start("Const", name)
    call b%attr_tensor("value", t)
    call b%attr_type("dtype", TF_FLOAT)
    op = b%finish()
    call TF_DeleteTensor(t)
  end function

  ! An int32 vector Const 0, 1, ..., n-1.
  type(c_ptr) function int32_range(b, name, n) result(op)
    type(op_builder), intent(inout) :: b
    character(*), intent(in) :: name
    integer, intent(in) :: n
    type(c_ptr) :: t
    integer(c_int32_t), pointer :: p(:)
    integer(c_int64_t) :: dims(1)
    integer :: i
    dims = n
    t = TF_AllocateTensor(TF_INT32, dims, 1_c_int, int(4 * n, c_size_t))
    if (n > 0) then
      call c_f_pointer(TF_TensorData(t), p, [n])
      p = [(int(i, c_int32_t), i = 0, n - 1)]
    end if
    call b%start("Const", name)
    call b%attr_tensor("value", t)
    call b%attr_type("dtype", TF_INT32)
    op = b%finish()
    call TF_DeleteTensor(t)
  end function
end submodule tf_bridge_train_build
