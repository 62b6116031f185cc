# TFBridge.ForwardDiffGradients: the gradient ops of the ops whose spec says
# `@gradient forwarddiff` (README, "Gradients from ForwardDiff").
#
# Such an op has no backward function: its gradient op, <Op>Grad, calls
# `<Op>Grad` of this module (generated per op by the build,
# templates/forwarddiff.jl.j2), which runs the user's forward function on
# ForwardDiff's dual numbers and contracts the outputs' partials with the
# incoming gradients: a vector-Jacobian product built from chunked forward
# passes (first_order.jl).  <Op>GradGrad, the gradient op of <Op>Grad, does
# the same with dual numbers nested two deep (second_order.jl), so Hessians
# and Hessian-vector products reach through the op.  Those passes cost one
# per CHUNK inputs; so by default both run in reverse mode instead
# (tracked.jl, reverse.jl): one pass records a tape of the forward
# function's scalar operations, with ForwardDiff's derivative rules
# (DiffRules), and one sweep back gives every input's gradient; second order
# records on values that are dual numbers along v (forward over reverse).
# Dual numbers remain for forward functions the tape cannot follow (layout.jl,
# `MODE` and `FORWARD_ONLY`).  `check_forward`
# (check.jl) refuses, when the op loads, a forward function that cannot take
# dual numbers.
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
