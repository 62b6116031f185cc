"""Gradient cases: special functions (Bessel, gamma and beta families, zeta, erf, Fresnel, ...) and TF's random_grad.py."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "BesselI0", "BesselI0e", "BesselI1", "BesselI1e", "BesselJ0", "BesselJ1", "BesselK0",
    "BesselK0e", "BesselK1", "BesselK1e", "BesselY0", "BesselY1", "Betainc", "Dawsn", "Digamma",
    "Erf", "Erfc", "Erfinv", "Expint", "FresnelCos", "FresnelSin", "Igamma", "Igammac",
    "Lgamma", "Ndtri", "Polygamma", "RandomGamma", "Spence",
    "StatelessParameterizedTruncatedNormal", "StatelessRandomGammaV2", "StatelessRandomGammaV3",
    "Xdivy", "Xlog1py", "Xlogy", "Zeta",
})
