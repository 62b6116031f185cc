"""Gradients of LSTM blocks (BlockLSTM, CudnnRNN), after TF's rnn_grad.py and cudnn_rnn_grad.py."""
from __future__ import annotations

from ._helpers import _node
from .registry import RegisterGradient


def _block_lstm_grad(op, *grads):
    """BlockLSTMGrad from the cell state and output gradients.  As TF, for BlockLSTMV2 too
    (not BlockLSTMGradV2, whose gate layout matches V2's)."""
    seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b = op.inputs
    i, cs, f, o, ci, co, h = op.outputs
    dx = _node("BlockLSTMGrad", [seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h,
                           grads[1], grads[6]], {"use_peephole": op.get_attr("use_peephole")}).outputs
    return (None,) + tuple(dx)


RegisterGradient("BlockLSTM")(_block_lstm_grad)
RegisterGradient("BlockLSTMV2")(_block_lstm_grad)

_CUDNN_ATTRS = ("dropout", "seed", "seed2", "rnn_mode", "input_mode", "direction")


def _cudnn_rnn_grad(op, *grads):
    """CudnnRNNBackprop (V2, V3 for the V2, V3 ops): GPU only, as the forward ops."""
    if not op.get_attr("is_training"):
        raise ValueError(f"To use {op.type} in gradients, is_training must be set to True.")
    inputs = list(op.inputs[:4])
    attrs = {n: op.get_attr(n) for n in _CUDNN_ATTRS}
    if op.type == "CudnnRNNV3":
        inputs.append(op.inputs[4])  # sequence_lengths
        attrs.update(time_major=op.get_attr("time_major"), num_proj=op.get_attr("num_proj"))
    inputs += list(op.outputs[:3]) + list(grads[:3]) + [op.outputs[3]]
    if op.type != "CudnnRNN":
        inputs.append(op.outputs[4])  # host_reserved
    grad_type = {"CudnnRNN": "CudnnRNNBackprop", "CudnnRNNV2": "CudnnRNNBackpropV2",
                 "CudnnRNNV3": "CudnnRNNBackpropV3"}[op.type]
    dx = tuple(_node(grad_type, inputs, attrs).outputs)
    return dx + (None,) if op.type == "CudnnRNNV3" else dx


for _type in ("CudnnRNN", "CudnnRNNV2", "CudnnRNNV3"):
    RegisterGradient(_type)(_cudnn_rnn_grad)
