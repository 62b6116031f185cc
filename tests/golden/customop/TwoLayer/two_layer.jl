# Julia side of the TensorFlow op TwoLayer (custom_op.txt).
#
# bridge.customop.load(".") includes this file; TensorFlow's kernels then call
# two_layer! and two_layer_back! with views of TensorFlow's buffers, in TensorFlow's
# index order (A[i, j] is TF's A[i-1, j-1]).  Write the outputs in place and
# keep no reference to any argument after returning: the buffers belong to
# TensorFlow.

"""
    two_layer!(y, hidden, x, w1, b1, w2, b2, alpha, k, relu, mode)

Forward pass of TwoLayer.

- `y`       output: Float64 vector of length m*n: write it in place (`y .= ...`)
- `hidden`  output: Float32 matrix of size (k, (h+1)//2): write it in place (`hidden .= ...`)
- `x`       input: Float64 vector of length n, read-only
- `w1`      input: Float64 matrix of size (h, n), read-only
- `b1`      input: Float64 vector of length h, read-only
- `w2`      input: Float64 matrix of size (m, h), read-only
- `b2`      input: Float64 vector of length m, read-only
- `alpha`   attribute: Float64 (default 0.5)
- `k`       attribute: Int64 (default 2)
- `relu`    attribute: Bool (default true)
- `mode`    attribute: String (default "fast")
"""
function two_layer!(y, hidden, x, w1, b1, w2, b2, alpha, k, relu, mode)
    # y: Float64 vector of length m*n: write it in place (`y .= ...`)
    # hidden: Float32 matrix of size (k, (h+1)//2): write it in place (`hidden .= ...`)
    error("two_layer!: compute the outputs of TwoLayer here (see the docstring above)")
end

"""
    two_layer_back!(grad_x, grad_w1, grad_b1, grad_w2, grad_b2, grad_y, grad_hidden, y, hidden, x, w1, b1, w2, b2, alpha, k, relu, mode)

Gradient of TwoLayer: given the gradients of a loss with respect to the
outputs (`grad_<output>`), add the gradients with respect to the inputs into
`grad_<input>` (they start at zero).

- `grad_x`       gradient of input x: Float64 vector of length n, zeros on entry: add into it (`grad_x .+= ...`)
- `grad_w1`      gradient of input w1: Float64 matrix of size (h, n), zeros on entry: add into it (`grad_w1 .+= ...`)
- `grad_b1`      gradient of input b1: Float64 vector of length h, zeros on entry: add into it (`grad_b1 .+= ...`)
- `grad_w2`      gradient of input w2: Float64 matrix of size (m, h), zeros on entry: add into it (`grad_w2 .+= ...`)
- `grad_b2`      gradient of input b2: Float64 vector of length m, zeros on entry: add into it (`grad_b2 .+= ...`)
- `grad_y`       gradient of output y: Float64 vector of length m*n, read-only
- `grad_hidden`  gradient of output hidden: Float32 matrix of size (k, (h+1)//2), read-only
- `y`            forward output: Float64 vector of length m*n, read-only
- `hidden`       forward output: Float32 matrix of size (k, (h+1)//2), read-only
- `x`            forward input: Float64 vector of length n, read-only
- `w1`           forward input: Float64 matrix of size (h, n), read-only
- `b1`           forward input: Float64 vector of length h, read-only
- `w2`           forward input: Float64 matrix of size (m, h), read-only
- `b2`           forward input: Float64 vector of length m, read-only
- `alpha`        attribute: Float64 (default 0.5)
- `k`            attribute: Int64 (default 2)
- `relu`         attribute: Bool (default true)
- `mode`         attribute: String (default "fast")
"""
function two_layer_back!(grad_x, grad_w1, grad_b1, grad_w2, grad_b2, grad_y, grad_hidden, y, hidden, x, w1, b1, w2, b2, alpha, k, relu, mode)
    # grad_x: Float64 vector of length n, zeros on entry: add into it (`grad_x .+= ...`)
    # grad_w1: Float64 matrix of size (h, n), zeros on entry: add into it (`grad_w1 .+= ...`)
    # grad_b1: Float64 vector of length h, zeros on entry: add into it (`grad_b1 .+= ...`)
    # grad_w2: Float64 matrix of size (m, h), zeros on entry: add into it (`grad_w2 .+= ...`)
    # grad_b2: Float64 vector of length m, zeros on entry: add into it (`grad_b2 .+= ...`)
    error("two_layer_back!: compute the gradients of TwoLayer here (see the docstring above)")
end
