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


def _dtype(attr: str, dtype) -> tuple[dict, dict]:
    return {attr: dtype}, {attr: "type"}


def _read_grad(op: Operation, grad: Output) -> list:
    handle, index, flow = op.inputs
    g_handle, g_flow = _grad_array(op, handle, flow)
    return [None, None, _op("TensorArrayWriteV3", [g_handle, index, grad, g_flow])]


def _write_grad(op: Operation, flow: Output) -> list:
    handle, index = op.inputs[0], op.inputs[1]
    flow = _after_write(op, flow)
    g_handle, g_flow = _grad_array(op, handle, flow)
    grad = _op("TensorArrayReadV3", [g_handle, index, g_flow], *_dtype("dtype", op.get_attr("T")))
    return [None, None, grad, flow]


def _gather_grad(op: Operation, grad: Output) -> list:
    handle, indices, flow = op.inputs
    g_handle, g_flow = _grad_array(op, handle, flow)
    return [None, None, _op("TensorArrayScatterV3", [g_handle, indices, grad, g_flow])]


def _scatter_grad(op: Operation, flow: Output) -> list:
    handle, indices = op.inputs[0], op.inputs[1]
    flow = _after_write(op, flow)
    g_handle, g_flow = _grad_array(op, handle, flow)
    grad = _op("TensorArrayGatherV3", [g_handle, indices, g_flow], *_dtype("dtype", op.get_attr("T")))
    return [None, None, grad, flow]


def _concat_grad(op: Operation, grad: Output, unused_lengths_grad=None) -> list:
    handle, flow = op.inputs
    g_handle, g_flow = _grad_array(op, handle, flow)
    # Split the gradient into the lengths the forward concat reported.
    return [None, _op("TensorArraySplitV3", [g_handle, grad, op.outputs[1], g_flow])]


def _split_grad(op: Operation, flow: Output) -> list:
    handle = op.inputs[0]
    flow = _after_write(op, flow)
    g_handle, g_flow = _grad_array(op, handle, flow)
    grad = _node("TensorArrayConcatV3", [g_handle, g_flow], *_dtype("dtype", op.get_attr("T"))).output(0)
    return [None, grad, None, flow]


for _v in ("", "V2", "V3"):
    RegisterGradient("TensorArrayRead" + _v)(_read_grad)
    RegisterGradient("TensorArrayWrite" + _v)(_write_grad)
    RegisterGradient("TensorArrayGather" + _v)(_gather_grad)
    RegisterGradient("TensorArrayScatter" + _v)(_scatter_grad)
    RegisterGradient("TensorArrayConcat" + _v)(_concat_grad)
    RegisterGradient("TensorArraySplit" + _v)(_split_grad)
