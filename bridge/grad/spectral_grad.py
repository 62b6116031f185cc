"""Gradients of FFTs (FFT, IFFT, RFFT, IRFFT in 1-3 dimensions), after TF's fft_ops.py.

TF registers none for RFFT3D and IRFFT3D; neither does the bridge.
"""
from __future__ import annotations

import numpy as np

from bridge.framework import dtypes
from bridge.framework.graph import Output
from ._helpers import _c, _const, _mul, _op
from .registry import RegisterGradient

_COMPLEX = {"float32": "complex64", "float64": "complex128"}
_REAL = {v: k for k, v in _COMPLEX.items()}


def _int(value) -> Output:
    return _const(value, "int32")


def _at(v: Output, index: int) -> Output:
    """v[index] of a 1-D int tensor (index < 0 counts from the end)."""
    end = {"end_mask": 1} if index == -1 else {}
    return _op("StridedSlice", [v, _int([index]), _int([index + 1]), _int([1])], {"shrink_axis_mask": 1, **end})


def _last(v: Output, n: int) -> Output:
    """v[-n:] of a 1-D tensor."""
    return _op("StridedSlice", [v, _int([-n]), _int([0]), _int([1])], {"end_mask": 1})


def _cast(x: Output, dtype: str) -> Output:
    return _op("Cast", [x], {"DstT": dtypes.as_dtype(dtype)})


def _fft_size(x: Output, rank: int) -> Output:
    """The number of elements the innermost ``rank`` dimensions of x hold (int32)."""
    return _op("Prod", [_last(_op("Shape", [x]), rank), _int(0)])


def _register_fft(op_type: str, inverse: str, rank: int, forward: bool) -> None:
    # FFT's adjoint is size * IFFT, IFFT's is FFT / size.
    @RegisterGradient(op_type)
    def _grad(op, grad):
        size = _fft_size(grad, rank)
        if forward:
            scale = _cast(size, grad.dtype.name)
        else:
            real = _REAL[grad.dtype.name]
            scale = _cast(_op("Reciprocal", [_cast(size, real)]), grad.dtype.name)
        return _op("Mul", [_op(inverse, [grad]), scale])


for _rank, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    _register_fft("FFT" + _suffix, "IFFT" + _suffix, _rank, True)
    _register_fft("IFFT" + _suffix, "FFT" + _suffix, _rank, False)


def _ymask(length: Output, complex_dtype: str) -> Output:
    """[1, -1, 1, -1, ...] of ``length`` (as complex)."""
    n = _op("Range", [_int(0), length, _int(1)])
    return _cast(_op("Sub", [_int(1), _op("Mul", [_int(2), _op("FloorMod", [n, _int(2)])])]), complex_dtype)


def _mask_matrix(length: Output, complex_dtype: str) -> Output:
    """The DFT matrix exp(-2 pi i a b / length) for a, b in range(length)."""
    a = _op("Tile", [_op("ExpandDims", [_op("Range", [_int(0), length, _int(1)]), _int(0)]),
                     _op("Pack", [[length, _int(1)]])])
    b = _op("Transpose", [a, _int([1, 0])])
    ab = _op("RealDiv", [_cast(_op("Mul", [a, b]), complex_dtype), _cast(length, complex_dtype)])
    return _op("Exp", [_op("Mul", [_const(-2j * np.pi, complex_dtype), ab])])


def _inner_slice(x: Output, begin: int, end: int, end_mask: int = 0) -> Output:
    """x[..., begin:end]."""
    return _op("StridedSlice", [x, _int([0, begin]), _int([0, end]), _int([1, 1])],
               {"ellipsis_mask": 1, "end_mask": end_mask})


def _rfft_grad(rank: int, irfft: str):
    """RFFT's gradient: the IRFFT of grad, rescaled, plus terms for the bins that
    Hermitian symmetry drops (as TF's fft_ops._rfft_grad_helper)."""
    def _grad(op, grad):
        x, fft_length = op.inputs
        complex_dtype = grad.dtype.name
        real_dtype = _REAL[complex_dtype]
        input_shape = _op("Shape", [x])
        is_even = _cast(_op("Sub", [_int(1), _op("FloorMod", [_at(fft_length, -1), _int(2)])]), complex_dtype)
        y0 = _inner_slice(grad, 0, 1)
        ym = _inner_slice(grad, -1, 0, end_mask=2)
        if rank == 1:
            extra = _op("AddV2", [y0, _mul(is_even, ym, _ymask(_at(input_shape, -1), complex_dtype))])
        else:
            # The dropped bins of a 2-D spectrum mix along the second-to-last axis: the DFT
            # matrix of that axis, tiled over y0's batch dimensions, applied to conj(y0), conj(ym).
            base = _mask_matrix(_at(input_shape, -2), complex_dtype)
            batch_rank = _op("Sub", [_op("Rank", [y0]), _int(2)])
            ones = _op("Fill", [_op("Reshape", [batch_rank, _int([1])]), _int(1)])
            expanded = _op("Reshape", [base, _op("ConcatV2", [[ones, _op("Shape", [base])], _int(0)])])
            batch_shape = _op("StridedSlice", [_op("Shape", [y0]), _int([0]), _int([-2]), _int([1])],
                              {"begin_mask": 1})
            tiled = _op("Tile", [expanded, _op("ConcatV2", [[batch_shape, _int([1, 1])], _int(0)])])
            y0_term = _op("BatchMatMulV2", [tiled, _op("Conj", [y0])])
            ym_term = _op("BatchMatMulV2", [tiled, _op("Conj", [ym])])
            inner_dim = _at(input_shape, -1)
            grad_ones = _op("Fill", [_op("Reshape", [_op("Sub", [_op("Rank", [grad]), _int(1)]), _int([1])]),
                                     _int(1)])
            multiples = _op("ConcatV2", [[grad_ones, _op("Reshape", [inner_dim, _int([1])])], _int(0)])
            ym_term = _op("Mul", [_op("Tile", [ym_term, multiples]), _ymask(inner_dim, complex_dtype)])
            extra = _op("AddV2", [y0_term, _op("Mul", [is_even, ym_term])])
        input_size = _cast(_fft_size(x, rank), real_dtype)
        the_irfft = _op(irfft, [grad, fft_length], {"Treal": dtypes.as_dtype(real_dtype)})
        total = _op("AddV2", [_op("Mul", [the_irfft, input_size]),
                              _op("Real", [extra], {"Tout": dtypes.as_dtype(real_dtype)})])
        return _mul(_c(total, 0.5), total), None
    return _grad


def _irfft_grad(rank: int, rfft: str):
    """IRFFT's gradient: the RFFT of grad over the size, the bins that stand for two
    (Hermitian pairs) counted twice (as TF's fft_ops._irfft_grad_helper)."""
    def _grad(op, grad):
        x, fft_length = op.inputs
        real_dtype = grad.dtype.name
        complex_dtype = _COMPLEX[real_dtype]
        is_odd = _op("FloorMod", [_at(fft_length, -1), _int(2)])
        last_dim = _at(_op("Shape", [x]), -1)
        # [1, 2, ..., 2, 1] for even lengths (DC and Nyquist once), [1, 2, ..., 2] for odd.
        twos = _op("Fill", [_op("Reshape", [_op("AddV2", [_op("Sub", [last_dim, _int(2)]), is_odd]), _int([1])]),
                            _const(2.0, real_dtype)])
        tail = _op("Fill", [_op("Reshape", [_op("Sub", [_int(1), is_odd]), _int([1])]), _const(1.0, real_dtype)])
        mask = _op("ConcatV2", [[_const([1.0], real_dtype), twos, tail], _int(0)])
        rsize = _op("Reciprocal", [_cast(_fft_size(grad, rank), real_dtype)])
        the_rfft = _op(rfft, [grad, fft_length], {"Tcomplex": dtypes.as_dtype(complex_dtype)})
        return _op("Mul", [the_rfft, _cast(_op("Mul", [rsize, mask]), complex_dtype)]), None
    return _grad


RegisterGradient("RFFT")(_rfft_grad(1, "IRFFT"))
RegisterGradient("IRFFT")(_irfft_grad(1, "RFFT"))
RegisterGradient("RFFT2D")(_rfft_grad(2, "IRFFT2D"))
RegisterGradient("IRFFT2D")(_irfft_grad(2, "RFFT2D"))
