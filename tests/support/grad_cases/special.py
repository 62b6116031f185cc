"""Gradient cases: special functions (Bessel, gamma and beta families, zeta, erf, Fresnel, ...) and TF's random_grad.py."""
from __future__ import annotations

import numpy as np

import bridge
from bridge import ops

from . import case, i32, i64, positive, signed


def _with_zero(x: np.ndarray) -> np.ndarray:
    """x with its first entry 0 (where Xlogy & co. mask their x-gradient)."""
    x = x.copy()
    x.flat[0] = 0.0
    return x


#: The gamma samplers' gradient op (RandomGammaGrad) has no float16 version: stock TF fails there.
_GAMMA_DTYPES = ("float64", "float32")

CASES = [
    # Unary special functions, each on its domain (K and Y need x > 0).
    case("Erf", ops.erf, signed(2, 3)),
    case("Erfc", ops.erfc, signed(2, 3)),
    case("Erfinv", ops.erfinv, signed(2, 3, low=0.1, high=0.8)),
    case("Ndtri", ops.ndtri, positive(2, 3, low=0.1, high=0.9)),
    case("Lgamma", ops.lgamma, positive(2, 3, low=0.3, high=3.0)),
    # float16 is left out: TF's gradient (Polygamma) has no float16 kernel, so stock TF fails.
    case("Digamma", ops.digamma, positive(2, 3, low=0.3, high=3.0), dtypes=("float64", "float32")),
    case("Dawsn", ops.dawsn, signed(2, 3)),
    case("Expint", ops.expint, positive(2, 3, low=0.3, high=2.0)),
    case("FresnelCos", ops.fresnel_cos, signed(2, 3)),
    case("FresnelSin", ops.fresnel_sin, signed(2, 3)),
    case("Spence", ops.spence, positive(2, 3, low=0.2, high=0.9)),
    case("BesselI0", ops.bessel_i0, signed(2, 3)),
    case("BesselI0e", ops.bessel_i0e, signed(2, 3)),
    case("BesselI1", ops.bessel_i1, signed(2, 3)),
    case("BesselI1e", ops.bessel_i1e, signed(2, 3)),
    case("BesselJ0", ops.bessel_j0, signed(2, 3, high=3.0)),
    case("BesselJ1", ops.bessel_j1, signed(2, 3, high=3.0)),
    # At x = 0 TF imputes the limit of I1', I1e', J1' (its formula divides by x).
    case("BesselI1", ops.bessel_i1, _with_zero(signed(2, 3)), label="at_zero"),
    case("BesselI1e", ops.bessel_i1e, _with_zero(signed(2, 3)), label="at_zero"),
    case("BesselJ1", ops.bessel_j1, _with_zero(signed(2, 3)), label="at_zero"),
    case("BesselK0", ops.bessel_k0, positive(2, 3, low=0.3, high=2.5)),
    case("BesselK0e", ops.bessel_k0e, positive(2, 3, low=0.3, high=2.5)),
    case("BesselK1", ops.bessel_k1, positive(2, 3, low=0.3, high=2.5)),
    case("BesselK1e", ops.bessel_k1e, positive(2, 3, low=0.3, high=2.5)),
    case("BesselY0", ops.bessel_y0, positive(2, 3, low=0.3, high=2.5)),
    case("BesselY1", ops.bessel_y1, positive(2, 3, low=0.3, high=2.5)),
    # Binary and ternary ones: TF differentiates only some arguments (None for the others).
    case("Igamma", ops.igamma, positive(2, 3, low=0.5, high=2.0), positive(2, 3, low=0.3, high=2.0)),
    case("Igamma", ops.igamma, positive(3, low=0.5, high=2.0), positive(2, 3, low=0.3, high=2.0),
         label="broadcast"),
    case("Igammac", ops.igammac, positive(2, 3, low=0.5, high=2.0), positive(2, 3, low=0.3, high=2.0)),
    case("Betainc", ops.betainc, positive(2, 3, low=0.5, high=2.0), positive(2, 3, low=0.5, high=2.0),
         positive(2, 3, low=0.2, high=0.8)),
    case("Zeta", ops.zeta, positive(2, 3, low=1.5, high=3.0), positive(2, 3, low=0.5, high=2.0)),
    case("Zeta", ops.zeta, positive(2, 3, low=1.5, high=3.0), positive(3, low=0.5, high=2.0),
         label="broadcast"),
    case("Polygamma", ops.polygamma, np.array([[0.0, 1.0, 2.0], [1.0, 2.0, 3.0]]),
         positive(2, 3, low=0.5, high=2.0)),
    case("Xlogy", ops.xlogy, _with_zero(signed(2, 3)), positive(2, 3, low=0.3, high=2.0)),
    case("Xlogy", ops.xlogy, signed(2, 3), positive(3, low=0.3, high=2.0), label="broadcast"),
    case("Xlog1py", ops.xlog1py, _with_zero(signed(2, 3)), signed(2, 3, low=0.1, high=0.8)),
    case("Xlog1py", ops.xlog1py, signed(3), signed(2, 3, low=0.1, high=0.8), label="broadcast"),
    case("Xdivy", ops.xdivy, _with_zero(signed(2, 3)), signed(2, 3, low=0.3, high=2.0)),
    case("Xdivy", ops.xdivy, signed(2, 3), signed(3, low=0.3, high=2.0), label="broadcast"),
    # Reparameterised samples: seeds fixed (op-level attrs or stateless seeds) so both sides draw the same.
    case("RandomGamma", lambda shape, alpha: ops.random_gamma(shape, alpha, seed=7, seed2=11),
         i32([4]), positive(2, 3, low=0.5, high=3.0), dtypes=_GAMMA_DTYPES),
    case("StatelessRandomGammaV2", lambda shape, seed, alpha: ops.stateless_random_gamma_v2(shape, seed, alpha),
         i32([4, 2, 3]), i64([3, 5]), positive(2, 3, low=0.5, high=3.0), dtypes=_GAMMA_DTYPES),
    case("StatelessRandomGammaV2", lambda shape, seed, alpha: ops.stateless_random_gamma_v2(shape, seed, alpha),
         i32([2, 3]), i64([3, 5]), positive(2, 3, low=0.5, high=3.0), label="no_sample_dims",
         dtypes=_GAMMA_DTYPES),
    case("StatelessRandomGammaV3",
         lambda shape, alg, alpha: ops.stateless_random_gamma_v3(
             shape, bridge.constant(np.array([3], np.uint64)), bridge.constant(np.array([5, 0], np.uint64)),
             alg, alpha),
         i32([4, 2, 3]), i32(1), positive(2, 3, low=0.5, high=3.0), dtypes=_GAMMA_DTYPES),
    case("StatelessParameterizedTruncatedNormal",
         lambda shape, seed, mean, std, lo, hi: ops.stateless_parameterized_truncated_normal(
             shape, seed, mean, std, lo, hi),
         i32([4, 3]), i64([3, 5]), signed(3, low=0.0, high=0.3), positive(3, low=0.5, high=1.5),
         -positive(3, low=0.5, high=1.0), positive(1, low=0.5, high=1.0), dtype_attr="dtype"),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING: frozenset[str] = frozenset()
