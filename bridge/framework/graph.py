"""Graph over TF_Graph, with its Operations and Outputs (bridge/framework/operation.py).

A Graph also carries the construction context TensorFlow users expect:
name scopes, device scopes, control dependencies and colocation, which every
op created in it picks up (see :meth:`Graph.create_op`); where ops run
(devices, device functions, colocation) is its :class:`Placement` part
(bridge/framework/placement.py).  ``Output``, ``Operation`` and
``PendingOperation`` are importable from here too.
"""
from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, Iterator, Optional, Sequence, Union

from . import buffers
from ._lib import ffi, lib
from .attrs import infer_attr_type, set_attr
from .errors import InvalidArgumentError, NotFoundError, check, status
from .operation import Operation, Output
from .placement import PendingOperation, Placement

__all__ = ["Graph", "Operation", "Output", "PendingOperation", "get_default_graph", "reset_default_graph"]

_VALID_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")


class _ControlDeps:
    """One ``control_dependencies`` block: its ops and the ops created inside it."""

    def __init__(self, ops: list[Operation]):
        self.ops = ops
        self.created: set[Operation] = set()


class Graph(Placement):
    """A TensorFlow graph (TF_Graph)."""

    def __init__(self):
        self._ptr = ffi.gc(lib.TF_NewGraph(), lib.TF_DeleteGraph)
        self._wrapped: dict[int, Operation] = {}
        self._lock = threading.RLock()
        self._names_in_use: dict[str, int] = {}
        self._scope = ""
        self._init_placement()
        self._control: list[Optional[_ControlDeps]] = []
        self.gradient_overrides: dict[str, str] = {}
        self._functions: dict[str, Any] = {}
        self._keepalive: list[Any] = []  # C objects the graph must outlive (function bodies)
        self.collections: dict[str, list] = {}  # e.g. "variables": every Variable made in it
        self.seed: Optional[int] = None  # graph-level random seed: bridge.set_random_seed

    # --- lookup -----------------------------------------------------------
    def _wrap(self, ptr) -> Operation:
        key = int(ffi.cast("uintptr_t", ptr))
        op = self._wrapped.get(key)
        if op is None:
            op = self._wrapped[key] = Operation(ptr, self)
        return op

    def get_operations(self) -> list[Operation]:
        return list(self)

    def __iter__(self) -> Iterator[Operation]:
        pos = ffi.new("size_t*", 0)
        while True:
            ptr = lib.TF_GraphNextOperation(self._ptr, pos)
            if ptr == ffi.NULL:
                return
            yield self._wrap(ptr)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        # Without this, `graph or get_default_graph()` would count every op (__len__).
        return True

    def get_operation_by_name(self, name: str) -> Operation:
        ptr = lib.TF_GraphOperationByName(self._ptr, name.encode())
        if ptr == ffi.NULL:
            raise NotFoundError(f"the graph has no operation named '{name}'")
        return self._wrap(ptr)

    def get_tensor_by_name(self, name: str) -> Output:
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            raise ValueError(f"'{name}' is not a tensor name of the form 'op:index'")
        return self.get_operation_by_name(op_name).output(int(index))

    def as_graph_element(self, obj: Any) -> Union[Output, Operation]:
        """Resolve an Output, Operation, name ("op:0" -> Output, "op" -> Operation),
        or an object with TensorFlow's ``_as_graph_element()`` (a Variable: its value)."""
        convert = getattr(type(obj), "_as_graph_element", None)
        if convert is not None and not isinstance(obj, (Output, Operation, str)):
            el = convert(obj)
            if not isinstance(el, (Output, Operation)):
                raise TypeError(f"{obj!r}._as_graph_element() gave {el!r}, not an Output or Operation")
            obj = el
        if isinstance(obj, (Output, Operation)):
            if obj.graph is not self:
                raise ValueError(f"{obj!r} belongs to another graph")
            return obj
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        raise TypeError(f"cannot interpret {type(obj).__name__} {obj!r} as a graph element "
                        "(Output, Operation, Variable or name)")

    # --- GraphDef -----------------------------------------------------------
    def as_graph_def(self) -> bytes:
        """Serialize the graph (with its function library) to GraphDef bytes."""
        return buffers.filled(lambda buf, s: lib.TF_GraphToGraphDef(self._ptr, buf, s), "exporting GraphDef")

    def import_graph_def(self, graph_def: bytes, prefix: str = "",
                         input_map: Optional[dict] = None,
                         return_elements: Optional[Sequence[str]] = None) -> list:
        """Import a serialized GraphDef into this graph.

        ``input_map`` maps tensor names of the imported graph ("x:0") to Outputs
        of this graph; ``return_elements`` names tensors ("y:0") or operations
        ("train") of the imported graph to return, in order.
        """
        if not isinstance(graph_def, (bytes, bytearray, memoryview)):
            raise TypeError("graph_def must be the serialized GraphDef bytes")
        data = bytes(graph_def)
        opts = ffi.gc(lib.TF_NewImportGraphDefOptions(), lib.TF_DeleteImportGraphDefOptions)
        if prefix:
            lib.TF_ImportGraphDefOptionsSetPrefix(opts, prefix.encode())
        keep = []
        for src, dst in (input_map or {}).items():
            src_op, _, src_index = src.rpartition(":") if ":" in src else (src, "", "0")
            name = ffi.new("char[]", src_op.encode())
            keep.append(name)
            lib.TF_ImportGraphDefOptionsAddInputMapping(opts, name, int(src_index or 0), self.as_graph_element(dst)._c())
        kinds = []
        for el in return_elements or ():
            if ":" in el:
                op_name, _, index = el.rpartition(":")
                name = ffi.new("char[]", op_name.encode())
                keep.append(name)
                lib.TF_ImportGraphDefOptionsAddReturnOutput(opts, name, int(index))
                kinds.append("output")
            else:
                name = ffi.new("char[]", el.encode())
                keep.append(name)
                lib.TF_ImportGraphDefOptionsAddReturnOperation(opts, name)
                kinds.append("op")
        buf = ffi.new("TF_Buffer*")
        raw = ffi.new("char[]", data)
        buf.data, buf.length = raw, len(data)
        s = status()
        with self._lock:
            results = lib.TF_GraphImportGraphDefWithResults(self._ptr, buf, opts, s.ptr)
            check(s, "importing GraphDef")
        results = ffi.gc(results, lib.TF_DeleteImportGraphDefResults)
        n = ffi.new("int*")
        outs = ffi.new("TF_Output**")
        lib.TF_ImportGraphDefResultsReturnOutputs(results, n, outs)
        out_list = [Output(self._wrap(outs[0][i].oper), outs[0][i].index) for i in range(n[0])]
        opers = ffi.new("TF_Operation***")
        lib.TF_ImportGraphDefResultsReturnOperations(results, n, opers)
        op_list = [self._wrap(opers[0][i]) for i in range(n[0])]
        for op in self:  # imported names are taken
            self._names_in_use.setdefault(op.name.lower(), 1)
        ret = []
        for kind in kinds:
            ret.append(out_list.pop(0) if kind == "output" else op_list.pop(0))
        return ret

    # --- construction context ----------------------------------------------
    @contextlib.contextmanager
    def as_default(self):
        """Make this the default graph inside the block (per thread)."""
        _stack().append(self)
        try:
            yield self
        finally:
            _stack().pop()

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """``name`` under the current scope, with "_1", "_2"... if taken (as TensorFlow does)."""
        if self._scope:
            name = f"{self._scope}/{name}"
        key = name.lower()
        with self._lock:
            i = self._names_in_use.get(key, 0)
            if mark_as_used:
                self._names_in_use[key] = i + 1
            if i > 0:
                base = key
                while key in self._names_in_use:
                    key = f"{base}_{i}"
                    i += 1
                if mark_as_used:
                    self._names_in_use[key] = 1
                name = f"{name}_{i - 1}"
        return name

    def get_name_scope(self) -> str:
        return self._scope

    @contextlib.contextmanager
    def name_scope(self, name: Optional[str]):
        """Nest names: ops created inside are named "<scope>/<name>". A name
        ending in "/" re-enters that exact scope; None or "" resets to the root."""
        old = self._scope
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            if not _VALID_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = self.unique_name(name)
        self._scope = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._scope = old

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Optional[Sequence[Any]]):
        """Ops created inside run after ``control_inputs`` (Operations or Outputs).
        ``None`` clears the enclosing blocks' dependencies."""
        if control_inputs is None:
            self._control.append(None)
        else:
            ops = []
            for c in control_inputs:
                el = self.as_graph_element(c)
                op = el.op if isinstance(el, Output) else el
                if op not in ops:
                    ops.append(op)
            self._control.append(_ControlDeps(ops))
        try:
            yield
        finally:
            self._control.pop()

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]):
        """Inside the block, ops of type K take their gradient from the function
        registered for op_type_map[K] (see bridge.RegisterGradient)."""
        saved = dict(self.gradient_overrides)
        self.gradient_overrides.update(op_type_map)
        try:
            yield
        finally:
            self.gradient_overrides = saved

    def _control_inputs_for(self, input_ops: set) -> list[Operation]:
        result: list[Operation] = []
        for block in reversed(self._control):
            if block is None:
                break
            # As TensorFlow: an op fed by an op created inside the block is
            # already ordered after the block's dependencies.
            if any(op in block.created for op in input_ops):
                continue
            result.extend(op for op in block.ops if op not in input_ops and op not in result)
        return result

    # --- creating operations --------------------------------------------------
    def create_op(self, op_type: str, inputs: Sequence[Any] = (), attrs: Optional[dict] = None,
                  name: Optional[str] = None, attr_types: Optional[dict] = None) -> Operation:
        """Add an operation. ``inputs`` holds Outputs, or lists of Outputs for
        list inputs; ``attrs`` maps names to values, typed by ``attr_types``
        (OpDef types such as "int", "list(type)"), else by the op's OpDef,
        else inferred from the value (attributes the OpDef does not declare,
        such as ``_class``)."""
        if name and name.endswith("/"):
            # TensorFlow's convention: a name ending in "/" (a scope name) is
            # used exactly, without the current scope or a "_1" suffix.
            name = name[:-1]
            self._names_in_use.setdefault(name.lower(), 1)
        else:
            name = self.unique_name(name or op_type)
        desc = lib.TF_NewOperation(self._ptr, op_type.encode(), name.encode())
        input_ops: set = set()
        for i, inp in enumerate(inputs):
            if isinstance(inp, (list, tuple)):
                arr = ffi.new("TF_Output[]", len(inp))
                for j, o in enumerate(inp):
                    o = self._check_input(o, op_type, name, f"{i}[{j}]")
                    arr[j].oper, arr[j].index = o.op._ptr, o.index
                    input_ops.add(o.op)
                lib.TF_AddInputList(desc, arr, len(inp))
            else:
                o = self._check_input(inp, op_type, name, str(i))
                lib.TF_AddInput(desc, o._c())
                input_ops.add(o.op)
        for ctrl in self._control_inputs_for(input_ops):
            lib.TF_AddControlInput(desc, ctrl._ptr)
        self._place_new_op(desc, op_type, name, inputs, attrs)
        types = attr_types or {}
        for key, value in (attrs or {}).items():
            if value is None:
                continue
            set_attr(desc, key, types.get(key) or self._attr_type(op_type, key) or infer_attr_type(value), value)
        override = self.gradient_overrides.get(op_type)
        if override and "_gradient_op_type" not in (attrs or {}):
            # As TensorFlow: the override is fixed when the op is created, so
            # gradients taken after the gradient_override_map block still use it.
            set_attr(desc, "_gradient_op_type", "string", override)
        s = status()
        with self._lock:
            ptr = lib.TF_FinishOperation(desc, s.ptr)
        check(s, f"creating operation '{name}' ({op_type})")
        op = self._wrap(ptr)
        for block in self._control:
            if block is not None:
                block.created.add(op)
        return op

    def _attr_type(self, op_type: str, key: str) -> Optional[str]:
        """``key``'s type in ``op_type``'s OpDef, as this graph knows it; None for
        an attribute it does not declare (``_class``, ``_gradient_op_type``)."""
        from .opdef import op_def  # not at import: `import bridge` loads no OpDef machinery
        try:
            return op_def(op_type, self).attr(key).type
        except (KeyError, NotFoundError):
            return None

    def _check_input(self, value: Any, op_type: str, name: str, where: str) -> Output:
        if not isinstance(value, Output):
            raise TypeError(f"{op_type} '{name}': input {where} is {type(value).__name__}, not an Output")
        if value.graph is not self:
            raise InvalidArgumentError(
                f"{op_type} '{name}': input {where} ('{value.name}') belongs to another graph")
        return value


# --- the default graph --------------------------------------------------------

_local = threading.local()
_global_default: Optional[Graph] = None
_global_lock = threading.Lock()


def _stack() -> list:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def get_default_graph() -> Graph:
    """The innermost ``as_default`` graph of this thread, else the global one."""
    s = _stack()
    if s:
        return s[-1]
    global _global_default
    if _global_default is None:
        with _global_lock:
            if _global_default is None:
                _global_default = Graph()
    return _global_default


def reset_default_graph() -> None:
    """Start a fresh global default graph (not allowed inside ``as_default``)."""
    global _global_default
    if _stack():
        raise RuntimeError("reset_default_graph() called inside a Graph.as_default() block")
    _global_default = None


# The package's hooks for this module (bridge/__init__.py; bridge/platform/hooks.py).
from bridge.platform import hooks as _hooks  # noqa: E402
_hooks.imported(__name__)
