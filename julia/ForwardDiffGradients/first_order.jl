# TFBridge.ForwardDiffGradients: the gradient op's function, a
# vector-Jacobian product from chunked forward passes (included by
# julia/ForwardDiffGradients.jl).
#
# With a real loss L and g = dL/dy (TensorFlow's convention for a complex y:
# dL/d(re y) + i dL/d(im y)), the gradient of direction t of the inputs is
# dL/dt = sum over outputs of re(y_t) re(g) + im(y_t) im(g), where y_t is
# the partial of y along t.  Each pass seeds CHUNK directions at once, so a
# gradient costs ceil(directions / CHUNK) forward passes on dual numbers of
# CHUNK partials (docs/performance.md, "What @gradient forwarddiff costs").

"""The first-order dual type of a real element type."""
gradient_dual(::Type{R}) where {R<:Real} = Dual{GRADIENT,R,CHUNK}

"""The dual copy of input `x` (memory order): its values, no partials yet."""
function gradient_input(x::AbstractArray)
    M = memory(x)
    E = lifted(eltype(M), gradient_dual(realtype(eltype(M))))
    return copy_as(E, M)
end

function copy_as(::Type{E}, M::AbstractArray) where {E}
    B = Array{E}(undef, size(M))
    @inbounds for k in eachindex(M)
        B[k] = convert(E, M[k])
    end
    return B
end

gradient_output(::Type{T}) where {T} = lifted(T, gradient_dual(realtype(T)))

"""The partials of an output element along the pass's directions (none for a value that does not depend on them)."""
@inline slope(y::Dual{GRADIENT}) = partials(y)
@inline slope(y::Real) = zero(Partials{CHUNK,Float64})

"""`acc` plus the partials of the values `Y` weighted by the gradients `G`, element by element."""
function contract(acc::Partials{N,Float64}, Y::AbstractArray, G::AbstractArray) where {N}
    for (y, g) in zip(Y, G)
        acc += weighted(y, g)
    end
    return acc
end

@inline weighted(y::Real, g::Real) = Float64(g) * slope(y)
@inline weighted(y::Complex, g::Number) = Float64(real(g)) * slope(real(y)) + Float64(imag(g)) * slope(imag(y))
@inline weighted(y::Real, g::Complex) = Float64(real(g)) * slope(y)

"""
    gradient!(layout, grads, gys, ys, xs, attrs)

The gradient op of an op with `@gradient forwarddiff`: adds to `grads` (the
gradients of the differentiable inputs, zeros on entry) the product of the
incoming gradients `gys` (of the differentiable outputs) with the Jacobian
of the forward function at the inputs `xs`; `ys` are the forward op's
outputs (only their shapes are used), `attrs` its attributes.  By the
reverse mode (reverse.jl), or dual numbers (`MODE`).
"""
gradient!(L::Layout, grads::Tuple, gys::Tuple, ys::Tuple, xs::Tuple, attrs::Tuple) =
    by_mode(forward_gradient!, reverse_gradient!, L, grads, gys, ys, xs, attrs)

"""`gradient!` by dual numbers: ceil(directions / CHUNK) forward passes."""
function forward_gradient!(L::Layout, grads::Tuple, gys::Tuple, ys::Tuple, xs::Tuple, attrs::Tuple)
    P = Passes(L, ys, xs, attrs, (i, x) -> gradient_input(x), gradient_output)
    each_chunk(P, grads) do values, first
        acc = zero(Partials{CHUNK,Float64})
        for (j, o) in enumerate(L.differentiable_outputs)
            acc = contract(acc, values[j], paired(L, o, values[j], gys[j]))
        end
        return acc
    end
    return nothing
end
