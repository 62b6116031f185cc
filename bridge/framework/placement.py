"""Where a graph's ops run: device scopes, device functions and colocation
(TF's ``device`` blocks, ``colocate_with`` and ``_class = loc:@op``), as the
:class:`Placement` part of :class:`bridge.framework.graph.Graph`.

An op made by ``Graph.create_op`` gets its device and colocation as it is
created (:meth:`Placement._place_new_op`); ops TensorFlow's C++ gradient
builder adds (bridge/grad/cpp.py) are placed after the fact
(:meth:`Placement._place_ops_since`), device functions then seeing them as
Operations rather than as :class:`PendingOperation`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional, Sequence, Union

from . import _proto as pb
from ._lib import ffi, lib
from .attrs import set_attr
from .device import device_fields, device_string
from .errors import InvalidArgumentError, NotFoundError, check, status
from .operation import Operation, Output
from .proto_fields import AttrValue

__all__ = ["PendingOperation", "Placement"]


class PendingOperation:
    """An op as a device function sees it while it is being created (TF's
    device functions get the Operation; the C API needs the device before the
    op exists): ``type``, ``name``, ``device`` (what inner device blocks gave
    so far), ``inputs`` (Outputs), ``get_attr(name)`` (the value given to the
    builder) and ``graph``."""

    __slots__ = ("graph", "type", "name", "device", "_inputs", "_attrs")

    def __init__(self, graph: Any, op_type: str, name: str, inputs: Sequence[Any], attrs: Optional[dict]):
        self.graph, self.type, self.name, self.device = graph, op_type, name, ""
        self._inputs, self._attrs = inputs, attrs or {}

    @property
    def inputs(self) -> list:
        out = []
        for i in self._inputs:
            out.extend(i if isinstance(i, (list, tuple)) else [i])
        return out

    def get_attr(self, name: str) -> Any:
        if name not in self._attrs or self._attrs[name] is None:
            raise ValueError(f"operation '{self.name}' ({self.type}) was given no attribute '{name}'")
        return self._attrs[name]

    def __repr__(self) -> str:
        return f"<bridge.PendingOperation '{self.name}' type={self.type}>"


class Placement:
    """A graph's device and colocation stacks (mixed into Graph, which calls
    ``_init_placement`` and provides ``_ptr``, ``_wrap`` and ``as_graph_element``)."""

    def _init_placement(self) -> None:
        self._devices: list[Any] = []     # device strings and device functions; None clears the outer ones
        self._colocate: list[Operation] = []

    @contextlib.contextmanager
    def device(self, device: Union[str, Callable[[Any], Optional[str]], None]):
        """Place ops created inside on ``device`` (e.g. "/cpu:0"); None clears it.
        Nested blocks merge field by field, the inner one winning (as TensorFlow).

        ``device`` may also be a *device function*, as in TensorFlow: called
        with each op created inside (innermost block first), it returns the
        op's device string, which replaces what inner blocks gave; the op it
        sees has ``type``, ``name``, ``device`` (so far), ``inputs``,
        ``get_attr`` and ``graph`` (:class:`PendingOperation`: the C API
        places an op before it exists).  Ops TensorFlow's C++ gradient
        builder adds are given the same way, then as Operations."""
        if device is not None and not callable(device):
            if hasattr(device, "to_string"):  # a DeviceSpec-like object
                device = device.to_string()
            device_fields(device)  # a bad spec fails here, not at the first op
        self._devices.append(device)
        try:
            yield
        finally:
            self._devices.pop()

    @contextlib.contextmanager
    def colocate_with(self, op: Union[Operation, Output]):
        """Place ops created inside with ``op`` (TensorFlow's ``_class`` = ``loc:@op``);
        with a Variable, its handle's op (as TensorFlow's ``_op_to_colocate_with``)."""
        handle = getattr(op, "handle", None)
        el = self.as_graph_element(handle if isinstance(handle, Output) else op)
        self._colocate.append(el.op if isinstance(el, Output) else el)
        # As TensorFlow: colocation is stronger than the enclosing device scopes.
        saved_devices, self._devices = self._devices, []
        try:
            yield
        finally:
            self._devices = saved_devices
            self._colocate.pop()

    def _current_device(self, op: Any = None) -> str:
        """The device of an op created now; ``op`` (an Operation, or a
        PendingOperation) is what device functions on the stack are given."""
        merged = (None,) * 5
        for d in reversed(self._devices):
            if d is None:
                break
            if callable(d):
                if op is None:
                    continue
                so_far = device_string(merged)
                if isinstance(op, PendingOperation):
                    op.device = so_far
                elif op.device != so_far:
                    self._set_requested_device(op, so_far)
                chosen = d(op)
                if hasattr(chosen, "to_string"):
                    chosen = chosen.to_string()
                merged = device_fields(chosen or "")
                continue
            merged = tuple(m if m is not None else f for m, f in zip(merged, device_fields(d)))
        return device_string(merged)

    def _set_requested_device(self, op: "Operation", device: str) -> None:
        lib.TF_SetRequestedDevice(self._ptr, op._ptr, device.encode())

    # --- ops created outside create_op (TF's C++ gradient builder) -------------
    def _placement_active(self) -> bool:
        """Whether ops created now get a device or a colocation (a device
        scope, a device function or a colocate_with block is open)."""
        return bool(self._colocate) or any(d is not None for d in self._devices)

    def _end_position(self) -> int:
        """TF_GraphNextOperation's position past the last op (ops created
        later are found from it: node ids only grow)."""
        pos = ffi.new("size_t*", getattr(self, "_scan_end", 0))
        while lib.TF_GraphNextOperation(self._ptr, pos) != ffi.NULL:
            pass
        # At the end pos is the id the next op gets, and TF_GraphNextOperation
        # steps past pos before it looks: one back.
        self._scan_end = pos[0] - 1
        return self._scan_end

    def _place_ops_since(self, position: int) -> list["Operation"]:
        """Give the ops created since ``position`` outside create_op the device
        and colocation create_op would have given them; returns them."""
        pos = ffi.new("size_t*", position)
        created = []
        while True:
            ptr = lib.TF_GraphNextOperation(self._ptr, pos)
            if ptr == ffi.NULL:
                break
            created.append(self._wrap(ptr))
        self._scan_end = pos[0] - 1
        groups = self._colocation_groups() if self._colocate else None
        for op in created:
            if op.device:
                continue
            device = self._current_device(op)
            if groups:
                value = pb.field_bytes(AttrValue.list, b"".join(pb.field_bytes(AttrValue.ListValue.s, g)
                                                                for g in groups))
                buf = lib.TF_NewBufferFromString(value, len(value))
                s = status()
                try:
                    lib.TF_SetAttr(self._ptr, op._ptr, b"_class", buf, s.ptr)
                finally:
                    lib.TF_DeleteBuffer(buf)
                check(s, f"colocating '{op.name}'")
                device = next((c.device for c in reversed(self._colocate) if c.device), device)
            if device and device != op.device:
                self._set_requested_device(op, device)
        return created

    def _has_device_functions(self) -> bool:
        for d in reversed(self._devices):
            if d is None:
                return False
            if callable(d):
                return True
        return False

    def _colocation_groups(self) -> list[str]:
        """TensorFlow's ``_class`` value: the groups of every op colocated with."""
        groups: set = set()
        for op in self._colocate:
            try:
                own = [g for g in op.get_attr("_class") if g.startswith(b"loc:@")]
            except (InvalidArgumentError, NotFoundError):
                own = []
            if own:
                groups.update(g.decode() for g in own)
            else:
                groups.add(f"loc:@{op.name}")
        return sorted(groups)

    def _place_new_op(self, desc: Any, op_type: str, name: str, inputs: Sequence[Any],
                      attrs: Optional[dict]) -> None:
        """Give the op being made (``desc``, a TF_OperationDescription) its device and colocation."""
        device = self._current_device(
            PendingOperation(self, op_type, name, inputs, attrs) if self._has_device_functions() else None)
        if self._colocate:
            set_attr(desc, "_class", "list(string)", self._colocation_groups())
            # The innermost colocated op with a device overrides device scopes.
            device = next((op.device for op in reversed(self._colocate) if op.device), device)
        if device:
            lib.TF_SetDevice(desc, device.encode())
