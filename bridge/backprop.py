"""Reverse-mode differentiation over a graph: ``gradients``, ``jacobian``, ``hessian``.

Two gradient registries are mixed
---------------------------------
TensorFlow's C++ gradient registry (reached through
``TF_AddGradientsWithPrefix``) knows most standard ops.  The Python registry
here (:class:`RegisterGradient`, :func:`NotDifferentiable`, per-graph
``Graph.gradient_override_map``) supplies the rest: Julia custom ops,
function calls (``bridge.function``), ``If``/``While`` from
``bridge.cond``/``bridge.while_loop``, second-order ops such as ``TanhGrad``,
and user overrides.  An op's gradient comes from, in order:

1. the name an override gives it (the op's ``_gradient_op_type`` attribute,
   set when it was created inside ``gradient_override_map``, or the graph's
   current map), looked up in the Python registry;
2. the Python registry under the op's type;
3. the function it calls, when its type is a ``bridge.function``;
4. TensorFlow's C++ registry.

:func:`gradients` finds the ops between ``xs`` and ``ys`` and gives each a
*level*: the largest number of Python-handled ops on a path from it to ys.
The C++-handled ops of one level form a block that no Python-handled op sits
inside (a path leaving the block through one could not come back to the same
level), so one ``TF_AddGradientsWithPrefix`` call differentiates the whole
block, given the summed gradients of its outputs (``dx``) and asked for its
boundary inputs.  Levels go from ys back: the block of level L, then the
Python ops of level L (their functions called with their outputs'
gradients), whose input gradients feed level L+1.  Without Python-handled ops
the whole subgraph is one block: TensorFlow's own path, one call.
Gradients reaching a tensor from several consumers are summed with ``AddN``.

TF's builder works on whole nodes and computes *total* derivatives between
its ``x``: started from a block's boundary inputs it also walks any path that
leaves a producer another way and comes back into the block (say ``h`` feeding
both ``AddV2(h, f(h))`` and, through a Python op, ``f(h)``), and would count
that path twice.  The ops where such paths re-enter are taken one at a time
(the stretches between them are blocks again), and a single op whose inputs
depend on one another (``Mul(a, Tanh(a))``) is differentiated as a copy fed
through fresh ``Identity`` ops, which runs only when its gradient reads its
outputs (``Pow``).  The forward graph is never modified.

Every gradient op goes under a ``gradients`` name scope (``gradients_1``...).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import dtypes
from ._lib import ffi, lib
from .errors import OpError, check, status
from .graph import Graph, Operation, Output, get_default_graph

__all__ = ["gradients", "jacobian", "hessian", "hessians", "RegisterGradient", "NotDifferentiable",
           "no_gradient", "register_custom_op_gradient", "get_gradient_function"]

GradientFunction = Callable[..., Any]

# op type (or override name) -> fn(op, *output_grads) -> input grads; None: not differentiable
_registry: dict[str, Optional[GradientFunction]] = {}

# Op types whose C++ gradient turned out to be missing (kept out of blocks from then on).
_cpp_missing: set[str] = set()

# Modules that register Python gradients for these op types when imported.
_LAZY_GRADIENT_MODULES = {t: "bridge.control_flow" for t in (
    "If", "StatelessIf", "While", "StatelessWhile",
    "TensorListPushBack", "TensorListPopBack", "EmptyTensorList")}

# TF v1 control flow: its gradients need frame bookkeeping the per-op walk cannot do.
_V1_CONTROL_FLOW = frozenset((
    "Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
    "NextIteration", "RefNextIteration", "LoopCond"))

# Set on a gradient function that wants None (not zeros) for outputs without gradient.
ACCEPTS_NONE = "_bridge_gradient_accepts_none"


# --- the Python registry ------------------------------------------------------

class RegisterGradient:
    """Decorator registering a Python gradient for an op type (or override name)::

        @bridge.RegisterGradient("MyOp")
        def _my_op_grad(op, grad):          # one grad per output of op
            return [grad * 2.0, None]       # one gradient (or None) per input

    Missing output gradients arrive as zeros (None for non-float outputs).
    """

    def __init__(self, op_type: str):
        if not isinstance(op_type, str) or not op_type:
            raise TypeError(f"RegisterGradient needs an op type name, got {op_type!r}")
        self._op_type = op_type

    def __call__(self, fn: GradientFunction) -> GradientFunction:
        register_gradient(self._op_type, fn)
        return fn


def register_gradient(op_type: str, fn: Optional[GradientFunction], replace: bool = False) -> None:
    """Register ``fn`` (None: not differentiable) for ``op_type``.  Registering
    a name twice is an error unless ``replace`` (as TensorFlow's registry)."""
    if op_type in _registry and not replace:
        raise KeyError(f"Registering two gradient with name '{op_type}'")
    _registry[op_type] = fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 (TensorFlow's name)
    """Declare that ops of ``op_type`` have no gradient: their inputs get None."""
    register_gradient(op_type, None)


no_gradient = NotDifferentiable


def register_custom_op_gradient(op_type: str, grad_op_type: Optional[str] = None) -> None:
    """Differentiate ``op_type`` with its gradient op (``<Op>Grad`` by default).

    The gradient op's inputs are: the gradients of the op's float outputs,
    then all the op's outputs, then all its inputs; its outputs are the
    gradients of the op's float inputs, in order.  Attributes the gradient op
    declares are copied from the forward op.  Calling this again for the same
    pair is a no-op (``bridge.customop.load`` may run twice).
    """
    grad_op_type = grad_op_type or f"{op_type}Grad"
    existing = _registry.get(op_type)
    if existing is not None and getattr(existing, "_bridge_grad_op_type", None) == grad_op_type:
        return

    def _grad(op: Operation, *grads: Optional[Output]) -> list:
        outs, ins = op.outputs, op.inputs
        float_outs = [i for i, o in enumerate(outs) if o.dtype.is_floating]
        float_ins = [i for i, x in enumerate(ins) if x.dtype.is_floating]
        dys = [grads[i] if grads[i] is not None else _zeros_like(outs[i]) for i in float_outs]
        attrs, types = _declared_attrs(op, grad_op_type)
        gop = op.graph.create_op(grad_op_type, dys + outs + ins, attrs=attrs, attr_types=types,
                                 name=grad_op_type)
        if gop.num_outputs != len(float_ins):
            raise ValueError(f"{grad_op_type} has {gop.num_outputs} outputs, but {op_type} "
                             f"'{op.name}' has {len(float_ins)} float inputs")
        result: list = [None] * len(ins)
        for k, i in enumerate(float_ins):
            result[i] = gop.output(k)
        return result

    _grad._bridge_grad_op_type = grad_op_type  # type: ignore[attr-defined]
    register_gradient(op_type, _grad, replace=True)


def _declared_attrs(op: Operation, op_type: str) -> tuple[dict, dict]:
    """The forward op's values of the attributes ``op_type``'s OpDef declares
    (apart from the ones TensorFlow infers from the inputs)."""
    from . import _proto as pb
    buf = ffi.gc(lib.TF_NewBuffer(), lib.TF_DeleteBuffer)
    s = status()
    lib.TF_GraphGetOpDef(op.graph._ptr, op_type.encode(), buf, s.ptr)
    check(s, f"looking up op {op_type}")
    op_def = pb.fields(bytes(ffi.buffer(buf.data, buf.length)))
    inferred = set()
    for arg in op_def.get(2, []):  # input_arg: type_attr 4, number_attr 5, type_list_attr 6
        f = pb.fields(bytes(arg))
        inferred.update(pb.text(f[k][0]) for k in (4, 5, 6) if k in f)
    have = set(op.attr_names)
    attrs, types = {}, {}
    for attr in op_def.get(4, []):
        f = pb.fields(bytes(attr))
        name, kind = pb.text(f[1][0]), pb.text(f[2][0])
        if name in have and name not in inferred:
            attrs[name], types[name] = op.get_attr(name), kind
    return attrs, types


def get_gradient_function(op: Operation) -> Optional[GradientFunction]:
    """The Python gradient function for ``op`` (override, registry, function
    call), or None when its gradient would come from the C++ registry or it
    has none.  Raises LookupError for an override name nothing is registered under."""
    kind, fn = _gradient_source(op)
    return fn if kind == "python" else None


def _override_name(op: Operation) -> Optional[str]:
    s = status()
    meta = lib.TF_OperationGetAttrMetadata(op._ptr, b"_gradient_op_type", s.ptr)
    found = None
    if s.code == 0 and meta.type == lib.TF_ATTR_STRING and meta.total_size >= 0:
        value = ffi.new("char[]", max(int(meta.total_size), 1))
        lib.TF_OperationGetAttrString(op._ptr, b"_gradient_op_type", value, meta.total_size, s.ptr)
        if s.code == 0:
            found = ffi.unpack(value, int(meta.total_size)).decode()
    lib.TF_SetStatus(s.ptr, 0, b"")  # a missing attr is the usual case, not an error
    return found if found is not None else op.graph.gradient_overrides.get(op.type)


def _gradient_source(op: Operation) -> tuple[str, Optional[GradientFunction]]:
    """("python", fn), ("none", None) or ("cpp", None)."""
    override = _override_name(op)
    if override is not None:
        if override not in _registry:
            raise LookupError(
                f"operation '{op.name}' (op type {op.type}) takes its gradient from '{override}' "
                f"(gradient_override_map), but no gradient is registered under that name: "
                f"register one with @bridge.RegisterGradient('{override}')")
        fn = _registry[override]
        return ("none", None) if fn is None else ("python", fn)
    if op.type not in _registry and op.type in _LAZY_GRADIENT_MODULES:
        importlib.import_module(_LAZY_GRADIENT_MODULES[op.type])
    if op.type in _registry:
        fn = _registry[op.type]
        return ("none", None) if fn is None else ("python", fn)
    from .functions import call_gradient, lookup
    if lookup(op.graph, op.type) is not None:
        return "python", call_gradient
    if op.type in _V1_CONTROL_FLOW:
        raise LookupError(
            f"operation '{op.name}' (op type {op.type}) is TensorFlow v1 control flow, whose "
            "gradient the bridge does not build; build loops and conditionals with "
            "bridge.while_loop / bridge.cond instead")
    return "cpp", None


def _no_gradient_error(op: Operation, cause: str = "") -> LookupError:
    return LookupError(
        f"No gradient defined for operation '{op.name}' (op type: {op.type}). "
        f"Register one in Python:\n"
        f"    @bridge.RegisterGradient('{op.type}')\n"
        f"    def _grad(op, *output_grads): return [...one gradient or None per input...]\n"
        f"or map it to a registered gradient with "
        f"graph.gradient_override_map({{'{op.type}': '<registered name>'}}), or declare it "
        f"bridge.NotDifferentiable('{op.type}'). A Julia custom op gets its "
        f"gradient from its '{op.type}Grad' op when loaded with bridge.customop."
        + (f"\n(TensorFlow: {cause})" if cause else ""))


# --- small op helpers (on the default graph, so function bodies capture) -------

def _op(op_type: str, inputs: Sequence[Any], attrs: Optional[dict] = None,
        attr_types: Optional[dict] = None, name: Optional[str] = None) -> Output:
    return get_default_graph().create_op(op_type, list(inputs), attrs=attrs, attr_types=attr_types,
                                         name=name).output(0)


def _const(value: Any, dtype: Any, name: str = "Const") -> Output:
    from .tensor import Tensor
    t = Tensor(np.asarray(value, dtype=dtypes.as_dtype(dtype).as_numpy_dtype), dtype)
    return _op("Const", [], {"value": t, "dtype": t.dtype}, {"value": "tensor", "dtype": "type"}, name)


def _zeros_like(x: Output) -> Output:
    return _op("ZerosLike", [x])


def _ones(x: Output) -> Output:
    """Ones of x's (dynamic) shape.  Not OnesLike: TF's C++ registry lacks its
    (empty) gradient, which would split second-derivative graphs into blocks."""
    return _op("Fill", [_op("Shape", [x]), _const(1, x.dtype, name="one")])


def _add_n(values: list[Output]) -> Output:
    return values[0] if len(values) == 1 else _op("AddN", [list(values)])


def is_differentiable(dtype: dtypes.DType) -> bool:
    """Whether gradients flow through tensors of ``dtype`` (floats, complex,
    and variants, which carry TensorLists of gradients)."""
    return dtype.is_floating or dtype.is_complex or dtype.name == "variant"


# --- the C++ registry ---------------------------------------------------------

def _c_outputs(values: Sequence[Output]):
    arr = ffi.new("TF_Output[]", max(len(values), 1))
    for i, v in enumerate(values):
        arr[i].oper, arr[i].index = v.op._ptr, v.index
    return arr


def add_cpp_gradients(graph: Graph, ys: Sequence[Output], xs: Sequence[Output],
                      dys: Sequence[Output], prefix_hint: str) -> list[Optional[Output]]:
    """One TF_AddGradientsWithPrefix call: d(sum dys*ys)/dxs, None where TF says NoGradient.
    The prefix is made unique under the current name scope."""
    s = status()
    out = ffi.new("TF_Output[]", max(len(xs), 1))
    for _ in range(100):
        prefix = graph.unique_name(prefix_hint)
        lib.TF_AddGradientsWithPrefix(graph._ptr, prefix.encode(), _c_outputs(ys), len(ys), _c_outputs(xs),
                                      len(xs), _c_outputs(dys), s.ptr, out)
        # An imported graph may hold nodes under a prefix unique_name thinks is free.
        if s.code == 3 and "conflicts with existing node" in s.message:
            lib.TF_SetStatus(s.ptr, 0, b"")
            continue
        break
    check(s, "adding gradients")
    return [None if out[i].oper == ffi.NULL else Output(graph._wrap(out[i].oper), out[i].index)
            for i in range(len(xs))]


_input_args_cache: dict[str, list[tuple[str, bool]]] = {}


def _input_args(graph: Graph, op_type: str) -> list[tuple[str, bool]]:
    """(name, is a list) of each input argument of ``op_type``'s OpDef."""
    key = op_type
    if key not in _input_args_cache:
        from . import _proto as pb
        buf = ffi.gc(lib.TF_NewBuffer(), lib.TF_DeleteBuffer)
        s = status()
        lib.TF_GraphGetOpDef(graph._ptr, op_type.encode(), buf, s.ptr)
        check(s, f"looking up op {op_type}")
        args = []
        for arg in pb.fields(bytes(ffi.buffer(buf.data, buf.length))).get(2, []):
            f = pb.fields(bytes(arg))  # name 1, number_attr 5, type_list_attr 6
            args.append((pb.text(f[1][0]), 5 in f or 6 in f))
        _input_args_cache[key] = args
    return _input_args_cache[key]


def _clone_op(op: Operation, replace: dict[Output, Output], name: str) -> Operation:
    """A copy of ``op`` (type, attributes and device; no control inputs) with
    the inputs in ``replace`` swapped for their values."""
    graph = op.graph
    s = status()
    desc = lib.TF_NewOperation(graph._ptr, op.type.encode(), graph.unique_name(name).encode())
    inputs = op.inputs
    pos = 0
    for arg, is_list in _input_args(graph, op.type):
        if is_list:
            n = lib.TF_OperationInputListLength(op._ptr, arg.encode(), s.ptr)
            check(s, f"reading input list '{arg}' of '{op.name}'")
            lib.TF_AddInputList(desc, _c_outputs([replace.get(t, t) for t in inputs[pos:pos + n]]), n)
            pos += n
        else:
            lib.TF_AddInput(desc, replace.get(inputs[pos], inputs[pos])._c())
            pos += 1
    for attr in op.attr_names:
        if attr == "_class":
            continue  # colocation with the original's neighbours is not the copy's business
        buf = ffi.gc(lib.TF_NewBuffer(), lib.TF_DeleteBuffer)
        lib.TF_OperationGetAttrValueProto(op._ptr, attr.encode(), buf, s.ptr)
        check(s, f"reading attribute '{attr}' of '{op.name}'")
        lib.TF_SetAttrValueProto(desc, attr.encode(), buf.data, buf.length, s.ptr)
        check(s, f"copying attribute '{attr}' of '{op.name}'")
    if op.device:
        lib.TF_SetDevice(desc, op.device.encode())
    ptr = lib.TF_FinishOperation(desc, s.ptr)
    check(s, f"copying '{op.name}'")
    return graph._wrap(ptr)


# --- the walk ---------------------------------------------------------------------

class _Backprop:
    """One gradients() call: the ops between xs and ys and their accumulated gradients.

    Ops are grouped by *level*: the largest number of ops without a C++
    gradient (Python-handled ops) on a path from the op to ys.  The C++ ops
    of one level form a block no such op can sit inside (a path leaving the
    block through one could never come back to the same level), so one
    TF_AddGradientsWithPrefix call differentiates the whole block.  Levels
    are processed from ys back: the block of level L, then the Python ops of
    level L, whose inputs' gradients feed level L+1.  Without Python ops the
    whole graph is one block: TensorFlow's own path.
    """

    def __init__(self, graph: Graph, ys: list[Output], xs: list[Output], grad_ys: list[Output],
                 stops: set[Output]):
        self.graph = graph
        self.ys, self.xs, self.grad_ys, self.stops = ys, xs, grad_ys, stops
        self.xs_set = set(xs)
        self.xs_by_op: dict[Operation, list[Output]] = {}
        for x in self.xs_set:
            self.xs_by_op.setdefault(x.op, []).append(x)
        self.contribs: dict[Output, list[Output]] = {}
        self.totals: dict[Output, Optional[Output]] = {}
        self.between = self._ops_between()
        self.order = self._reverse_topological_order()
        self.position = {op: i for i, op in enumerate(self.order)}
        self.kind: dict[Operation, Any] = {}
        for op in self.order:
            try:
                kind, _ = _gradient_source(op)
            except LookupError as exc:
                kind = exc  # raised only if a gradient actually reaches the op
            if kind == "cpp" and op.type in _cpp_missing:
                kind = "cpp alone"  # kept out of blocks: its own call raises the LookupError
            self.kind[op] = kind
        self.level = self._levels()

    # which ops matter -----------------------------------------------------------------
    def _ops_between(self) -> set[Operation]:
        downstream: set[Operation] = set()
        stack = [c for x in self.xs for c in x.consumers()]
        while stack:
            op = stack.pop()
            if op in downstream:
                continue
            downstream.add(op)
            for out in op.outputs:
                stack.extend(c for c in out.consumers() if c not in downstream)
        between: set[Operation] = set()
        stack = [y.op for y in self.ys if y.op in downstream]
        while stack:
            op = stack.pop()
            if op in between:
                continue
            between.add(op)
            for inp in op.inputs:
                if inp not in self.stops and inp.op in downstream and inp.op not in between:
                    stack.append(inp.op)
        return between

    def _reverse_topological_order(self) -> list[Operation]:
        pending: dict[Operation, int] = {}
        producers: dict[Operation, set[Operation]] = {}
        for op in self.between:
            producers[op] = {i.op for i in op.inputs if i.op in self.between and i not in self.stops}
            pending.setdefault(op, 0)
            for p in producers[op]:
                pending[p] = pending.get(p, 0) + 1
        ready = [op for op in self.between if pending[op] == 0]
        order = []
        while ready:
            op = ready.pop()
            order.append(op)
            for p in producers[op]:
                pending[p] -= 1
                if pending[p] == 0:
                    ready.append(p)
        return order

    def _levels(self) -> dict[Operation, int]:
        level: dict[Operation, int] = {}
        for op in self.order:  # consumers come first
            best = 0
            for out in op.outputs:
                for c in out.consumers():
                    if c in level:
                        best = max(best, level[c] + (self.kind[c] != "cpp"))
            level[op] = best
        return level

    def _wants(self, t: Output) -> bool:
        return (t not in self.stops and (t.op in self.between or t in self.xs_set)
                and is_differentiable(t.dtype))

    # accumulation ----------------------------------------------------------------------
    def _contribute(self, t: Output, g: Optional[Output]) -> None:
        if g is not None:
            self.contribs.setdefault(t, []).append(g)

    def _total(self, t: Output) -> Optional[Output]:
        if t not in self.totals:
            parts = self.contribs.pop(t, [])
            self.totals[t] = _add_n(parts) if parts else None
        return self.totals[t]

    def run(self) -> list[Optional[Output]]:
        for y, gy in zip(self.ys, self.grad_ys):
            if is_differentiable(y.dtype):
                self._contribute(y, gy)
        by_level: dict[int, tuple[list, list]] = {}
        for op in self.order:
            block, others = by_level.setdefault(self.level[op], ([], []))
            (block if self.kind[op] == "cpp" else others).append(op)
        for level in sorted(by_level):
            block, others = by_level[level]
            if block:
                self._backprop_block(block, level)
            for op in others:
                self._backprop_op(op)
        return [self._total(x) for x in self.xs]

    # one C++ call per block ---------------------------------------------------------------
    def _backprop_block(self, block: list[Operation], level: int) -> None:
        # Work items in processing order: ("block", ops) or ("op", op).
        work: list[tuple[str, Any]] = [("block", block)]
        while work:
            kind, item = work.pop(0)
            if kind == "op":
                self._backprop_op(item)
            else:
                work[0:0] = self._backprop_block_once(item, level)

    def _backprop_block_once(self, block: list[Operation], level: int) -> list[tuple[str, Any]]:
        """One C++ call over ``block``; or, where paths from outside re-enter it,
        the pieces to take instead: those ops alone, the stretches between them
        (in processing order) as blocks again."""
        members = set(block)
        boundary = list(dict.fromkeys(t for op in block for t in op.inputs
                                      if t.op not in members and self._wants(t)))
        inner_xs = [x for op in block for x in self.xs_by_op.get(op, ()) if self._wants(x)]
        seeded = [t for op in block for t in op.outputs if self.contribs.get(t)]
        if not seeded or not (boundary or inner_xs):
            return []
        reentry = self._reentry(members, boundary + inner_xs, level)
        if reentry:
            pieces: list[tuple[str, Any]] = []
            stretch: list[Operation] = []
            for op in block:
                if op in reentry:
                    if stretch:
                        pieces.append(("block", stretch))
                        stretch = []
                    pieces.append(("op", op))
                else:
                    stretch.append(op)
            if stretch:
                pieces.append(("block", stretch))
            return pieces
        # TF's builder rejects an x no y depends on (e.g. behind a None gradient).
        reachable = self._ancestors_within(members, [t.op for t in seeded])
        boundary = [t for t in boundary if any(c in reachable for c in t.consumers())]
        inner_xs = [x for x in inner_xs if x.op in reachable]
        if not (boundary or inner_xs):
            return []
        saved = {t: list(self.contribs[t]) for t in seeded}
        ys, dys = [], []
        for t in seeded:
            dys.append(_add_n(self.contribs.pop(t)))
            # TF's builder stops at a y's op and would drop paths through the op's
            # consumers inside the block; an Identity beyond the op keeps them.
            feeds_block = any(c in members for out in t.op.outputs for c in out.consumers())
            ys.append(_op("Identity", [t], name="seed") if feeds_block else t)
        try:
            result = add_cpp_gradients(self.graph, ys, boundary + inner_xs, dys, "grad")
        except OpError as exc:
            missing = _missing_gradient_type(exc)
            if missing:
                _cpp_missing.add(missing)
            self.contribs.update(saved)  # the per-op walk pinpoints the op, or gets past it
            return [("op", op) for op in block]
        for t, g in zip(boundary, result):
            self._contribute(t, g)
        for x, g in zip(inner_xs, result[len(boundary):]):
            self.totals[x] = g  # TF's result already includes the seed given to x
        for op in block:
            for x in self.xs_by_op.get(op, ()):
                self.totals.setdefault(x, None)  # no y depends on it through this block
        return []

    def _ancestors_within(self, members: set[Operation], starts: list[Operation]) -> set[Operation]:
        seen: set[Operation] = set()
        stack = [op for op in starts if op in members]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            stack.extend(t.op for t in op.inputs if t.op in members and t.op not in seen)
        return seen

    def _reentry(self, members: set[Operation], xs: list[Output], level: int) -> set[Operation]:
        """The block ops TF's builder, started from the producers of ``xs``, would
        reach from outside the block: through another output of a producer or a
        path from one x to another (through a Python op, say), which C++ would
        differentiate too.  Empty when one call over the block is right."""
        if self.stops and any(t in self.stops and t.op in members for op in members for t in op.inputs):
            return set(members)  # TF's builder would differentiate through the stopped tensor
        stack = [c for p in {x.op for x in xs} for out in p.outputs for c in out.consumers()
                 if c not in members]
        # Ops processed before every block op come after them all in the graph.
        first = min(self.position[op] for op in members)
        seen: set[Operation] = set()
        hit: set[Operation] = set()
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            if op in members:
                hit.add(op)
                continue
            if op in self.between:
                if self.level[op] < level or self.position[op] < first:
                    continue  # cannot lead back into the block
            elif not self.stops:
                continue  # not on a path to ys: cannot lead into the block
            stack.extend(c for out in op.outputs for c in out.consumers() if c not in seen)
        return hit

    # one op at a time -----------------------------------------------------------------------
    def _backprop_op(self, op: Operation) -> None:
        out_grads = [self._total(o) if is_differentiable(o.dtype) else None for o in op.outputs]
        if all(g is None for g in out_grads):
            return
        inputs = op.inputs
        needed = [i for i, t in enumerate(inputs) if self._wants(t)]
        if not needed:
            return
        kind = self.kind[op]
        if isinstance(kind, LookupError):
            raise kind
        if kind == "none":
            return
        if kind == "python":
            grads = self._python_gradient(op, _gradient_source(op)[1], out_grads)
            for i in needed:
                self._contribute(inputs[i], grads[i])
            return
        tensors = list(dict.fromkeys(inputs[i] for i in needed))
        for t, g in zip(tensors, self._cpp_gradient(op, out_grads, tensors)):
            self._contribute(t, g)

    def _python_gradient(self, op: Operation, fn: GradientFunction,
                         out_grads: list[Optional[Output]]) -> list[Optional[Output]]:
        grads = list(out_grads)
        if not getattr(fn, ACCEPTS_NONE, False):
            for i, o in enumerate(op.outputs):
                if grads[i] is None and is_differentiable(o.dtype):
                    grads[i] = _zeros_like(o)
        with self.graph.name_scope(f"{op.name}_grad"):
            result = fn(op, *grads)
        n = op.num_inputs
        if isinstance(result, Output) or result is None:
            result = [result]
        result = list(result)
        if len(result) != n:
            raise ValueError(f"the gradient function of {op.type} returned {len(result)} gradients, "
                             f"but operation '{op.name}' has {n} inputs")
        for i, g in enumerate(result):
            if g is not None and not isinstance(g, Output):
                raise TypeError(f"the gradient function of {op.type} returned {g!r} for input {i} "
                                f"of '{op.name}'; expected an Output or None")
        return result

    def _cpp_gradient(self, op: Operation, out_grads: list[Optional[Output]],
                      tensors: list[Output]) -> list[Optional[Output]]:
        ys = [o for o, g in zip(op.outputs, out_grads) if g is not None]
        dys = [g for g in out_grads if g is not None]
        hint = f"{op.name}_grad"
        try:
            if self._interdependent(op, tensors):
                # Differentiate a copy fed through fresh Identity ops instead: its
                # inputs no longer depend on one another.  The copy only runs if
                # its gradient uses its outputs (as Pow's does).
                isolated = [_op("Identity", [t], name="isolate") for t in tensors]
                clone = _clone_op(op, dict(zip(tensors, isolated)), f"{op.name}_isolated")
                ys = [clone.output(o.index) for o in ys]
                return add_cpp_gradients(self.graph, ys, isolated, dys, hint)
            return add_cpp_gradients(self.graph, ys, tensors, dys, hint)
        except OpError as exc:
            missing = _missing_gradient_type(exc)
            if missing:
                _cpp_missing.add(missing)
                raise _no_gradient_error(op, exc.message) from None
            raise

    def _interdependent(self, op: Operation, tensors: list[Output]) -> bool:
        """Whether a data path leads from the producer of one of ``tensors`` to
        the producer of another.  TF's builder would then fold one input's
        gradient into another's, or (from another output of a multi-output
        producer) differentiate ops on that path, which may lack C++ gradients."""
        if len({t.op for t in tensors}) < 2:
            return False
        starts = {c for p in {t.op for t in tensors} for out in p.outputs for c in out.consumers()
                  if c is not op and c in self.between}
        if not starts:
            return False
        # Ops further upstream than every such consumer cannot lie on such a path.
        bound = max(self.position[c] for c in starts)
        stack = [t.op for t in tensors if t.op in self.between]
        seen: set[Operation] = set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in starts:
                return True
            for inp in v.inputs:
                p = inp.op
                if p in self.between and p not in seen and self.position[p] <= bound:
                    stack.append(p)
        return False


def _missing_gradient_type(exc: OpError) -> Optional[str]:
    marker = "No gradient defined for op: "
    msg = exc.message
    if marker not in msg:
        return None
    return msg.split(marker, 1)[1].split(".", 1)[0].strip()


# --- public API ---------------------------------------------------------------------

def _as_list(value: Any, what: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _as_output(value: Any, what: str) -> Output:
    from .builders import Variable
    if isinstance(value, Variable):
        return value.value()
    if not isinstance(value, Output):
        raise TypeError(f"{what} must hold Outputs, got {type(value).__name__}")
    return value


def gradients(ys: Union[Output, Sequence[Output]], xs: Union[Output, Sequence[Output]],
              grad_ys: Optional[Union[Any, Sequence[Any]]] = None, name: str = "gradients",
              stop_gradients: Optional[Sequence[Output]] = None,
              unconnected_gradients: str = "none") -> list[Optional[Output]]:
    """Symbolic derivatives of ``sum(ys)`` with respect to each of ``xs``.

    Returns a list aligned with ``xs``: for each x, the sum over ys of
    ``dy/dx`` weighted by ``grad_ys`` (ones by default).  An x that ``ys`` do not
    depend on (or an integer x) gets None, or zeros with
    ``unconnected_gradients="zero"``.  ``stop_gradients`` are treated as
    constants.  Raises LookupError naming an op on the way that has no
    gradient in either registry.  A Variable in ``xs`` stands for its value.
    """
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"unconnected_gradients must be 'none' or 'zero', not {unconnected_gradients!r}")
    ys = [_as_output(y, "ys") for y in _as_list(ys, "ys")]
    xs = [_as_output(x, "xs") for x in _as_list(xs, "xs")]
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
    stops = set(_as_output(s, "stop_gradients") for s in (stop_gradients or ()))

    with graph.as_default(), graph.name_scope(name):
        seeds = []
        for i, (y, gy) in enumerate(zip(ys, grad_ys)):
            if gy is None:
                seeds.append(_ones(y) if (y.dtype.is_floating or y.dtype.is_complex) else None)
            elif isinstance(gy, Output):
                if gy.dtype != y.dtype:
                    raise TypeError(f"grad_ys[{i}] is {gy.dtype.name}, but ys[{i}] '{y.name}' is {y.dtype.name}")
                seeds.append(gy)
            else:
                seeds.append(_const(gy, y.dtype, name=f"grad_ys_{i}"))
        result = _Backprop(graph, ys, xs, seeds, stops).run()
        if unconnected_gradients == "zero":
            result = [_zeros_like(x) if g is None and x.dtype.name != "resource" else g
                      for x, g in zip(xs, result)]
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
    xs = [_as_output(v, "x") for v in _as_list(x, "x")]
    y_dims, n = _static_size(y, "jacobian: y")
    graph = y.graph
    np_dtype = y.dtype.as_numpy_dtype
    rows: list[list[Optional[Output]]] = [[] for _ in xs]
    with graph.as_default(), graph.name_scope(name):
        for i in range(n):
            seed = np.zeros(n, dtype=np_dtype)
            seed[i] = 1
            g = gradients([y], xs, grad_ys=[_const(seed.reshape(y_dims), y.dtype, name=f"seed_{i}")],
                          name=f"row_{i}")
            for k, gk in enumerate(g):
                rows[k].append(gk)
        result = []
        for xk, r in zip(xs, rows):
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
    xs = [_as_output(v, "x") for v in _as_list(x, "x")]
    y = _as_output(y, "y")
    graph = y.graph
    result = []
    with graph.as_default(), graph.name_scope(name):
        grads = gradients([y], xs, name="first")
        for xk, g in zip(xs, grads):
            result.append(None if g is None else jacobian(g, xk, name="second"))
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


# --- Python gradients for ops TensorFlow's C++ registry lacks ------------------------
# Second derivatives need the gradients of first-derivative ops (TanhGrad...);
# these follow TensorFlow's Python definitions (math_grad.py, nn_grad.py).

def _c(x: Output, value: float) -> Output:
    return _const(value, x.dtype)


def _mul(*xs: Output) -> Output:
    out = xs[0]
    for x in xs[1:]:
        out = _op("Mul", [out, x])
    return out


@RegisterGradient("TanhGrad")
def _tanh_grad_grad(op, grad):
    y, dy = op.inputs
    return _mul(grad, _c(y, -2.0), dy, y), _op("TanhGrad", [y, grad])


@RegisterGradient("SigmoidGrad")
def _sigmoid_grad_grad(op, grad):
    y, dy = op.inputs
    one_minus_2y = _op("Sub", [_c(y, 1.0), _mul(_c(y, 2.0), y)])
    return _mul(grad, dy, one_minus_2y), _op("SigmoidGrad", [y, grad])


@RegisterGradient("SqrtGrad")
def _sqrt_grad_grad(op, grad):
    y = op.inputs[0]
    ga = _op("RealDiv", [grad, y])
    return _op("Neg", [_mul(ga, op.outputs[0])]), _mul(_c(y, 0.5), ga)


@RegisterGradient("RsqrtGrad")
def _rsqrt_grad_grad(op, grad):
    y, dy = op.inputs
    return _mul(_c(y, -1.5), grad, dy, _op("Square", [y])), _op("RsqrtGrad", [y, grad])


@RegisterGradient("InvGrad")  # InvGrad is ReciprocalGrad's older name
@RegisterGradient("ReciprocalGrad")
def _reciprocal_grad_grad(op, grad):
    y, dy = op.inputs
    return _mul(grad, _c(y, -2.0), dy, y), _op(op.type, [y, grad])


@RegisterGradient("ReluGrad")
def _relu_grad_grad(op, grad):
    features = op.inputs[1]
    return _op("ReluGrad", [grad, features]), _zeros_like(features)


@RegisterGradient("Relu6Grad")
def _relu6_grad_grad(op, grad):
    features = op.inputs[1]
    return _op("Relu6Grad", [grad, features]), _zeros_like(features)


@RegisterGradient("EluGrad")
def _elu_grad_grad(op, grad):
    dy, elu_x = op.inputs
    negative = _op("Less", [elu_x, _c(elu_x, 0.0)])
    return (_op("EluGrad", [grad, elu_x]),
            _op("SelectV2", [negative, _mul(grad, dy), _zeros_like(elu_x)]))


@RegisterGradient("SoftplusGrad")
def _softplus_grad_grad(op, grad):
    dy, x = op.inputs
    denom = _op("AddV2", [_op("AddV2", [_op("Exp", [_op("Neg", [x])]), _c(x, 2.0)]), _op("Exp", [x])])
    return _op("SoftplusGrad", [grad, x]), _op("RealDiv", [_mul(grad, dy), denom])


@RegisterGradient("Erfc")
def _erfc_grad(op, grad):
    x = op.inputs[0]
    scale = _c(x, -2.0 / np.sqrt(np.pi))
    return _mul(grad, scale, _op("Exp", [_op("Neg", [_op("Square", [x])])]))


def _reduce_to(grad: Output, x: Output, other: Output) -> Output:
    """Sum a broadcast gradient back to x's shape."""
    rx, _ = get_default_graph().create_op(
        "BroadcastGradientArgs", [_op("Shape", [x]), _op("Shape", [other])]).outputs
    return _op("Reshape", [_op("Sum", [grad, rx]), _op("Shape", [x])])


@RegisterGradient("Xlogy")
def _xlogy_grad(op, grad):
    x, y = op.inputs
    not_zero_x = _op("Cast", [_op("NotEqual", [x, _c(x, 0.0)])], {"DstT": x.dtype})
    gx = _op("Xlogy", [not_zero_x, y])
    gy = _op("Xdivy", [x, y])
    return _reduce_to(_mul(gx, grad), x, y), _reduce_to(_mul(gy, grad), y, x)


@RegisterGradient("Xdivy")
def _xdivy_grad(op, grad):
    x, y = op.inputs
    not_zero_x = _op("Cast", [_op("NotEqual", [x, _c(x, 0.0)])], {"DstT": x.dtype})
    gx = _op("Xdivy", [not_zero_x, y])
    gy = _op("Neg", [_op("Xdivy", [x, _op("Square", [y])])])
    return _reduce_to(_mul(gx, grad), x, y), _reduce_to(_mul(gy, grad), y, x)


@RegisterGradient("MulNoNan")
def _mul_no_nan_grad(op, grad):
    x, y = op.inputs
    return (_reduce_to(_op("MulNoNan", [grad, y]), x, y),
            _reduce_to(_op("MulNoNan", [x, grad]), y, x))


def _softmax_xent_grad(op, grad_loss, grad_grad):
    # TF's C++ version builds a float32 constant into float64 graphs and lacks the labels' gradient.
    logits = op.inputs[0]
    minus_one = _const(-1, "int32", name="minus_one")

    def batch_mul(vec: Output, mat: Output) -> Output:
        return _op("Mul", [_op("ExpandDims", [vec, minus_one]), mat])

    grad = dlabels = None
    if grad_loss is not None:
        grad = batch_mul(grad_loss, op.outputs[1])
        dlabels = batch_mul(grad_loss, _op("Neg", [_op("LogSoftmax", [logits])]))
    if grad_grad is not None:
        softmax = _op("Softmax", [logits])
        inner = _op("BatchMatMulV2", [_op("ExpandDims", [grad_grad, _const(1, "int32")]),
                                      _op("ExpandDims", [softmax, _const(2, "int32")])])
        inner = _op("Squeeze", [inner], {"squeeze_dims": [1]})
        extra = _op("Mul", [_op("Sub", [grad_grad, inner]), softmax])
        grad = extra if grad is None else _op("AddV2", [grad, extra])
    return grad, dlabels


setattr(_softmax_xent_grad, ACCEPTS_NONE, True)
RegisterGradient("SoftmaxCrossEntropyWithLogits")(_softmax_xent_grad)


@RegisterGradient("PreventGradient")
def _prevent_gradient_grad(op, _grad):
    message = op.get_attr("message")
    raise LookupError(f"gradient explicitly disabled for '{op.name}'"
                      + (f": {message.decode(errors='replace')}" if message else ""))


for _t in ("Round", "Rint", "Ceil", "FloorDiv", "TruncateDiv", "OnesLike"):
    if _t not in _registry:
        NotDifferentiable(_t)
del _t
