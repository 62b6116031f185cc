"""Gradients of FFTs (FFT, IFFT, RFFT, IRFFT in 1-3 dimensions), after TF's fft_ops.py."""
from __future__ import annotations
