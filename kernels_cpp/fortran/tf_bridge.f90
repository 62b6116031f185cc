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
! message naming what failed); none stops the program.  See docs/guides/fortran.md.
module tf_bridge
  use tf_bridge_core
  use tf_bridge_from
  use tf_bridge_to
  use tf_bridge_view
  use tf_bridge_alloc
  implicit none
  public
end module tf_bridge
