"""Gradients of special functions (Bessel, gamma and beta families, zeta, erf, Fresnel, ...), after TF's math_grad.py.

TensorFlow's C++ registry has Erf, Erfinv, Ndtri and Lgamma (whose gradient
builds Digamma, differentiated here).  The rest are written here as TF Python
writes them, so second derivatives go through the same ops; the arguments TF
does not differentiate (Betainc's a and b, Zeta's x, Polygamma's n) get None.
"""
from __future__ import annotations

import numpy as np

from bridge.framework.graph import Output, get_default_graph
from ._helpers import _c, _mul, _op, _ones
from .registry import RegisterGradient


def _reduce_to(grad: Output, x: Output, other: Output) -> Output:
    """Sum a broadcast gradient back to x's shape."""
    rx, _ = get_default_graph().create_op(
        "BroadcastGradientArgs", [_op("Shape", [x]), _op("Shape", [other])]).outputs
    return _op("Reshape", [_op("Sum", [grad, rx]), _op("Shape", [x])])


def _unary(op_type: str):
    """Register ``fn(x, y) -> dy/dx`` as the gradient of the unary op ``op_type``."""
    def register(partial):
        @RegisterGradient(op_type)
        def _grad(op, grad):
            return _op("Mul", [grad, partial(op.inputs[0], op.outputs[0])])
        return partial
    return register


def _where_zero(x: Output, value: float, otherwise: Output) -> Output:
    """``value`` where x == 0, else ``otherwise`` (TF's imputed limits at 0, where x/0 is NaN)."""
    return _op("SelectV2", [_op("Equal", [x, _c(x, 0.0)]), _c(x, value), otherwise])


def _div(a: Output, b: Output) -> Output:
    return _op("RealDiv", [a, b])


def _sub(a: Output, b: Output) -> Output:
    return _op("Sub", [a, b])


@_unary("Digamma")
def _digamma(x, y):
    return _op("Polygamma", [_c(x, 1.0), x])


@_unary("Dawsn")
def _dawsn(x, y):
    return _sub(_c(x, 1.0), _mul(_c(x, 2.0), x, y))


@_unary("Expint")
def _expint(x, y):
    return _div(_op("Exp", [x]), x)


@_unary("FresnelCos")
def _fresnel_cos(x, y):
    return _op("Cos", [_mul(_c(x, np.pi / 2), _op("Square", [x]))])


@_unary("FresnelSin")
def _fresnel_sin(x, y):
    return _op("Sin", [_mul(_c(x, np.pi / 2), _op("Square", [x]))])


@_unary("Spence")
def _spence(x, y):
    # log(x) / (1 - x), with its limit -1 at x = 1.
    at_one = _op("Equal", [x, _c(x, 1.0)])
    return _op("SelectV2", [at_one, _op("Neg", [_ones(x)]), _div(_op("Log", [x]), _sub(_c(x, 1.0), x))])


@_unary("BesselI0")
def _bessel_i0(x, y):
    return _op("BesselI1", [x])


@_unary("BesselI0e")
def _bessel_i0e(x, y):
    return _sub(_op("BesselI1e", [x]), _mul(_op("Sign", [x]), y))


@_unary("BesselI1")
def _bessel_i1(x, y):
    return _where_zero(x, 1.0, _sub(_op("BesselI0", [x]), _div(y, x)))


@_unary("BesselI1e")
def _bessel_i1e(x, y):
    sign_plus_inverse = _op("AddV2", [_op("Sign", [x]), _op("Reciprocal", [x])])
    return _where_zero(x, 0.5, _sub(_op("BesselI0e", [x]), _mul(y, sign_plus_inverse)))


@_unary("BesselK0")
def _bessel_k0(x, y):
    return _op("Neg", [_op("BesselK1", [x])])


@_unary("BesselK0e")
def _bessel_k0e(x, y):
    return _sub(y, _op("BesselK1e", [x]))


@_unary("BesselK1")
def _bessel_k1(x, y):
    return _sub(_op("Neg", [_op("BesselK0", [x])]), _div(y, x))


@_unary("BesselK1e")
def _bessel_k1e(x, y):
    return _sub(_mul(y, _sub(_c(x, 1.0), _op("Reciprocal", [x]))), _op("BesselK0e", [x]))


@_unary("BesselJ0")
def _bessel_j0(x, y):
    return _op("Neg", [_op("BesselJ1", [x])])


@_unary("BesselJ1")
def _bessel_j1(x, y):
    return _where_zero(x, 0.5, _sub(_op("BesselJ0", [x]), _div(y, x)))


@_unary("BesselY0")
def _bessel_y0(x, y):
    return _op("Neg", [_op("BesselY1", [x])])


@_unary("BesselY1")
def _bessel_y1(x, y):
    return _sub(_op("BesselY0", [x]), _div(y, x))


@RegisterGradient("Igamma")
def _igamma_grad(op, grad):
    a, x = op.inputs
    partial_a = _op("IgammaGradA", [a, x])
    # exp(-x + (a-1) log x - lgamma(a)): in log space, as Gamma(a) can be large.
    log_partial_x = _sub(_sub(_mul(_sub(a, _c(a, 1.0)), _op("Log", [x])), x), _op("Lgamma", [a]))
    partial_x = _op("Exp", [log_partial_x])
    return _reduce_to(_mul(partial_a, grad), a, x), _reduce_to(_mul(partial_x, grad), x, a)


@RegisterGradient("Igammac")
def _igammac_grad(op, grad):
    return tuple(_op("Neg", [g]) for g in _igamma_grad(op, grad))


@RegisterGradient("Betainc")
def _betainc_grad(op, grad):
    a, b, x = op.inputs
    # TF differentiates x only.  x^(a-1) (1-x)^(b-1) / B(a, b), in log space;
    # xlogy/xlog1py give the right limits at the tails when a or b is 1.
    log_beta = _sub(_op("AddV2", [_op("Lgamma", [a]), _op("Lgamma", [b])]),
                    _op("Lgamma", [_op("AddV2", [a, b])]))
    log_partial = _op("AddV2", [_op("Xlog1py", [_sub(b, _c(b, 1.0)), _op("Neg", [x])]),
                                _op("Xlogy", [_sub(a, _c(a, 1.0)), x])])
    partial_x = _op("Exp", [_sub(log_partial, log_beta)])
    return None, None, _reduce_to(_mul(partial_x, grad), x, a)


@RegisterGradient("Zeta")
def _zeta_grad(op, grad):
    x, q = op.inputs
    # TF differentiates q only: d/dq zeta(x, q) = -x zeta(x + 1, q).
    partial_q = _mul(_op("Neg", [x]), _op("Zeta", [_op("AddV2", [x, _c(x, 1.0)]), q]))
    return None, _reduce_to(_mul(partial_q, grad), q, x)


@RegisterGradient("Polygamma")
def _polygamma_grad(op, grad):
    n, x = op.inputs
    # TF differentiates x only: d/dx psi^(n)(x) = psi^(n+1)(x).
    partial_x = _op("Polygamma", [_op("AddV2", [n, _c(n, 1.0)]), x])
    return None, _reduce_to(_mul(partial_x, grad), x, n)


@RegisterGradient("Xlog1py")
def _xlog1py_grad(op, grad):
    x, y = op.inputs
    # d/dx is log1p(y), masked to 0 where x == 0 (as xlog1py itself is).
    not_zero_x = _op("Cast", [_op("NotEqual", [x, _c(x, 0.0)])], {"DstT": x.dtype})
    partial_x = _op("Xlog1py", [not_zero_x, y])
    partial_y = _op("Xdivy", [x, _op("AddV2", [y, _c(y, 1.0)])])
    return _reduce_to(_mul(partial_x, grad), x, y), _reduce_to(_mul(partial_y, grad), y, x)
