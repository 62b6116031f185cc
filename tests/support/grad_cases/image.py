"""Gradient cases: TF's image_grad.py and image_ops.py (resizing, crops, colour, projective transforms)."""
from __future__ import annotations

import numpy as np

import bridge
from bridge import ops

from . import case, cplx, i32, i64, positive, signed  # noqa: F401


def _i32(value):
    return bridge.constant(np.asarray(value, dtype=np.int32))


def _f32(x):
    """float32-only inputs (boxes, scales): differentiated through a cast from the dtype under test."""
    return x if x.dtype == bridge.float32 else ops.cast(x, DstT=bridge.float32)


# A small rotation, scaling and shift, mapping output pixels to input pixels.
_TRANSFORM = np.array([[0.9, -0.2, 0.6, 0.25, 1.1, -0.3, 0.01, -0.02]], np.float32)


def _projective(version, interpolation, fill_mode="CONSTANT"):
    def build(x):
        t = bridge.constant(_TRANSFORM)
        if version == 2:
            return ops.image_projective_transform_v2(x, t, _i32([5, 4]), interpolation=interpolation,
                                                     fill_mode=fill_mode)
        return ops.image_projective_transform_v3(x, t, _i32([5, 4]), bridge.constant(np.float32(0.5)),
                                                 interpolation=interpolation, fill_mode=fill_mode)
    return build


# TF's gradient rejects bfloat16 images.
_PROJECTIVE_DTYPES = ("float64", "float32", "float16")

# Colours with distinct channels (RGBToHSV's gradient branches on which one is largest/smallest),
# at least 0.25 apart: the second order divides by differences to the 4th power (float16 overflows).
_RGB = np.array([[[0.8, 0.3, 0.55], [0.2, 0.75, 0.45], [0.3, 0.55, 0.9]],
                 [[0.6, 0.85, 0.2], [0.7, 0.2, 0.45], [0.25, 0.9, 0.55]]])

# TF's gradient (ScaleAndTranslateGrad) is float32-only.
_SCALE_DTYPES = ("float32",)

CASES = [
    case("ResizeBilinear", lambda x: ops.resize_bilinear(x, _i32([5, 7])), signed(2, 3, 4, 2)),
    case("ResizeBilinear", lambda x: ops.resize_bilinear(x, _i32([2, 3]), align_corners=True),
         signed(1, 4, 5, 2), label="align_corners"),
    case("ResizeBilinear", lambda x: ops.resize_bilinear(x, _i32([5, 6]), half_pixel_centers=True),
         signed(1, 3, 4, 1), label="half_pixel"),
    case("ResizeNearestNeighbor", lambda x: ops.resize_nearest_neighbor(x, _i32([5, 7])), signed(2, 3, 4, 2)),
    case("ResizeNearestNeighbor",
         lambda x: ops.resize_nearest_neighbor(x, _i32([2, 3]), half_pixel_centers=True),
         signed(1, 4, 5, 2), label="half_pixel"),
    case("ResizeBicubic", lambda x: ops.resize_bicubic(x, _i32([5, 7])), signed(2, 3, 4, 2)),
    case("ResizeBicubic", lambda x: ops.resize_bicubic(x, _i32([3, 3]), align_corners=True),
         signed(1, 4, 5, 2), label="align_corners"),
    case("ScaleAndTranslate",
         lambda x: ops.scale_and_translate(x, _i32([5, 7]), bridge.constant(np.float32([1.6, 1.7])),
                                           bridge.constant(np.float32([0.3, -0.2]))),
         signed(1, 3, 4, 2), dtypes=_SCALE_DTYPES),
    case("ScaleAndTranslate",
         lambda x: ops.scale_and_translate(x, _i32([2, 3]), bridge.constant(np.float32([0.6, 0.7])),
                                           bridge.constant(np.float32([0.1, 0.2])), kernel_type="triangle",
                                           antialias=False),
         signed(1, 4, 5, 1), label="triangle", dtypes=_SCALE_DTYPES),
    case("CropAndResize",
         lambda x, b: ops.crop_and_resize(x, _f32(b), _i32([0, 1, 0]), _i32([3, 2])),
         signed(2, 5, 6, 2), np.array([[0.1, 0.15, 0.8, 0.7], [0.3, 0.2, 0.65, 0.9], [0.05, 0.5, 0.55, 0.95]])),
    case("CropAndResize",
         lambda x, b: ops.crop_and_resize(x, _f32(b), _i32([1, 0]), _i32([2, 3]), method="nearest"),
         signed(2, 5, 6, 1), np.array([[0.1, 0.15, 0.8, 0.7], [0.3, 0.2, 0.65, 0.9]]), label="nearest"),
    case("RGBToHSV", ops.rgb_to_hsv, _RGB),
    case("ImageProjectiveTransformV2", _projective(2, "BILINEAR"), signed(2, 4, 5, 2), dtype_attr="dtype", dtypes=_PROJECTIVE_DTYPES),
    case("ImageProjectiveTransformV2", _projective(2, "NEAREST", "REFLECT"), signed(1, 4, 5, 1),
         dtype_attr="dtype", dtypes=_PROJECTIVE_DTYPES, label="nearest_reflect"),
    case("ImageProjectiveTransformV3", _projective(3, "BILINEAR"), signed(2, 4, 5, 2), dtype_attr="dtype", dtypes=_PROJECTIVE_DTYPES),
    case("ImageProjectiveTransformV3", _projective(3, "NEAREST", "WRAP"), signed(1, 4, 5, 1),
         dtype_attr="dtype", dtypes=_PROJECTIVE_DTYPES, label="nearest_wrap"),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset()
