# Julia side of the DiffusionSolve1D op (custom_op.txt).
#
# The discrete problem, with n = length(kappa) cells of width h = 1/n and the
# m = n - 1 interior nodes as unknowns (u_0 = u_n = 0):
#
#   (A u)_i = (-kappa_i u_{i-1} + (kappa_i + kappa_{i+1}) u_i - kappa_{i+1} u_{i+1}) / h^2 = f_i
#
# where kappa_i is the coefficient on cell i (between nodes i-1 and i).  A is
# symmetric, tridiagonal and positive definite when every kappa_i > 0.
#
# Arrays arrive without copies (read-only inputs); outputs are written in place.
# The functions take any number type, not only Float64: ForwardDiff's dual
# numbers too, so the same forward function serves DiffusionSolve1DAuto
# (forwarddiff/), whose gradient ForwardDiff computes.

using LinearAlgebra

"""
    diffusion_matrix(kappa) -> SymTridiagonal

The (n-1) x (n-1) stiffness matrix A of the cell coefficients `kappa` (length n).
"""
function diffusion_matrix(kappa::AbstractVector{<:Real})
    n = length(kappa)
    n >= 2 || throw(DimensionMismatch("DiffusionSolve1D needs at least 2 cells (kappa of length >= 2), got $n"))
    k = collect(kappa)
    bad = findfirst(v -> !(v > 0), k)
    bad === nothing || throw(DomainError(k[bad], "kappa[$(bad - 1)] must be positive (and finite) for the " *
                                                 "diffusion matrix to be invertible"))
    all(isfinite, k) || throw(DomainError(k, "kappa must be finite"))
    s = n^2   # 1 / h^2
    m = n - 1
    diagonal = s .* (k[1:m] .+ k[2:n])
    off = -s .* k[2:m]
    return SymTridiagonal(diagonal, off)
end

function check_sizes(kappa, f)
    length(kappa) == length(f) + 1 ||
        throw(DimensionMismatch("kappa has $(length(kappa)) cells, so f needs $(length(kappa) - 1) interior values, " *
                                "not $(length(f))"))
end

"""
    diffusion_solve1d(u, kappa, f)

Forward pass: u = A(kappa) \\ f, an LDL' solve of the tridiagonal system, O(n).
"""
function diffusion_solve1d(u, kappa, f)
    check_sizes(kappa, f)
    A = diffusion_matrix(kappa)
    u .= A \ collect(f)
    return nothing
end

"""
    diffusion_solve1d_grad(grad_kappa, grad_f, grad_u, u, kappa, f)

The adjoint method.  With A(kappa) u = f and a loss L(u), the adjoint
lambda = A' \\ dL/du (A' = A: A is symmetric) gives

    dL/df       = lambda
    dL/dkappa_j = -lambda' (dA/dkappa_j) u = -(lambda_j - lambda_{j-1}) (u_j - u_{j-1}) / h^2

(with lambda_0 = lambda_n = u_0 = u_n = 0): A = sum_j kappa_j d_j d_j' / h^2
with d_j = e_j - e_{j-1}, so dA/dkappa_j = d_j d_j' / h^2.  One sparse solve
and an O(n) contraction, whatever the number of coefficients.
"""
function diffusion_solve1d_grad(grad_kappa, grad_f, grad_u, u, kappa, f)
    check_sizes(kappa, f)
    A = diffusion_matrix(kappa)
    lambda = A \ collect(grad_u)
    n = length(kappa)
    du = diff([0.0; collect(u); 0.0])        # u_j - u_{j-1}, j = 1..n
    dlambda = diff([0.0; lambda; 0.0])
    grad_kappa .+= -(n^2) .* dlambda .* du
    grad_f .+= lambda
    return nothing
end
