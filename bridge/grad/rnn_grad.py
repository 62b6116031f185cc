"""Gradients of LSTM blocks (BlockLSTM, CudnnRNN), after TF's rnn_grad.py and cudnn_rnn_grad.py."""
from __future__ import annotations
