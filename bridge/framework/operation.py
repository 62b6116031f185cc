"""Output and Operation: a graph's symbolic tensors and nodes, over TF_Output and
TF_Operation (the graph that owns them: :mod:`bridge.framework.graph`)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from . import buffers, dtypes
from ._lib import ffi, lib
from .attrs import Shape, decode_attr_value
from .graph_def import parse_node_def
from .errors import check, status

__all__ = ["Output", "Operation"]

# "Graph" in annotations is bridge.framework.graph.Graph, which imports this
# module (so this one cannot import it).


class Output:
    """One output of an operation: a symbolic tensor (``"op:index"``)."""

    __slots__ = ("op", "index")

    def __init__(self, op: "Operation", index: int):
        self.op = op
        self.index = index

    @property
    def graph(self) -> "Graph":
        return self.op.graph

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.index}"

    def _c(self):
        return ffi.new("TF_Output*", (self.op._ptr, self.index))[0]

    @property
    def dtype(self) -> dtypes.DType:
        return self.op._output_dtypes()[self.index]

    @property
    def shape(self) -> Shape:
        """Static shape as far as shape inference knows it."""
        s = status()
        c = self._c()
        rank = lib.TF_GraphGetTensorNumDims(self.graph._ptr, c, s.ptr)
        check(s, self.name)
        if rank < 0:
            return Shape.unknown()
        dims = ffi.new("int64_t[]", max(rank, 1))
        lib.TF_GraphGetTensorShape(self.graph._ptr, c, dims, rank, s.ptr)
        check(s, self.name)
        return Shape(None if dims[i] < 0 else int(dims[i]) for i in range(rank))

    def set_shape(self, shape: Sequence[Optional[int]]) -> None:
        dims = [-1 if d is None else int(d) for d in shape]
        s = status()
        lib.TF_GraphSetTensorShape(self.graph._ptr, self._c(), ffi.new("int64_t[]", dims), len(dims), s.ptr)
        check(s, self.name)

    def consumers(self) -> list["Operation"]:
        c = self._c()
        n = lib.TF_OperationOutputNumConsumers(c)
        arr = ffi.new("TF_Input[]", max(n, 1))
        n = lib.TF_OperationOutputConsumers(c, arr, n)
        return [self.graph._wrap(arr[i].oper) for i in range(n)]

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and self.op == other.op and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.op, self.index))

    def __repr__(self) -> str:
        return f"<bridge.Output '{self.name}' dtype={self.dtype.name} shape={self.shape!r}>"

    def _short_repr(self) -> str:
        """How error messages name it (bridge.framework.attrs.short_repr): its name, not its repr,
        which would look its dtype and shape up."""
        return f"Output '{self.name}'"

    # Python's operators (x + y, x @ w, -x, ...) are installed by bridge.ops.operators:
    # they call the generated op functions, which are built on this module.


class Operation:
    """A node of a graph (TF_Operation). The graph owns it."""

    __slots__ = ("_ptr", "graph", "_dtypes")

    def __init__(self, ptr, graph: "Graph"):
        self._ptr = ptr
        self.graph = graph
        self._dtypes: Optional[list] = None

    def _output_dtypes(self) -> list:
        # An operation's output types never change: read them once.
        if self._dtypes is None:
            self._dtypes = [dtypes.as_dtype(lib.TF_OperationOutputType(ffi.new("TF_Output*", (self._ptr, i))[0]))
                            for i in range(self.num_outputs)]
        return self._dtypes

    @property
    def name(self) -> str:
        return ffi.string(lib.TF_OperationName(self._ptr)).decode()

    @property
    def type(self) -> str:
        return ffi.string(lib.TF_OperationOpType(self._ptr)).decode()

    @property
    def device(self) -> str:
        return ffi.string(lib.TF_OperationDevice(self._ptr)).decode()

    @property
    def num_inputs(self) -> int:
        return lib.TF_OperationNumInputs(self._ptr)

    @property
    def num_outputs(self) -> int:
        return lib.TF_OperationNumOutputs(self._ptr)

    @property
    def outputs(self) -> list[Output]:
        return [Output(self, i) for i in range(self.num_outputs)]

    def output(self, index: int = 0) -> Output:
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"operation '{self.name}' has {self.num_outputs} outputs, not index {index}")
        return Output(self, index)

    @property
    def inputs(self) -> list[Output]:
        result = []
        for i in range(self.num_inputs):
            src = lib.TF_OperationInput(ffi.new("TF_Input*", (self._ptr, i))[0])
            result.append(Output(self.graph._wrap(src.oper), src.index))
        return result

    @property
    def control_inputs(self) -> list["Operation"]:
        return self._operations(lib.TF_OperationNumControlInputs, lib.TF_OperationGetControlInputs)

    @property
    def control_outputs(self) -> list["Operation"]:
        return self._operations(lib.TF_OperationNumControlOutputs, lib.TF_OperationGetControlOutputs)

    def _operations(self, count, get) -> list["Operation"]:
        """The operations a TF_Operation*[] getter of this op returns (``count``: how many)."""
        n = count(self._ptr)
        arr = ffi.new("TF_Operation*[]", max(n, 1))
        n = get(self._ptr, arr, n)
        return [self.graph._wrap(arr[i]) for i in range(n)]

    def get_attr(self, name: str) -> Any:
        """The attribute's value (int, float, bool, bytes, DType, Shape, Tensor, lists)."""
        return decode_attr_value(buffers.filled(
            lambda buf, s: lib.TF_OperationGetAttrValueProto(self._ptr, name.encode(), buf, s),
            f"operation '{self.name}'"))

    @property
    def node_def(self) -> bytes:
        """The serialized NodeDef."""
        return buffers.filled(lambda buf, s: lib.TF_OperationToNodeDef(self._ptr, buf, s), self.name)

    @property
    def attr_names(self) -> list[str]:
        return list(parse_node_def(self.node_def).attrs)

    def __eq__(self, other) -> bool:
        return isinstance(other, Operation) and self._ptr == other._ptr

    def __hash__(self) -> int:
        return hash(int(ffi.cast("uintptr_t", self._ptr)))

    def __repr__(self) -> str:
        return f"<bridge.Operation '{self.name}' type={self.type}>"
