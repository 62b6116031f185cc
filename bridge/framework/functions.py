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
"""
from __future__ import annotations

import functools
import inspect
import re
import weakref
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import buffers, dtypes
from ._lib import ffi, lib
from .attrs import Shape, as_shape
from .errors import InvalidArgumentError, check, status
from .graph import Graph, Operation, Output, get_default_graph

__all__ = ["function", "Function", "TensorSpec", "FuncGraph", "TracedFunction", "Trace", "trace",
           "trace_graph", "lookup", "library_function", "flatten", "pack_as"]


# --- nested structures ----------------------------------------------------------

def flatten(structure: Any) -> list:
    """Leaves of nested lists, tuples, namedtuples and dicts (sorted keys), in order."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure, key=repr) for leaf in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in flatten(item)]
    return [structure]


def pack_as(structure: Any, flat: Sequence[Any]) -> Any:
    """Rebuild ``structure`` with the leaves of ``flat`` (the inverse of flatten)."""
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, dict):
            built = {k: build(s[k]) for k in sorted(s, key=repr)}
            return type(s)((k, built[k]) for k in s)
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[build(v) for v in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(v) for v in s)
        return next(it)

    result = build(structure)
    if next(it, None) is not None:
        raise ValueError("pack_as: more values than leaves in the structure")
    return result


# --- TensorSpec -------------------------------------------------------------------

class TensorSpec:
    """The dtype and (partial) shape of a function argument: ``TensorSpec([None, 3], "float64")``."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape: Any = None, dtype: Any = "float32", name: Optional[str] = None):
        self.shape = as_shape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_value(cls, value: Any) -> "TensorSpec":
        """A spec from a TensorSpec, an Output, a dtype, or a (dtype, shape) pair."""
        if isinstance(value, TensorSpec):
            return value
        if isinstance(value, Output):
            return cls(value.shape, value.dtype)
        if isinstance(value, tuple) and len(value) == 2:
            return cls(value[1], value[0])
        return cls(None, value)

    def is_compatible_with(self, shape: Shape) -> bool:
        if self.shape.unknown_rank or shape.unknown_rank:
            return True
        return len(self.shape) == len(shape) and all(
            a is None or b is None or a == b for a, b in zip(self.shape, shape))

    def _key(self) -> tuple:
        return (self.dtype.name, None if self.shape.unknown_rank else tuple(self.shape))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape!r}, dtype={self.dtype.name})"


# --- FuncGraph ----------------------------------------------------------------------

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

_REGISTRY: "weakref.WeakValueDictionary[str, TracedFunction]" = weakref.WeakValueDictionary()

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def _function_name(hint: str) -> str:
    name = _NAME_CHARS.sub("_", hint).strip("_") or "fn"
    return name if name[0].isalpha() else f"fn_{name}"


def lookup(graph: Graph, name: str) -> Optional["TracedFunction"]:
    """The traced function called by ops of type ``name`` in ``graph``, if any:
    one the bridge traced, or else one rebuilt from the FunctionDef of that
    name in ``graph``'s library (a graph imported from a GraphDef that stock
    TensorFlow wrote: see :func:`library_function`)."""
    found = graph._functions.get(name)
    if found is None:
        found = _REGISTRY.get(name)
    if found is None:
        found = library_function(graph, name)
    return found


# --- functions of an imported library ---------------------------------------------------
# A GraphDef written by stock TensorFlow carries its functions (cond branches, loop bodies,
# tf.function bodies) as FunctionDefs only.  The gradients need them as bodies they can
# inline and differentiate, so each is turned back into a FuncGraph as TF Python's
# function_def_to_graph does: a Placeholder per argument, the nodes with their inputs
# rewritten from the FunctionDef form ("node:output_arg:index") to the GraphDef form
# ("node:flat_index"), and the library alongside for the functions they call.

# graph -> (number of functions when read, {name: serialized FunctionDef})
_libraries: "weakref.WeakKeyDictionary[Graph, tuple[int, dict[str, bytes]]]" = weakref.WeakKeyDictionary()
# serialized FunctionDef -> the TracedFunction rebuilt from it (with the library it was read from)
_rebuilt: dict[bytes, "TracedFunction"] = {}


def _library(graph: Graph) -> dict[str, bytes]:
    n = lib.TF_GraphNumFunctions(graph._ptr)
    cached = _libraries.get(graph)
    if cached is not None and cached[0] == n:
        return cached[1]
    defs: dict[str, bytes] = {}
    if n:
        s = status()
        funcs = ffi.new("TF_Function*[]", n)
        got = lib.TF_GraphGetFunctions(graph._ptr, funcs, n, s.ptr)
        check(s, "reading the graph's function library")
        try:
            for i in range(got):
                name = ffi.string(lib.TF_FunctionName(funcs[i])).decode()
                defs[name] = buffers.filled(
                    lambda buf, st, f=funcs[i]: lib.TF_FunctionToFunctionDef(f, buf, st), name)
        finally:
            for i in range(got):
                lib.TF_DeleteFunction(funcs[i])
    _libraries[graph] = (n, defs)
    return defs


def library_function(graph: Graph, name: str) -> Optional["TracedFunction"]:
    """The function ``name`` of ``graph``'s library as a TracedFunction (None if
    the library has no such function).  Its inputs and outputs are the
    FunctionDef's arguments and results, in order."""
    library = _library(graph)
    fdef = library.get(name)
    if fdef is None:
        return None
    found = _rebuilt.get(fdef)
    if found is None:
        found = _rebuilt[fdef] = _function_from_def(graph, fdef, library)
    return found


def _arg_size(arg: Any, attrs: dict) -> int:
    if arg.number_attr:
        return int(attrs[arg.number_attr])
    if arg.type_list_attr:
        return len(attrs[arg.type_list_attr])
    return 1


def _function_from_def(graph: Graph, fdef: bytes, library: dict[str, bytes]) -> "TracedFunction":
    from . import _proto as pb
    from .attrs import decode_attr_value
    from .opdef import decode_op_def, op_def

    f = pb.fields(fdef)
    sig = decode_op_def(f[1][0])
    arg_shapes: dict[int, bytes] = {}
    for entry in f.get(7, []):  # arg_attr: map<uint32, ArgAttrs>
        e = pb.fields(bytes(entry))
        index = e.get(1, [0])[0]
        for a in pb.fields(bytes(e[2][0])).get(1, []) if 2 in e else []:
            kv = pb.fields(bytes(a))
            if pb.text(kv[1][0]) == "_output_shapes" and 2 in kv:
                lst = pb.fields(bytes(kv[2][0])).get(1)
                shapes = pb.fields(bytes(lst[0])).get(7, []) if lst else []
                if shapes:
                    arg_shapes[index] = bytes(shapes[0])
    fdef_attrs = {}
    for entry in f.get(5, []):
        kv = pb.fields(bytes(entry))
        fdef_attrs[pb.text(kv[1][0])] = bytes(kv[2][0]) if 2 in kv else b""

    nodes: list[bytes] = []
    for i, arg in enumerate(sig.input_args):
        dtype = arg.type
        attrs = pb.field_bytes(5, pb.field_bytes(1, "dtype") + pb.field_bytes(2, pb.field_varint(6, dtype.enum)))
        if i in arg_shapes:
            attrs += pb.field_bytes(5, pb.field_bytes(1, "shape") + pb.field_bytes(2, pb.field_bytes(7, arg_shapes[i])))
        nodes.append(pb.field_bytes(1, arg.name) + pb.field_bytes(2, "Placeholder") + attrs)
    arg_names = {a.name for a in sig.input_args}

    # Each node's output args, to turn "node:arg:index" into "node:flat_index".
    node_defs = [bytes(n) for n in f.get(3, [])]
    outputs_of: dict[str, dict[str, int]] = {}
    for nd in node_defs:
        nf = pb.fields(nd)
        node_name, op_type = pb.text(nf[1][0]), pb.text(nf[2][0])
        attrs = {}
        for entry in nf.get(5, []):
            kv = pb.fields(bytes(entry))
            attrs[pb.text(kv[1][0])] = decode_attr_value(bytes(kv[2][0])) if 2 in kv else None
        if op_type in library:
            out_args = decode_op_def(pb.fields(library[op_type])[1][0]).output_args
        else:
            od = op_def(op_type, graph)
            out_args = od.output_args
            for a in od.attrs:
                if a.name not in attrs and a.has_default:
                    attrs[a.name] = a.default
        starts, pos = {}, 0
        for a in out_args:
            starts[a.name] = pos
            pos += _arg_size(a, attrs)
        outputs_of[node_name] = starts

    def tensor_name(ref: str) -> str:
        if ref.startswith("^"):
            return ref
        parts = ref.split(":")
        if len(parts) == 1:
            return f"{ref}:0"
        if len(parts) == 2:  # "arg:index" of an argument
            return ref
        node, out, index = parts
        return f"{node}:{outputs_of[node][out] + int(index)}"

    for nd in node_defs:
        rebuilt = bytearray()
        for number, wire, value in pb.iter_fields(nd):
            if number == 3:
                ref = pb.text(value)
                if ref.startswith("^") and ref[1:] in arg_names:
                    continue  # an argument's control edge: nothing to wait for
                rebuilt += pb.field_bytes(3, tensor_name(ref))
            elif wire == pb.LEN:
                rebuilt += pb.field_bytes(number, bytes(value))
            elif wire == pb.VARINT:
                rebuilt += pb.field_varint(number, value)
            # (NodeDef has no fixed-size fields)
        nodes.append(bytes(rebuilt))
    lib_def = b"".join(pb.field_bytes(1, d) for d in library.values())
    versions = pb.fields(Graph().as_graph_def()).get(4, [b""])[0]
    graph_def = (b"".join(pb.field_bytes(1, n) for n in nodes) + pb.field_bytes(2, lib_def)
                 + pb.field_bytes(4, bytes(versions)))

    fg = FuncGraph(sig.name)
    fg.import_graph_def(graph_def)
    inputs = [fg.get_tensor_by_name(f"{a.name}:0") for a in sig.input_args]
    rets = {}
    for entry in f.get(4, []):
        kv = pb.fields(bytes(entry))
        rets[pb.text(kv[1][0])] = pb.text(kv[2][0])
    outputs = []
    with fg.as_default():
        for a in sig.output_args:
            t = fg.get_tensor_by_name(tensor_name(rets[a.name]))
            if t.op.type == "Placeholder":
                t = fg.create_op("Identity", [t], name=f"{a.name}_identity").output(0)
            outputs.append(t)
    traced = TracedFunction(fg, inputs, outputs, description=f"rebuilt from FunctionDef '{sig.name}'")
    traced.library_name = sig.name  # type: ignore[attr-defined]
    return traced


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
        func = lib.TF_GraphToFunction(g._ptr, _function_name(g.name).encode(), 1, len(opers), c_opers,
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
        op = graph.create_op(self.name, inputs, name=name or _function_name(self.graph.name))
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
            ph = fg.add_input(spec.dtype, spec.shape, name=_function_name(spec.name or f"arg{i}"))
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
        op = traced.call(tensors, name=_function_name(self.__name__))
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
