"""Gradient cases: TF's image_grad.py and image_ops.py (resizing, crops, colour, projective transforms)."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "CropAndResize", "ImageProjectiveTransformV2", "ImageProjectiveTransformV3", "RGBToHSV",
    "ResizeBicubic", "ResizeBilinear", "ResizeNearestNeighbor", "ScaleAndTranslate",
})
