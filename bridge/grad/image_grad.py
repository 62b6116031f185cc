"""Gradients of image ops (resizing, crops, colour, projective transforms), after TF's image_grad.py."""
from __future__ import annotations

from bridge.framework import dtypes
from bridge.framework.graph import Output
from ._helpers import _c, _const, _mul, _op
from .registry import NotDifferentiable, RegisterGradient

NotDifferentiable("ResizeBilinearGrad")  # as TF: no second order through bilinear resizing


@RegisterGradient("ResizeBicubic")
def _resize_bicubic_grad(op, grad):
    # As TF: ResizeBicubicGrad has float32/float64 kernels only; other dtypes get no gradient.
    x = op.inputs[0]
    if x.dtype.name not in ("float32", "float64"):
        return None, None
    attrs = {n: op.get_attr(n) for n in ("align_corners", "half_pixel_centers")}
    return _op("ResizeBicubicGrad", [grad, x], attrs), None


def _projective_transform_grad(op, grad):
    """The inverse transform applied to grad (TF's approximation: interpolation is ignored)."""
    images, transforms = op.inputs[0], op.inputs[1]
    flat = _op("Reshape", [transforms, _const([-1, 8], "int32")])
    ones = _op("Fill", [_op("Pack", [[_op("StridedSlice", [_op("Shape", [flat]), _const([0], "int32"),
                                                            _const([1], "int32"), _const([1], "int32")],
                                          {"shrink_axis_mask": 1}), _const(1, "int32")]]),
                        _const(1.0, flat.dtype)])
    matrices = _op("Reshape", [_op("ConcatV2", [[flat, ones], _const(1, "int32")]), _const([-1, 3, 3], "int32")])
    inverse = _op("Reshape", [_op("MatrixInverse", [matrices]), _const([-1, 9], "int32")])

    def columns(begin, end):
        return _op("StridedSlice", [inverse, _const([0, begin], "int32"), _const([0, end], "int32"),
                                    _const([1, 1], "int32")], {"begin_mask": 1, "end_mask": 1})

    inverse = _op("RealDiv", [inverse, columns(8, 9)])  # normalise the last entry to 1
    inverse_flat = columns(0, 8)
    size = _op("StridedSlice", [_op("Shape", [images]), _const([1], "int32"), _const([3], "int32"),
                                _const([1], "int32")])
    attrs = {"interpolation": op.get_attr("interpolation"), "fill_mode": op.get_attr("fill_mode")}
    inputs = [grad, inverse_flat, size]
    if op.type == "ImageProjectiveTransformV3":
        inputs.append(_const(0.0, "float32"))
    return [_op(op.type, inputs, attrs)] + [None] * (len(op.inputs) - 1)


RegisterGradient("ImageProjectiveTransformV2")(_projective_transform_grad)
RegisterGradient("ImageProjectiveTransformV3")(_projective_transform_grad)


def _channel(x: Output, k: int) -> Output:
    """x[..., k]."""
    return _op("StridedSlice", [x, _const([0, k], "int32"), _const([0, k + 1], "int32"), _const([1, 1], "int32")],
               {"begin_mask": 1, "end_mask": 1, "ellipsis_mask": 1, "shrink_axis_mask": 2})


@RegisterGradient("RGBToHSV")
def _rgb_to_hsv_grad(op, grad):
    """TF's piecewise derivative of RGB -> HSV, term by term (same ops, so the same second order)."""
    dtype = op.inputs[0].dtype
    r, g, b = (_channel(op.inputs[0], k) for k in range(3))
    s, v = _channel(op.outputs[0], 1), _channel(op.outputs[0], 2)

    def cast(cond):
        return _op("Cast", [cond], {"DstT": dtypes.as_dtype(dtype)})

    def both(c1, c2):
        return cast(_op("LogicalAnd", [c1, c2]))

    def ge(a, c):
        return _op("GreaterEqual", [a, c])

    def gt(a, c):
        return _op("Greater", [a, c])

    def lt(a, c):
        return _op("Less", [a, c])

    def le(a, c):
        return _op("LessEqual", [a, c])

    def add(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = _op("AddV2", [out, x])
        return out

    def sub(a, c):
        return _op("Sub", [a, c])

    def recip(x):  # TF's _CustomReciprocal: 1/x, 0 where x is 0
        return _op("DivNoNan", [_c(x, 1.0), x])

    def sq(x):
        return _op("Square", [x])

    def positive(x):
        return cast(gt(x, _c(x, 0.0)))

    minus = _c(r, -1.0)
    sixty = _c(r, 60.0)
    r_big, g_big, b_big = both(ge(r, b), ge(r, g)), both(gt(g, r), ge(g, b)), both(gt(b, r), gt(b, g))
    r_small, g_small, b_small = both(lt(r, b), lt(r, g)), both(le(g, r), lt(g, b)), both(le(b, r), le(b, g))

    ds_dr = _mul(positive(r), add(_mul(r_big, add(_mul(g_small, g), _mul(b_small, b)), recip(sq(r))),
                                  _mul(r_small, minus, recip(add(_mul(g_big, g), _mul(b_big, b))))))
    ds_dg = _mul(positive(g), add(_mul(g_big, add(_mul(r_small, r), _mul(b_small, b)), recip(sq(g))),
                                  _mul(g_small, minus, recip(add(_mul(r_big, r), _mul(b_big, b))))))
    ds_db = _mul(positive(b), add(_mul(b_big, add(_mul(g_small, g), _mul(r_small, r)), recip(sq(b))),
                                  _mul(b_small, minus, recip(add(_mul(g_big, g), _mul(r_big, r))))))

    def hue_term(*factors):
        return _mul(sixty, _mul(*factors))

    inv_sv = (recip(sq(s)), recip(sq(v)))
    dh_dr = add(hue_term(positive(r), r_big, minus, sub(g, b), *inv_sv),
                hue_term(positive(g), g_big, r_small, sub(b, g), recip(sq(sub(r, g)))),
                hue_term(positive(g), g_big, b_small, minus, recip(sub(g, b))),
                hue_term(positive(b), b_big, r_small, sub(b, g), recip(sq(sub(b, r)))),
                hue_term(positive(b), b_big, g_small, recip(sub(b, g))))
    dh_dg = add(hue_term(positive(g), g_big, minus, sub(b, r), *inv_sv),
                hue_term(positive(r), r_big, g_small, sub(r, b), recip(sq(sub(r, g)))),
                hue_term(positive(r), r_big, b_small, recip(sub(r, b))),
                hue_term(positive(b), b_big, g_small, sub(r, b), recip(sq(sub(b, g)))),
                hue_term(positive(b), b_big, r_small, minus, recip(sub(b, r))))
    dh_db = add(hue_term(positive(b), b_big, minus, sub(r, g), *inv_sv),
                hue_term(positive(r), r_big, b_small, sub(g, r), recip(sq(sub(r, b)))),
                hue_term(positive(r), r_big, g_small, minus, recip(sub(r, g))),
                hue_term(positive(g), g_big, b_small, sub(g, r), recip(sq(sub(g, b)))),
                hue_term(positive(g), g_big, r_small, recip(sub(g, r))))
    deg = _c(r, 360.0)
    dh_dr, dh_dg, dh_db = (_op("RealDiv", [d, deg]) for d in (dh_dr, dh_dg, dh_db))

    def stacked(k, d_r, d_g, d_b):
        gk = _channel(grad, k)
        return _op("Pack", [[_mul(gk, d_r), _mul(gk, d_g), _mul(gk, d_b)]], {"axis": -1})

    return add(add(stacked(2, r_big, g_big, b_big), stacked(1, ds_dr, ds_dg, ds_db)),
               stacked(0, dh_dr, dh_dg, dh_db))
