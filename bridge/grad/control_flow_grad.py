"""Gradients of ``If``, ``Case`` and ``While`` (from ``bridge.cond``/``bridge.while_loop``,
or imported from a GraphDef stock TF wrote) and of the TensorLists a loop keeps for them.

The module docstring of :mod:`bridge.framework.control_flow` tells how they work.  An
imported op's branches and bodies come from the graph's library (``lookup`` rebuilds
them from their FunctionDefs); an imported ``While`` (TF's while_v2 layout: counter,
maximum iterations, variables, captures) is treated as a loop whose every input is a
loop variable, and kept nothing for its gradient, which reruns it keeping each step.
"""
from __future__ import annotations

from typing import Optional

from bridge.framework import dtypes
from bridge.framework.attrs import Shape
from bridge.framework.control_flow import WhileInfo, make_if, make_while, while_loop
from bridge.framework.functions import TracedFunction, lookup
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
        # A loop the bridge did not build (TF's while_v2, from a GraphDef): every input is a
        # loop variable of its cond and body, and it kept nothing for the gradient.
        info = _imported_while_info(op, body_f)
        nv, nc = info.num_vars, 0
        init, caps = op.inputs, []
        g_vars, g_caps, g_accs = grads, [], []
    else:
        nv, nc = info.num_vars, info.num_captures
        inputs = op.inputs
        init, caps = inputs[1:1 + nv], inputs[1 + nv:1 + nv + nc]
        g_vars, g_caps, g_accs = grads[1:1 + nv], grads[1 + nv:1 + nv + nc], grads[1 + nv + nc:]

    forward = op
    if not info.accumulate:
        # Nothing was kept: run the loop again, this time keeping each step's values.
        forward = make_while(info, init, caps, accumulate=True)
    outs = forward.outputs
    count, accs = outs[0], outs[1 + nv + nc:]

    var_mask = [is_differentiable(v.dtype) for v in init]
    cap_mask = [is_differentiable(c.dtype) for c in caps]
    carry_accs = any(g is not None for g in g_accs)
    body_vjp, _ = vjp(info.user_body, var_mask, wrt=var_mask + cap_mask)

    def zeros_or(g: Optional[Output], like: Output) -> Output:
        return g if g is not None else _op("ZerosLike", [like])

    start = ([zeros_or(g, o) for g, o, m in zip(g_vars, outs[1:1 + nv], var_mask) if m]
             + [zeros_or(g, c) for g, c, m in zip(g_caps, caps, cap_mask) if m]
             + ([zeros_or(g, a) for g, a in zip(g_accs, accs)] if carry_accs else []))
    n_gv, n_gc = sum(var_mask), sum(cap_mask)
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
        return gv_final
    num_lists = n - 1 - nv - nc  # the op's own TensorList inputs (none with back_prop=False)
    ga_final = [next(r) for _ in range(nv)] if carry_accs else [None] * num_lists
    return [None] + gv_final + gc_final + ga_final


def _sum2(a: Output, b: Output) -> Output:
    """a + b; AddN for TensorLists (variants), which AddV2 does not take."""
    if a.dtype == dtypes.variant:
        return _op("AddN", [[a, b]])
    return _op("AddV2", [a, b])


def _imported_while_info(op: Operation, body_f: Optional[TracedFunction]) -> WhileInfo:
    """A WhileInfo for a While the bridge did not build, from its cond and body
    FunctionDefs: all its inputs are loop variables, nothing was accumulated."""
    cond_f = lookup(op.graph, op.get_attr("cond"))
    if body_f is None or cond_f is None:
        missing = op.get_attr("body") if body_f is None else op.get_attr("cond")
        raise LookupError(f"operation '{op.name}' ({op.type}) calls function '{missing}', which is "
                          "neither traced by the bridge nor in the graph's library, so it has no gradient")
    n = op.num_inputs
    try:
        shapes = list(op.get_attr("output_shapes"))
    except Exception:  # noqa: BLE001 (an older GraphDef may lack the attr)
        shapes = []
    if len(shapes) != n:
        shapes = [t.shape for t in op.inputs]
    try:
        parallel = int(op.get_attr("parallel_iterations"))
    except Exception:  # noqa: BLE001
        parallel = 10
    return WhileInfo(cond_f, body_f, n, 0, [Shape(s) if not s.unknown_rank else Shape.unknown() for s in shapes],
                     None, False, parallel)


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
