"""Gradient cases: control flow (If, Case, While; TF v1 Switch/Merge/Enter/Exit), TensorLists and TensorArrays."""
from __future__ import annotations

import numpy as np

import bridge
from bridge import dtypes, errors, ops
from bridge.framework.control_flow import WhileInfo, _loop_functions
from bridge.framework.functions import TensorSpec, trace_graph
from bridge.framework.graph import get_default_graph

from . import Raises, case, cplx, i32, i64, positive, signed  # noqa: F401


# --- functional ops built directly (bridge.cond / while_loop build If / While only) ---------

def _traced(fns, args):
    """Trace each of ``fns`` over ``args`` into functions sharing one signature (args, captures)."""
    graph = get_default_graph()
    specs = [TensorSpec(a.shape, a.dtype) for a in args]
    traces = [trace_graph(f, args, f"branch{i}", graph, specs) for i, f in enumerate(fns)]
    captured = list(dict.fromkeys(c for t in traces for c in t.graph.captures))
    return [t.finish(captured) for t in traces], captured


def _functional_if(op_type, pred, args, then_fn, else_fn):
    (then_f, else_f), captured = _traced([then_fn, else_fn], args)
    graph = get_default_graph()
    then_f.add_to(graph)
    else_f.add_to(graph)
    inputs = list(args) + captured
    attrs = {"Tcond": dtypes.bool, "Tin": [t.dtype for t in inputs], "Tout": [t.dtype for t in then_f.outputs],
             "then_branch": then_f.name, "else_branch": else_f.name,
             "output_shapes": [t.shape for t in then_f.outputs]}
    return graph.create_op(op_type, [pred, inputs], attrs=attrs).outputs


def _case(op_type, index, args, branches):
    fs, captured = _traced(branches, args)
    graph = get_default_graph()
    for f in fs:
        f.add_to(graph)
    inputs = list(args) + captured
    attrs = {"Tin": [t.dtype for t in inputs], "Tout": [t.dtype for t in fs[0].outputs],
             "branches": [f.name for f in fs], "output_shapes": [t.shape for t in fs[0].outputs]}
    return graph.create_op(op_type, [index, inputs], attrs=attrs).outputs


def _stateless_while(cond, body, loop_vars):
    """bridge.while_loop's layout (counter, vars, captures, TensorLists), as a StatelessWhile."""
    graph = get_default_graph()
    specs = [TensorSpec(v.shape, v.dtype) for v in loop_vars]
    body_t = trace_graph(body, loop_vars, "sw_body", graph, specs)
    cond_t = trace_graph(cond, loop_vars, "sw_cond", graph, specs)
    captured = list(dict.fromkeys(list(body_t.graph.captures) + list(cond_t.graph.captures)))
    info = WhileInfo(cond_t.finish(captured), body_t.finish(captured), len(loop_vars), len(captured),
                     [v.shape for v in loop_vars], None, True, 10)
    cond_f, body_f = _loop_functions(info, True)
    cond_f.add_to(graph)
    body_f.add_to(graph)
    accs = [ops.empty_tensor_list(-1, -1, element_dtype=v.dtype) for v in loop_vars]
    inputs = [bridge.constant(np.int32(0))] + list(loop_vars) + captured + accs
    attrs = {"T": [t.dtype for t in inputs], "cond": cond_f.name, "body": body_f.name,
             "output_shapes": [t.shape for t in inputs], "parallel_iterations": 10}
    op = graph.create_op("StatelessWhile", [inputs], attrs=attrs)
    return op.outputs[1:1 + len(loop_vars)]


def _if(pred, x, y):
    return bridge.cond(pred, lambda: ops.mul(ops.mul(x, y), x), lambda: ops.add_v2(ops.square(x), y))


# TF's While gradient (while_v2) reads the loop's input 1 as its maximum_iterations (TF's
# layout: counter, maximum_iterations, variables); the bridge's input 1 is the first loop
# variable, so the loops here start with their iteration bound, passed on unchanged.
def _loop_vars(x):
    return [bridge.constant(np.int32(3)), bridge.constant(np.int32(0)), x]


def _cond(n, i, v):
    return ops.less(i, n)


def _body(y):
    return lambda n, i, v: (n, ops.add_v2(i, 1), ops.mul(ops.mul(v, y), v))


def _while(x, y):
    return bridge.while_loop(_cond, _body(y), _loop_vars(x))[2]


def _three(x, y):
    return [lambda a, b: ops.mul(a, b), lambda a, b: ops.add_v2(ops.square(a), b),
            lambda a, b: ops.mul(ops.mul(a, a), b)]


# --- TensorLists ----------------------------------------------------------------------------

def _dt(x):
    return {"element_dtype": x.dtype}


def _list(x):
    """A TensorList of x's rows (elements of shape x.shape[1:])."""
    return ops.tensor_list_from_tensor(x, i32(list(x.shape)[1:]))


def _stack(lst, x, n=-1):
    return ops.tensor_list_stack(lst, i32(list(x.shape)[1:]), num_elements=n, **_dt(x))


def _set_item(x, e, resize=False, index=1):
    return _stack(ops.tensor_list_set_item(_list(ops.square(x)), index, ops.mul(e, e),
                                           resize_if_index_out_of_bounds=resize), x)


def _pop_back(x):
    lst, last = ops.tensor_list_pop_back(_list(ops.square(x)), i32([2]), **_dt(x))
    return [_stack(lst, x), ops.mul(last, ops.gather_v2(x, 0, 0))]


def _concat(x, v2):
    lst = _list(ops.square(x))
    if v2:
        return ops.tensor_list_concat_v2(lst, i32([-1, 2]), i64([]), **_dt(x)).tensor
    return ops.tensor_list_concat(lst, element_shape=[-1, 2], **_dt(x)).tensor


def _split(x):
    lst = ops.tensor_list_split(ops.square(x), i32([-1, 2]), i64([2, 3]))
    return [ops.tensor_list_get_item(lst, 1, i32([-1, 2]), **_dt(x)),
            ops.tensor_list_concat_v2(lst, i32([-1, 2]), i64([]), **_dt(x)).tensor]


# --- TensorArrays ---------------------------------------------------------------------------

def _old_graph(producer: int) -> None:
    """Lower the default graph's GraphDef producer version below ``producer`` (by importing an
    empty GraphDef of version producer - 1), so ops removed from GraphDefs at ``producer`` (the
    V1/V2 TensorArray ops) can still be built, as in an old imported model."""
    get_default_graph().import_graph_def(bytes([0x22, 0x02, 0x08, producer - 1]))


def _taop(v, name=""):
    """The bridge.ops function of TensorArray op ``name`` ("read", ...) of version v ("", "V2", "V3")."""
    return getattr(ops, "tensor_array" + (f"_{name}" if name else "") + {"": "", "V2": "_v2", "V3": "_v3"}[v])


def _ta(x, n=3, v="V3", **attrs):
    """A TensorArray of x's dtype (handle, flow) with n elements."""
    if v == "V3":
        return ops.tensor_array_v3(n, dtype=x.dtype, **attrs)
    _old_graph(16)  # V1 removed at GraphDef version 16, V2 at 26
    # (V1/V2 have no flow output: TF Python starts their flow at a float32 0.)
    return _taop(v)(n, dtype=x.dtype, **attrs), bridge.constant(np.float32(0))


def _scattered(x, v="V3", **attrs):
    """A TensorArray holding the rows of x*x, and its flow."""
    handle, flow = _ta(x, n=int(list(x.shape)[0]), v=v, **attrs)
    idx = i32(list(range(int(list(x.shape)[0]))))
    return handle, _taop(v, "scatter")(handle, idx, ops.square(x), flow)


def _ta_read(x, v="V3"):
    h, flow = _scattered(x, v, clear_after_read=False)
    read = _taop(v, "read")
    a = read(h, 1, flow, dtype=x.dtype)
    b = read(h, 2, flow, dtype=x.dtype)
    return [ops.mul(a, read(h, 1, flow, dtype=x.dtype)), b]


def _ta_write(x, e, v="V3"):
    handle, flow = _ta(x, v=v)
    write = _taop(v, "write")
    flow = write(handle, 0, ops.square(e), flow)
    flow = write(handle, 2, ops.mul(e, ops.gather_v2(x, 1, 0)), flow)
    flow = write(handle, 1, ops.gather_v2(ops.square(x), 0, 0), flow)
    return _taop(v, "gather")(handle, i32([2, 0, 1]), flow, dtype=x.dtype, element_shape=[2])


def _ta_gather(x, v="V3"):
    h, flow = _scattered(x, v, clear_after_read=False)
    return ops.sin(_taop(v, "gather")(h, i32([2, 0, 2]), flow, dtype=x.dtype, element_shape=[2]))


def _ta_scatter(x, v="V3"):
    h, flow = _scattered(ops.sin(x), v)
    return ops.square(_taop(v, "gather")(h, i32([1, 2]), flow, dtype=x.dtype))


def _ta_concat(x, v="V3"):
    h, flow = _scattered(x, v)
    return ops.sin(_taop(v, "concat")(h, flow, dtype=x.dtype, element_shape_except0=[2]).value)


def _ta_split(x, v="V3"):
    handle, flow = _ta(x, n=2, v=v, clear_after_read=False)
    flow = _taop(v, "split")(handle, ops.square(x), i64([2, 3]), flow)
    read = _taop(v, "read")
    return [read(handle, 1, flow, dtype=x.dtype),
            ops.mul(read(handle, 0, flow, dtype=x.dtype), ops.gather_v2(x, [0, 1], 0))]


def _ta_cases():
    """One case per TensorArray op type of each version.  The V1/V2 ops take string handles
    (Ref(string) for V1), which TF's gradients pass to TensorArrayGradV3 (resource handles only):
    TF's gradient raises TypeError for them, and the bridge's InvalidArgumentError, as TF's C API
    refuses the node (one dtype is enough)."""
    cases = []
    for v in ("V3", "V2", ""):
        handle = "string" if v == "V2" else "string_ref"
        refused = Raises(f"TypeError: Input 'handle' of 'TensorArrayGradV3' Op has type {handle} that does not "
                         "match expected type of resource.", errors.InvalidArgumentError,
                         rf"\(TensorArrayGradV3\): Input 'handle' passed {handle} expected resource while building "
                         "NodeDef 'gradients/TensorArray")
        opts = {} if v == "V3" else {"raises": refused, "dtypes": ("float64",)}
        cases += [
            case("TensorArrayRead" + v, lambda x, v=v: _ta_read(x, v), signed(3, 2), dtype_attr="dtype", **opts),
            case("TensorArrayWrite" + v, lambda x, e, v=v: _ta_write(x, e, v), signed(3, 2), signed(2), **opts),
            case("TensorArrayGather" + v, lambda x, v=v: _ta_gather(x, v), signed(3, 2), dtype_attr="dtype",
                 **opts),
            case("TensorArrayScatter" + v, lambda x, v=v: _ta_scatter(x, v), signed(3, 2), **opts),
            case("TensorArrayConcat" + v, lambda x, v=v: _ta_concat(x, v), signed(3, 2, 2), dtype_attr="dtype",
                 **opts),
            case("TensorArraySplit" + v, lambda x, v=v: _ta_split(x, v), signed(5, 2), **opts),
        ]
    return cases


# --- TF v1 conditionals -------------------------------------------------------------------

# (Without TF's Python-side CondContext, which a GraphDef does not keep, a tensor used only in
# the branch not taken gets a dead gradient on both sides: every x here goes through the Switch.)
def _v1_cond(p, x):
    f, t = ops.switch(x, p)
    return ops.merge([ops.square(f), ops.sin(t)]).output


def _v1_ref_cond(p, x):
    # Ref tensors come from (v1) variables; TF's gradient stops at Assign (None), as the bridge's.
    var = ops.variable_v2(shape=list(x.shape), dtype=x.dtype)
    f, t = ops.ref_switch(ops.assign(var, x), p)
    return [ops.square(ops.ref_merge([f, t]).output), ops.mul(x, x)]


CASES = [
    case("If", _if, np.asarray(True), signed(2, 3), signed(2, 3), label="true"),
    case("If", _if, np.asarray(False), signed(2, 3), signed(2, 3), label="false"),
    case("StatelessIf", lambda p, x, y: _functional_if("StatelessIf", p, [x, y], lambda a, b: ops.mul(ops.mul(a, b), a),
                                                       lambda a, b: ops.mul(a, ops.square(b))),
         np.asarray(True), signed(2, 3), signed(2, 3)),
    case("While", _while, signed(2, 3, high=1.0), signed(2, 3, high=1.0)),
    # (Another cond than While's: TF names its rewritten functions after the forward ones, and
    # the oracle's TF keeps them between cases.)
    case("StatelessWhile", lambda x, y: _stateless_while(
        lambda n, i, v: ops.greater(n, i), lambda n, i, v: (n, ops.add_v2(i, 1), ops.mul(ops.add_v2(v, y), v)),
        _loop_vars(x))[2],
         signed(2, 3, high=1.0), signed(2, 3, high=1.0)),
    case("Case", lambda k, x, y: _case("Case", k, [x, y], _three(x, y)), i32(1), signed(2, 3), signed(2, 3)),
    case("Case", lambda k, x, y: _case("Case", k, [x, y], _three(x, y)), i32(7), signed(2, 3), signed(2, 3),
         label="default"),
    case("StatelessCase", lambda k, x, y: _case("StatelessCase", k, [x, y], _three(x, y)), i32(2),
         signed(2, 3), signed(2, 3)),

    case("TensorListFromTensor", lambda x: ops.mul(_stack(_list(ops.square(x)), x), x), signed(3, 2),
         dtype_attr="element_dtype"),
    case("TensorListFromTensor", lambda x: ops.mul(_stack(_list(ops.square(x)), x), x), cplx(3, 2),
         dtype_attr="element_dtype", label="complex"),
    case("TensorListStack", lambda x: ops.sin(_stack(_list(ops.square(x)), x, n=3)), signed(3, 2, 2),
         dtype_attr="element_dtype"),
    case("TensorListGetItem", lambda x: ops.square(ops.tensor_list_get_item(_list(ops.square(x)), 1, i32([2]),
                                                                            **_dt(x))),
         signed(3, 2), dtype_attr="element_dtype"),
    case("TensorListSetItem", _set_item, signed(3, 2), signed(2), dtype_attr="element_dtype"),
    case("TensorListSetItem", lambda x, e: _set_item(x, e, resize=True, index=4), signed(3, 2), signed(2),
         dtype_attr="element_dtype", label="resize"),
    case("TensorListGather", lambda x: ops.square(ops.tensor_list_gather(_list(ops.square(x)), i32([2, 0, 2]),
                                                                         i32([2]), **_dt(x))),
         signed(3, 2), dtype_attr="element_dtype"),
    case("TensorListScatter", lambda x: _stack(ops.tensor_list_scatter(ops.square(x), i32([2, 0, 1]), i32([2])), x),
         signed(3, 2), dtype_attr="element_dtype"),
    case("TensorListScatterV2", lambda x: ops.tensor_list_gather(
        ops.tensor_list_scatter_v2(ops.square(x), i32([4, 0, 1]), i32([2]), 6), i32([1, 4, 0]), i32([2]), **_dt(x)),
         signed(3, 2), dtype_attr="element_dtype"),
    case("TensorListScatterIntoExistingList", lambda x, t: _stack(ops.tensor_list_scatter_into_existing_list(
        _list(ops.square(x)), ops.mul(t, t), i32([2, 0])), x), signed(3, 2), signed(2, 2),
         dtype_attr="element_dtype"),
    case("TensorListConcat", lambda x: _concat(x, False), signed(3, 2, 2), dtype_attr="element_dtype"),
    case("TensorListConcatV2", lambda x: _concat(x, True), signed(3, 2, 2), dtype_attr="element_dtype"),
    case("TensorListSplit", _split, signed(5, 2), dtype_attr="element_dtype"),
    case("TensorListPushBack", lambda x, e: _stack(ops.tensor_list_push_back(_list(ops.square(x)), ops.mul(e, e)), x),
         signed(3, 2), signed(2), dtype_attr="element_dtype"),
    case("TensorListPopBack", _pop_back, signed(3, 2), dtype_attr="element_dtype"),
    case("TensorListResize", lambda x: _stack(ops.tensor_list_resize(_list(ops.square(x)), 5), x), signed(3, 2),
         dtype_attr="element_dtype"),
    case("TensorListResize", lambda x: _stack(ops.tensor_list_resize(_list(ops.square(x)), 2), x), signed(3, 2),
         dtype_attr="element_dtype", label="shrink"),

    case("Switch", _v1_cond, np.asarray(True), signed(2, 3), label="true"),
    case("Switch", _v1_cond, np.asarray(False), signed(2, 3), label="false"),
    case("Merge", lambda p, x: ops.mul(_v1_cond(p, x), x), np.asarray(False), signed(2, 3)),
    # LoopCond (bool) lies on no differentiable path: TF's gradient is None, the bridge's too.
    case("LoopCond", lambda p, x: ops.merge(list(ops.switch(ops.square(x), ops.loop_cond(p)))).output,
         np.asarray(True), signed(2, 3)),
    case("RefSwitch", _v1_ref_cond, np.asarray(True), signed(2, 3)),
    case("RefMerge", _v1_ref_cond, np.asarray(False), signed(2, 3)),
] + _ta_cases()

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING: frozenset[str] = frozenset()
