"""TF 2's ``tf.math``, ``tf.linalg`` and ``tf.random`` namespaces, as
``bridge.math``, ``bridge.linalg`` and ``bridge.random``: the same names for
the functions the bridge has, each building TF's nodes (the one-op
functions are the generated raw ops; the others come from ``math_ops``,
``array_ops`` and ``bridge.nn``).  They live above ``bridge.ops`` and
``bridge.nn`` because they name modules of both (bridge/api/__init__.py).
tests/ops/test_operators.py checks them against stock TF through the oracle.
"""
from __future__ import annotations

import importlib
import types
from typing import Any

__all__ = ["linalg", "math", "random"]

# TF's name -> the raw op that is exactly TF's function (same op, same name, same arguments).
_MATH_RAW = {n: n for n in (
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "cos", "cosh", "digamma", "erf", "erfc",
    "exp", "expm1", "floor", "is_finite", "is_inf", "is_nan", "lgamma", "log", "log1p", "logical_and",
    "logical_not", "logical_or", "maximum", "minimum", "pow", "reciprocal", "rint", "rsqrt", "sign", "sin",
    "sinh", "softplus", "sqrt", "square", "squared_difference", "tan", "tanh", "xlogy",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "segment_sum", "segment_mean",
    "segment_max", "segment_min", "segment_prod", "unsorted_segment_sum", "unsorted_segment_max",
    "unsorted_segment_min", "unsorted_segment_prod", "sigmoid", "igamma",
    "igammac", "zeta", "polygamma", "betainc")}
_MATH_RAW.update({"negative": "neg", "floormod": "floor_mod"})
_MATH_COMPOSED = {n: "bridge.ops.math_ops" for n in (
    "abs", "add", "add_n", "argmax", "argmin", "divide", "multiply", "subtract", "round", "reduce_all",
    "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum",
    "bessel_i0e", "bessel_i1e", "xdivy", "xlog1py")}
_MATH_COMPOSED.update({"softmax": "bridge.nn.nn_ops", "log_softmax": "bridge.nn.nn_ops"})

_LINALG_RAW = {"inv": "matrix_inverse", "det": "matrix_determinant", "cholesky": "cholesky",
               "solve": "matrix_solve", "qr": "qr", "band_part": "matrix_band_part"}
_LINALG_COMPOSED = {"matmul": "bridge.ops.math_ops"}

_RANDOM = {"normal": ("bridge.nn.random_ops", "random_normal"),
           "uniform": ("bridge.nn.random_ops", "random_uniform"),
           "truncated_normal": ("bridge.nn.random_ops", "truncated_normal"),
           "set_seed": ("bridge.framework.random_seed", "set_random_seed")}


class _Namespace(types.ModuleType):
    """A module whose names resolve on first use (the raw ops generate lazily)."""

    def __init__(self, name: str, table: dict[str, tuple[str, str]]):
        super().__init__(f"bridge.{name}", f"TF's tf.{name}: the functions the bridge has, by TF's names.")
        self._table = table

    def __getattr__(self, name: str) -> Any:
        table = self.__dict__.get("_table", {})
        if name not in table:
            raise AttributeError(f"bridge.{self.__name__.split('.')[-1]} has no '{name}' "
                                 f"(TF's tf.{self.__name__.split('.')[-1]}.{name} is not in the bridge)")
        module, attr = table[name]
        value = getattr(importlib.import_module(module), attr)
        setattr(self, name, value)
        return value

    def __dir__(self) -> list:
        return sorted(set(self.__dict__.get("_table", {})) | set(super().__dir__()))


def _table(raw: dict[str, str], composed: dict[str, str]) -> dict[str, tuple[str, str]]:
    out = {tf_name: ("bridge.ops", op) for tf_name, op in raw.items()}
    out.update({name: (module, name) for name, module in composed.items()})
    return out


math = _Namespace("math", _table(_MATH_RAW, _MATH_COMPOSED))
linalg = _Namespace("linalg", _table(_LINALG_RAW, _LINALG_COMPOSED))
random = _Namespace("random", _RANDOM)
