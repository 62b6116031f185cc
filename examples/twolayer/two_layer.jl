# Julia side of the TwoLayer op (custom_op.txt).
#
# Arrays arrive without copies, indexed as in TensorFlow: w1[k, j] is
# TensorFlow's w1[k-1, j-1]. Outputs are written in place.

using LinearAlgebra

# ForwardDiff comes from Julia's package registry, or from a depot named by
# TFBRIDGE_JULIA_DEPOT (docs/guides/julia-packages.md); where Julia finds
# it the Jacobian is computed by automatic differentiation, otherwise
# analytically.  The import is conditional, so customop.load does not refuse
# this file where ForwardDiff is missing.
const HAVE_FORWARDDIFF = Base.find_package("ForwardDiff") !== nothing
if HAVE_FORWARDDIFF
    import ForwardDiff
end

two_layer_method() = HAVE_FORWARDDIFF ? "ForwardDiff.jacobian" :
                     "the analytic Jacobian W2*Diagonal(1 .- tanh.(z).^2)*W1 (ForwardDiff is not installed: " *
                     "set TFBRIDGE_JULIA_DEPOT to a Julia depot holding it, or run " *
                     "julia -e 'using Pkg; Pkg.add(\"ForwardDiff\")' where Julia's registry is reachable)"

network(x, w1, b1, w2, b2) = w2 * tanh.(w1 * x .+ b1) .+ b2

# The Jacobian dy/dx both ways (bench/bench_twolayer_jacobian.py times each).
jacobian_forwarddiff(x, w1, b1, w2, b2) = ForwardDiff.jacobian(v -> network(v, w1, b1, w2, b2), collect(x))

function jacobian_analytic(x, w1, b1, w2, b2)
    z = w1 * x .+ b1
    return w2 * (Diagonal(1 .- tanh.(z) .^ 2) * w1)
end

jacobian_matrix(x, w1, b1, w2, b2) =
    HAVE_FORWARDDIFF ? jacobian_forwarddiff(x, w1, b1, w2, b2) : jacobian_analytic(x, w1, b1, w2, b2)

# Row-major flattening, as TensorFlow lays out an (m, n) tensor.
rowmajor(A) = vec(permutedims(A))

function two_layer(jac, x, w1, b1, w2, b2)
    jac .= rowmajor(jacobian_matrix(x, w1, b1, w2, b2))
    return nothing
end

# Gradient of a loss L through the op: given dL/djac, fill dL/d(each input).
# With s = 1 - tanh(z)^2, z = W1*x + b1 and J = W2*Diagonal(s)*W1:
#   dL/dW2 = G*W1'*Diagonal(s),  dL/dW1 = Diagonal(s)*W2'*G + dz*x',
#   dL/ds = diag(W2'*G*W1'),     dz = dL/ds .* (-2 .* tanh.(z) .* s),
#   dL/db1 = dz, dL/dx = W1'*dz, dL/db2 = 0.
function two_layer_grad(grad_x, grad_w1, grad_b1, grad_w2, grad_b2, grad_jac, jac, x, w1, b1, w2, b2)
    m, n = size(w2, 1), length(x)
    G = permutedims(reshape(grad_jac, n, m))   # dL/dJ as an m x n matrix
    z = w1 * x .+ b1
    t = tanh.(z)
    s = 1 .- t .^ 2
    ds = diag(w2' * G * w1')
    dz = ds .* (-2 .* t .* s)
    grad_w2 .= G * w1' * Diagonal(s)
    grad_w1 .= Diagonal(s) * w2' * G .+ dz * x'
    grad_b1 .= dz
    grad_x .= w1' * dz
    grad_b2 .= 0
    return nothing
end
