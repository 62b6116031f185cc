# Julia side of the TensorFlow op Twice (custom_op.txt).
#
# bridge.customop.load(".") includes this file; TensorFlow's kernels then call
# twice and twice_grad with views of TensorFlow's buffers, in TensorFlow's
# index order (A[i, j] is TF's A[i-1, j-1]).  Write the outputs in place and
# keep no reference to any argument after returning: the buffers belong to
# TensorFlow.

"""
    twice(y, x)

Forward pass of Twice.

- `y`  output: Float64 vector of length n: write it in place (`y .= ...`)
- `x`  input: Float64 vector of length n, read-only
"""
function twice(y, x)
    y .= 2 .* x
    return nothing
end

"""
    twice_grad(grad_x, grad_y, y, x)

Gradient of Twice: given the gradients of a loss with respect to the
outputs (`grad_<output>`), add the gradients with respect to the inputs into
`grad_<input>` (they start at zero).

- `grad_x`  gradient of input x: Float64 vector of length n, zeros on entry: add into it (`grad_x .+= ...`)
- `grad_y`  gradient of output y: Float64 vector of length n, read-only
- `y`       forward output: Float64 vector of length n, read-only
- `x`       forward input: Float64 vector of length n, read-only
"""
function twice_grad(grad_x, grad_y, y, x)
    grad_x .+= 2 .* grad_y
    return nothing
end
