# Julia side of the TensorFlow op TwoLayerAuto (custom_op.txt).
#
# bridge.customop.load(".") includes this file; TensorFlow's kernels then call
# two_layer with views of TensorFlow's buffers, in TensorFlow's
# index order (A[i, j] is TF's A[i-1, j-1]).  Write the outputs in place and
# keep no reference to any argument after returning: the buffers belong to
# TensorFlow.
#
# The gradient comes from ForwardDiff (@gradient forwarddiff): TwoLayerAutoGrad runs
# two_layer on dual numbers, so write it for any number type (no Float64
# annotations, buffers allocated with the inputs' element type).

"""
    two_layer(jac, x, w1, b1, w2, b2)

Forward pass of TwoLayerAuto.

- `jac`  output: Float64 vector of length m*n: write it in place (`jac .= ...`)
- `x`    input: Float64 vector of length n, read-only
- `w1`   input: Float64 matrix of size (h, n), read-only
- `b1`   input: Float64 vector of length h, read-only
- `w2`   input: Float64 matrix of size (m, h), read-only
- `b2`   input: Float64 vector of length m, read-only
"""
function two_layer(jac, x, w1, b1, w2, b2)
    # jac: Float64 vector of length m*n: write it in place (`jac .= ...`)
    error("two_layer: compute the outputs of TwoLayerAuto here (see the docstring above)")
end
