"""Gradient cases: TF's fft_ops.py (FFT, IFFT, RFFT, IRFFT in 1-3 dimensions)."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "FFT", "FFT2D", "FFT3D", "IFFT", "IFFT2D", "IFFT3D", "IRFFT", "IRFFT2D", "RFFT", "RFFT2D",
})
