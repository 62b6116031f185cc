# TFBridge.ForwardDiffGradients: the gradient ops of the ops whose spec says
# `@gradient forwarddiff` (docs/guides/julia-ops.md, "Gradients from ForwardDiff").
#
# Such an op has no backward function: its gradient op, <Op>Grad, calls
# `<Op>Grad` of this module (generated per op by the build,
# templates/forwarddiff.jl.j2), which runs the user's forward function again
# to compute the vector-Jacobian product of the incoming gradients, and
# <Op>GradGrad, the gradient op of <Op>Grad, calls `<Op>GradGrad`, for the
# second derivatives (Hessians, Hessian-vector products).  Two ways, one
# choice per op (layout.jl, `MODE`, `FORWARD_ONLY`):
# - the reverse mode, by default (tracked.jl, reverse.jl): one pass on
#   numbers that record a tape of the forward function's scalar operations,
#   with ForwardDiff's derivative rules (DiffRules), and of its matrix
#   products, one entry each (products.jl), then one sweep back to every
#   input; second order records on values that are ForwardDiff's dual
#   numbers moving along the incoming direction (forward over reverse);
# - ForwardDiff's dual numbers, for forward functions the tape cannot follow
#   (first_order.jl, second_order.jl): a pass per CHUNK input directions,
#   nested two deep for second order.
# `check_op` (check.jl) refuses, when the op loads, a forward function that
# cannot take dual numbers, and sends one the tape cannot record to dual
# numbers.
#
# TFBridge itself is built into Julia's system image without any package, so
# this module is not one of its files: customop.load includes it into
# TFBridge (`Base.include(TFBridge, ...)`) the first time an op needs it,
# after checking that ForwardDiff loads; an op image built for such ops
# (julia/build_op_image.jl) holds it, with the code a traced run compiled.
module ForwardDiffGradients

import ForwardDiff
using ForwardDiff: Dual, Partials, Tag, value, partials
import LinearAlgebra
using LinearAlgebra: Transpose
using ..TFBridge: ReadOnlyArray, DynamicOutput, tf_view, checkinterrupt, resolve_function

# The tags of the dual numbers, fixed types of this module rather than
# ForwardDiff's per-function tags: the code compiled for them does not
# mention the user's function, so an op image can keep it.  ForwardDiff
# orders nested tags by when each was first used, the inner one first:
# DirectionTag (the Jacobian-vector product of second order) before
# SecondTag, which wraps it; a tag of the user's own ForwardDiff call inside
# the forward function comes later, and wraps ours.
struct GradientTag end
struct DirectionTag end
struct SecondTag end
const GRADIENT = Tag{GradientTag,Float64}
const DIRECTION = Tag{DirectionTag,Float64}
const SECOND = Tag{SecondTag,Float64}
ForwardDiff.tagcount(GRADIENT)
ForwardDiff.tagcount(DIRECTION)
ForwardDiff.tagcount(SECOND)
ForwardDiff.:≺(DIRECTION, SECOND) || error("ForwardDiff orders the gradient's tags the wrong way round")

"""How many input elements (real and imaginary parts counted apart) one forward pass differentiates."""
const CHUNK = 8

include("ForwardDiffGradients/layout.jl")
include("ForwardDiffGradients/first_order.jl")
include("ForwardDiffGradients/second_order.jl")
include("ForwardDiffGradients/tracked.jl")
include("ForwardDiffGradients/products.jl")
include("ForwardDiffGradients/reverse.jl")
include("ForwardDiffGradients/check.jl")

# Per process (this module may come built into an op image): a slot per Julia thread for the tapes.
function __init__()
    for slots in ACTIVE
        resize!(slots, Threads.nthreads())
        fill!(slots, nothing)
    end
    empty!(FORWARD_ONLY)
    return nothing
end

end # module ForwardDiffGradients
