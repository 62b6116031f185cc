"""Gradients of TensorArrays (TF v1), after TF's tensor_array_grad.py.

A TensorArray's gradient lives in a second TensorArray, made by
``TensorArrayGradV3`` from the forward handle and keyed by the gradients()
call (so two calls do not add into one accumulator): a read's gradient
writes into it, a write's gradient reads from it, and so on; writes to one
index add up.  Gradients travel between these ops on the float ``flow``
tensors, as in TF.  The V1/V2 op types take TF's string handles, which
``TensorArrayGradV3`` does not: TF's own gradients fail on them, so do these.
"""
from __future__ import annotations

from bridge.framework.graph import Operation, Output, get_default_graph
from ._helpers import _node, _op
from .registry import NotDifferentiable, RegisterGradient
from .walk import current_call

for _v in ("", "V2", "V3"):
    for _type in ("TensorArray", "TensorArrayGrad", "TensorArraySize", "TensorArrayClose"):
        NotDifferentiable(_type + _v)
NotDifferentiable("TensorArrayGradWithShape")


def _grad_array(op: Operation, handle: Output, flow: Output) -> tuple[Output, Output]:
    """(handle, flow) of the gradient TensorArray of ``handle`` for the current gradients() call."""
    if handle.op.type in ("TensorArrayGradV3", "TensorArrayGradWithShape"):
        # TF's kernel refuses a gradient array of a gradient array ("Wrong input container"):
        # say so now rather than when the graph runs.
        raise LookupError(f"operation '{op.name}' ({op.type}) works on a gradient TensorArray: "
                          "TensorArrays have no second-order gradients (nor in TensorFlow)")
    g_handle = _node("TensorArrayGradV3", [handle, flow], {"source": current_call()},
                     {"source": "string"}).output(0)
    with get_default_graph().control_dependencies([g_handle]):
        g_flow = _op("Identity", [flow], name="gradient_flow")
    return g_handle, g_flow


def _after_write(op: Operation, flow: Output) -> Output:
    """``flow`` held back until ``op`` (a write) has run: reads of the gradient array come after it."""
    flow_out = _op("Identity", [op.outputs[0]], name="flow_out")
    with get_default_graph().control_dependencies([flow_out]):
        return _op("Identity", [flow], name="write_barrier")


def _read_grad(write_type: str):
    """Gradient of a read (TensorArrayRead/Gather at index/indices): the gradient
    array gets the incoming gradient written at the same place."""
    def grad_fn(op: Operation, grad: Output) -> list:
        handle, where, flow = op.inputs
        g_handle, g_flow = _grad_array(op, handle, flow)
        return [None, None, _op(write_type, [g_handle, where, grad, g_flow])]
    return grad_fn


def _write_grad(read_type: str):
    """Gradient of a write (TensorArrayWrite/Scatter): the value's gradient is
    read back from the gradient array at the same place, after the write."""
    def grad_fn(op: Operation, flow: Output) -> list:
        handle, where = op.inputs[0], op.inputs[1]
        flow = _after_write(op, flow)
        g_handle, g_flow = _grad_array(op, handle, flow)
        grad = _op(read_type, [g_handle, where, g_flow], {"dtype": op.get_attr("T")})
        return [None, None, grad, flow]
    return grad_fn


def _concat_grad(op: Operation, grad: Output, unused_lengths_grad=None) -> list:
    handle, flow = op.inputs
    g_handle, g_flow = _grad_array(op, handle, flow)
    # Split the gradient into the lengths the forward concat reported.
    return [None, _op("TensorArraySplitV3", [g_handle, grad, op.outputs[1], g_flow])]


def _split_grad(op: Operation, flow: Output) -> list:
    handle = op.inputs[0]
    flow = _after_write(op, flow)
    g_handle, g_flow = _grad_array(op, handle, flow)
    grad = _node("TensorArrayConcatV3", [g_handle, g_flow], {"dtype": op.get_attr("T")}).output(0)
    return [None, grad, None, flow]


for _v in ("", "V2", "V3"):
    RegisterGradient("TensorArrayRead" + _v)(_read_grad("TensorArrayWriteV3"))
    RegisterGradient("TensorArrayWrite" + _v)(_write_grad("TensorArrayReadV3"))
    RegisterGradient("TensorArrayGather" + _v)(_read_grad("TensorArrayScatterV3"))
    RegisterGradient("TensorArrayScatter" + _v)(_write_grad("TensorArrayGatherV3"))
    RegisterGradient("TensorArrayConcat" + _v)(_concat_grad)
    RegisterGradient("TensorArraySplit" + _v)(_split_grad)
