# Julia side of the TwoLayerAuto op (custom_op.txt): the forward function of
# TwoLayer, from its file.  Its spec says `@gradient forwarddiff`, so the
# hand-written two_layer_grad defined there too goes unused: the gradient op
# runs two_layer on dual numbers (through ForwardDiff.jacobian inside it,
# nested dual numbers).
include(joinpath(@__DIR__, "..", "two_layer.jl"))
