"""Where an op's gradient comes from: the Python registry, overrides, and other sources.

An op's gradient comes from, in order:

1. the name an override gives it (the op's ``_gradient_op_type`` attribute,
   set when it was created inside ``gradient_override_map``, or the graph's
   current map), looked up in the registry;
2. the registry under the op's type (:class:`RegisterGradient`,
   :func:`NotDifferentiable`);
3. the gradient sources registered with :func:`add_gradient_source` (calls
   of ``bridge.function`` functions, from :mod:`bridge.grad.function_grad`);
4. TensorFlow's C++ registry (:mod:`bridge.grad.cpp`).
"""
from __future__ import annotations

from typing import Any, Callable, Literal, Optional

from bridge.framework._lib import ffi, lib
from bridge.framework.errors import status
from bridge.framework.graph import Operation

__all__ = ["GradientFunction", "ACCEPTS_NONE", "RegisterGradient", "register_gradient",
           "NotDifferentiable", "no_gradient", "registered", "get_gradient_function",
           "add_gradient_source", "gradient_source", "accepts_indexed_slices", "returns_indexed_slices",
           "register_sparse_passthrough", "sparse_passthrough", "takes_indexed_slices",
           "gives_indexed_slices"]

GradientFunction = Callable[..., Any]
GradientSource = Callable[[Operation], Optional[GradientFunction]]
SourceKind = Literal["python", "none", "cpp"]

# Set on a gradient function that wants None (not zeros) for outputs without gradient.
ACCEPTS_NONE = "_bridge_gradient_accepts_none"

# Set on a gradient function that takes IndexedSlices output gradients as they
# are (TF's Identity, Cast, ReadVariableOp gradients pass them on); any other
# function gets them densified, as TF's ops convert them to tensors.
ACCEPTS_INDEXED_SLICES = "_bridge_gradient_accepts_indexed_slices"
# Set on a gradient function that may return IndexedSlices (TF's gathers').
RETURNS_INDEXED_SLICES = "_bridge_gradient_returns_indexed_slices"

# op type (or override name) -> fn(op, *output_grads) -> input grads; None: not differentiable
_registry: dict[str, Optional[GradientFunction]] = {}

# op type -> the IndexedSlices-aware gradient used instead of TF's C++ one
# where the op's output gradient may arrive as IndexedSlices (Identity, Cast).
_sparse_passthrough: dict[str, GradientFunction] = {}

# Consulted, in order, for op types the registry does not name.
_sources: list[GradientSource] = []

# TF v1 control flow: its gradients need frame bookkeeping the per-op walk cannot do.
_V1_CONTROL_FLOW = frozenset((
    "Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
    "NextIteration", "RefNextIteration", "LoopCond"))


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


def accepts_indexed_slices(fn: GradientFunction) -> GradientFunction:
    """Mark ``fn`` as taking IndexedSlices output gradients as they are."""
    setattr(fn, ACCEPTS_INDEXED_SLICES, True)
    return fn


def returns_indexed_slices(fn: GradientFunction) -> GradientFunction:
    """Mark ``fn`` as a gradient that may return IndexedSlices (a gather's)."""
    setattr(fn, RETURNS_INDEXED_SLICES, True)
    return fn


def takes_indexed_slices(fn: Optional[GradientFunction]) -> bool:
    return bool(getattr(fn, ACCEPTS_INDEXED_SLICES, False))


def gives_indexed_slices(fn: Optional[GradientFunction]) -> bool:
    return bool(getattr(fn, RETURNS_INDEXED_SLICES, False))


def register_sparse_passthrough(op_type: str, fn: GradientFunction) -> None:
    """``fn`` (IndexedSlices-aware) differentiates ``op_type`` ops whose output
    gradient may be IndexedSlices; TF's C++ registry keeps the others."""
    _sparse_passthrough[op_type] = accepts_indexed_slices(fn)


def sparse_passthrough(op_type: str) -> Optional[GradientFunction]:
    return _sparse_passthrough.get(op_type)


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


def registered(op_type: str) -> tuple[bool, Optional[GradientFunction]]:
    """(whether ``op_type`` is in the registry, its function or None)."""
    return op_type in _registry, _registry.get(op_type)


def add_gradient_source(source: GradientSource) -> None:
    """Ask ``source(op)`` for the gradient function of ops the registry does not
    name (after the sources added before it); it returns None to pass."""
    _sources.append(source)


def get_gradient_function(op: Operation) -> Optional[GradientFunction]:
    """The Python gradient function for ``op`` (override, registry, function
    call), or None when its gradient would come from the C++ registry or it
    has none.  Raises LookupError for an override name nothing is registered under."""
    kind, fn = gradient_source(op)
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


def gradient_source(op: Operation) -> tuple[SourceKind, Optional[GradientFunction]]:
    """("python", fn), ("none", None) or ("cpp", None); LookupError when an
    override names nothing registered or ``op`` is TF v1 control flow."""
    override = _override_name(op)
    if override is not None:
        if override not in _registry:
            raise LookupError(
                f"operation '{op.name}' (op type {op.type}) takes its gradient from '{override}' "
                f"(gradient_override_map), but no gradient is registered under that name: "
                f"register one with @bridge.RegisterGradient('{override}')")
        fn = _registry[override]
        return ("none", None) if fn is None else ("python", fn)
    if op.type in _registry:
        fn = _registry[op.type]
        return ("none", None) if fn is None else ("python", fn)
    for source in _sources:
        fn = source(op)
        if fn is not None:
            return "python", fn
    if op.type in _V1_CONTROL_FLOW:
        raise LookupError(
            f"operation '{op.name}' (op type {op.type}) is TensorFlow v1 control flow, whose "
            "gradient the bridge does not build; build loops and conditionals with "
            "bridge.while_loop / bridge.cond instead")
    return "cpp", None


def no_gradient_error(op: Operation, cause: str = "") -> LookupError:
    """The error for an op that neither registry can differentiate."""
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
