# TFBridge.ForwardDiffGradients: the function of <Op>GradGrad, the gradient
# op of the gradient op (included by julia/ForwardDiffGradients.jl).
#
# The gradient op computes gx = J(x)' gy.  For a loss L2 of gx with incoming
# gradient v = dL2/dgx (real and imaginary parts taken as two real
# directions, as everywhere), its gradients are
#     dL2/dgy = J(x) v                  (a Jacobian-vector product)
#     dL2/dx  = d/dx [gy' J(x) v]       (a Hessian-vector product, contracted with gy)
# and none for the forward op's outputs, which the gradient op does not read.
# One dual number inside another gives both: the inner one (DIRECTION) moves
# the inputs along v, the outer one (SECOND) along CHUNK directions of the
# inputs at a time, as for first order; the inner partial of an output is
# (J v)_i, and the inner partial of its outer partials the second derivatives.

second_dual(::Type{R}) where {R<:Real} = Dual{SECOND,Dual{DIRECTION,R,1},CHUNK}

"""The nested dual copy of input `x` (memory order), moving along `v` (shaped like `x`) in its inner partial."""
function second_input(x::AbstractArray, v::AbstractArray)
    M, V = memory(x), memory(v)
    T = eltype(M)
    R = realtype(T)
    B = Array{lifted(T, second_dual(R))}(undef, size(M))
    @inbounds for k in eachindex(M)
        B[k] = along(M[k], V[k], R)
    end
    return B
end

@inline along(x::Real, v::Number, ::Type{R}) where {R} =
    convert(second_dual(R), Dual{DIRECTION}(R(x), Partials{1,R}((R(real(v)),))))
@inline along(x::Complex, v::Number, ::Type{R}) where {R} =
    complex(along(real(x), real(v), R), along(imag(x), imag(v), R))

second_output(::Type{T}) where {T} = lifted(T, second_dual(realtype(T)))

"""(J v) of an output element: the inner partial of its value (0 for one that does not depend on the inputs)."""
@inline directional(y::Dual{SECOND}) = partials(value(y))[1]
@inline directional(y::Real) = zero(y)
@inline directional(y::Complex) = complex(directional(real(y)), directional(imag(y)))

"""The inner partials of an output element's outer partials: its second derivatives along v and each direction."""
@inline second_slope(y::Dual{SECOND}) = Partials{CHUNK,Float64}(map(p -> Float64(partials(p)[1]), partials(y).values))
@inline second_slope(y::Real) = zero(Partials{CHUNK,Float64})

@inline second_weighted(y::Real, g::Real) = Float64(g) * second_slope(y)
@inline second_weighted(y::Complex, g::Number) =
    Float64(real(g)) * second_slope(real(y)) + Float64(imag(g)) * second_slope(imag(y))

function second_contract(acc::Partials{N,Float64}, Y::AbstractArray, G::AbstractArray) where {N}
    for (y, g) in zip(Y, G)
        acc += second_weighted(y, g)
    end
    return acc
end

"""Write (J v) of the values `Y` into `O` (the same layout)."""
function store_directional!(O::AbstractArray, Y::AbstractArray)
    for (k, y) in zip(eachindex(O), Y)
        O[k] = directional(y)
    end
    return O
end

"""
    second!(layout, grad_gys, grad_xs, vs, gys, ys, xs, attrs)

The gradient op of the gradient op of an op with `@gradient forwarddiff`:
given `vs`, the incoming gradients of the gradient op's outputs (shaped like
the differentiable inputs), adds J(x) v to `grad_gys` (shaped like the
differentiable outputs) and d/dx [gy' J(x) v] to `grad_xs` (shaped like the
differentiable inputs), both zeros on entry.
"""
second!(L::Layout, grad_gys::Tuple, grad_xs::Tuple, vs::Tuple, gys::Tuple, ys::Tuple, xs::Tuple, attrs::Tuple) =
    by_mode(forward_second!, reverse_second!, L, grad_gys, grad_xs, vs, gys, ys, xs, attrs)

"""`second!` by dual numbers nested two deep: ceil(directions / CHUNK) forward passes."""
function forward_second!(L::Layout, grad_gys::Tuple, grad_xs::Tuple, vs::Tuple, gys::Tuple, ys::Tuple, xs::Tuple,
                         attrs::Tuple)
    P = Passes(L, ys, xs, attrs, (i, x) -> second_input(x, vs[i]), second_output)
    each_chunk(P, grad_xs) do values, first
        acc = zero(Partials{CHUNK,Float64})
        for (j, o) in enumerate(L.differentiable_outputs)
            first == 1 && store_directional!(paired(L, o, values[j], grad_gys[j]), values[j])
            acc = second_contract(acc, values[j], paired(L, o, values[j], gys[j]))
        end
        return acc
    end
    return nothing
end
