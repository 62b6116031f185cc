# Julia side of the DiffusionSolve1DAuto op (custom_op.txt): the forward
# function of DiffusionSolve1D, from its file.  Its spec says
# `@gradient forwarddiff`, so the hand-written diffusion_solve1d_grad defined
# there too goes unused: the gradient op runs diffusion_solve1d on dual numbers.
include(joinpath(@__DIR__, "..", "diffusion_solve1d.jl"))
