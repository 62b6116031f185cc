"""Math functions TF Python composes around its raw ops (``tf.reduce_sum``,
``tf.matmul``, ...), under TF's names and with TF's arguments.

The raw ops (``bridge.ops.sum``, ``bridge.ops.mat_mul``) need every input:
``ops.sum(x, [0, 1])``.  These add what TF Python adds: ``axis=None``
reducing every dimension, ``keepdims``, TF1's ``reduction_indices`` and
``keep_dims``, ``transpose_a``/``adjoint_b`` for batches.  Each builds the
nodes TF Python's ``math_ops.py`` builds, in its order and with its names
(tests/ops/test_operators.py compares the graphs through the oracle), so a graph
the bridge writes reads like stock TF's and its gradients are TF's.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from bridge.framework import dtypes
from bridge.framework.builders import constant, convert_to_output
from bridge.framework.graph import Output, get_default_graph

__all__ = ["abs", "add", "add_n", "argmax", "argmin", "bessel_i0e", "bessel_i1e", "cast", "clip_by_value", "divide", "matmul", "multiply",
           "range", "reduce_all", "round", "subtract", "xdivy", "xlog1py", "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_mean",
           "reduce_min", "reduce_prod", "reduce_sum"]


def _ops() -> Any:
    from . import gen_ops  # the generated functions: generated or loaded on first use
    return gen_ops


def _reduction_dims(x: Output, axis: Any) -> Any:
    """TF's ``_ReductionDims``: ``axis`` as given, else every dimension: a
    Const where the rank is known and not 0, else ``range(0, rank(x))``."""
    if axis is not None:
        return axis
    if not x.shape.unknown_rank and len(x.shape):
        return constant(np.arange(len(x.shape), dtype=np.int32))
    from bridge.ops.array_ops import rank
    return range(0, rank(x))


def _axis(axis: Any, reduction_indices: Any) -> Any:
    if reduction_indices is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'reduction_indices'.")
        return reduction_indices
    return axis


def _keepdims(keepdims: Any, keep_dims: Any) -> bool:
    if keep_dims is not None:
        if keepdims is not None:
            raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'.")
        keepdims = keep_dims
    return False if keepdims is None else bool(keepdims)


def _may_reduce_to_scalar(keepdims: bool, axis: Any, output: Output) -> Output:
    """A reduction of every axis is a scalar even where the input's shape is unknown."""
    shape = output.shape
    if not keepdims and axis is None and (shape.unknown_rank or any(d is None for d in shape)):
        output.set_shape([])
    return output


def _reduction(raw: str, doc: str):
    def reduce(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None, name: Optional[str] = None,
               reduction_indices: Any = None, keep_dims: Optional[bool] = None) -> Output:
        axis = _axis(axis, reduction_indices)
        keepdims = _keepdims(keepdims, keep_dims)
        x = convert_to_output(input_tensor, name="input_tensor")
        dims = _reduction_dims(x, axis)
        return _may_reduce_to_scalar(keepdims, axis, getattr(_ops(), raw)(x, dims, keep_dims=keepdims, name=name))
    reduce.__name__ = reduce.__qualname__ = f"reduce_{raw}"
    reduce.__doc__ = (f"``tf.reduce_{raw}``: {doc} of ``input_tensor`` over ``axis`` (default: every "
                      "dimension), keeping reduced dimensions with length 1 if ``keepdims``. TF1's "
                      "``reduction_indices`` and ``keep_dims`` are accepted.")
    return reduce


reduce_sum = _reduction("sum", "the sum")
reduce_mean = _reduction("mean", "the mean")
reduce_max = _reduction("max", "the maximum")
reduce_min = _reduction("min", "the minimum")
reduce_prod = _reduction("prod", "the product")
reduce_all = _reduction("all", "the logical and")
reduce_any = _reduction("any", "the logical or")


def reduce_logsumexp(input_tensor: Any, axis: Any = None, keepdims: Optional[bool] = None,
                     name: Optional[str] = None, reduction_indices: Any = None,
                     keep_dims: Optional[bool] = None) -> Output:
    """``tf.reduce_logsumexp``: ``log(sum(exp(x)))`` over ``axis``, computed
    as TF does it (the maximum subtracted first, so large inputs do not overflow;
    an infinite maximum is replaced by 0)."""
    axis = _axis(axis, reduction_indices)
    keepdims = _keepdims(keepdims, keep_dims)
    o = _ops()
    with get_default_graph().name_scope(name or "ReduceLogSumExp") as scope:
        x = convert_to_output(input_tensor, name="input_tensor")
        raw_max = reduce_max(x, axis=axis, keepdims=True)
        my_max = o.stop_gradient(o.select_v2(o.is_finite(raw_max), raw_max, 0))
        result = o.log(reduce_sum(o.exp(o.sub(x, my_max)), axis=axis, keepdims=keepdims))
        if not keepdims:
            my_max = o.reshape(my_max, o.shape(result))
        result = o.add_v2(result, my_max, name=scope)
        return _may_reduce_to_scalar(keepdims, axis, result)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           name: Optional[str] = None) -> Output:
    """``tf.matmul``: ``a @ b`` with either side transposed or adjoint;
    batched (``BatchMatMulV2``) where either side has more than two
    dimensions or an unknown rank. ``a_is_sparse``/``b_is_sparse`` are
    hints that make 2-D float32 operands a ``SparseMatMul``, as in TF."""
    if transpose_a and adjoint_a:
        raise ValueError(f"Only one of `transpose_a` and `adjoint_a` can be True. Received "
                         f"`transpose_a`={transpose_a}, `adjoint_a`={adjoint_a}.")
    if transpose_b and adjoint_b:
        raise ValueError(f"Only one of `transpose_b` and `adjoint_b` can be True. Received "
                         f"`transpose_b`={transpose_b}, `adjoint_b`={adjoint_b}.")
    o = _ops()
    with get_default_graph().name_scope(name or "MatMul") as scope:
        a = convert_to_output(a, name="a")
        b = b if isinstance(b, Output) else _convert_like(b, a, "b")
        batched = any(s.unknown_rank or len(s) > 2 for s in (a.shape, b.shape))
        if batched and not (a_is_sparse or b_is_sparse):
            if transpose_a:
                a, adjoint_a = _conj(a), True
            if transpose_b:
                b, adjoint_b = _conj(b), True
            return o.batch_mat_mul_v2(a, b, adj_x=adjoint_a, adj_y=adjoint_b, name=scope)
        if adjoint_a:
            a, transpose_a = _conj(a), True
        if adjoint_b:
            b, transpose_b = _conj(b), True
        sparse_types = (dtypes.float32, dtypes.bfloat16)
        if (a_is_sparse or b_is_sparse) and a.dtype in sparse_types and b.dtype in sparse_types:
            return o.sparse_mat_mul(a, b, transpose_a=transpose_a, transpose_b=transpose_b,
                                    a_is_sparse=a_is_sparse, b_is_sparse=b_is_sparse, name=scope)
        return o.mat_mul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=scope)


def _conj(x: Output) -> Output:
    """``tf.math.conj``: a Conj op for complex values, the value itself otherwise."""
    return _ops().conj(x) if x.dtype.is_complex else x


def _convert_like(value: Any, like: Output, name: str) -> Output:
    """``ops.convert_to_tensor(value, dtype_hint=like.dtype, name=name)``."""
    from bridge.ops.operators import _convert
    return _convert(value, name, dtype_hint=dtypes.base_dtype(like.dtype))


def cast(x: Any, dtype: Any, name: Optional[str] = None) -> Output:
    """``tf.cast``: ``x`` as ``dtype`` (``x`` itself when it already is)."""
    base = dtypes.base_dtype(dtypes.as_dtype(dtype))
    if isinstance(x, Output) and dtypes.base_dtype(x.dtype) == base:
        return x
    graph = x.graph if isinstance(x, Output) else get_default_graph()
    with graph.as_default(), graph.name_scope(name or "Cast") as scope:
        x = convert_to_output(x, name="x")
        if dtypes.base_dtype(x.dtype) != base:
            x = _ops().cast(x, DstT=base, name=scope)
        return x


def _arg_reduction(raw: str):
    def arg(input: Any, axis: Any = None, output_type: Any = dtypes.int64,  # noqa: A002 (TF's name)
            name: Optional[str] = None) -> Output:
        if axis is None:
            axis = 0
        return getattr(_ops(), raw)(input, axis, output_type=dtypes.as_dtype(output_type), name=name)
    arg.__name__ = arg.__qualname__ = raw.replace("_", "")
    arg.__doc__ = (f"``tf.{arg.__name__}``: the index of the {'largest' if 'max' in raw else 'smallest'} "
                   "value along ``axis`` (default 0), as ``output_type`` (int64).")
    return arg


argmax = _arg_reduction("arg_max")
argmin = _arg_reduction("arg_min")

_RANGE_DTYPES = ("int32", "int64", "float16", "bfloat16", "float32", "float64")


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,  # noqa: A001 (TF's name)
          name: str = "range") -> Output:
    """``tf.range``: ``start, start + delta, ...`` below ``limit`` (``range(n)``: from 0),
    of ``dtype`` or the widest of the arguments' dtypes."""
    if limit is None:
        start, limit = 0, start
    graph = next((v.graph for v in (start, limit, delta) if isinstance(v, Output)), get_default_graph())
    dtype = None if dtype is None else dtypes.as_dtype(dtype)
    with graph.as_default(), graph.name_scope(name) as scope:
        start, limit, delta = (v if isinstance(v, Output) else constant(v, dtype, name=label)
                               for v, label in ((start, "start"), (limit, "limit"), (delta, "delta")))
        if dtype is None:
            for v in (start, limit, delta):
                if v.dtype.name not in _RANGE_DTYPES:
                    raise TypeError(f"range: '{v.name}' is {v.dtype.name}, not one of {', '.join(_RANGE_DTYPES)}")
            dtype = max((v.dtype for v in (start, limit, delta)), key=lambda d: _RANGE_DTYPES.index(d.name))
        start, limit, delta = (cast(v, dtype) for v in (start, limit, delta))
        return _ops().range(start, limit, delta, name=scope)


def add_n(inputs: Any, name: Optional[str] = None) -> Output:
    """``tf.add_n``: the sum of a list of tensors of one shape and dtype
    (one tensor: an Identity, as TF)."""
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("Inputs must be an iterable of at least one Tensor/IndexedSlices with the same dtype "
                         "and shape.")
    inputs = [convert_to_output(v) for v in inputs]
    if len(inputs) == 1:
        return _ops().identity(inputs[0], name=name) if name else inputs[0]
    return _ops().add_n(inputs, name=name)


def add(x: Any, y: Any, name: Optional[str] = None) -> Output:
    """``tf.add``: ``x + y`` (an AddV2 op named "Add"; Add for strings)."""
    graph = x.graph if isinstance(x, Output) else get_default_graph()
    with graph.as_default(), graph.name_scope(name or "Add") as scope:
        x = convert_to_output(x, name="x")
        y = y if isinstance(y, Output) else _convert_like(y, x, "y")
        raw = _ops().add if x.dtype == dtypes.string else _ops().add_v2
        return raw(x, y, name=scope)


def multiply(x: Any, y: Any, name: Optional[str] = None) -> Output:
    """``tf.multiply``: ``x * y`` elementwise, broadcast (Mul)."""
    return _ops().mul(x, y, name=name)


def subtract(x: Any, y: Any, name: Optional[str] = None) -> Output:
    """``tf.subtract``: ``x - y`` elementwise, broadcast (Sub)."""
    return _ops().sub(x, y, name=name)


def divide(x: Any, y: Any, name: Optional[str] = None) -> Output:
    """``tf.divide``: ``x / y`` as Python's ``/`` on tensors (integers divide in floating point)."""
    if not isinstance(x, Output):
        x = convert_to_output(x, dtype=dtypes.base_dtype(y.dtype) if isinstance(y, Output) else None)
    if name is None:
        return x / y
    from bridge.ops.operators import _truediv   # TF's DivideDelegateWithName: x / y in the scope `name`
    with x.graph.as_default(), x.graph.name_scope(name) as scope:
        return _truediv(x, y, scope)


def abs(x: Any, name: Optional[str] = None) -> Output:  # noqa: A001 (TF's name)
    """``tf.abs``: |x| (ComplexAbs, real-valued, for complex x)."""
    graph = x.graph if isinstance(x, Output) else get_default_graph()
    with graph.as_default(), graph.name_scope(name or "Abs") as scope:
        x = convert_to_output(x, name="x")
        if x.dtype.is_complex:
            real = dtypes.float32 if dtypes.base_dtype(x.dtype) == dtypes.complex64 else dtypes.float64
            return _ops().complex_abs(x, Tout=real, name=scope)
        return _ops().abs(x, name=scope)


def round(x: Any, name: Optional[str] = None) -> Output:  # noqa: A001 (TF's name)
    """``tf.round``: to the nearest integer, half to even (integers pass through)."""
    x = convert_to_output(x, name="x")
    return x if x.dtype.is_integer else _ops().round(x, name=name)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: Optional[str] = None) -> Output:
    """``tf.clip_by_value``: ``t`` clipped to [min, max] (Minimum then Maximum, as TF builds it)."""
    graph = t.graph if isinstance(t, Output) else get_default_graph()
    with graph.as_default(), graph.name_scope(name or "clip_by_value") as scope:
        values = convert_to_output(t, name="t")
        t_min = _ops().minimum(values, clip_value_max)
        return _ops().maximum(t_min, clip_value_min, name=scope)


def _in_scope(scope_name: str, raw: str, doc: str):
    """A TF function that opens a scope and builds one unnamed op in it ("xdivy/Xdivy")."""
    def fn(*args: Any, name: Optional[str] = None) -> Output:
        graph = next((a.graph for a in args if isinstance(a, Output)), get_default_graph())
        with graph.as_default(), graph.name_scope(name or scope_name):
            return getattr(_ops(), raw)(*args)
    fn.__name__ = fn.__qualname__ = scope_name
    fn.__doc__ = doc
    return fn


bessel_i0e = _in_scope("bessel_i0e", "bessel_i0e", "``tf.math.bessel_i0e``: exp(-|x|) I0(x).")
bessel_i1e = _in_scope("bessel_i1e", "bessel_i1e", "``tf.math.bessel_i1e``: exp(-|x|) I1(x).")
xdivy = _in_scope("xdivy", "xdivy", "``tf.math.xdivy``: x / y, 0 where x is 0.")
xlog1py = _in_scope("xlog1py", "xlog1py", "``tf.math.xlog1py``: x * log1p(y), 0 where x is 0.")
