"""Gradients of ``If``, ``Case`` and ``While`` (from ``bridge.cond``/``bridge.while_loop``,
or imported from a GraphDef stock TF wrote) and of the TensorLists a loop keeps for them.

The module docstring of :mod:`bridge.framework.control_flow` tells how they work.  An
imported op's branches and bodies come from the graph's library (``lookup`` rebuilds
them from their FunctionDefs); an imported ``While`` (TF's while_v2 layout: counter,
maximum iterations, variables, captures) kept nothing for its gradient, which reruns it
keeping each step.  As in TF's while_v2, the inputs its body passes on unchanged (maximum
iterations, captured tensors, variable handles) are loop invariants: they are taken as
captures, never kept per step (no TensorList holds resources), and a handle the body reads
gets the summed gradients of its reads, as a captured float gets its gradients summed.
"""
from __future__ import annotations

import weakref
from typing import Optional, Sequence

from bridge.framework import dtypes
from bridge.framework.attrs import Shape
from bridge.framework.control_flow import PARALLEL_ITERATIONS, WhileInfo, make_if, make_while, while_loop
from bridge.framework.errors import InvalidArgumentError
from bridge.framework.func_graph import FuncGraph, TracedFunction
from bridge.framework.functions import lookup
from bridge.framework.graph import Operation, Output
from ._helpers import _const, _node, _op, is_differentiable
from .function_grad import vjp
from .registry import ACCEPTS_NONE, NotDifferentiable, RegisterGradient


def _branch(op: Operation, attr: str) -> TracedFunction:
    name = op.get_attr(attr)
    f = lookup(op.graph, name)
    if f is None:
        raise LookupError(f"operation '{op.name}' ({op.type}) has branch function '{name}', which the "
                          "bridge did not trace (a graph imported from a GraphDef?), so it has no gradient")
    return f


def _if_grad(op: Operation, *grads: Optional[Output]) -> list[Optional[Output]]:
    n = op.num_inputs
    out_mask = tuple(g is not None for g in grads)
    if not any(out_mask):
        return [None] * n
    then_f, else_f = _branch(op, "then_branch"), _branch(op, "else_branch")
    then_g, then_mask = vjp(then_f, out_mask)
    else_g, else_mask = vjp(else_f, out_mask)
    union = tuple(a or b for a, b in zip(then_mask, else_mask))
    if not any(union):
        return [None] * n
    if then_mask != union:
        then_g, _ = vjp(then_f, out_mask, wrt=union)
    if else_mask != union:
        else_g, _ = vjp(else_f, out_mask, wrt=union)
    pred, inputs = op.inputs[0], op.inputs[1:]
    args = inputs + [g for g in grads if g is not None]
    shapes = [t.shape for t, m in zip(inputs, union) if m]
    grad_if = make_if(pred, args, then_g, else_g, shapes, name="If")
    outs = iter(grad_if.outputs)
    return [None] + [next(outs) if m else None for m in union]


setattr(_if_grad, ACCEPTS_NONE, True)
RegisterGradient("If")(_if_grad)
RegisterGradient("StatelessIf")(_if_grad)


def _case_grad(op: Operation, *grads: Optional[Output]) -> list[Optional[Output]]:
    """A Case on the same index over the branches' gradient functions (TF's cond_v2._CaseGrad)."""
    n = op.num_inputs
    out_mask = tuple(g is not None for g in grads)
    if not any(out_mask):
        return [None] * n
    names = op.get_attr("branches")
    branches = []
    for name in names:
        f = lookup(op.graph, name)
        if f is None:
            raise LookupError(f"operation '{op.name}' ({op.type}) has branch function '{name}', which the "
                              "bridge did not trace (a graph imported from a GraphDef?), so it has no gradient")
        branches.append(f)
    masks = [vjp(f, out_mask)[1] for f in branches]
    union = tuple(any(m[i] for m in masks) for i in range(n - 1))
    if not any(union):
        return [None] * n
    # Every branch's gradient returns the union's inputs (zeros for ones it does not use).
    grad_fs = [vjp(f, out_mask, wrt=union)[0] for f in branches]
    graph = op.graph
    for f in grad_fs:
        f.add_to(graph)
    index, inputs = op.inputs[0], op.inputs[1:]
    args = inputs + [g for g in grads if g is not None]
    outs = grad_fs[0].outputs
    attrs = {"Tin": [t.dtype for t in args], "Tout": [t.dtype for t in outs],
             "branches": [f.name for f in grad_fs], "output_shapes": [t.shape for t, m in zip(inputs, union) if m]}
    grad_case = _node(op.type, [index, args], attrs, name=op.type)
    results = iter(grad_case.outputs)
    return [None] + [next(results) if m else None for m in union]


setattr(_case_grad, ACCEPTS_NONE, True)
RegisterGradient("Case")(_case_grad)
RegisterGradient("StatelessCase")(_case_grad)


def _while_grad(op: Operation, *grads: Optional[Output]) -> list[Optional[Output]]:
    n = op.num_inputs
    if all(g is None for g in grads):
        return [None] * n
    body_f = lookup(op.graph, op.get_attr("body"))
    info: Optional[WhileInfo] = getattr(body_f, "while_info", None)
    imported = info is None
    if imported:
        # A loop the bridge did not build (TF's while_v2, from a GraphDef): it kept nothing for
        # the gradient.  Its inputs the body passes on unchanged (maximum iterations, variable
        # handles, captured tensors) become captures; the others are its loop variables.
        info, var_pos, inv_pos = _imported_while_info(op, body_f)
        init, caps = [op.inputs[i] for i in var_pos], [op.inputs[i] for i in inv_pos]
        g_vars, g_caps, g_accs = [grads[i] for i in var_pos], [grads[i] for i in inv_pos], []
    nv, nc = info.num_vars, info.num_captures
    if not imported:
        inputs = op.inputs
        var_pos = list(range(1, 1 + nv))
        init, caps = inputs[1:1 + nv], inputs[1 + nv:1 + nv + nc]
        g_vars, g_caps, g_accs = grads[1:1 + nv], grads[1 + nv:1 + nv + nc], grads[1 + nv + nc:]
    _refuse_resource_variables(op, init, var_pos, imported)

    forward = op
    if not info.accumulate:
        # Nothing was kept: run the loop again, this time keeping each step's values.
        forward = make_while(info, init, caps, accumulate=True)
    outs = forward.outputs
    count, accs = outs[0], outs[1 + nv + nc:]

    var_mask = [is_differentiable(v.dtype) for v in init]
    cap_mask = _capture_mask(info.user_body, var_mask, caps)
    carry_accs = any(g is not None for g in g_accs)
    body_vjp, _ = vjp(info.user_body, var_mask, wrt=var_mask + cap_mask)
    n_gv, n_gc = sum(var_mask), sum(cap_mask)
    start = [g if g is not None else _zeros(o) for g, o, m in zip(g_vars, outs[1:1 + nv], var_mask) if m]
    cap_grads = iter(body_vjp.outputs[n_gv:])  # the body's gradients of the masked captures, in order
    for g, c, m in zip(g_caps, caps, cap_mask):
        if m:
            dtype = next(cap_grads).dtype
            start.append(g if g is not None else _zeros(c, dtype))
    if carry_accs:
        start += [g if g is not None else _zeros(a) for g, a in zip(g_accs, accs)]
    var_dtypes = [v.dtype for v in init]

    def bw_cond(k, *rest):
        return _op("Greater", [k, _const(0, dtypes.int32, name="zero")])

    def bw_body(k, *rest):
        rest = list(rest)
        gv, gc = rest[:n_gv], rest[n_gv:n_gv + n_gc]
        ga = rest[n_gv + n_gc:n_gv + n_gc + (nv if carry_accs else 0)]
        lists = rest[len(rest) - nv:]
        popped, states = [], []
        for lst, dtype, shape in zip(lists, var_dtypes, info.shapes):
            new_list, value = _node("TensorListPopBack", [lst, _const(-1, dtypes.int32, name="element_shape")],
                                    {"element_dtype": dtype}).outputs
            if not shape.unknown_rank:
                value.set_shape(shape)
            popped.append(new_list)
            states.append(value)
        d = body_vjp.call(states + list(caps) + gv, name="body_grad").outputs
        d_vars, d_caps = d[:n_gv], d[n_gv:]
        new_ga = []
        if carry_accs:
            # Gradients that reached the kept values (second derivatives) join the variables'.
            elems = []
            for g, dtype in zip(ga, var_dtypes):
                g_list, g_elem = _node("TensorListPopBack", [g, _const(-1, dtypes.int32, name="element_shape")],
                                       {"element_dtype": dtype}).outputs
                new_ga.append(g_list)
                elems.append(g_elem)
            diff_elems = [e for e, m in zip(elems, var_mask) if m]
            d_vars = [_sum2(a, b) for a, b in zip(d_vars, diff_elems)]
        new_gc = [_sum2(a, b) for a, b in zip(gc, d_caps)]
        step = _op("Sub", [k, _const(1, dtypes.int32, name="one")])
        return [step] + d_vars + new_gc + new_ga + popped

    # Gradient shapes are left open: the body's gradient function may know less than the forward.
    invariants = [Shape(())] + [Shape.unknown()] * len(start) + [Shape(())] * len(accs)
    result = while_loop(bw_cond, bw_body, [count] + start + list(accs), shape_invariants=invariants,
                        back_prop=False, name="while_grad")
    r = iter(result[1:])
    gv_final = [next(r) if m else None for m in var_mask]
    gc_final = [next(r) if m else None for m in cap_mask]
    if imported:
        by_position: list[Optional[Output]] = [None] * n
        for i, g in zip(var_pos, gv_final):
            by_position[i] = g
        for i, g in zip(inv_pos, gc_final):
            by_position[i] = g
        return by_position
    num_lists = n - 1 - nv - nc  # the op's own TensorList inputs (none with back_prop=False)
    ga_final = [next(r) for _ in range(nv)] if carry_accs else [None] * num_lists
    return [None] + gv_final + gc_final + ga_final


def _zeros(like: Output, dtype: Optional[dtypes.DType] = None) -> Output:
    """Zeros for the gradient of ``like``; of a variable handle, zeros of its value (``dtype``)."""
    if like.dtype != dtypes.resource:
        return _op("ZerosLike", [like])
    shape = _op("VariableShape", [like], {"out_type": dtypes.int32})
    return _op("Fill", [shape, _const(0, dtype, name="zero")])


def _capture_mask(body: TracedFunction, var_mask: list[bool], caps: Sequence[Output]) -> list[bool]:
    """Which captures get gradients: floats, complex and variants; and, as TF's while_v2 gives
    them, variable handles the body reads (the gradient of the value read, summed over steps)."""
    mask = [is_differentiable(c.dtype) for c in caps]
    if any(c.dtype == dtypes.resource for c in caps) and any(var_mask):
        _, reached = vjp(body, var_mask)
        nv = len(var_mask)
        mask = [m or (c.dtype == dtypes.resource and reached[nv + j]) for j, (m, c) in enumerate(zip(mask, caps))]
    return mask


def _refuse_resource_variables(op: Operation, init: Sequence[Output], positions: Sequence[int],
                               imported: bool) -> None:
    """Refuse a loop variable that is a resource handle: the gradient would need each step's
    handle, and no TensorList pops resources (TF's while_v2 requires handles to be loop
    invariants too).  An imported loop's invariants are captures by now."""
    for k, (i, v) in enumerate(zip(positions, init)):
        if v.dtype != dtypes.resource:
            continue
        if imported:
            raise TypeError(f"operation '{op.name}' ({op.type}): input {i} is a resource handle that the loop "
                            "body changes from step to step; its gradient would need each step's handle, "
                            "which a TensorList cannot keep")
        raise TypeError(f"operation '{op.name}' ({op.type}): loop variable {k} ('{v.name}') is a resource "
                        "handle; its gradient would need each step's handle, which a TensorList cannot keep: "
                        "use the variable inside the body instead (the body then captures its handle)")


def _sum2(a: Output, b: Output) -> Output:
    """a + b; AddN for TensorLists (variants), which AddV2 does not take."""
    if a.dtype == dtypes.variant:
        return _op("AddN", [[a, b]])
    return _op("AddV2", [a, b])


def _passes_through(body: TracedFunction, i: int) -> bool:
    """Whether the body returns its input ``i`` unchanged (through Identity ops): a loop invariant."""
    t = body.outputs[i]
    while t.op.type == "Identity":
        t = t.op.inputs[0]
    return t == body.inputs[i]


# An imported loop's cond and body with its inputs reordered: body function -> {key: (cond, body)}
_reordered: "weakref.WeakKeyDictionary[TracedFunction, dict[tuple, tuple[TracedFunction, TracedFunction]]]" = \
    weakref.WeakKeyDictionary()


def _reorder(cond_f: TracedFunction, body_f: TracedFunction, var_pos: list[int], inv_pos: list[int],
             shapes: list[Shape]) -> tuple[TracedFunction, TracedFunction]:
    """The cond and body as functions of (loop variables..., invariants...), the body returning
    the loop variables only: the layout of a bridge loop's user functions."""
    key = (cond_f.name, tuple(var_pos), tuple(repr(s) for s in shapes))
    cache = _reordered.setdefault(body_f, {})
    if key in cache:
        return cache[key]
    made = []
    for f, keep in ((cond_f, None), (body_f, var_pos)):
        fg = FuncGraph(f"{f.graph.name}_invariants_last")
        with fg.as_default():
            args: list[Optional[Output]] = [None] * len(body_f.inputs)
            for i in var_pos + inv_pos:
                args[i] = fg.add_input(body_f.inputs[i].dtype, shapes[i], name=f"in{i}")
            inputs = [args[i] for i in var_pos + inv_pos]
            outs = f.inline(args, name="loop")
        outputs = outs if keep is None else [outs[i] for i in keep]
        made.append(TracedFunction(fg, inputs, outputs, description=f"'{f.name}' with its loop invariants last"))
    cache[key] = (made[0], made[1])
    return cache[key]


def _attr_or(op: Operation, name: str, default: object) -> object:
    """The attribute ``name`` of ``op``, or ``default`` where the op lacks it (a While of an
    older GraphDef): TF's answer to an attribute an op does not have is InvalidArgument."""
    try:
        return op.get_attr(name)
    except InvalidArgumentError:
        return default


def _imported_while_info(op: Operation, body_f: Optional[TracedFunction]) -> tuple[WhileInfo, list[int], list[int]]:
    """A WhileInfo for a While the bridge did not build, from its cond and body FunctionDefs,
    with the positions of its loop variables and of its loop invariants (which it takes as
    captures): nothing was accumulated."""
    cond_f = lookup(op.graph, op.get_attr("cond"))
    if body_f is None or cond_f is None:
        missing = op.get_attr("body") if body_f is None else op.get_attr("cond")
        raise LookupError(f"operation '{op.name}' ({op.type}) calls function '{missing}', which is "
                          "neither traced by the bridge nor in the graph's library, so it has no gradient")
    n = op.num_inputs
    shapes = list(_attr_or(op, "output_shapes", []))
    if len(shapes) != n:
        shapes = [t.shape for t in op.inputs]
    shapes = [Shape(s) if not s.unknown_rank else Shape.unknown() for s in shapes]
    parallel = int(_attr_or(op, "parallel_iterations", PARALLEL_ITERATIONS))
    inv_pos = [i for i in range(n) if _passes_through(body_f, i)]
    var_pos = [i for i in range(n) if i not in inv_pos]
    cond_r, body_r = _reorder(cond_f, body_f, var_pos, inv_pos, shapes)
    info = WhileInfo(cond_r, body_r, len(var_pos), len(inv_pos), [shapes[i] for i in var_pos], None, False, parallel)
    return info, var_pos, inv_pos


setattr(_while_grad, ACCEPTS_NONE, True)
RegisterGradient("While")(_while_grad)
RegisterGradient("StatelessWhile")(_while_grad)


# --- TF v1 conditionals (Switch/Merge outside while loops) --------------------------------
# As TF's gradients of ops without a control-flow context (a GraphDef imported as is): the
# Switch's gradient merges the gradients of its two outputs, each passed on only where the
# predicate sent the value; the Merge's sends its gradient to the input that was taken.
# Loops (Enter/Exit/NextIteration/LoopCond) need TF's frame bookkeeping: see registry.py.

def _switch_grad(op: Operation, false_grad: Output, true_grad: Output) -> list:
    pred = op.inputs[1]
    f = _node("Switch", [false_grad, pred]).output(0)
    t = _node("Switch", [true_grad, pred]).output(1)
    return [_node("Merge", [[f, t]]).output(0), None]


def _merge_grad(op: Operation, grad: Output, unused_index_grad=None) -> list:
    index = op.outputs[1]
    return [_node("Switch", [grad, _op("Equal", [index, _const(i, dtypes.int32, name="branch")])]).output(1)
            for i in range(op.num_inputs)]


RegisterGradient("Switch")(_switch_grad)
RegisterGradient("RefSwitch")(_switch_grad)
RegisterGradient("Merge")(_merge_grad)
RegisterGradient("RefMerge")(_merge_grad)


# --- TensorList gradients (what the loops' kept values need for second derivatives) ----

@RegisterGradient("TensorListPushBack")
def _push_back_grad(op: Operation, dresult: Output) -> list:
    shape = _op("Shape", [op.inputs[1]])
    dlist, delem = _node("TensorListPopBack", [dresult, shape], {"element_dtype": op.get_attr("element_dtype")}).outputs
    return [dlist, delem]


def _pop_back_grad(op: Operation, dlist: Optional[Output], delem: Optional[Output]) -> list:
    if dlist is None and delem is None:
        return [None, None]
    # A missing gradient is zeros of the same length (as TF's gradients give variant outputs),
    # not an empty list: the gradient reaching the input list must have its length.
    if dlist is None:
        dlist = _op("ZerosLike", [op.outputs[0]])
    if delem is None:
        delem = _op("ZerosLike", [op.outputs[1]])
    pushed = _op("TensorListPushBack", [dlist, delem], {"element_dtype": op.get_attr("element_dtype")})
    return [pushed, None]


setattr(_pop_back_grad, ACCEPTS_NONE, True)
RegisterGradient("TensorListPopBack")(_pop_back_grad)
NotDifferentiable("EmptyTensorList")
