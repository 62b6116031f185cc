"""Python's operators on graph tensors, as TF Python builds them in graph mode.

``x + y``, ``x @ w``, ``x // 2``, ``x < 3``, ``~mask``, ``x[1:, ::-1]``...
build the ops, names and dtype conversions TF Python's Tensor operators
build in a ``tf.Graph`` (tensorflow/python/ops/math_ops.py,
override_binary_operator.py, tensor_getitem_override.py): ``x + 1`` is an
``AddV2`` named "add" whose 1 is a Const "add/y" of x's dtype, ``2 - x`` a
``Sub`` "sub" whose 2 is "sub/x", ``a / b`` on int32 casts both to float64
and divides (``RealDiv``), ``&``/``|``/``^``/``~`` are logical on bool and
bitwise on integers, ``a @ b`` is ``MatMul`` (``BatchMatMulV2`` beyond rank
2), ``x[...]`` one ``StridedSlice``.  tests/ops/test_operators.py compares the
graphs with the ones stock TF builds for the same expressions.

Python values are converted to the tensor's dtype where no value changes
(``x_int32 + 2.5`` raises TypeError, as in TF); tensors of different dtypes
are never cast implicitly (TypeError).  ``==`` and ``!=`` compare tensors
by identity, as in TF1 graph mode (``tf.equal`` compares values).  As there, a graph
tensor is no Python bool, has no ``len`` and cannot be iterated (TypeError).

The operators live here and are installed on :class:`bridge.Output` when
``bridge`` is imported, rather than written in ``bridge/framework/graph.py``, because
the generated ops are built on the graph module: graph must not import them
back.  ``bridge.ops`` itself is imported on the first operator used, so
``import bridge`` stays light.
"""
from __future__ import annotations

import contextlib
import numbers
from typing import Any, Callable, Iterator, Optional

import numpy as np

from bridge.framework import dtypes
from bridge.framework.graph import Graph, Output, get_default_graph

__all__ = ["OPERATORS", "BINARY"]

_ops_module: Any = None


def _ops() -> Any:
    global _ops_module
    if _ops_module is None:
        from . import gen_ops  # the generated functions: generated or loaded on first use
        _ops_module = gen_ops
    return _ops_module


# --- conversions, as TF's ops.convert_to_tensor --------------------------------

def _graph_of(x: Output) -> Graph:
    """The graph an operator on ``x`` builds in: the default graph when it
    holds x or captures from x's graph (a function body), else x's."""
    default = get_default_graph()
    if default is x.graph:
        return default
    encloses = getattr(default, "encloses", None)
    if encloses is not None and encloses(x.graph):
        return default
    return x.graph


@contextlib.contextmanager
def _scope(x: Output, name: str) -> Iterator[str]:
    """TF's ``ops.name_scope(None, name, [x, ...])``: a unique scope on x's
    graph, made the default; yields the scope ("add/"), which names the op."""
    graph = _graph_of(x)
    with graph.as_default(), graph.name_scope(name) as scope:
        yield scope


def _variable_value(value: Any) -> Optional[Output]:
    from bridge.framework.builders import Variable
    return value.value() if isinstance(value, Variable) else None


def _convert(value: Any, name: str, dtype: Optional[dtypes.DType] = None,
             dtype_hint: Optional[dtypes.DType] = None) -> Output:
    """``ops.convert_to_tensor(value, dtype=..., dtype_hint=..., name=...)`` in
    the current graph and scope: Outputs pass (their dtype must be ``dtype``),
    values become a Const of ``dtype`` (TypeError where a value would change),
    else of ``dtype_hint`` where they fit it, else of their natural dtype."""
    if not isinstance(value, Output):
        var = _variable_value(value)
        if var is not None:
            value = var
    if isinstance(value, Output):
        if dtype is not None and dtypes.base_dtype(value.dtype) != dtype:
            raise TypeError(f"Tensor conversion requested dtype {dtype.name} for Output '{value.name}' "
                            f"with dtype {value.dtype.name}")
        return value
    from bridge.framework.builders import constant
    if dtype is not None:
        try:
            return constant(value, dtype, name=name)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"cannot convert {_short(value)} to a {dtype.name} tensor: {exc}") from None
    if dtype_hint is not None:
        from .op_helpers import _fits
        if _fits(value, dtype_hint) or (isinstance(value, (np.ndarray, np.generic))
                                        and np.asarray(value).dtype == dtype_hint.as_numpy_dtype):
            try:
                return constant(value, dtype_hint, name=name)
            except (TypeError, ValueError):
                pass
    from .op_helpers import natural_dtype
    try:
        return constant(value, natural_dtype(value), name=name)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot convert {_short(value)} to a tensor: {exc}") from None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _base(x: Output) -> dtypes.DType:
    return dtypes.base_dtype(x.dtype)


def _same_dtype(x: Output, y: Output, what: str) -> None:
    if _base(x) != _base(y):
        raise TypeError(f"{what}: x and y must have the same dtype, got {_base(x).name} ('{x.name}') "
                        f"and {_base(y).name} ('{y.name}')")


def _cast(x: Output, dtype: dtypes.DType) -> Output:
    """math_ops.cast: x itself if already ``dtype``, else a Cast named "Cast"."""
    if _base(x) == dtype:
        return x
    graph = get_default_graph()
    with graph.name_scope("Cast") as scope:
        return _ops().cast(x, DstT=dtype, name=scope)


# --- binary operators ---------------------------------------------------------------
# Each ``fn(x, y, scope)`` gets x, y as TF's binary_op_wrapper passes them to
# the math_ops function: forward, x is the Output and y as given; reflected
# (``2 - x``), x is already a Const of y's dtype named "<scope>/x".  ``fn``
# runs inside the scope and names its result op ``scope``.

def _y(x: Output, y: Any) -> Output:
    """y converted as the generated op converts it, to x's dtype, "<scope>/y"."""
    return _convert(y, "y", dtype=_base(x))


def _add(x, y, scope):
    if not isinstance(y, Output):
        y = _convert(y, "y", dtype_hint=_base(x))
    _same_dtype(x, y, "x + y")
    if _base(x) == dtypes.string:
        return _ops().add(x, y, name=scope)
    return _ops().add_v2(x, y, name=scope)


def _elementwise(op: str) -> Callable:
    def fn(x, y, scope):
        y = _y(x, y)
        _same_dtype(x, y, op)
        return getattr(_ops(), op)(x, y, name=scope)
    return fn


def _mul(x, y, scope):
    y = _convert(y, "y", dtype=_base(x)) if not isinstance(y, Output) else y
    if _base(x) == dtypes.bool or _base(y) == dtypes.bool:
        # TF multiplies bools as int32, then casts back.
        xi = _ops().cast(x, DstT=dtypes.int32)
        yi = _ops().cast(y, DstT=dtypes.int32)
        return _ops().cast(_ops().mul(xi, yi, name=scope), DstT=dtypes.bool)
    _same_dtype(x, y, "x * y")
    return _ops().mul(x, y, name=scope)


# __truediv__'s casts (math_ops._TRUEDIV_TABLE); None: divide as is.
_TRUEDIV = {"uint8": "float32", "int8": "float32", "uint16": "float32", "int16": "float32",
            "uint32": "float64", "int32": "float64", "uint64": "float64", "int64": "float64",
            "bfloat16": None, "half": None, "float16": None, "float32": None, "float64": None,
            "complex64": None, "complex128": None}


def _truediv(x, y, scope):
    if not isinstance(y, Output):
        y = _convert(y, "y", dtype_hint=_base(x))
    _same_dtype(x, y, "x / y")
    name = _base(x).name
    if name not in _TRUEDIV:
        raise TypeError(f"x / y: invalid dtype {name} in __truediv__ ('{x.name}'); expected one of "
                        f"{', '.join(sorted(set(_TRUEDIV)))}")
    target = _TRUEDIV[name]
    if target is not None:
        x, y = _cast(x, dtypes.as_dtype(target)), _cast(y, dtypes.as_dtype(target))
    return _ops().real_div(x, y, name=scope)


def _matmul(a, b, scope):
    if not isinstance(b, Output):
        b = _convert(b, "b", dtype_hint=_base(a))
    _same_dtype(a, b, "a @ b")
    batched = any(s.unknown_rank or len(s) > 2 for s in (a.shape, b.shape))
    if batched:
        return _ops().batch_mat_mul_v2(a, b, name=scope)
    return _ops().mat_mul(a, b, name=scope)


def _logical_or_bitwise(logical: str, bitwise: str) -> Callable:
    def fn(x, y, scope):
        if _base(x) == dtypes.bool:
            return getattr(_ops(), logical)(x, _y(x, y), name=scope)
        return getattr(_ops(), bitwise)(x, y)   # TF does not pass the name on: "<scope>/BitwiseAnd"
    return fn


def _xor(x, y, scope):
    if _base(x) == dtypes.bool:
        o = _ops()
        # math_ops.logical_xor: (x | y) & ~(x & y)
        return o.logical_and(o.logical_or(x, y), o.logical_not(o.logical_and(x, y)), name=scope)
    return _ops().bitwise_xor(x, y)


#: Python's binary operators -> (the name TF's scope takes, the builder).
_BINARY: dict[str, tuple[str, Callable]] = {
    "add": ("add", _add),
    "sub": ("sub", _elementwise("sub")),
    "mul": ("mul", _mul),
    "truediv": ("truediv", _truediv),
    "floordiv": ("floordiv", _elementwise("floor_div")),
    "mod": ("mod", _elementwise("floor_mod")),
    "pow": ("pow", _elementwise("pow")),
    "matmul": ("matmul", _matmul),
    "and": ("and", _logical_or_bitwise("logical_and", "bitwise_and")),
    "or": ("or", _logical_or_bitwise("logical_or", "bitwise_or")),
    "xor": ("xor", _xor),
}

#: Python's binary operators -> the op type each builds (for floats; see module doc).
BINARY = {"add": "AddV2", "sub": "Sub", "mul": "Mul", "truediv": "RealDiv", "floordiv": "FloorDiv",
          "mod": "FloorMod", "pow": "Pow", "matmul": "MatMul", "and": "LogicalAnd/BitwiseAnd",
          "or": "LogicalOr/BitwiseOr", "xor": "LogicalXor/BitwiseXor"}


def _forward(scope_name: str, fn: Callable) -> Callable[[Output, Any], Any]:
    def operator(x: Output, y: Any) -> Any:
        """``x <op> y``"""
        with _scope(x, scope_name) as scope:
            try:
                return fn(x, y, scope)
            except (TypeError, ValueError) as exc:
                # TF's binary_op_wrapper: let y's reflected operator try.
                reflected = getattr(type(y), f"__r{scope_name}__", None)
                if reflected is not None and not isinstance(y, Output):
                    try:
                        out = reflected(y, x)
                    except (TypeError, ValueError):
                        raise exc from None
                    if out is not NotImplemented:
                        return out
                raise
    return operator


def _reflected(scope_name: str, fn: Callable) -> Callable[[Output, Any], Any]:
    def operator(y: Output, x: Any) -> Any:
        """``x <op> y`` called on y (``2.0 * y``): x becomes a Const of y's dtype."""
        with _scope(y, scope_name) as scope:
            x = _convert(x, "x", dtype=_base(y))
            return fn(x, y, scope)
    return operator


# --- unary operators and comparisons ---------------------------------------------------

def _neg(x: Output) -> Output:
    with _graph_of(x).as_default():
        return _ops().neg(x)


def _abs(x: Output) -> Output:
    with _scope(x, "Abs") as scope:
        if _base(x).is_complex:
            real = dtypes.float64 if _base(x) == dtypes.complex128 else dtypes.float32
            return _ops().complex_abs(x, Tout=real, name=scope)
        return _ops().abs(x, name=scope)


def _invert(x: Output) -> Output:
    with _graph_of(x).as_default():
        if _base(x) == dtypes.bool:
            return _ops().logical_not(x)
        return _ops().invert(x)


def _comparison(op: str) -> Callable[[Output, Any], Output]:
    def compare(x: Output, y: Any) -> Output:
        with _graph_of(x).as_default():
            return getattr(_ops(), op)(x, y)
    return compare


def _bool(x: Output) -> bool:
    raise TypeError(f"using a graph tensor ('{x.name}') as a Python bool is not allowed: its value exists only "
                    "when a Session runs the graph. Use bridge.cond or bridge.while_loop to decide in the graph.")


def _len(x: Output) -> int:
    raise TypeError(f"len is not defined for a graph tensor ('{x.name}'); its static shape is x.shape")


def _iter(x: Output) -> Iterator[Output]:
    # Without it Python would iterate through __getitem__ forever (StridedSlice never raises IndexError).
    raise TypeError(f"iterating over a graph tensor ('{x.name}') is not allowed, as in TF's graph mode; "
                    "use x[i] for each i, or bridge.ops.unpack(x, num=n)")


# --- __getitem__: tensor_getitem_override._slice_helper ---------------------------------

_SLICE_TYPE_ERROR = ("Only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and scalar "
                     "int32/int64 tensors are valid indices")
_INDEX_DTYPES = ("int16", "int32", "int64")


def _check_index(idx: Any) -> None:
    if isinstance(idx, numbers.Integral):
        return
    if isinstance(idx, Output):
        shape = idx.shape
        if _base(idx).name in _INDEX_DTYPES and (shape.unknown_rank or len(shape) != 1):
            return
    raise TypeError(f"{_SLICE_TYPE_ERROR}, got {_short(idx)}")


def _stack(values: list) -> Output:
    """array_ops_stack.stack of begin/end/strides: a Const when they are all
    Python ints, else a Pack (values converted to the first tensor's dtype)."""
    graph = get_default_graph()
    tensors = [v for v in values if isinstance(v, Output)]
    if not tensors:
        return _convert(values, "stack")
    dtype = _base(tensors[0])
    with graph.name_scope("stack") as scope:
        items = []
        for i, v in enumerate(values):
            if isinstance(v, Output):
                if _base(v) != dtype:
                    raise TypeError(f"cannot slice with indices of different dtypes: '{v.name}' is "
                                    f"{_base(v).name}, another index is {dtype.name}")
                items.append(v)
            else:
                items.append(_convert(v, str(i), dtype=dtype))
        return _ops().pack(items, name=scope)


def _getitem(tensor: Output, spec: Any) -> Output:
    """``tensor[spec]``: one StridedSlice, as TF Python builds it; a boolean
    mask (a bool tensor or array) is ``boolean_mask(tensor, mask)``, as in TF."""
    if (isinstance(spec, (bool, np.bool_)) or (isinstance(spec, Output) and _base(spec) == dtypes.bool)
            or (isinstance(spec, np.ndarray) and spec.dtype == bool)):
        from .array_ops import boolean_mask
        return boolean_mask(tensor=tensor, mask=spec)
    if not isinstance(spec, (list, tuple)):
        spec = [spec]
    begin, end, strides = [], [], []
    begin_mask = end_mask = ellipsis_mask = new_axis_mask = shrink_axis_mask = 0
    from bridge.framework.builders import constant
    graph = _graph_of(tensor)
    with graph.as_default():
        for index, s in enumerate(spec):
            bit = 1 << index
            if isinstance(s, slice):
                dtype = None  # the widest index tensor's dtype, for the bounds left out
                for t in (s.start, s.stop, s.step):
                    if isinstance(t, Output):
                        name = _base(t).name
                        if name == "int64":
                            dtype = dtypes.int64
                        elif name == "int32" and dtype != dtypes.int64:
                            dtype = dtypes.int32
                        elif name == "int16" and dtype is None:
                            dtype = dtypes.int16
                for value, out, default, mask in ((s.start, begin, 0, "begin"), (s.stop, end, 0, "end"),
                                                  (s.step, strides, 1, None)):
                    if value is not None:
                        _check_index(value)
                        out.append(value)
                        continue
                    out.append(default if dtype is None else constant(default, dtype))
                    if mask == "begin":
                        begin_mask |= bit
                    elif mask == "end":
                        end_mask |= bit
            elif s is Ellipsis:
                begin.append(0), end.append(0), strides.append(1)
                ellipsis_mask |= bit
            elif s is None:
                begin.append(0), end.append(0), strides.append(1)
                new_axis_mask |= bit
            else:
                _check_index(s)
                begin.append(s)
                end.append(s + 1)
                if isinstance(s, Output) and _base(s).name in ("int16", "int64"):
                    strides.append(constant(1, _base(s)))
                else:
                    strides.append(1)
                shrink_axis_mask |= bit
        with graph.name_scope("strided_slice") as scope:
            if begin:
                packed = [_stack(begin), _stack(end), _stack(strides)]
                kinds = [_base(p).name for p in packed]
                if "int64" in kinds:
                    packed = [_cast(p, dtypes.int64) for p in packed]
            else:
                packed = [constant(np.array([], np.int32))] * 3
            return _ops().strided_slice(tensor, *packed, begin_mask=begin_mask, end_mask=end_mask,
                                        ellipsis_mask=ellipsis_mask, new_axis_mask=new_axis_mask,
                                        shrink_axis_mask=shrink_axis_mask, name=scope)


#: Output's special method -> what it does.
OPERATORS: dict[str, Callable[..., Any]] = {
    "__neg__": _neg,
    "__abs__": _abs,
    "__invert__": _invert,
    "__lt__": _comparison("less"),
    "__le__": _comparison("less_equal"),
    "__gt__": _comparison("greater"),
    "__ge__": _comparison("greater_equal"),
    "__getitem__": _getitem,
    "__iter__": _iter,
    "__len__": _len,
    "__bool__": _bool,
}
for _operator, (_scope_name, _fn) in _BINARY.items():
    OPERATORS[f"__{_operator}__"] = _forward(_scope_name, _fn)
    OPERATORS[f"__r{_operator}__"] = _reflected(_scope_name, _fn)
del _operator, _scope_name, _fn

for _name, _method in OPERATORS.items():
    setattr(Output, _name, _method)
del _name, _method

# numpy defers to Output: ``array + x`` calls ``x.__radd__(array)`` (a graph
# op) instead of numpy applying ``+`` to each element with x, which built an
# object array of Outputs.  TF's Tensor does the same (__array_priority__).
Output.__array_ufunc__ = None
