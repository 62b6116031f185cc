"""Variable initializers with ``tf.compat.v1.initializers``' names, defaults and formulas.

Each initializer is a callable ``init(shape, dtype=float32) -> Output``
(``bridge.initializers.glorot_uniform(seed=1)([3, 4])``); the layers call
them inside the variable's ``<name>/Initializer`` scope.  Random ones build
TF's random ops (:mod:`bridge.nn.random_ops`) with seeds from
:func:`bridge.framework.random_seed.get_seed`, so ``bridge.set_random_seed`` makes
them reproducible, and an explicit ``seed`` gives TensorFlow's own values.

Fans (``variance_scaling``) are computed as TF's ``_compute_fans``: a
matrix ``[fan_in, fan_out]``; a convolution kernel ``[..., in, out]``
multiplies both by the receptive field size; a vector has fan_in = fan_out
= its length; a scalar 1.  ``truncated_normal`` distributions divide the
standard deviation by 0.87962566103423978, the standard deviation of a
unit normal truncated to two standard deviations, so that the values have
the intended variance.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from bridge.framework import dtypes
from bridge import ops
from bridge.framework.attrs import Shape
from bridge.framework.builders import constant as _const
from bridge.framework.graph import Output, get_default_graph
from . import random_ops

__all__ = [
    "Initializer", "Zeros", "Ones", "Constant", "RandomNormal", "TruncatedNormal", "RandomUniform",
    "VarianceScaling", "GlorotUniform", "GlorotNormal",
    "zeros", "ones", "constant", "random_normal", "truncated_normal", "random_uniform", "variance_scaling",
    "glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform",
    "zeros_initializer", "ones_initializer", "constant_initializer", "random_normal_initializer",
    "truncated_normal_initializer", "random_uniform_initializer", "variance_scaling_initializer",
    "glorot_uniform_initializer", "glorot_normal_initializer", "get",
]

#: Standard deviation of a unit normal truncated to [-2, 2] (TF's constant).
TRUNCATED_NORMAL_STDDEV = 0.87962566103423978

# Above this many elements zeros/ones are a Fill, not a Const (TF's
# array_ops.zeros makes the same choice), so big variables keep GraphDefs small.
_FILL_ABOVE = 1000

ShapeLike = Union[Sequence[int], Shape]


def _dims(shape: Any, who: str) -> list[int]:
    if isinstance(shape, Output):
        raise TypeError(f"{who}: shape must be static (a list of ints), not Output '{shape.name}'")
    try:
        dims = [int(d) for d in (shape if not isinstance(shape, int) else [shape])]
    except TypeError:
        raise TypeError(f"{who}: shape must be a list of ints, not {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"{who}: shape {dims} has a negative dimension")
    return dims


def _float(dtype: Any, who: str) -> dtypes.DType:
    dt = dtypes.as_dtype(dtype)
    if not dt.is_floating:
        raise ValueError(f"{who}: expected a floating point dtype, not {dt.name}")
    return dt


def compute_fans(shape: ShapeLike) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shape, as TF's ``init_ops._compute_fans``."""
    shape = list(shape)
    if len(shape) < 1:
        fan_in = fan_out = 1
    elif len(shape) == 1:
        fan_in = fan_out = shape[0]
    elif len(shape) == 2:
        fan_in, fan_out = shape[0], shape[1]
    else:
        receptive_field_size = 1
        for dim in shape[:-2]:
            receptive_field_size *= dim
        fan_in = shape[-2] * receptive_field_size
        fan_out = shape[-1] * receptive_field_size
    return int(fan_in), int(fan_out)


class Initializer:
    """Base class: ``init(shape, dtype=None) -> Output`` (dtype None: the one given at construction)."""

    dtype: dtypes.DType = dtypes.float32

    def __call__(self, shape: ShapeLike, dtype: Any = None, partition_info: Any = None) -> Output:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _filled(value: float, dims: list[int], dtype: dtypes.DType, name: str) -> Output:
    g = get_default_graph()
    with g.name_scope(name) as scope:
        if int(np.prod(dims, dtype=np.int64)) < _FILL_ABOVE:
            return _const(np.full(dims, value, dtype=dtype.as_numpy_dtype), dtype, name=scope)
        return ops.fill(random_ops.shape_tensor(dims), _const(np.asarray(value, dtype.as_numpy_dtype), dtype,
                                                                name="Const"), name=scope)


class Zeros(Initializer):
    """All zeros (``tf.compat.v1.zeros_initializer``)."""

    def __init__(self, dtype: Any = dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return _filled(0, _dims(shape, "zeros"), dtypes.as_dtype(dtype or self.dtype), "zeros")

    def get_config(self):
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    """All ones (``tf.compat.v1.ones_initializer``)."""

    def __init__(self, dtype: Any = dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return _filled(1, _dims(shape, "ones"), dtypes.as_dtype(dtype or self.dtype), "ones")

    def get_config(self):
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """A given value: a scalar is broadcast, an array of the same size reshaped
    (``tf.compat.v1.constant_initializer``)."""

    def __init__(self, value: Any = 0, dtype: Any = dtypes.float32):
        if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
            raise TypeError(f"constant initializer: value must be a Python scalar, list, tuple or numpy array, "
                            f"not {type(value).__name__}")
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dims = _dims(shape, "constant")
        dtype = dtypes.as_dtype(dtype or self.dtype)
        arr = np.asarray(self.value)
        size = int(np.prod(dims, dtype=np.int64))
        if arr.size not in (1, size):
            raise ValueError(f"constant initializer: {arr.size} values cannot fill shape {dims}")
        return _const(arr.astype(dtype.as_numpy_dtype), dtype, shape=dims, name="Const")

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name}


class _Normal(Initializer):
    """Normal values of mean and stddev, drawn by ``random_ops.<_sampler>``."""

    _sampler = ""

    def __init__(self, mean: float = 0.0, stddev: float = 1.0, seed: Optional[int] = None,
                 dtype: Any = dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _float(dtype, self._sampler)

    def __call__(self, shape, dtype=None, partition_info=None):
        return getattr(random_ops, self._sampler)(_dims(shape, self._sampler), self.mean, self.stddev,
                                                  _float(dtype or self.dtype, self._sampler), seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed, "dtype": self.dtype.name}


class RandomNormal(_Normal):
    """Normal values (``tf.compat.v1.random_normal_initializer``: mean 0, stddev 1)."""

    _sampler = "random_normal"


class TruncatedNormal(_Normal):
    """Normal values re-drawn beyond two stddevs (``tf.compat.v1.truncated_normal_initializer``)."""

    _sampler = "truncated_normal"


class RandomUniform(Initializer):
    """Uniform values in [minval, maxval) (``tf.compat.v1.random_uniform_initializer``:
    [0, 1); integer dtypes need ``maxval``)."""

    def __init__(self, minval: Any = 0.0, maxval: Any = None, seed: Optional[int] = None,
                 dtype: Any = dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return random_ops.random_uniform(_dims(shape, "random_uniform"), self.minval, self.maxval,
                                         dtypes.as_dtype(dtype or self.dtype), seed=self.seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed, "dtype": self.dtype.name}


class VarianceScaling(Initializer):
    """Values whose variance is ``scale / n`` (``tf.compat.v1.variance_scaling_initializer``).

    ``n`` is fan_in, fan_out or their mean (``mode``); ``distribution``
    "truncated_normal" (or its old alias "normal"): truncated normal with
    stddev ``sqrt(scale / n) / 0.8796...``; "untruncated_normal": normal
    with stddev ``sqrt(scale / n)``; "uniform": within ``+-sqrt(3 scale / n)``.
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                 seed: Optional[int] = None, dtype: Any = dtypes.float32):
        if scale <= 0.0:
            raise ValueError(f"variance_scaling: scale must be a positive float, not {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', not {mode!r}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError("variance_scaling: distribution must be 'truncated_normal', 'untruncated_normal', "
                             f"'uniform' or 'normal', not {distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _float(dtype, "variance_scaling")

    def __call__(self, shape, dtype=None, partition_info=None):
        dims = _dims(shape, "variance_scaling")
        dtype = _float(dtype or self.dtype, "variance_scaling")
        fan_in, fan_out = compute_fans(dims)
        scale = self.scale
        if self.mode == "fan_in":
            scale /= max(1.0, fan_in)
        elif self.mode == "fan_out":
            scale /= max(1.0, fan_out)
        else:
            scale /= max(1.0, (fan_in + fan_out) / 2.0)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / TRUNCATED_NORMAL_STDDEV
            return random_ops.truncated_normal(dims, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(dims, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(dims, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution, "seed": self.seed,
                "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Uniform within ``+-sqrt(6 / (fan_in + fan_out))`` (``tf.compat.v1.glorot_uniform_initializer``);
    the layers' default kernel initializer."""

    def __init__(self, seed: Optional[int] = None, dtype: Any = dtypes.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="uniform", seed=seed, dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev ``sqrt(2 / (fan_in + fan_out))`` after truncation
    (``tf.compat.v1.glorot_normal_initializer``)."""

    def __init__(self, seed: Optional[int] = None, dtype: Any = dtypes.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="truncated_normal", seed=seed, dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed: Optional[int] = None) -> VarianceScaling:
    """Truncated normal with stddev ``sqrt(2 / fan_in)`` (``tf.compat.v1.initializers.he_normal``)."""
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def he_uniform(seed: Optional[int] = None) -> VarianceScaling:
    """Uniform within ``+-sqrt(6 / fan_in)`` (``tf.compat.v1.initializers.he_uniform``)."""
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform", seed=seed)


def lecun_normal(seed: Optional[int] = None) -> VarianceScaling:
    """Truncated normal with stddev ``sqrt(1 / fan_in)`` (``tf.compat.v1.initializers.lecun_normal``)."""
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def lecun_uniform(seed: Optional[int] = None) -> VarianceScaling:
    """Uniform within ``+-sqrt(3 / fan_in)`` (``tf.compat.v1.initializers.lecun_uniform``)."""
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="uniform", seed=seed)


# tf.compat.v1.initializers.* names (classes, called to make an initializer) ...
zeros = Zeros
ones = Ones
constant = Constant
random_normal = RandomNormal
truncated_normal = TruncatedNormal
random_uniform = RandomUniform
variance_scaling = VarianceScaling
glorot_uniform = GlorotUniform
glorot_normal = GlorotNormal
# ... and their tf.compat.v1.*_initializer spellings.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal

_BY_NAME: dict[str, Callable[[], Initializer]] = {
    "zeros": Zeros, "ones": Ones, "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal,
    "he_normal": he_normal, "he_uniform": he_uniform, "lecun_normal": lecun_normal,
    "lecun_uniform": lecun_uniform, "random_normal": RandomNormal, "truncated_normal": TruncatedNormal,
    "random_uniform": RandomUniform, "variance_scaling": VarianceScaling,
}


def get(identifier: Any) -> Optional[Callable]:
    """An initializer from a name ("glorot_uniform", "zeros", ...), a callable, or None."""
    if identifier is None or callable(identifier):
        return identifier
    if isinstance(identifier, str):
        try:
            return _BY_NAME[identifier]()
        except KeyError:
            raise ValueError(f"unknown initializer {identifier!r} (known: {', '.join(sorted(_BY_NAME))})") from None
    raise TypeError(f"cannot interpret {identifier!r} as an initializer")
