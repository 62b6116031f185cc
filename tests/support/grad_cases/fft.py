"""Gradient cases: TF's fft_ops.py (FFT, IFFT, RFFT, IRFFT in 1-3 dimensions).

TF registers no gradient for RFFT3D and IRFFT3D, so they have no case.
"""
from __future__ import annotations

import bridge
from bridge import ops

from . import case, cplx, i32, signed

_COMPLEX = {"float32": "complex64", "float64": "complex128"}


def _rfft(op):
    """``op`` (RFFT, RFFT2D) with the complex output matching x's precision."""
    return lambda x, n: op(x, n, Tcomplex=bridge.as_dtype(_COMPLEX[x.dtype.name]))


def _irfft(op):
    """``op`` (IRFFT, IRFFT2D) with the real output matching x's precision."""
    real = {v: k for k, v in _COMPLEX.items()}
    return lambda x, n: op(x, n, Treal=bridge.as_dtype(real[x.dtype.name]))


CASES = [
    case("FFT", ops.fft, cplx(2, 5), dtype_attr="Tcomplex"),
    case("IFFT", ops.ifft, cplx(2, 5), dtype_attr="Tcomplex"),
    case("FFT2D", ops.fft2d, cplx(2, 3, 4), dtype_attr="Tcomplex"),
    case("IFFT2D", ops.ifft2d, cplx(2, 3, 4), dtype_attr="Tcomplex"),
    case("FFT3D", ops.fft3d, cplx(2, 3, 2, 4), dtype_attr="Tcomplex"),
    case("IFFT3D", ops.ifft3d, cplx(2, 3, 2, 4), dtype_attr="Tcomplex"),
    # Real <-> Hermitian half-spectrum: even and odd lengths differ (the Nyquist bin).
    case("RFFT", _rfft(ops.rfft), signed(2, 6), i32([6]), dtype_attr="Treal", label="even"),
    case("RFFT", _rfft(ops.rfft), signed(2, 5), i32([5]), dtype_attr="Treal", label="odd"),
    case("IRFFT", _irfft(ops.irfft), cplx(2, 4), i32([6]), dtype_attr="Tcomplex", label="even"),
    case("IRFFT", _irfft(ops.irfft), cplx(2, 3), i32([5]), dtype_attr="Tcomplex", label="odd"),
    case("RFFT2D", _rfft(ops.rfft2d), signed(2, 3, 4), i32([3, 4]), dtype_attr="Treal", label="even"),
    case("RFFT2D", _rfft(ops.rfft2d), signed(2, 4, 5), i32([4, 5]), dtype_attr="Treal", label="odd"),
    case("IRFFT2D", _irfft(ops.irfft2d), cplx(2, 3, 3), i32([3, 4]), dtype_attr="Tcomplex", label="even"),
    case("IRFFT2D", _irfft(ops.irfft2d), cplx(2, 4, 3), i32([4, 5]), dtype_attr="Tcomplex", label="odd"),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING: frozenset[str] = frozenset()
