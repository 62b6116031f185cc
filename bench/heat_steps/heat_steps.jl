# Julia side of HeatSteps (custom_op.txt): `steps` smoothing steps, each
# u[i] += r (u[i-1] - 2 u[i] + u[i+1]), on plain vectors (the inputs arrive
# read-only: copy first).

function heat_steps!(a::Vector{Float64}, steps::Integer)
    n = length(a)
    b = similar(a)
    r = 0.25
    for _ in 1:steps
        @inbounds for i in 1:n
            left = i > 1 ? a[i - 1] : 0.0
            right = i < n ? a[i + 1] : 0.0
            b[i] = a[i] + r * (left - 2.0 * a[i] + right)
        end
        a, b = b, a
    end
    return a
end

function heat_steps(u, u0, steps)
    steps[] >= 0 || throw(DomainError(steps[], "steps must be >= 0"))
    u .= heat_steps!(collect(Float64, u0), steps[])
    return nothing
end

# The step matrix is symmetric: the adjoint of `steps` steps is `steps` steps.
function heat_steps_grad(grad_u0, grad_u, u, u0, steps)
    grad_u0 .= heat_steps!(collect(Float64, grad_u), steps[])
    return nothing
end
