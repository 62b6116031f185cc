"""Hand-written graph builders where a generated op function is not what
users want: constants, placeholders, resource variables, sparse tensors."""
from __future__ import annotations

import contextlib
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from . import dtypes
from .attrs import Shape, as_shape
from .graph import Graph, Operation, Output, get_default_graph
from .tensor import Tensor


def _python_default_dtype(value: Any) -> Optional[dtypes.DType]:
    """TensorFlow's defaults for Python values: int -> int32 (int64 if it does
    not fit), float -> float32; numpy values keep their dtype."""
    if isinstance(value, (np.ndarray, np.generic, Tensor)):
        return None
    arr = np.asarray(value)
    if arr.dtype.kind == "i":
        if arr.size and (arr.max() > np.iinfo(np.int32).max or arr.min() < np.iinfo(np.int32).min):
            return dtypes.int64
        return dtypes.int32
    if arr.dtype.kind == "f":
        return dtypes.float32
    if arr.dtype.kind == "c":
        return dtypes.complex128
    return None


def constant(value: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None,
             name: str = "Const", graph: Optional[Graph] = None) -> Output:
    """A Const op holding ``value`` (broadcast to ``shape`` when given)."""
    graph = graph or get_default_graph()
    dtype = dtypes.as_dtype(dtype) if dtype is not None else _python_default_dtype(value)
    tensor = value if isinstance(value, Tensor) and dtype in (None, value.dtype) else Tensor(
        value.numpy() if isinstance(value, Tensor) else value, dtype)
    if shape is not None:
        arr = tensor.numpy()
        shape = tuple(int(d) for d in shape)
        if arr.shape != shape:
            if arr.size == int(np.prod(shape)):
                arr = arr.reshape(shape)
            elif arr.size == 1:
                arr = np.broadcast_to(arr.reshape(()), shape)
            else:
                raise ValueError(f"constant '{name}': {arr.size} values cannot fill shape {list(shape)}")
            tensor = Tensor(np.ascontiguousarray(arr), tensor.dtype)
    return graph.create_op("Const", attrs={"value": tensor, "dtype": tensor.dtype},
                           attr_types={"value": "tensor", "dtype": "type"}, name=name).output(0)


def placeholder(dtype: Any, shape: Optional[Sequence[Optional[int]]] = None, name: str = "Placeholder",
                graph: Optional[Graph] = None) -> Output:
    """A value fed at run time; ``shape=None`` accepts any shape."""
    graph = graph or get_default_graph()
    return graph.create_op("Placeholder", attrs={"dtype": dtypes.as_dtype(dtype), "shape": as_shape(shape)},
                           attr_types={"dtype": "type", "shape": "shape"}, name=name).output(0)


def convert_to_output(value: Any, dtype: Any = None, graph: Optional[Graph] = None,
                      name: str = "Const") -> Output:
    """An Output for ``value``: Outputs pass through, Variables are read,
    anything else becomes a Const."""
    if isinstance(value, Output):
        if dtype is not None and value.dtype != dtypes.as_dtype(dtype):
            raise TypeError(f"'{value.name}' is {value.dtype.name}, expected {dtypes.as_dtype(dtype).name}")
        return value
    if isinstance(value, Variable):
        return value.value()
    return constant(value, dtype, name=name, graph=graph)


class Variable:
    """A resource variable (VarHandleOp), laid out as TensorFlow does:
    ``<name>`` the handle, ``<name>/Assign`` its initializer,
    ``<name>/Read/ReadVariableOp`` its value.  As in TF1, ``v.name`` is
    ``"<name>:0"`` (its handle's tensor) and ``v.op.name`` is ``"<name>"``,
    the name checkpoints, slots and averages are keyed and named by."""

    def __init__(self, initial_value: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None,
                 name: str = "Variable", trainable: bool = True, graph: Optional[Graph] = None):
        self.graph = graph or get_default_graph()
        self.trainable = trainable
        g = self.graph
        with g.name_scope(name) as scope:
            op_name = scope[:-1]
            with g.name_scope("Initializer"):
                init = convert_to_output(initial_value, dtype, g, name="initial_value")
            self.dtype = init.dtype
            self._shape = as_shape(shape) if shape is not None else init.shape
            self.handle = g.create_op(
                "VarHandleOp", name=scope,
                attrs={"dtype": self.dtype, "shape": self._shape, "shared_name": op_name, "container": ""},
                attr_types={"dtype": "type", "shape": "shape", "shared_name": "string", "container": "string"},
            ).output(0)
            self._name = f"{op_name}:0"
            # As TF's ResourceVariable: the initializer and the read sit on the
            # handle's device (a device function may have put it on a ps task).
            with g.device(self.handle.op.device) if self.handle.op.device else contextlib.nullcontext():
                self.initializer = g.create_op("AssignVariableOp", [self.handle, init], name="Assign",
                                               attrs={"dtype": self.dtype}, attr_types={"dtype": "type"})
                with g.name_scope("Read"):
                    self._read = self._read_op()
        g.collections.setdefault("variables", []).append(self)
        if trainable:
            g.collections.setdefault("trainable_variables", []).append(self)

    def _read_op(self) -> Output:
        return self.graph.create_op("ReadVariableOp", [self.handle], name="ReadVariableOp",
                                    attrs={"dtype": self.dtype}, attr_types={"dtype": "type"}).output(0)

    @property
    def name(self) -> str:
        """TF1's ``Variable.name``: ``"<name>:0"``; the op's name is ``v.op.name``."""
        return self._name

    @property
    def shape(self) -> Shape:
        return self._shape

    def value(self) -> Output:
        """The value read when the variable was created (an Output)."""
        return self._read

    def read_value(self) -> Output:
        """A new read, ordered by the current control dependencies."""
        return self._read_op()

    def sparse_read(self, indices: Any, name: Optional[str] = None) -> Output:
        """Rows ``indices`` of the variable, read by one ``ResourceGather`` (named
        "Gather" or ``name``), as TF's ``ResourceVariable.sparse_read``: its
        gradient is IndexedSlices of those rows, not the whole table."""
        g = self.graph
        with g.as_default(), g.name_scope(name or "Gather") as scope:
            ids = convert_to_output(indices, None, g, name="indices")
            if not ids.dtype.is_integer:
                raise TypeError(f"sparse_read: indices must be int32 or int64, got {ids.dtype.name}")
            return g.create_op("ResourceGather", [self.handle, ids], name=scope,
                               attrs={"dtype": self.dtype, "batch_dims": 0, "validate_indices": True},
                               attr_types={"dtype": "type", "batch_dims": "int",
                                           "validate_indices": "bool"}).output(0)

    def _update(self, op_type: str, value: Any, name: Optional[str]) -> Operation:
        v = convert_to_output(value, self.dtype, self.graph)
        return self.graph.create_op(op_type, [self.handle, v], name=name or op_type,
                                    attrs={"dtype": self.dtype}, attr_types={"dtype": "type"})

    def assign(self, value: Any, name: Optional[str] = None) -> Operation:
        return self._update("AssignVariableOp", value, name)

    def assign_add(self, value: Any, name: Optional[str] = None) -> Operation:
        return self._update("AssignAddVariableOp", value, name)

    def assign_sub(self, value: Any, name: Optional[str] = None) -> Operation:
        return self._update("AssignSubVariableOp", value, name)

    @property
    def op(self) -> Operation:
        return self.handle.op

    def _as_graph_element(self) -> Output:
        """What TensorFlow's ``as_graph_element`` makes of a resource variable:
        its value (``<name>/Read/ReadVariableOp:0``), so ``sess.run(v)`` fetches
        the value, a feed keyed by ``v`` feeds that read, and
        ``control_dependencies([v])`` waits for it."""
        return self._read

    def __repr__(self) -> str:
        return f"<bridge.Variable '{self.name}' dtype={self.dtype.name} shape={self._shape!r}>"


def global_variables(graph: Optional[Graph] = None) -> list[Variable]:
    """Every Variable made in ``graph`` (the default graph), in creation order."""
    return list((graph or get_default_graph()).collections.get("variables", []))


def trainable_variables(graph: Optional[Graph] = None) -> list[Variable]:
    """The Variables made with ``trainable=True``: what optimizers train by default."""
    return list((graph or get_default_graph()).collections.get("trainable_variables", []))


def global_variables_initializer(graph: Optional[Graph] = None, name: str = "init") -> Operation:
    """One op that runs every variable's initializer."""
    graph = graph or get_default_graph()
    inits = [v.initializer for v in graph.collections.get("variables", [])]
    with graph.control_dependencies(inits):
        return graph.create_op("NoOp", name=name)


class SparseTensorValue(NamedTuple):
    """A fetched (or fed) :class:`SparseTensor`'s value, as TensorFlow's."""
    indices: Any
    values: Any
    dense_shape: Any


class SparseTensor:
    """A sparse tensor as TensorFlow's three parts: int64 ``indices`` [n, rank],
    ``values`` [n] and int64 ``dense_shape`` [rank]. Sparse ops take them in
    that order: ``bridge.ops.sparse_tensor_dense_mat_mul(*sp, b)``."""

    def __init__(self, indices: Any, values: Any, dense_shape: Any, graph: Optional[Graph] = None):
        graph = graph or get_default_graph()
        self.indices = convert_to_output(indices, dtypes.int64, graph, name="indices")
        self.values = convert_to_output(values, None, graph, name="values")
        self.dense_shape = convert_to_output(dense_shape, dtypes.int64, graph, name="dense_shape")

    @property
    def dtype(self) -> dtypes.DType:
        return self.values.dtype

    def __iter__(self):
        return iter((self.indices, self.values, self.dense_shape))

    def to_dense(self, default_value: Any = 0, name: str = "SparseToDense") -> Output:
        """The dense tensor (SparseToDense; indices must be in order)."""
        g = self.indices.graph
        default = convert_to_output(np.asarray(default_value, self.dtype.as_numpy_dtype), None, g)
        return g.create_op("SparseToDense", [self.indices, self.dense_shape, self.values, default], name=name,
                           attrs={"T": self.dtype, "Tindices": dtypes.int64, "validate_indices": True},
                           attr_types={"T": "type", "Tindices": "type", "validate_indices": "bool"}).output(0)

    def __repr__(self) -> str:
        return f"<bridge.SparseTensor values={self.values.name} dtype={self.dtype.name}>"
