"""Differentiable control flow: ``cond`` and ``while_loop``.

Both build TensorFlow's *functional* ops, ``If`` and ``While``, whose
branches, condition and body are functions traced from Python (see
:mod:`bridge.framework.functions`).  Their gradients are registered in
:mod:`bridge.grad.control_flow_grad`.

Why not ``TF_NewWhile``: the C API's while loop is TF v1 control flow
(Enter/Merge/Switch/Exit frames) and its C++ gradient only differentiates
loop bodies whose ops have C++ gradients, without saving per-iteration
values: a body as simple as ``x * x`` gets a wrong gradient or aborts the
process (a CHECK failure in ``gradients.cc``).  Functional ops need neither:

* ``cond``: the gradient of ``If(pred, inputs)`` is another ``If`` on the same
  predicate whose branches are the gradient functions of the two branches
  (each recomputes its branch and differentiates it; an input only one
  branch uses gets zeros from the other).
* ``while_loop``: the forward ``While`` carries, besides the loop variables, an
  iteration counter, the tensors the body captures, and (with
  ``back_prop=True``, the default) one TensorList per loop variable onto
  which each iteration pushes the values it starts from.  The gradient is a
  second ``While`` running the counter down: each step pops those values,
  recomputes the body's vector-Jacobian product at them (the gradient
  function of the body, a function call) and adds up the captured tensors'
  gradients.  Julia ops, functions and conds in the body differentiate
  like anywhere else.  A loop built with ``back_prop=False`` keeps no
  TensorLists; its gradient reruns it once with them.  The backward loop is
  itself a ``while_loop``, so loops have second derivatives too.

The same gradients serve the ``If``/``Case``/``While`` ops of a GraphDef stock TF
wrote: their functions, found in the graph's library, are rebuilt from their
FunctionDefs (:func:`bridge.framework.function_def_to_graph.library_function`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import dtypes
from .attrs import Shape, as_shape
from .func_graph import TracedFunction
from .functions import Trace, trace_graph
from .nest import flatten, pack_as
from .tensor_spec import TensorSpec
from .graph import Operation, Output, get_default_graph

__all__ = ["cond", "while_loop"]

#: How many steps of a loop may run at once unless told: TF's default
#: ``parallel_iterations`` (``tf.while_loop``'s), also taken for a While whose
#: GraphDef lacks the attribute.
PARALLEL_ITERATIONS = 10


def _op(op_type: str, inputs: Sequence[Any], attrs: Optional[dict] = None,
        attr_types: Optional[dict] = None, name: Optional[str] = None) -> Operation:
    return get_default_graph().create_op(op_type, list(inputs), attrs=attrs, attr_types=attr_types, name=name)


def _const(value: Any, dtype: Any, name: str = "Const") -> Output:
    from .builders import constant
    return constant(np.asarray(value, dtype=dtypes.as_dtype(dtype).as_numpy_dtype), dtype, name=name)


def _as_output(value: Any, what: str) -> Output:
    from .builders import Variable, constant
    if isinstance(value, Output):
        return value
    if isinstance(value, Variable):
        return value.value()
    try:
        return constant(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: cannot use {value!r} as a tensor ({exc})") from None


def _most_specific_common(a: Shape, b: Shape) -> Shape:
    if a.unknown_rank or b.unknown_rank or len(a) != len(b):
        return Shape.unknown()
    return Shape(x if x == y else None for x, y in zip(a, b))


def _shape_compatible(inner: Shape, outer: Shape) -> bool:
    """Whether a value of shape ``inner`` fits the invariant ``outer``."""
    if outer.unknown_rank:
        return True
    if inner.unknown_rank or len(inner) != len(outer):
        return False
    return all(o is None or i == o for i, o in zip(inner, outer))


# --- cond ---------------------------------------------------------------------------

def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str = "cond") -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()``, decided when the graph runs.

    ``pred`` is a scalar bool Output (a Python bool just calls one branch
    now).  Both branches take no arguments, may use any tensor of the
    enclosing graphs, and must return the same structure of tensors with the
    same dtypes.  Builds one ``If`` op; differentiable in both branches.
    """
    if isinstance(pred, (bool, np.bool_)):
        return true_fn() if pred else false_fn()
    graph = get_default_graph()
    pred = _as_output(pred, "cond: pred")
    if pred.dtype != dtypes.bool:
        raise TypeError(f"cond: pred must be a bool tensor, '{pred.name}' is {pred.dtype.name}")
    if not pred.shape.unknown_rank and len(pred.shape) != 0:
        raise ValueError(f"cond: pred must be a scalar, '{pred.name}' has shape {pred.shape!r}")
    with graph.name_scope(name):
        then_t = trace_graph(true_fn, [], f"{name}_true", graph)
        else_t = trace_graph(false_fn, [], f"{name}_false", graph)
        _check_same_outputs(then_t, else_t)
        captured = list(dict.fromkeys(list(then_t.graph.captures) + list(else_t.graph.captures)))
        then_f, else_f = then_t.finish(captured), else_t.finish(captured)
        shapes = [_most_specific_common(a.shape, b.shape) for a, b in zip(then_f.outputs, else_f.outputs)]
        op = make_if(pred, captured, then_f, else_f, shapes, name="If")
    values = iter(op.outputs)
    leaves = [None if leaf is None else next(values) for leaf in flatten(then_t.structure)]
    if not op.outputs:
        return op
    return pack_as(then_t.structure, leaves)


def _same_structure(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` nest alike: dicts with the same keys, sequences of the
    same length (a list and a tuple alike), leaves where leaves are."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)
                and all(_same_structure(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)
                and all(_same_structure(x, y) for x, y in zip(a, b)))
    return True


def _check_same_outputs(a: Trace, b: Trace) -> None:
    la, lb = flatten(a.structure), flatten(b.structure)
    if (len(la) != len(lb) or [x is None for x in la] != [x is None for x in lb]
            or not _same_structure(a.structure, b.structure)):
        raise ValueError(f"cond: the branches return different structures: {a.structure!r} and {b.structure!r}")
    for i, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        if x.dtype != y.dtype:
            raise TypeError(f"cond: output {i} is {x.dtype.name} in true_fn but {y.dtype.name} in false_fn")


def make_if(pred: Output, inputs: Sequence[Output], then_f: TracedFunction, else_f: TracedFunction,
            shapes: Sequence[Shape], name: str) -> Operation:
    """An ``If`` op on ``pred`` calling ``then_f`` or ``else_f`` with ``inputs``."""
    graph = get_default_graph()
    then_f.add_to(graph)
    else_f.add_to(graph)
    attrs = {"Tcond": dtypes.bool, "Tin": [t.dtype for t in inputs], "Tout": [t.dtype for t in then_f.outputs],
             "then_branch": then_f.name, "else_branch": else_f.name, "output_shapes": list(shapes)}
    op = graph.create_op("If", [pred, list(inputs)], attrs=attrs, name=name)
    for out, shape in zip(op.outputs, shapes):
        if not shape.unknown_rank:
            out.set_shape(shape)
    return op


# --- while_loop -------------------------------------------------------------------------

class WhileInfo:
    """What the gradient of a bridge While needs: the traced user cond/body
    (taking loop variables then captures) and the loop's layout: inputs and
    outputs are [counter, loop variables, captures, TensorLists]."""

    def __init__(self, user_cond: TracedFunction, user_body: TracedFunction, num_vars: int,
                 num_captures: int, shapes: list[Shape], maximum_iterations: Any, accumulate: bool,
                 parallel_iterations: int):
        self.user_cond, self.user_body = user_cond, user_body
        self.num_vars, self.num_captures = num_vars, num_captures
        self.shapes = shapes
        self.maximum_iterations = maximum_iterations
        self.accumulate = accumulate
        self.parallel_iterations = parallel_iterations


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any,
               shape_invariants: Any = None, maximum_iterations: Any = None, back_prop: bool = True,
               parallel_iterations: int = PARALLEL_ITERATIONS, name: str = "while") -> Any:
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)``.

    ``loop_vars`` is a (nested) list or tuple of tensors (or one tensor);
    ``body`` returns the same structure with the same dtypes, and shapes
    that fit ``shape_invariants`` (default: the initial shapes).  Both may use
    any tensor of the enclosing graphs.  ``maximum_iterations`` caps the
    iteration count.  ``back_prop=True`` keeps each iteration's starting
    values for the gradient; with False the gradient recomputes the loop.
    """
    graph = get_default_graph()
    single = not isinstance(loop_vars, (list, tuple))
    structure = [loop_vars] if single else loop_vars
    init = [_as_output(v, "while_loop: loop_vars") for v in flatten(structure)]
    if shape_invariants is None:
        shapes = [v.shape for v in init]
    else:
        given = _flatten_up_to(structure, [shape_invariants] if single else shape_invariants)
        shapes = [as_shape(s) for s in given]
    for i, (v, s) in enumerate(zip(init, shapes)):
        if not _shape_compatible(v.shape, s):
            raise ValueError(f"while_loop: loop variable {i} has shape {v.shape!r}, outside its invariant {s!r}")
    specs = [TensorSpec(s, v.dtype, name=f"loop_var{i}") for i, (v, s) in enumerate(zip(init, shapes))]

    def unpack(args):
        packed = pack_as(structure, list(args))
        return [packed[0]] if single else list(packed)

    with graph.name_scope(name):
        body_t = trace_graph(lambda *a: body(*unpack(a)), init, f"{name}_body", graph, specs)
        cond_t = trace_graph(lambda *a: cond(*unpack(a)), init, f"{name}_cond", graph, specs)
        _check_body(body_t, init, shapes, structure, single)
        if len(cond_t.outputs) != 1 or cond_t.outputs[0].dtype != dtypes.bool:
            raise TypeError("while_loop: cond must return one scalar bool tensor")
        max_iter = maximum_iterations
        extra = []
        if max_iter is not None and isinstance(max_iter, Output):
            extra = [max_iter]
        captured = list(dict.fromkeys(list(body_t.graph.captures) + list(cond_t.graph.captures) + extra))
        info = WhileInfo(cond_t.finish(captured), body_t.finish(captured), len(init), len(captured), shapes,
                         max_iter, back_prop, parallel_iterations)
        op = make_while(info, init, captured, info.accumulate)
    outputs = op.outputs[1:1 + len(init)]
    result = pack_as(structure, outputs)
    return result[0] if single else result


def _flatten_up_to(structure: Any, value: Any) -> list:
    """Leaves of ``value`` where ``structure`` has leaves (a shape there is one leaf)."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure, key=repr) for leaf in _flatten_up_to(structure[k], value[k])]
    if isinstance(structure, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(structure):
            raise ValueError(f"while_loop: shape_invariants {value!r} do not match loop_vars {structure!r}")
        return [leaf for s, v in zip(structure, value) for leaf in _flatten_up_to(s, v)]
    return [value]


def _check_body(body_t: Trace, init: list[Output], shapes: list[Shape], structure: Any, single: bool) -> None:
    outs = body_t.outputs
    if len(flatten(body_t.structure)) != len(init) or len(outs) != len(init):
        raise ValueError(f"while_loop: body returns {len(outs)} tensors for {len(init)} loop variables")
    # One loop variable may come back alone or in a 1-list, whatever loop_vars was (as in TF).
    returned = body_t.structure if isinstance(body_t.structure, (list, tuple)) else [body_t.structure]
    if not _same_structure(structure, returned):
        raise ValueError(f"while_loop: body returns {body_t.structure!r}, not the structure of loop_vars "
                         f"{structure[0] if single else structure!r}")
    for i, (o, v, s) in enumerate(zip(outs, init, shapes)):
        if o.dtype != v.dtype:
            raise TypeError(f"while_loop: body returns {o.dtype.name} for loop variable {i}, which is {v.dtype.name}")
        if not _shape_compatible(o.shape, s):
            raise ValueError(f"while_loop: body returns shape {o.shape!r} for loop variable {i}, outside its "
                             f"shape invariant {s!r}; pass shape_invariants with None for changing dims")


def _loop_functions(info: WhileInfo, accumulate: bool) -> tuple[TracedFunction, TracedFunction]:
    """The While's cond and body functions over [counter, vars, captures, TensorLists]."""
    from .func_graph import FuncGraph
    var_dtypes = [t.dtype for t in info.user_body.inputs[:info.num_vars]]
    cap_inputs = info.user_body.inputs[info.num_vars:]
    made = []
    for kind in ("cond", "body"):
        fg = FuncGraph(f"{kind}_{'acc' if accumulate else 'noacc'}")
        with fg.as_default():
            counter = fg.add_input(dtypes.int32, [], name="counter")
            vs = [fg.add_input(d, s, name=f"var{i}") for i, (d, s) in enumerate(zip(var_dtypes, info.shapes))]
            caps = [fg.add_input(c.dtype, c.shape, name=f"capture{i}") for i, c in enumerate(cap_inputs)]
            accs = [fg.add_input(dtypes.variant, [], name=f"acc{i}") for i in range(len(vs))] if accumulate else []
            inputs = [counter] + vs + caps + accs
            if kind == "cond":
                pred = info.user_cond.inline(vs + caps, name="cond")[0]
                limit = info.maximum_iterations
                if limit is not None:
                    if isinstance(limit, Output):
                        limit = caps[info.user_body.captured.index(limit)]
                        if limit.dtype != dtypes.int32:
                            limit = _op("Cast", [limit], {"DstT": dtypes.int32}).output(0)
                    else:
                        limit = _const(int(limit), dtypes.int32, name="maximum_iterations")
                    pred = _op("LogicalAnd", [pred, _op("Less", [counter, limit]).output(0)]).output(0)
                outputs = [pred]
            else:
                new_vs = info.user_body.inline(vs + caps, name="body")
                step = _op("AddV2", [counter, _const(1, dtypes.int32, name="one")]).output(0)
                same_caps = [_op("Identity", [c]).output(0) for c in caps]
                pushed = [_op("TensorListPushBack", [a, v], {"element_dtype": v.dtype}).output(0)
                          for a, v in zip(accs, vs)]
                outputs = [step] + new_vs + same_caps + pushed
        # The layout is part of the description, hence of the function's name (a hash):
        # loops whose bodies match but whose shape invariants differ stay apart.
        layout = ", ".join(repr(list(sh)) if not sh.unknown_rank else "?" for sh in info.shapes)
        made.append(TracedFunction(fg, inputs, outputs, description=f"while_loop {kind}, loop variables [{layout}]"))
    cond_f, body_f = made
    body_f.while_info = info  # type: ignore[attr-defined]
    return cond_f, body_f


def _empty_list(dtype: dtypes.DType) -> Output:
    return _op("EmptyTensorList", [_const(-1, dtypes.int32, name="element_shape"),
                                   _const(-1, dtypes.int32, name="max_num_elements")],
               {"element_dtype": dtype}).output(0)


def make_while(info: WhileInfo, init: Sequence[Output], captured: Sequence[Output],
               accumulate: bool) -> Operation:
    """The ``While`` op of ``info``'s loop; ``accumulate`` keeps each step's values in TensorLists."""
    graph = get_default_graph()
    cond_f, body_f = _loop_functions(info, accumulate)
    cond_f.add_to(graph)
    body_f.add_to(graph)
    counter = _const(0, dtypes.int32, name="counter")
    accs = [_empty_list(v.dtype) for v in init] if accumulate else []
    inputs = [counter] + list(init) + list(captured) + accs
    shapes = [Shape(())] + list(info.shapes) + [c.shape for c in captured] + [Shape(())] * len(accs)
    attrs = {"T": [t.dtype for t in inputs], "cond": cond_f.name, "body": body_f.name,
             "output_shapes": shapes, "parallel_iterations": int(info.parallel_iterations)}
    op = graph.create_op("While", [inputs], attrs=attrs, name="While")
    for out, shape in zip(op.outputs, shapes):
        if not shape.unknown_rank:
            out.set_shape(shape)
    return op
