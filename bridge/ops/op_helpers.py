"""The small runtime behind the generated op functions (``bridge.ops``).

A generated function describes its op to an :class:`OpBuilder` (inputs with
their type constraints, attribute values) and calls :meth:`OpBuilder.finish`,
which does what TensorFlow's ``op_def_library`` does in Python:

* inputs: Outputs pass through; numpy arrays, Python scalars/lists and
  ``bridge.Tensor`` values become Const ops of the dtype the input needs,
  named ``<op>/<input>`` (``<op>/<input>_<i>`` in list inputs), as TF names them;
* type attributes (``T``), list lengths (``N``) and type lists (``Tin``) are
  inferred from the inputs: an Output decides a type first, then a value
  with a definite dtype (numpy, Tensor), then the attribute's default, then
  the first Python value; so ``add_v2(x, 1)`` makes the 1 of x's dtype;
* everything that can be checked before the C API is (input and list
  counts, dtypes against ``allowed_values``), with errors that name the op;
  attribute values go through :func:`bridge.framework.attrs.convert_attr`, the
  checks ``Graph.create_op`` makes too.
"""
from __future__ import annotations

import collections
from typing import Any, Optional, Sequence

import numpy as np

from bridge.framework import double_attrs, dtypes
from bridge.framework.attrs import convert_attr, short_repr
from bridge.framework.graph import Graph, Operation, Output, get_default_graph
from bridge.framework.indexed_slices import IndexedSlices, convert_to_tensor
from bridge.framework.tensor import Tensor


class _TFDefault:
    """Default of an attribute that the generated code cannot spell as a
    literal: the attribute is left unset and TensorFlow fills in its default."""

    def __repr__(self) -> str:
        return "TF_DEFAULT"

    def __reduce__(self):
        return "TF_DEFAULT"


TF_DEFAULT: Any = _TFDefault()

_INT32 = np.iinfo(np.int32)


def output_dtype(output: Output) -> tuple[dtypes.DType, bool]:
    """(dtype, is_ref) of an Output; reference types (VariableV2's) report their base type."""
    dtype = output.dtype
    base = dtypes.base_dtype(dtype)
    return base, base is not dtype


def natural_dtype(value: Any) -> dtypes.DType:
    """The dtype TensorFlow gives a value converted without a dtype: numpy
    values keep theirs; Python ints are int32 (int64 when they do not fit),
    floats float32, complex numbers complex128, str/bytes string."""
    if isinstance(value, Tensor):
        return value.dtype
    if isinstance(value, (np.ndarray, np.generic)):
        return dtypes.as_dtype(value.dtype)
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind == "b":
        return dtypes.bool
    if kind in "iu":
        if arr.size and (arr.max() > _INT32.max or arr.min() < _INT32.min):
            return dtypes.int64
        return dtypes.int32
    if kind == "f":
        return dtypes.float32
    if kind == "c":
        return dtypes.complex128
    if kind in "SU" or (kind == "O" and all(isinstance(v, (str, bytes)) for v in arr.ravel())):
        return dtypes.string
    raise TypeError(f"cannot convert {value!r} to a tensor")


def _has_definite_dtype(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic, Tensor))


def _variable_output(value: Any, dtype: Optional[dtypes.DType]) -> Optional[Output]:
    """A bridge.Variable as an input: its handle where a resource is wanted, else its value."""
    from bridge.framework.builders import Variable
    if not isinstance(value, Variable):
        return None
    return value.handle if dtype is not None and dtype.name == "resource" else value.value()


class _Input:
    """One input argument as given, before conversion."""

    __slots__ = ("arg", "value", "dtype", "type_attr", "number_attr", "type_list_attr", "is_ref", "is_list")

    def __init__(self, arg, value, dtype, type_attr, number_attr, type_list_attr, is_ref, is_list):
        self.arg, self.value, self.dtype = arg, value, dtype
        self.type_attr, self.number_attr, self.type_list_attr = type_attr, number_attr, type_list_attr
        self.is_ref, self.is_list = is_ref, is_list

    def items(self) -> list:
        return list(self.value) if self.is_list else [self.value]


class OpBuilder:
    """Collects one op's inputs and attributes, then creates it (see module doc)."""

    __slots__ = ("op_type", "name", "_inputs", "_attrs", "_attr_types", "_constraints")

    def __init__(self, op_type: str, name: Optional[str]):
        self.op_type = op_type
        self.name = name
        self._inputs: list[_Input] = []
        self._attrs: dict[str, Any] = {}
        self._attr_types: dict[str, str] = {}
        # inferred attr -> (allowed dtype names or None, default, minimum)
        self._constraints: dict[str, tuple] = {}

    def _error(self, message: str, kind=TypeError) -> Exception:
        return kind(f"{self.op_type}: {message}")

    # --- description, called by the generated code ---------------------------
    def inferred(self, attr: str, allowed: Optional[tuple] = None, default: Any = None,
                 minimum: Optional[int] = None) -> None:
        """Constraints of an attribute that the inputs determine."""
        self._constraints[attr] = (allowed, default, minimum)

    def input(self, arg: str, value: Any, dtype: Optional[str] = None, type_attr: str = "",
              is_ref: bool = False) -> None:
        """A single-tensor input, of fixed ``dtype`` or of the type in ``type_attr``."""
        self._inputs.append(_Input(arg, value, dtype and dtypes.as_dtype(dtype), type_attr, "", "", is_ref, False))

    def list_input(self, arg: str, value: Any, dtype: Optional[str] = None, type_attr: str = "",
                   number_attr: str = "", type_list_attr: str = "", is_ref: bool = False) -> None:
        """A list input: ``number_attr`` tensors of one type, or one per ``type_list_attr`` entry."""
        if isinstance(value, (Output, str, bytes, np.ndarray)) or not isinstance(value, Sequence):
            raise self._error(f"input '{arg}' takes a list of tensors, got {short_repr(value)}")
        self._inputs.append(_Input(arg, value, dtype and dtypes.as_dtype(dtype), type_attr, number_attr,
                                   type_list_attr, is_ref, True))

    def attr(self, attr: str, value: Any, attr_type: str, allowed: Optional[tuple] = None,
             minimum: Optional[int] = None) -> None:
        """An attribute the caller gave (or left at its default)."""
        if value is TF_DEFAULT:
            return
        try:
            value = convert_attr(attr, attr_type, value, allowed, minimum)
        except (TypeError, ValueError) as exc:
            raise self._error(str(exc), type(exc)) from None
        self._attrs[attr] = value
        self._attr_types[attr] = attr_type

    def double_attr(self, attr: str, value: Any) -> None:
        """A float64 attribute the caller gave: TensorFlow's float attribute
        ``attr`` (32 bits) and the int attribute of its bits, which carries it
        exactly (:mod:`bridge.framework.double_attrs`)."""
        if value is TF_DEFAULT:
            return
        try:
            value = convert_attr(attr, "float", value)
        except (TypeError, ValueError) as exc:
            raise self._error(str(exc), type(exc)) from None
        bits = double_attrs.bits_name(attr)
        self._attrs[attr], self._attrs[bits] = double_attrs.encode(value)
        self._attr_types[attr], self._attr_types[bits] = "float", "int"

    def _pack_error(self, inp: _Input) -> Exception:
        return self._error(f"input '{inp.arg}': a list holding Outputs cannot become a constant; "
                           "combine them with bridge.ops.pack first")

    # --- creation ---------------------------------------------------------------
    def finish(self) -> Operation:
        """Convert the inputs, infer the hidden attributes and create the op."""
        graph = self._graph()
        types = self._infer_types()
        for attr, dtype in types.items():
            self._attrs[attr] = dtype
            self._attr_types[attr] = "list(type)" if isinstance(dtype, list) else "type"
        for attr, n in self._list_lengths().items():
            self._attrs[attr] = n
            self._attr_types[attr] = "int"
        name = self.name or self.op_type
        converted = self._convert_inputs(graph, types, name)
        try:
            return graph.create_op(self.op_type, converted, self._attrs, name=name, attr_types=self._attr_types)
        except (TypeError, ValueError) as exc:  # from setting an attribute: say which op
            raise type(exc)(f"{self.op_type}: {exc}") from None

    def finish_outputs(self, *fields: tuple) -> Any:
        """Create the op and package its outputs.  Each field is (name, length
        attr) of one output argument, length attr None for a single tensor:
        one list argument gives a list, several arguments a namedtuple."""
        op = self.finish()
        values, index = [], 0
        for _, length_attr in fields:
            if not length_attr:
                values.append(Output(op, index))
                index += 1
                continue
            n = self._attrs[length_attr]
            n = n if isinstance(n, int) else len(n)
            values.append([Output(op, index + i) for i in range(n)])
            index += n
        if len(fields) == 1:
            return values[0]
        return result_type(self.op_type, tuple(f for f, _ in fields))(*values)

    def _graph(self) -> Graph:
        default = get_default_graph()
        # While a function body is traced, outer tensors are captured by the
        # body's graph (FuncGraph.encloses), so they do not decide the graph.
        encloses = getattr(default, "encloses", None)
        graph = None
        for inp in self._inputs:
            for v in inp.items():
                if isinstance(v, Output):
                    if encloses is not None and encloses(v.graph):
                        continue
                    if graph is None:
                        graph = v.graph
                    elif v.graph is not graph:
                        raise self._error(f"input '{inp.arg}' ('{v.name}') belongs to another graph than "
                                          "the op's other inputs", ValueError)
        return graph if graph is not None else default

    def _minimum(self, attr: str) -> Optional[int]:
        return self._constraints.get(attr, (None, None, None))[2]

    def _list_lengths(self) -> dict[str, int]:
        """Values of the number attributes (``N``): the lengths of their list inputs."""
        lengths: dict[str, int] = {}
        for inp in self._inputs:
            if not inp.number_attr:
                continue
            n = len(inp.value)
            if lengths.setdefault(inp.number_attr, n) != n:
                raise self._error(f"input '{inp.arg}' has {n} tensors, but an earlier input sharing "
                                  f"'{inp.number_attr}' has {lengths[inp.number_attr]}", ValueError)
            minimum = self._minimum(inp.number_attr)
            if minimum is not None and n < minimum:
                raise self._error(f"input '{inp.arg}' needs at least {minimum} tensors, got {n}", ValueError)
        return lengths

    def _infer_types(self) -> dict[str, Any]:
        """Values of the type attributes the inputs determine."""
        out: dict[str, Any] = {}
        by_attr: dict[str, list] = {}
        for inp in self._inputs:
            if inp.type_attr:
                by_attr.setdefault(inp.type_attr, []).extend((inp, v) for v in inp.items())
            elif inp.type_list_attr:
                out[inp.type_list_attr] = [self._item_dtype(inp, v) for v in inp.value]
                minimum = self._minimum(inp.type_list_attr)
                if minimum is not None and len(inp.value) < minimum:
                    raise self._error(f"input '{inp.arg}' needs at least {minimum} tensors, got {len(inp.value)}",
                                      ValueError)
        for attr, items in by_attr.items():
            out[attr] = self._pick_type(attr, items)
        for attr, value in out.items():
            allowed = self._constraints.get(attr, (None,))[0]
            if allowed is None:
                continue
            for dt in value if isinstance(value, list) else [value]:
                if dt.name not in allowed:
                    args = [i.arg for i in self._inputs if attr in (i.type_attr, i.type_list_attr)]
                    raise self._error(f"input '{args[0]}' has type {dt.name}, but {attr} must be one of "
                                      f"{', '.join(allowed)}")
        return out

    def _item_dtype(self, inp: _Input, value: Any) -> dtypes.DType:
        if isinstance(value, Output):
            return output_dtype(value)[0]
        if isinstance(value, IndexedSlices):
            return value.dtype
        var = _variable_output(value, None)
        if var is not None:
            return output_dtype(var)[0]
        if isinstance(value, (list, tuple)) and _holds_output(value):
            raise self._pack_error(inp)
        try:
            return natural_dtype(value)
        except (TypeError, ValueError) as exc:
            raise self._error(f"input '{inp.arg}': {exc}") from None

    def _pick_type(self, attr: str, items: list) -> dtypes.DType:
        for inp, v in items:  # an Output (or Variable, IndexedSlices) decides
            if isinstance(v, (Output, IndexedSlices)) or _variable_output(v, None) is not None:
                return self._item_dtype(inp, v)
        for inp, v in items:  # then a value with its own dtype
            if _has_definite_dtype(v):
                return self._item_dtype(inp, v)
        if not items:
            raise self._error(f"cannot infer attribute '{attr}' from empty input lists")
        allowed, default = self._constraints.get(attr, (None, None, None))[:2]
        inp, v = items[0]
        # TF's _apply_op_helper: Python values take their natural dtype where the
        # attribute allows it, else the attribute's default where they fit it.
        try:
            natural = self._item_dtype(inp, v)
        except (TypeError, ValueError):
            natural = None
        if natural is not None and allowed is not None and natural.name in allowed:
            return natural
        if default is not None:
            default = dtypes.as_dtype(default)
            if all(_fits(v, default) for _, v in items):
                return default
        return natural if natural is not None else self._item_dtype(inp, v)

    def _convert_inputs(self, graph: Graph, types: dict, name: str) -> list:
        """Outputs for every input, creating Const ops (in the op's name scope) for values."""
        needs_const = any(not isinstance(v, Output) for inp in self._inputs for v in inp.items())
        if not needs_const:
            return [self._check_output(inp, inp.value, self._wanted(inp, types, 0)) if not inp.is_list else
                    [self._check_output(inp, v, self._wanted(inp, types, i)) for i, v in enumerate(inp.value)]
                    for inp in self._inputs]
        # TF names converted inputs "<op>/<arg>": the scope is the op's own
        # (not yet taken) name, which create_op then claims for the op.
        # A name ending in "/" is that exact scope (TF's convention), not one under the current scope.
        scope = name[:-1] if name.endswith("/") else graph.unique_name(name, mark_as_used=False)
        result = []
        with graph.name_scope(scope + "/"):
            for inp in self._inputs:
                if not inp.is_list:
                    result.append(self._convert(graph, inp, inp.value, self._wanted(inp, types, 0), inp.arg))
                else:
                    result.append([self._convert(graph, inp, v, self._wanted(inp, types, i), f"{inp.arg}_{i}")
                                   for i, v in enumerate(inp.value)])
        return result

    @staticmethod
    def _wanted(inp: _Input, types: dict, index: int) -> Optional[dtypes.DType]:
        if inp.dtype is not None:
            return inp.dtype
        if inp.type_attr:
            return types[inp.type_attr]
        if inp.type_list_attr:
            return types[inp.type_list_attr][index]
        return None

    def _check_output(self, inp: _Input, value: Output, wanted: Optional[dtypes.DType]) -> Output:
        dtype, is_ref = output_dtype(value)
        if inp.is_ref and not is_ref:
            raise self._error(f"input '{inp.arg}' needs a reference tensor (such as a VariableV2 output); "
                              f"'{value.name}' is a plain {dtype.name} tensor")
        if wanted is not None and dtype != wanted:
            raise self._error(f"input '{inp.arg}' must be {wanted.name}, but '{value.name}' is {dtype.name}")
        return value

    def _convert(self, graph: Graph, inp: _Input, value: Any, wanted: Optional[dtypes.DType],
                 const_name: str) -> Output:
        if isinstance(value, Output):
            return self._check_output(inp, value, wanted)
        if isinstance(value, IndexedSlices):  # TF's convert_to_tensor: densified
            return self._check_output(inp, convert_to_tensor(value), wanted)
        var = _variable_output(value, wanted)
        if var is not None:
            return self._check_output(inp, var, wanted)
        if inp.is_ref:
            raise self._error(f"input '{inp.arg}' needs a reference tensor (such as a VariableV2 output), "
                              f"got {short_repr(value)}")
        if isinstance(value, (list, tuple)) and _holds_output(value):
            raise self._pack_error(inp)
        from bridge.framework.builders import constant
        try:
            return constant(value, wanted, name=const_name, graph=graph)
        except (TypeError, ValueError) as exc:
            target = wanted.name if wanted is not None else "a tensor"
            raise self._error(f"input '{inp.arg}': cannot convert {short_repr(value)} to {target} ({exc})") from None


def _holds_output(value: Any) -> bool:
    return any(isinstance(v, Output) or (isinstance(v, (list, tuple)) and _holds_output(v)) for v in value)


def _fits(value: Any, dtype: dtypes.DType) -> bool:
    """Whether a Python value may take ``dtype`` instead of its natural one, as
    TensorFlow's preferred dtype allows: ints widen to any number type that
    holds them, floats to float or complex types; nothing else converts."""
    try:
        natural = natural_dtype(value)
    except (TypeError, ValueError):
        return False
    if natural == dtype:
        return True
    wanted = dtype.as_numpy_dtype
    if wanted is None or dtype.name in ("string", "bool"):
        return False
    if natural.is_integer:
        if dtype.is_integer:
            arr = np.asarray(value)
            info = np.iinfo(wanted)
            return bool(arr.size == 0 or (arr.min() >= info.min and arr.max() <= info.max))
        return dtype.is_floating or dtype.is_complex
    if natural.is_floating:
        return dtype.is_floating or dtype.is_complex
    return natural.is_complex and dtype.is_complex


_result_types: dict[tuple, type] = {}


def result_type(op_type: str, fields: tuple) -> type:
    """The namedtuple type of an op's outputs (made on first use: ~40 us each)."""
    key = (op_type, fields)
    cls = _result_types.get(key)
    if cls is None:
        cls = _result_types[key] = collections.namedtuple(op_type, fields)
    return cls
