"""Random tensors built as TF Python builds them (tensorflow/python/ops/random_ops.py).

``random_uniform``, ``random_normal`` and ``truncated_normal`` make the same
ops in the same order as ``tf.random.uniform`` / ``normal`` /
``truncated_normal`` (the raw random op, then ``* (max - min) + min`` or
``* stddev + mean`` in the output dtype), with seeds from
:func:`bridge.framework.random_seed.get_seed`.  So for the same (seed, seed2) they give
TensorFlow's values bit for bit.  The initializers, ``bridge.nn.dropout``
and the layers draw their random numbers here.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from bridge.framework import dtypes
from bridge import ops
from bridge.framework.builders import constant
from bridge.framework.graph import Output, get_default_graph
from bridge.framework.random_seed import op_seed_attrs

__all__ = ["random_normal", "random_uniform", "truncated_normal"]

_FLOATS = ("float16", "bfloat16", "float32", "float64")




def shape_tensor(shape: Any) -> Output:
    """An int32 (int64 if needed) 1-D Output for ``shape``: Outputs pass, sequences become a Const "shape"."""
    if isinstance(shape, Output):
        return shape
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {list(dims)} has a negative dimension")
    dtype = np.int64 if any(d > np.iinfo(np.int32).max for d in dims) else np.int32
    return constant(np.asarray(dims, dtype=dtype).reshape(len(dims)), name="shape")


def _float_dtype(dtype: Any, what: str) -> dtypes.DType:
    dt = dtypes.as_dtype(dtype)
    if dt.name not in _FLOATS:
        raise ValueError(f"{what}: dtype must be a floating point type, not {dt.name}")
    return dt


def _value(value: Any, dtype: dtypes.DType, name: str) -> Output:
    if isinstance(value, Output):
        if value.dtype != dtype:
            raise TypeError(f"'{value.name}' is {value.dtype.name}, expected {dtype.name}")
        return value
    return constant(np.asarray(value, dtype=dtype.as_numpy_dtype), dtype, name=name)


def _static_shape(out: Output, shape: Any) -> Output:
    if not isinstance(shape, Output):
        out.set_shape([int(d) for d in shape])
    return out


def _scaled_normal(op: str, op_name: str, what: str, shape: Any, mean: Any, stddev: Any, dtype: Any,
                   seed: Optional[int], name: Optional[str]) -> Output:
    """``<op>(shape) * stddev + mean``, laid out as TF's random_ops lays it out."""
    dtype = _float_dtype(dtype, what)
    g = get_default_graph()
    with g.name_scope(name or what) as scope:
        shape_t = shape_tensor(shape)
        mean_t = _value(mean, dtype, "mean")
        stddev_t = _value(stddev, dtype, "stddev")
        rnd = getattr(ops, op)(shape_t, dtype=dtype, **op_seed_attrs(seed, g), name=op_name)
        mul = ops.mul(rnd, stddev_t, name="mul")
        return _static_shape(ops.add_v2(mul, mean_t, name=scope), shape)


def random_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                  seed: Optional[int] = None, name: Optional[str] = None) -> Output:
    """Normal values (``tf.random.normal``): RandomStandardNormal * stddev + mean."""
    return _scaled_normal("random_standard_normal", "RandomStandardNormal", "random_normal",
                          shape, mean, stddev, dtype, seed, name)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
                     seed: Optional[int] = None, name: Optional[str] = None) -> Output:
    """Normal values re-drawn beyond two standard deviations (``tf.random.truncated_normal``)."""
    return _scaled_normal("truncated_normal", "TruncatedNormal", "truncated_normal",
                          shape, mean, stddev, dtype, seed, name)


def random_uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = dtypes.float32,
                   seed: Optional[int] = None, name: Optional[str] = None) -> Output:
    """Uniform values in [minval, maxval) (``tf.random.uniform``; maxval None means 1).

    As TF: with the Python ints 0 and 1 as bounds the raw RandomUniform is the
    result; otherwise ``rnd * (max - min) + min`` in ``dtype``.  Integer dtypes
    use RandomUniformInt and need ``maxval``."""
    dtype = dtypes.as_dtype(dtype)
    if dtype.name not in _FLOATS + ("int32", "int64"):
        raise ValueError(f"random_uniform: dtype must be a float, int32 or int64, not {dtype.name}")
    is_int = dtype.name in ("int32", "int64")
    if maxval is None:
        if is_int:
            raise ValueError(f"random_uniform: maxval is required for the integer dtype {dtype.name}")
        maxval = 1
    g = get_default_graph()
    with g.name_scope(name or "random_uniform") as scope:
        shape_t = shape_tensor(shape)
        minval_is_zero = isinstance(minval, int) and not isinstance(minval, bool) and minval == 0
        maxval_is_one = isinstance(maxval, int) and not isinstance(maxval, bool) and maxval == 1
        if not minval_is_zero or not maxval_is_one or is_int:
            minval = _value(minval, dtype, "min")
            maxval = _value(maxval, dtype, "max")
        seeds = op_seed_attrs(seed, g)
        if is_int:
            return _static_shape(ops.random_uniform_int(shape_t, minval, maxval, **seeds, name=scope), shape)
        rnd = ops.random_uniform(shape_t, dtype=dtype, **seeds, name="RandomUniform")
        if minval_is_zero:
            result = rnd if maxval_is_one else ops.mul(rnd, maxval, name=scope)
        else:
            diff = ops.sub(maxval, minval, name="sub")
            result = ops.add_v2(ops.mul(rnd, diff, name="mul"), minval, name=scope)
        return _static_shape(result, shape)
