! tf_bridge: TensorFlow from Fortran, through TensorFlow's C API.
!
!   use tf_bridge
!   type(tf_model) :: model;  type(tf_tensor) :: x(1), y(1);  type(tf_status) :: st
!   call tf_load_saved_model(model, "export_dir", st)           ! tags default "serve"
!   call tf_tensor_from(x(1), xs, st)                           ! zero-copy, dims reversed
!   call model%run("serving_default", ["x"], x, ["y"], y, st)
!   call tf_to_array(y(1), ys, st)
!
! Every procedure reports through a tf_status (TF's code, 0 is OK, and a
! message naming what failed); none stops the program.  Handles (tf_tensor,
! tf_model, tf_trainer) are reference counted and released when they go out
! of scope.  See docs/guides/fortran.md.
module tf_bridge
  use tf_bridge_c, only: TF_FLOAT, TF_DOUBLE, TF_INT8, TF_INT16, TF_INT32, TF_INT64, TF_BOOL, TF_STRING, &
       TF_RESOURCE, TF_OK, TF_INVALID_ARGUMENT, TF_NOT_FOUND, TF_FAILED_PRECONDITION, TF_UNIMPLEMENTED, TF_INTERNAL
  use tf_bridge_status, only: tf_status, tf_dtype_name, tf_live_objects, &
       TF_LIVE_TENSORS, TF_LIVE_MODELS, TF_LIVE_TRAINERS, TF_LIVE_BORROWED
  use tf_bridge_tensor, only: tf_tensor
  use tf_bridge_model, only: tf_model, tf_signature, tf_tensor_info, tf_saver_def, TF_NAME_LEN, &
       tf_load_library, tf_load_julia_op, tf_load_saved_model, tf_load_graph_def
  use tf_bridge_from, only: tf_tensor_from
  use tf_bridge_to, only: tf_to_array
  use tf_bridge_view, only: tf_view
  use tf_bridge_alloc, only: tf_allocate
  use tf_bridge_train, only: tf_trainer, tf_optimizer, tf_sgd, tf_adam, tf_trainer_create
  implicit none
  public
end module tf_bridge
