"""Function bodies: a :class:`FuncGraph` being traced, and the ``TF_Function``
made of it, a :class:`TracedFunction` (TF's ``func_graph`` and
``ConcreteFunction``).

A FuncGraph is a temporary graph whose Placeholders stand for the
function's arguments; tensors of enclosing graphs that the body uses are
*captured*: each becomes one more Placeholder, and the call passes the outer
tensor.  ``TF_GraphToFunction`` turns it into a ``TF_Function`` named
``<python name>_<hash of its body>``, which a graph's library holds once
(``TF_GraphCopyFunction``) however many ops call it.
"""
from __future__ import annotations

import re
import weakref
from typing import Any, Optional, Sequence

from . import buffers, dtypes
from ._lib import ffi, lib
from .attrs import as_shape
from .errors import InvalidArgumentError, check, status
from .graph import Graph, Operation, Output, get_default_graph

__all__ = ["FuncGraph", "TracedFunction", "function_name", "registered"]


class FuncGraph(Graph):
    """A graph being traced into a function body.

    Ops whose inputs come from an enclosing graph capture those tensors:
    each becomes a Placeholder here (recorded in :attr:`captures`), fed with
    the outer tensor at the call.  Enclosing FuncGraphs capture in turn, so
    nested bodies can use tensors from any level.
    """

    def __init__(self, name: str, outer_graph: Optional[Graph] = None):
        super().__init__()
        self.name = name
        self.outer_graph = outer_graph
        self.captures: dict[Output, Output] = {}  # tensor of outer_graph -> its Placeholder here
        if outer_graph is not None:
            self.gradient_overrides = dict(outer_graph.gradient_overrides)

    def encloses(self, graph: Graph) -> bool:
        """Whether ``graph`` is this graph or one it is nested in."""
        g: Optional[Graph] = self
        while g is not None:
            if g is graph:
                return True
            g = getattr(g, "outer_graph", None)
        return False

    def add_input(self, dtype: Any, shape: Any = None, name: str = "arg") -> Output:
        """A Placeholder at the root scope, free of control dependencies."""
        with self.name_scope(None), self.control_dependencies(None):
            return self.create_op("Placeholder", attrs={"dtype": dtypes.as_dtype(dtype), "shape": as_shape(shape)},
                                  attr_types={"dtype": "type", "shape": "shape"}, name=name).output(0)

    def capture(self, value: Output) -> Output:
        """The tensor standing for ``value`` (of this or an enclosing graph) here."""
        if value.graph is self:
            return value
        outer = self.outer_graph
        if outer is None or not self.encloses(value.graph):
            raise InvalidArgumentError(
                f"'{value.name}' belongs to a graph that does not enclose function body '{self.name}'")
        if value.graph is not outer:
            value = outer.capture(value)  # type: ignore[attr-defined]
        ph = self.captures.get(value)
        if ph is None:
            ph = self.captures[value] = self.add_input(value.dtype, value.shape, name="capture")
        return ph

    def _check_input(self, value: Any, op_type: str, name: str, where: str) -> Output:
        if isinstance(value, Output) and value.graph is not self and self.encloses(value.graph):
            return self.capture(value)
        return super()._check_input(value, op_type, name, where)


# --- traced functions -----------------------------------------------------------------

# Every TracedFunction alive, by its TF_Function's name (a call op's type).
_REGISTRY: "weakref.WeakValueDictionary[str, TracedFunction]" = weakref.WeakValueDictionary()

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def function_name(hint: str) -> str:
    """A function or op name TF accepts made from ``hint`` (a Python name, a scope)."""
    name = _NAME_CHARS.sub("_", hint).strip("_") or "fn"
    return name if name[0].isalpha() else f"fn_{name}"


def registered(name: str) -> Optional["TracedFunction"]:
    """The TracedFunction alive whose TF_Function is named ``name``, if any."""
    return _REGISTRY.get(name)


class TracedFunction:
    """A FuncGraph made into a TF_Function.

    ``inputs`` are the body's Placeholders (arguments, then captures),
    ``captured`` the outer tensors the captures stand for, ``outputs`` the
    body's results.  ``structure`` (optional) is the Python structure the
    outputs are packed into.
    """

    def __init__(self, graph: FuncGraph, inputs: Sequence[Output], outputs: Sequence[Output],
                 captured: Sequence[Output] = (), structure: Any = None, description: str = ""):
        self.graph = graph
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.captured = list(captured)
        self.structure = structure
        self._func = self._to_function(description)
        self.name = ffi.string(lib.TF_FunctionName(self._func)).decode()
        _REGISTRY[self.name] = self

    def _to_function(self, description: str):
        g = self.graph
        input_ops = {t.op for t in self.inputs}
        # Inlined bodies leave their own (remapped, unused) Placeholders behind.
        opers = [op for op in g if op.type != "Placeholder" or op in input_ops]
        c_opers = ffi.new("TF_Operation*[]", [op._ptr for op in opers] or [ffi.NULL])
        c_in = ffi.new("TF_Output[]", max(len(self.inputs), 1))
        for i, t in enumerate(self.inputs):
            c_in[i].oper, c_in[i].index = t.op._ptr, t.index
        c_out = ffi.new("TF_Output[]", max(len(self.outputs), 1))
        for i, t in enumerate(self.outputs):
            c_out[i].oper, c_out[i].index = t.op._ptr, t.index
        s = status()
        func = lib.TF_GraphToFunction(g._ptr, function_name(g.name).encode(), 1, len(opers), c_opers,
                                      len(self.inputs), c_in, len(self.outputs), c_out, ffi.NULL, ffi.NULL,
                                      description.encode() if description else ffi.NULL, s.ptr)
        check(s, f"making function '{g.name}'")
        return ffi.gc(func, lib.TF_DeleteFunction)

    @property
    def function_def(self) -> bytes:
        """The serialized FunctionDef."""
        return buffers.filled(lambda buf, s: lib.TF_FunctionToFunctionDef(self._func, buf, s), self.name)

    def __repr__(self) -> str:
        return f"<bridge.TracedFunction '{self.name}' inputs={len(self.inputs)} outputs={len(self.outputs)}>"

    # --- placing in a graph --------------------------------------------------------
    def add_to(self, graph: Graph) -> None:
        """Put this function, and every function its body calls, in ``graph``'s library."""
        if graph._functions.get(self.name) is not None:
            return
        s = status()
        n = lib.TF_GraphNumFunctions(self.graph._ptr)
        if n:
            funcs = ffi.new("TF_Function*[]", n)
            got = lib.TF_GraphGetFunctions(self.graph._ptr, funcs, n, s.ptr)
            check(s, f"reading the library of '{self.name}'")
            try:
                for i in range(got):
                    lib.TF_GraphCopyFunction(graph._ptr, funcs[i], ffi.NULL, s.ptr)
                    check(s, f"adding functions '{self.name}' calls")
            finally:
                for i in range(got):
                    lib.TF_DeleteFunction(funcs[i])
        lib.TF_GraphCopyFunction(graph._ptr, self._func, ffi.NULL, s.ptr)
        check(s, f"adding function '{self.name}'")
        for name, f in self.graph._functions.items():
            graph._functions.setdefault(name, f)
        graph._functions[self.name] = self

    def call(self, args: Sequence[Output], name: Optional[str] = None) -> Operation:
        """Add a call op in the default graph: ``args`` are the explicit
        arguments; the captured tensors are appended."""
        graph = get_default_graph()
        self.add_to(graph)
        inputs = list(args) + list(self.captured)
        if len(inputs) != len(self.inputs):
            raise TypeError(f"function '{self.name}' takes {len(self.inputs) - len(self.captured)} "
                            f"arguments, got {len(args)}")
        for i, (given, ph) in enumerate(zip(inputs, self.inputs)):
            if given.dtype != ph.dtype:
                raise TypeError(f"argument {i} of function '{self.name}' must be {ph.dtype.name}, "
                                f"got '{given.name}' of {given.dtype.name}")
        op = graph.create_op(self.name, inputs, name=name or function_name(self.graph.name))
        for out, traced in zip(op.outputs, self.outputs):
            shape = traced.shape
            if not shape.unknown_rank:
                try:
                    out.set_shape(shape)
                except InvalidArgumentError:
                    pass  # shape inference already knows better than the trace
        return op

    def inline(self, args: Sequence[Output], name: str = "inline") -> list[Output]:
        """Copy the body into the default graph with ``args`` (all inputs,
        captures included) in place of its Placeholders; return its outputs."""
        graph = get_default_graph()
        if len(args) != len(self.inputs):
            raise TypeError(f"inlining '{self.name}' needs {len(self.inputs)} inputs, got {len(args)}")
        if isinstance(graph, FuncGraph):
            args = [graph.capture(a) for a in args]
        input_map = {t.name: a for t, a in zip(self.inputs, args)}
        returns = [t.name for t in self.outputs]
        outs = graph.import_graph_def(self.graph.as_graph_def(), prefix=graph.unique_name(name),
                                      input_map=input_map, return_elements=returns)
        for fname, f in self.graph._functions.items():
            graph._functions.setdefault(fname, f)
        return outs
