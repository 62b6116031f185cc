"""Graph functions: ``@bridge.function`` traces Python into a FunctionDef.

Tracing
    The Python function runs once per input signature (dtypes and shapes of
    its tensor arguments, values of its Python arguments) and per calling
    graph, inside a :class:`FuncGraph`: a temporary graph whose Placeholders
    stand for the arguments.  Tensors of enclosing graphs that the body uses
    are *captured*: each becomes one more Placeholder, and the call passes the
    outer tensor.  ``TF_GraphToFunction`` turns the FuncGraph into a
    ``TF_Function`` named ``<python name>_<hash of its body>``.

Calling
    The function is added once to the calling graph's library
    (``TF_GraphCopyFunction``, with every function its body calls) and each
    call is an op whose type is the function's name, so the exported
    GraphDef holds the body once however many times it is called.

Differentiating
    A call op's gradient is a call of a gradient function that recomputes
    the body: see :mod:`bridge.grad.function_grad`.  Functions of a graph
    imported from a GraphDef (cond branches, loop bodies, ``tf.function``
    bodies stock TF wrote) exist only as FunctionDefs in its library:
    :func:`lookup` rebuilds them into TracedFunctions
    (:func:`library_function`) for the gradients.

This module traces Python (``Trace``, ``trace_graph``, ``Function``,
``function``) and finds a call's function (``lookup``); the rest has a
module per concern, whose names it also exports: ``nest`` (``flatten``,
``pack_as``), ``tensor_spec`` (``TensorSpec``), ``func_graph``
(``FuncGraph``, ``TracedFunction``) and ``function_def_to_graph``
(``library_function``).
"""
from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .func_graph import FuncGraph, TracedFunction, function_name, registered
from .function_def_to_graph import library_function
from .graph import Graph, Operation, Output, get_default_graph
from .nest import flatten, pack_as
from .tensor_spec import TensorSpec

# The names this module has always exported; the nest helpers, TensorSpec,
# FuncGraph, TracedFunction and library_function live in modules of their own.
__all__ = ["function", "Function", "TensorSpec", "FuncGraph", "TracedFunction", "Trace", "trace",
           "trace_graph", "lookup", "library_function", "flatten", "pack_as"]


def lookup(graph: Graph, name: str) -> Optional[TracedFunction]:
    """The traced function called by ops of type ``name`` in ``graph``, if any:
    one the bridge traced, or else one rebuilt from the FunctionDef of that
    name in ``graph``'s library (a graph imported from a GraphDef that stock
    TensorFlow wrote: see :func:`library_function`)."""
    found = graph._functions.get(name)
    if found is None:
        found = registered(name)
    if found is None:
        found = library_function(graph, name)
    return found


# --- tracing Python ---------------------------------------------------------------------

class Trace:
    """A Python function run in a FuncGraph, before it becomes a function:
    ``graph``, ``arguments`` (its Placeholders), ``outputs`` and ``structure``
    (what the Python function returned, to repack outputs into)."""

    def __init__(self, graph: FuncGraph, arguments: list[Output], outputs: list[Output], structure: Any):
        self.graph, self.arguments, self.outputs, self.structure = graph, arguments, outputs, structure

    def finish(self, captured: Optional[Sequence[Output]] = None) -> TracedFunction:
        """The function taking (arguments..., captures...).  ``captured`` fixes
        the captures and their order (it may add ones the body does not use,
        so sibling functions share one signature); default: the body's own."""
        captured = list(self.graph.captures) if captured is None else list(captured)
        inputs = self.arguments + [self.graph.capture(c) for c in captured]
        return TracedFunction(self.graph, inputs, self.outputs, captured, structure=self.structure)


def _constant_output(leaf: Any, index: int, name: str, constant: Callable, refused: tuple) -> Output:
    """A returned Python or numpy value as a Const; a TypeError naming anything else
    (an Operation, a SparseTensor, an arbitrary object), never a wrong value."""
    def refuse(why: str = "") -> TypeError:
        return TypeError(f"'{name}' returned {type(leaf).__name__} {leaf!r} (leaf {index} of what it "
                         "returned): a traced function (bridge.function, a cond branch, a while_loop "
                         "body) returns Outputs, Variables, Python or numpy values, or None, nested in "
                         f"lists, tuples and dicts{why}")
    if isinstance(leaf, refused):
        raise refuse()
    try:
        return constant(leaf)
    except (TypeError, ValueError) as exc:
        raise refuse(f" ({exc})") from None


def trace_graph(python_function: Callable, args: Sequence[Any], name: str,
                outer_graph: Optional[Graph] = None,
                specs: Optional[Sequence[Optional[TensorSpec]]] = None) -> Trace:
    """Run ``python_function(*args)`` in a new FuncGraph nested in ``outer_graph``.

    ``specs[i]`` (a TensorSpec) makes argument i a Placeholder of that spec;
    None passes ``args[i]`` through as a Python value.  Returned Python
    numbers become constants, returned Nones are left out of the outputs.
    """
    from .builders import SparseTensor, Variable, constant
    outer_graph = outer_graph if outer_graph is not None else get_default_graph()
    fg = FuncGraph(name, outer_graph)
    specs = list(specs) if specs is not None else [None] * len(args)
    with fg.as_default():
        placeholders, call_args = [], []
        for i, (arg, spec) in enumerate(zip(args, specs)):
            if spec is None:
                call_args.append(arg)
                continue
            ph = fg.add_input(spec.dtype, spec.shape, name=function_name(spec.name or f"arg{i}"))
            placeholders.append(ph)
            call_args.append(ph)
        structure = python_function(*call_args)
        outputs = []
        for i, leaf in enumerate(flatten(structure)):
            if leaf is None:
                continue
            if isinstance(leaf, Output):
                leaf = fg.capture(leaf)
            elif isinstance(leaf, Variable):
                leaf = fg.capture(leaf.value())
            else:
                leaf = _constant_output(leaf, i, name, constant, (Operation, SparseTensor))
            if leaf.op.type == "Placeholder":
                # An argument or capture returned as is: TF_GraphToFunction wants an op between.
                leaf = fg.create_op("Identity", [leaf], name="Identity").output(0)
            outputs.append(leaf)
    return Trace(fg, placeholders, outputs, structure)


def trace(python_function: Callable, args: Sequence[Any], name: str,
          outer_graph: Optional[Graph] = None, specs: Optional[Sequence[Optional[TensorSpec]]] = None
          ) -> TracedFunction:
    """Trace ``python_function(*args)`` into a function (see :func:`trace_graph`)."""
    return trace_graph(python_function, args, name, outer_graph, specs).finish()


def pack_outputs(traced: TracedFunction, values: Sequence[Output]) -> Any:
    """Repack a call's outputs into the structure the Python function returned."""
    leaves = flatten(traced.structure)
    it = iter(values)
    filled = [None if leaf is None else next(it) for leaf in leaves]
    return pack_as(traced.structure, filled)


class Function:
    """A Python function traced into graph functions (see :func:`function`)."""

    def __init__(self, python_function: Callable, input_signature: Optional[Sequence[Any]] = None,
                 name: Optional[str] = None):
        functools.update_wrapper(self, python_function, updated=())
        self.python_function = python_function
        self.input_signature = None if input_signature is None else [
            TensorSpec.from_value(s) for s in input_signature]
        self.__name__ = name or getattr(python_function, "__name__", "function")
        self._signature = inspect.signature(python_function)
        self._traces: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()

    def _bind(self, args: tuple, kwargs: dict) -> list:
        if not kwargs:
            return list(args)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return list(bound.args)

    def _canonicalize(self, graph: Graph, args: list) -> tuple[tuple, list, list]:
        """(cache key, specs, values to trace or call with)."""
        from .builders import Variable, constant
        from .tensor import Tensor
        specs: list[Optional[TensorSpec]] = []
        values: list = []
        key: list = []
        if self.input_signature is not None:
            if len(args) != len(self.input_signature):
                raise TypeError(f"{self.__name__}() takes {len(self.input_signature)} arguments "
                                f"(input_signature), got {len(args)}")
            for i, (arg, spec) in enumerate(zip(args, self.input_signature)):
                if isinstance(arg, Variable):
                    arg = arg.value()
                if not isinstance(arg, Output):
                    arg = constant(arg, spec.dtype, graph=graph)
                if arg.dtype != spec.dtype or not spec.is_compatible_with(arg.shape):
                    raise TypeError(f"{self.__name__}() argument {i}: '{arg.name}' "
                                    f"({arg.dtype.name}, {arg.shape!r}) does not match {spec!r}")
                specs.append(spec)
                values.append(arg)
            return ("signature",), specs, values
        for arg in args:
            if isinstance(arg, Variable):
                arg = arg.value()
            if isinstance(arg, (np.ndarray, np.generic, Tensor)):
                arg = constant(arg, graph=graph)
            if isinstance(arg, Output):
                spec = TensorSpec(arg.shape, arg.dtype)
                specs.append(spec)
                values.append(arg)
                key.append(("tensor",) + spec._key())
            else:
                try:
                    hash(arg)
                except TypeError:
                    raise TypeError(f"{self.__name__}(): argument {arg!r} is neither a tensor nor a "
                                    "hashable Python value") from None
                specs.append(None)
                values.append(arg)
                key.append(("python", type(arg).__name__, arg))
        return tuple(key), specs, values

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> TracedFunction:
        """The traced function for these arguments in the default graph (tracing if new)."""
        graph = get_default_graph()
        return self._concrete(graph, self._bind(args, kwargs))[0]

    def _concrete(self, graph: Graph, args: list) -> tuple[TracedFunction, list]:
        key, specs, values = self._canonicalize(graph, args)
        per_graph = self._traces.setdefault(graph, {})
        traced = per_graph.get(key)
        if traced is None:
            traced = per_graph[key] = trace(self.python_function, values, self.__name__, graph, specs)
        tensors = [v for v, s in zip(values, specs) if s is not None]
        return traced, tensors

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        graph = get_default_graph()
        traced, tensors = self._concrete(graph, self._bind(args, kwargs))
        op = traced.call(tensors, name=function_name(self.__name__))
        if not traced.outputs:
            return op  # nothing to return: the call op, to run for its effects
        return pack_outputs(traced, op.outputs)

    def __repr__(self) -> str:
        return f"<bridge.function {self.__name__}>"


def function(func: Optional[Callable] = None, *, input_signature: Optional[Sequence[Any]] = None,
             name: Optional[str] = None) -> Any:
    """Make a Python function a graph function (a decorator, with or without arguments)::

        @bridge.function
        def f(x, y): return x * y + 1.0

        @bridge.function(input_signature=[bridge.TensorSpec([None], "float64")])
        def g(x): ...                      # or input_signature=[("float64", [None])]

    Each call adds one call op; the body is in the graph's function library
    once per distinct signature.  ``input_signature`` (TensorSpecs, dtypes or
    (dtype, shape) pairs) fixes one trace for every call.
    """
    if func is None:
        return lambda f: Function(f, input_signature, name)
    return Function(func, input_signature, name)
