"""Gradients of CTC losses, after TF's ctc_ops.py."""
from __future__ import annotations

from ._helpers import _const, _op
from .registry import RegisterGradient


def _ctc_loss_grad(op, grad_loss, _grad_grad):
    """The op's own gradient output, scaled per batch entry.  As TF, it goes through
    PreventGradient: the fused op has no second derivative, asking for one is an error."""
    fused = _op("PreventGradient", [op.outputs[1]],
                {"message": "Currently there is no way to take the second derivative of ctc_loss due to "
                            "the fused implementation's interaction with gradients()"})
    return _op("Mul", [_op("ExpandDims", [grad_loss, _const(-1, "int32")]), fused]), None, None, None


RegisterGradient("CTCLoss")(_ctc_loss_grad)
RegisterGradient("CTCLossV2")(_ctc_loss_grad)
