! tf_trainer: training a loaded inference SavedModel from Fortran, with no
! train signature baked in by Python.  tf_trainer_create adds to the model's
! graph the gradients of a loss (TF_AddGradientsWithPrefix: TensorFlow's C++
! gradient registry) with respect to the variables the loss reads, and an
! optimizer's updates on TensorFlow's own kernels, as the Python bridge's
! (and TF's tf.compat.v1.train) optimizers build them:
!   tf_sgd(lr):   ResourceApplyGradientDescent
!   tf_adam(lr, beta1, beta2, epsilon): ResourceApplyAdam with the slots m, v
!     (zeros) and the non-slot beta1_power, beta2_power (float32, multiplied
!     by beta1, beta2 after every update)
! Hyperparameters are float32, cast to each variable's dtype, as TF makes a
! Python float; the learning rate is fed at each step (set_learning_rate).
! Its checkpoints hold the model's variables and the optimizer's under the
! names TF's Saver gives them (w, w/Adam, w/Adam_1, beta1_power, ...), so
! Python (bridge.train.Saver, tf.compat.v1.train.Saver) restores them into
! the same model trained there.  The graph building is in the submodule
! tf_bridge_train_build.
module tf_bridge_train
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  use tf_bridge_c
  use tf_bridge_status
  use tf_bridge_tensor
  use tf_bridge_model
  use tf_bridge_from, only: tf_tensor_from
  use tf_bridge_to, only: tf_to_array
  implicit none
  private
  public :: tf_trainer, tf_optimizer, tf_sgd, tf_adam, tf_trainer_create

  ! An optimizer and its hyperparameters (tf_sgd, tf_adam make them).
  type :: tf_optimizer
    character(len=8) :: name = ""                  ! "sgd" or "adam"
    real(c_double) :: learning_rate = 0.001d0
    real(c_double) :: beta1 = 0.9d0, beta2 = 0.999d0, epsilon = 1d-8
  end type

  ! A model with a loss, gradients and an optimizer's update ops.  A handle:
  ! copies share the ops and the optimizer's variables (reference counted, as
  ! tf_tensor and tf_model), and the trainer holds its model.
  type :: tf_trainer
    type(tf_model) :: model                        ! the model it trains
    type(tf_optimizer) :: optimizer
    character(len=TF_NAME_LEN) :: signature = ""
    character(len=TF_NAME_LEN) :: loss = ""        ! a scalar output's key, or "mse" of output
    character(len=TF_NAME_LEN) :: output = ""      ! the output a built loss compares with the target
    character(len=TF_NAME_LEN), allocatable :: variables(:)   ! what it trains: the variables' op names
    character(len=TF_NAME_LEN), allocatable :: keys(:)        ! its checkpoint's keys
    integer, pointer, private :: refs => null()
    character(len=TF_NAME_LEN), private :: loss_tensor = "", target = "", rate_feed = "", train_op = ""
    type(tf_saver_def), private :: saver
  contains
    procedure :: step => trainer_step
    procedure :: set_learning_rate => trainer_set_learning_rate
    procedure :: learning_rate => trainer_learning_rate
    procedure :: save_checkpoint => trainer_save_checkpoint
    procedure :: restore_checkpoint => trainer_restore_checkpoint
    procedure :: delete => trainer_delete
    procedure, private :: trainer_assign
    generic :: assignment(=) => trainer_assign
    final :: trainer_final
  end type

  interface         ! tf_bridge_train_build
    ! Adds the loss, gradients, updates and saver of self (whose model,
    ! optimizer, signature, loss and output are set) to the model's graph and
    ! initialises the optimizer's variables; .false. with st set when it cannot.
    module function build_trainer(self, who, only, st) result(ok)
      type(tf_trainer), intent(inout) :: self
      character(*), intent(in) :: who
      character(*), intent(in), optional :: only(:)
      type(tf_status), intent(inout) :: st
      logical :: ok
    end function
  end interface

contains

  type(tf_optimizer) function tf_sgd(learning_rate)
    real(c_double), intent(in) :: learning_rate
    tf_sgd = tf_optimizer("sgd", learning_rate)
  end function

  ! Adam with TF's defaults for what is not given.
  type(tf_optimizer) function tf_adam(learning_rate, beta1, beta2, epsilon)
    real(c_double), intent(in), optional :: learning_rate, beta1, beta2, epsilon
    tf_adam%name = "adam"
    if (present(learning_rate)) tf_adam%learning_rate = learning_rate
    if (present(beta1)) tf_adam%beta1 = beta1
    if (present(beta2)) tf_adam%beta2 = beta2
    if (present(epsilon)) tf_adam%epsilon = epsilon
  end function

  ! A trainer of model for a loss of its signature: the scalar output whose
  ! key is loss, or (output given) loss="mse", the mean squared error of that
  ! output against a target fed to each step.  variables: the op names of
  ! the variables to train (default: those the loss reads, of the model's
  ! trainable_variables collection when it has one).
  subroutine tf_trainer_create(trainer, model, signature, loss, optimizer, st, output, variables)
    type(tf_trainer), intent(inout) :: trainer
    type(tf_model), intent(in) :: model
    character(*), intent(in) :: signature, loss
    type(tf_optimizer), intent(in) :: optimizer
    type(tf_status), intent(out) :: st
    character(*), intent(in), optional :: output, variables(:)
    character(len=:), allocatable :: who
    call trainer%delete()
    st%message = ""
    who = "tf_trainer_create('" // trim(signature) // "', '" // trim(loss) // "')"
    if (.not. c_associated(model%session)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the model is not loaded (or was closed)")
      return
    end if
    if (optimizer%name /= "sgd" .and. optimizer%name /= "adam") then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": unknown optimizer '" // trim(optimizer%name) &
           // "'; tf_sgd(...) and tf_adam(...) make the known ones")
      return
    end if
    if (present(output)) then
      if (loss /= "mse") then
        call set_status(st, TF_INVALID_ARGUMENT, who // ": a loss built from the output '" // trim(output) &
             // "' is one of: 'mse' (mean squared error against the target each step feeds)")
        return
      end if
      trainer%output = output
    end if
    trainer%model = model
    trainer%optimizer = optimizer
    trainer%signature = signature
    trainer%loss = loss
    if (.not. build_trainer(trainer, who, variables, st)) then
      call trainer%delete()           ! (the ops already added stay in the graph, never run)
      return
    end if
    allocate(trainer%refs)
    trainer%refs = 1
    call count_live(TF_LIVE_TRAINERS, 1)
  end subroutine

  ! One training step: the signature's inputs by key (and, for a built loss,
  ! the target, shaped as the output), the update, and the loss computed before
  ! it (as TF's sess.run([train_op, loss]) gives it).
  subroutine trainer_step(self, input_keys, inputs, st, target, loss)
    class(tf_trainer), intent(in) :: self
    character(*), intent(in) :: input_keys(:)
    type(tf_tensor), intent(in) :: inputs(:)
    type(tf_status), intent(out) :: st
    type(tf_tensor), intent(in), optional :: target
    real(c_double), intent(out), optional :: loss
    character(len=TF_NAME_LEN) :: feeds(size(inputs) + 2)
    type(tf_tensor) :: values(size(inputs) + 2), fetched(1)
    type(tf_output_c) :: where
    real(c_float), target :: rate
    real(c_float) :: loss32
    real(c_double) :: loss64
    character(len=:), allocatable :: who
    integer :: n
    st%message = ""
    who = "step"
    if (.not. associated(self%refs)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the trainer is not made (tf_trainer_create) or deleted")
      return
    end if
    who = "step('" // trim(self%signature) // "')"
    if (len_trim(self%target) == 0 .and. present(target)) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the loss '" // trim(self%loss) &
           // "' is an output of the signature: it takes no target")
      return
    end if
    if (len_trim(self%target) > 0 .and. .not. present(target)) then
      call set_status(st, TF_INVALID_ARGUMENT, who // ": the loss 'mse' of '" // trim(self%output) &
           // "' needs a target (target=)")
      return
    end if
    if (.not. signature_feeds(self%model, self%signature, input_keys, inputs, feeds, who, st)) return
    n = size(inputs)
    values(1:n) = inputs
    n = n + 1
    feeds(n) = self%rate_feed
    rate = real(self%optimizer%learning_rate, c_float)      ! float32, as TF makes a Python float
    call tf_tensor_from(values(n), rate, st, copy=.true.)
    if (len_trim(self%target) > 0) then
      if (.not. c_associated(target%handle)) then
        call set_status(st, TF_FAILED_PRECONDITION, who // ": the target is an empty tensor")
        return
      end if
      if (.not. resolve(self%model, self%target, where, who, st)) return
      if (.not. feed_fits(self%model, "target", where, target, st)) then
        st%message = who // ": " // st%message(len("run: ") + 1:)
        return
      end if
      n = n + 1
      feeds(n) = self%target
      values(n) = target
    end if
    call self%model%run_tensors(feeds(1:n), values(1:n), [self%loss_tensor], fetched, st, targets=[self%train_op])
    if (.not. st%ok()) then
      st%message = who // ": " // st%message
      return
    end if
    if (present(loss)) then
      if (fetched(1)%dtype() == TF_DOUBLE) then
        call tf_to_array(fetched(1), loss64, st)
        loss = loss64
      else
        call tf_to_array(fetched(1), loss32, st)
        loss = loss32
      end if
    end if
  end subroutine

  ! The learning rate of the next steps (fed as float32, as TF makes a Python float).
  subroutine trainer_set_learning_rate(self, learning_rate)
    class(tf_trainer), intent(inout) :: self
    real(c_double), intent(in) :: learning_rate
    self%optimizer%learning_rate = learning_rate
  end subroutine

  real(c_double) function trainer_learning_rate(self)
    class(tf_trainer), intent(in) :: self
    trainer_learning_rate = self%optimizer%learning_rate
  end function

  ! A V2 checkpoint (prefix.index, prefix.data-*) of the model's variables and
  ! the optimizer's, under the keys in self%keys (the folder of prefix must exist).
  subroutine trainer_save_checkpoint(self, prefix, st)
    class(tf_trainer), intent(in) :: self
    character(*), intent(in) :: prefix
    type(tf_status), intent(out) :: st
    call checkpoint(self, prefix, .true., st)
  end subroutine

  subroutine trainer_restore_checkpoint(self, prefix, st)
    class(tf_trainer), intent(in) :: self
    character(*), intent(in) :: prefix
    type(tf_status), intent(out) :: st
    call checkpoint(self, prefix, .false., st)
  end subroutine

  subroutine checkpoint(self, prefix, save, st)
    class(tf_trainer), intent(in) :: self
    character(*), intent(in) :: prefix
    logical, intent(in) :: save
    type(tf_status), intent(out) :: st
    character(len=:), allocatable :: who
    who = trim(merge("save_checkpoint   ", "restore_checkpoint", save)) // "('" // trim(prefix) // "')"
    st%message = ""
    if (.not. associated(self%refs)) then
      call set_status(st, TF_FAILED_PRECONDITION, who // ": the trainer is not made (tf_trainer_create) or deleted")
      return
    end if
    call saver_run(self%model, self%saver, prefix, save, who, st)
  end subroutine

  ! Drops this variable's hold on the trainer (and, through it, on its model).
  subroutine trainer_delete(self)
    class(tf_trainer), intent(inout) :: self
    if (associated(self%refs)) then
      self%refs = self%refs - 1
      if (self%refs == 0) then
        deallocate(self%refs)
        call count_live(TF_LIVE_TRAINERS, -1)
      end if
    end if
    nullify(self%refs)
    call self%model%close()
    if (allocated(self%variables)) deallocate(self%variables)
    if (allocated(self%keys)) deallocate(self%keys)
    self%signature = ""
    self%loss = ""
    self%output = ""
    self%loss_tensor = ""
    self%target = ""
    self%rate_feed = ""
    self%train_op = ""
    self%saver = tf_saver_def()
  end subroutine

  impure elemental subroutine trainer_final(self)
    type(tf_trainer), intent(inout) :: self
    call self%delete()
  end subroutine

  ! lhs = rhs: lhs drops the trainer it held and shares rhs's (self-assignment safe).
  impure elemental subroutine trainer_assign(lhs, rhs)
    class(tf_trainer), intent(inout) :: lhs
    type(tf_trainer), intent(in) :: rhs
    integer, pointer :: refs
    character(len=TF_NAME_LEN), allocatable :: variables(:), keys(:)
    character(len=TF_NAME_LEN) :: names(7)
    type(tf_optimizer) :: optimizer
    type(tf_saver_def) :: saver
    refs => rhs%refs                 ! (copied first: lhs may be rhs)
    if (associated(refs)) refs = refs + 1
    if (allocated(rhs%variables)) variables = rhs%variables
    if (allocated(rhs%keys)) keys = rhs%keys
    names = [rhs%signature, rhs%loss, rhs%output, rhs%loss_tensor, rhs%target, rhs%rate_feed, rhs%train_op]
    optimizer = rhs%optimizer
    saver = rhs%saver
    if (.not. associated(refs, lhs%refs)) lhs%model = rhs%model   ! (the same trainer: the same model)
    call release_keeping_model(lhs)
    lhs%refs => refs
    if (allocated(variables)) call move_alloc(variables, lhs%variables)
    if (allocated(keys)) call move_alloc(keys, lhs%keys)
    lhs%signature = names(1)
    lhs%loss = names(2)
    lhs%output = names(3)
    lhs%loss_tensor = names(4)
    lhs%target = names(5)
    lhs%rate_feed = names(6)
    lhs%train_op = names(7)
    lhs%optimizer = optimizer
    lhs%saver = saver
  contains
    subroutine release_keeping_model(t)
      class(tf_trainer), intent(inout) :: t
      if (associated(t%refs)) then
        t%refs = t%refs - 1
        if (t%refs == 0) then
          deallocate(t%refs)
          call count_live(TF_LIVE_TRAINERS, -1)
        end if
      end if
      nullify(t%refs)
    end subroutine
  end subroutine
end module tf_bridge_train
