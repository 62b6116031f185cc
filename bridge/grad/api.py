"""The public entry points: ``gradients``, ``jacobian``, ``hessian``, ``hessians``."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from bridge.framework.builders import Variable
from bridge.framework.graph import Output
from bridge.framework.indexed_slices import convert_to_tensor
from ._helpers import _add_n, _const, _ones, _op, _zeros_like
from .walk import Backprop

__all__ = ["gradients", "jacobian", "hessian", "hessians"]


def _as_list(value: Any, what: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _as_output(value: Any, what: str) -> Output:
    if isinstance(value, Variable):
        return value.value()
    if not isinstance(value, Output):
        raise TypeError(f"{what} must hold Outputs, got {type(value).__name__}")
    return value


def _as_x(value: Any, what: str) -> tuple[Output, Output]:
    """(what to differentiate against, a tensor of its value's shape and dtype):
    a Variable stands for its handle, so every read of it counts."""
    if isinstance(value, Variable):
        return value.handle, value.value()
    t = _as_output(value, what)
    return t, t


def gradients(ys: Union[Output, Sequence[Output]], xs: Union[Output, Sequence[Output]],
              grad_ys: Optional[Union[Any, Sequence[Any]]] = None, name: str = "gradients",
              stop_gradients: Optional[Sequence[Output]] = None,
              unconnected_gradients: str = "none",
              colocate_gradients_with_ops: bool = False) -> list[Optional[Output]]:
    """Symbolic derivatives of ``sum(ys)`` with respect to each of ``xs``.

    Returns a list aligned with ``xs``: for each x, the sum over ys of
    ``dy/dx`` weighted by ``grad_ys`` (ones by default).  An x that ``ys`` do not
    depend on (or an integer x) gets None, or zeros with
    ``unconnected_gradients="zero"``.  ``stop_gradients`` (a tensor or a
    list), as in TensorFlow, stop their producing ops: no gradient flows
    through any output of such an op to its inputs, yet a stopped tensor among
    ``xs`` still gets its gradient.  Raises LookupError naming an op on the way that has no
    gradient in either registry.

    A Variable in ``xs`` (or its handle) gets the gradient through every read
    of it (``value()``, ``read_value()``, ``ResourceGather``,
    ``ResourceGatherNd``).  Where TensorFlow returns ``IndexedSlices`` (a
    gather's gradient, only gathers reaching x), so does this:
    :class:`bridge.IndexedSlices`, whose dense value
    ``bridge.convert_to_tensor`` builds; contributions are combined as TF
    combines them (IndexedSlices concatenated, mixed with dense ones summed densely).

    Gradient ops get the device scopes open at the call (device functions
    included), or with ``colocate_gradients_with_ops=True`` the device and
    colocation of the op each one differentiates, as in TensorFlow.
    """
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"unconnected_gradients must be 'none' or 'zero', not {unconnected_gradients!r}")
    ys = [_as_output(y, "ys") for y in _as_list(ys, "ys")]
    pairs = [_as_x(x, "xs") for x in _as_list(xs, "xs")]
    xs, values = [p[0] for p in pairs], [p[1] for p in pairs]
    if not ys:
        raise ValueError("gradients() needs at least one y")
    graph = ys[0].graph
    for t in ys + xs:
        if t.graph is not graph:
            raise ValueError(f"'{t.name}' belongs to another graph than '{ys[0].name}'")
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    grad_ys = _as_list(grad_ys, "grad_ys")
    if len(grad_ys) != len(ys):
        raise ValueError(f"grad_ys has {len(grad_ys)} entries for {len(ys)} ys")
    # TF stops the producer of each (``t.op``): a Variable's is its handle's op.
    stops = set(_as_x(s, "stop_gradients")[0]
                for s in (_as_list(stop_gradients, "stop_gradients") if stop_gradients is not None else ()))

    with graph.as_default(), graph.name_scope(name):
        seeds = []
        for i, (y, gy) in enumerate(zip(ys, grad_ys)):
            if gy is None:
                if not (y.dtype.is_floating or y.dtype.is_complex):
                    seeds.append(None)
                elif colocate_gradients_with_ops:
                    with graph.colocate_with(y.op):
                        seeds.append(_ones(y))
                else:
                    seeds.append(_ones(y))
            elif isinstance(gy, (Output, Variable)):
                gy = _as_output(gy, "grad_ys")
                if gy.dtype != y.dtype:
                    raise TypeError(f"grad_ys[{i}] is {gy.dtype.name}, but ys[{i}] '{y.name}' is {y.dtype.name}")
                seeds.append(gy)
            else:
                seeds.append(_const(gy, y.dtype, name=f"grad_ys_{i}"))
        result = Backprop(graph, ys, xs, seeds, stops, colocate_gradients_with_ops).run()
        if unconnected_gradients == "zero":
            result = [_zeros_like(v) if g is None and v.dtype.name != "resource" else g
                      for v, g in zip(values, result)]
    return result


def _static_size(t: Output, what: str) -> tuple[list[int], int]:
    shape = t.shape
    if shape.unknown_rank or any(d is None for d in shape):
        raise ValueError(f"{what} '{t.name}' needs a fully known static shape, has {shape!r}")
    dims = [int(d) for d in shape]
    return dims, int(np.prod(dims, dtype=np.int64))


def _reshape_to(t: Output, y_dims: list[int], x: Output) -> Output:
    """Reshape a (n, size(x)) stack to y_dims + shape(x)."""
    xs = x.shape
    if not xs.unknown_rank and all(d is not None for d in xs):
        target = _const(y_dims + [int(d) for d in xs], "int32", name="shape")
    else:
        target = _op("ConcatV2", [[_const(y_dims, "int32", name="y_shape"), _op("Shape", [x])],
                                  _const(0, "int32", name="axis")])
    return _op("Reshape", [t, target])


def jacobian(y: Output, x: Union[Output, Sequence[Output]],
             unconnected_gradients: str = "none", name: str = "jacobian") -> Any:
    """The Jacobian ``dy/dx`` with shape ``y.shape + x.shape`` (a list for a list of xs).

    Row i is the gradient of element i of y, so y needs a static shape; an x
    that y does not depend on gives None (zeros with
    ``unconnected_gradients="zero"``).
    """
    y = _as_output(y, "y")
    given = _as_list(x, "x")
    like = [_as_x(v, "x")[1] for v in given]  # a Variable's value: its gradient's shape
    y_dims, n = _static_size(y, "jacobian: y")
    graph = y.graph
    np_dtype = y.dtype.as_numpy_dtype
    rows: list[list[Optional[Output]]] = [[] for _ in given]
    with graph.as_default(), graph.name_scope(name):
        for i in range(n):
            seed = np.zeros(n, dtype=np_dtype)
            seed[i] = 1
            g = gradients([y], given, grad_ys=[_const(seed.reshape(y_dims), y.dtype, name=f"seed_{i}")],
                          name=f"row_{i}")
            for k, gk in enumerate(g):
                rows[k].append(convert_to_tensor(gk))
        result = []
        for xk, r in zip(like, rows):
            if all(g is None for g in r):
                if unconnected_gradients == "zero":
                    result.append(_reshape_to(_op("ZerosLike", [_op("Pack", [[_op("Reshape", [
                        _zeros_like(xk), _const([-1], "int32")])] * max(n, 1)])]), y_dims, xk))
                else:
                    result.append(None)
                continue
            flat = [_op("Reshape", [g if g is not None else _zeros_like(xk), _const([-1], "int32", name="flat")])
                    for g in r]
            stacked = _op("Pack", [flat], {"axis": 0}) if flat else None
            result.append(_reshape_to(stacked, y_dims, xk))
    return result if isinstance(x, (list, tuple)) else result[0]


def hessian(y: Output, x: Union[Output, Sequence[Output]], name: str = "hessian") -> Any:
    """The Hessian of ``sum(y)`` with respect to x, shape ``x.shape + x.shape``
    (a list for a list of xs; None where y does not depend on x)."""
    given = _as_list(x, "x")
    y = _as_output(y, "y")
    graph = y.graph
    result = []
    with graph.as_default(), graph.name_scope(name):
        grads = gradients([y], given, name="first")
        for xk, g in zip(given, grads):
            result.append(None if g is None else jacobian(convert_to_tensor(g), xk, name="second"))
    return result if isinstance(x, (list, tuple)) else result[0]


def hessians(ys: Union[Output, Sequence[Output]], xs: Union[Output, Sequence[Output]],
             name: str = "hessians") -> list[Optional[Output]]:
    """TensorFlow's ``tf.hessians``: the Hessian of ``sum(ys)`` for each x."""
    ys = [_as_output(y, "ys") for y in _as_list(ys, "ys")]
    graph = ys[0].graph
    with graph.as_default(), graph.name_scope(name):
        sums = [_op("Sum", [_op("Reshape", [y, _const([-1], "int32")]), _const(0, "int32")]) for y in ys]
        total = _add_n(sums)
    return hessian(total, list(_as_list(xs, "xs")), name=name)
