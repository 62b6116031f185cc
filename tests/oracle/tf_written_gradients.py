"""Oracle: GraphDefs written by stock TensorFlow, and the gradients stock TF gives on them.

Unlike graph_gradients (which differentiates a graph the bridge built), here
TensorFlow writes the whole GraphDef: the forward part with TF's own builders
(``tf.function`` with ``tf.cond`` / ``tf.while_loop`` / ``tf.switch_case``
and TensorArrays, whose concrete function graph holds functional
``If``/``StatelessIf``/``While``/``StatelessWhile``/``Case``/``StatelessCase``
ops and their branch and body FunctionDefs; ``tf.compat.v1`` graphs with
ref variables (``VariableV2``, ``RefSwitch``, ``RefMerge``, ``RefIdentity``);
``Split``/``SplitV`` with one piece), then placeholders for the upstream
gradients (``gy<k>``) and for the second-order directions (``v<k>``).  It
then imports that GraphDef into a fresh ``tf.compat.v1`` graph and
differentiates it with ``tf.gradients``, as the bridge does on its side.

Request: ``{"saved_model": True}`` writes a TF2 SavedModel instead (see
:func:`saved_model`).  Request: ``{"cases": [name, ...]}`` (names from :data:`CASES`).  Response:
``{"results": {name: {...} | "ErrorType: message"}}`` (a string when TF could
not write the graph), each::

    {"graph_def": bytes,             # what the bridge imports, as TF wrote it
     "xs": ["x:0", ...], "ys": ["Identity:0", ...],
     "grad_ys": ["gy0:0", ...], "vs": ["v0:0", ...],
     "init": ["init", ...],          # ops to run before (variable initializers)
     "feed": {"x:0": array, ...},
     "op_types": [...],              # every op type of the graph and its library
     "first": [array | None, ...] | "ErrorType: message",  # d ys / d xs, weighted by grad_ys
     "second": [array | None, ...] | None | "ErrorType: message"}

The second order is the gradient of ``sum_k sum(first_k * v_k)`` (built as
``AddN`` of ``Sum(Reshape(g * v, [-1]), 0)``, seeded with ones).
"""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np
import tensorflow as tf

import _common

F64 = tf.float64
_rng = np.random.default_rng(0)  # reseeded per case (eval_case), so a case's values never depend on the others


def _spec(*shape):
    return tf.TensorSpec(shape, F64)


def _concrete(fn: Callable, signature: list, feeds: dict) -> tuple:
    """(GraphDef of ``fn``'s concrete function, xs, ys, feeds) for the float inputs."""
    cf = tf.function(fn, input_signature=signature).get_concrete_function()
    gd = cf.graph.as_graph_def()
    names = [t.name for t in cf.inputs]
    xs = [n for n, s in zip(names, signature, strict=True) if s.dtype.is_floating]
    ys = [t.name for t in cf.outputs if t.dtype.is_floating]
    return gd, xs, ys, {n: feeds[i] for i, n in enumerate(names)}, []


def _val(*shape):
    return _rng.uniform(-1, 1, shape)


# --- functional control flow from tf.function -----------------------------------------------

def _cond(pred_value, stateful=False):
    def f(p, x, y):
        def true_fn():
            r = x * y * x
            if stateful:
                with tf.control_dependencies([tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(x)), [x])]):
                    r = tf.identity(r)
            return r, tf.sin(y)

        return tf.cond(p, true_fn, lambda: (tf.square(x) + y, tf.cos(x) * y))
    return _concrete(f, [tf.TensorSpec([], tf.bool), _spec(2, 3), _spec(2, 3)],
                     [np.asarray(pred_value), _val(2, 3), _val(2, 3)])


def _while(stateful=False):
    def f(x, y):
        def body(i, v):
            nv = v * y + tf.sin(v)
            if stateful:
                with tf.control_dependencies([tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(v)), [v])]):
                    nv = tf.identity(nv)
            return i + 1, nv
        return tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1]
    return _concrete(f, [_spec(2, 3), _spec(2, 3)], [_val(2, 3), _val(2, 3)])


def _while_max_iterations():
    def f(x, y):
        return tf.while_loop(lambda v: tf.reduce_sum(v) < 1e9, lambda v: v * y + x, [x],
                             maximum_iterations=4)[0]
    return _concrete(f, [_spec(3), _spec(3)], [_val(3), _val(3)])


def _case(index, stateful=False):
    def f(k, x, y):
        def b0():
            r = x * y
            if stateful:
                with tf.control_dependencies([tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(x)), [x])]):
                    r = tf.identity(r)
            return r
        return tf.switch_case(k, [b0, lambda: tf.square(x) + y, lambda: x * x * tf.sin(y)])
    return _concrete(f, [tf.TensorSpec([], tf.int32), _spec(2, 3), _spec(2, 3)],
                     [np.asarray(index, np.int32), _val(2, 3), _val(2, 3)])


def _nested():
    """A cond inside a while body, and a while loop inside a cond branch."""
    def f(p, x, y):
        def body(i, v):
            v = tf.cond(tf.reduce_sum(v) > 0.0, lambda: v * y, lambda: tf.sin(v) + y)
            return i + 1, v

        def branch():
            return tf.while_loop(lambda i, v: i < 2, body, [tf.constant(0), x])[1]

        return tf.cond(p, branch, lambda: x * y)
    return _concrete(f, [tf.TensorSpec([], tf.bool), _spec(2, 3), _spec(2, 3)],
                     [np.asarray(True), _val(2, 3), _val(2, 3)])


def _nested_loops():
    def f(x, y):
        def inner(v):
            return tf.while_loop(lambda j, w: j < 2, lambda j, w: (j + 1, w * y + 0.5 * tf.sin(w)),
                                 [tf.constant(0), v])[1]
        return tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, inner(v) * x), [tf.constant(0), x])[1]
    return _concrete(f, [_spec(3), _spec(3)], [_val(3), _val(3)])


def _tensor_array():
    """A TensorArray written in a while loop (a loop-carried TensorList), stacked after it."""
    def f(x, y):
        ta = tf.TensorArray(F64, size=4)

        def body(i, v, ta):
            v = tf.sin(v) * y
            return i + 1, v, ta.write(i, v * x)
        _, v, ta = tf.while_loop(lambda i, v, ta: i < 4, body, [tf.constant(0), x, ta])
        return ta.stack(), v
    return _concrete(f, [_spec(3), _spec(3)], [_val(3), _val(3)])


def _tensor_array_read():
    """A TensorArray filled before the loop and read inside it."""
    def f(x, y):
        ta = tf.TensorArray(F64, size=3).unstack(x * y)

        def body(i, acc):
            return i + 1, acc + ta.read(i) * tf.cos(acc)
        return tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), tf.zeros_like(y[0])])[1]
    return _concrete(f, [_spec(3, 2), _spec(3, 2)], [_val(3, 2), _val(3, 2)])


def _call_in_function(inner_flow: str = ""):
    """A tf.function calling another: (Stateful)PartitionedCall ops, in the main graph and in a
    cond branch.  With ``inner_flow`` ("cond", "loop") the called function holds control flow,
    which stock TF's gradient of the call (a SymbolicGradient op) gets wrong: "Retval[0] does
    not have value" for a cond, the loop's contribution left out (zeros) for a while loop."""
    @tf.function
    def inner(x, y):
        if inner_flow == "loop":
            return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * y), [tf.constant(0), x])[1]
        if inner_flow == "cond":
            return tf.cond(tf.reduce_sum(y) > 0, lambda: x * y * y, lambda: tf.sin(x) * y)
        return x * y * tf.sin(y)

    def f(x, y):
        return inner(x, y) + tf.cond(tf.reduce_sum(x) > 0, lambda: inner(y, x), lambda: x * inner(x, x))
    return _concrete(f, [_spec(3), _spec(3)], [_val(3), _val(3)])


# --- TF1 ref variables -------------------------------------------------------------------------

def _v1_graph(build: Callable) -> tuple:
    graph = tf.Graph()
    with graph.as_default():
        xs, ys, feed = build()
        init = tf.compat.v1.global_variables_initializer()
    return graph.as_graph_def(), xs, ys, feed, [init.name]


def _ref_variable():
    def build():
        w = tf.compat.v1.get_variable("w", initializer=_val(2, 3), use_resource=False)
        x = tf.compat.v1.placeholder(F64, [2, 3], name="x")
        y = tf.sin(w) * x + tf.square(tf.identity(w))
        return [w.name, x.name], [y.name], {x.name: _val(2, 3)}
    return _v1_graph(build)


def _ref_control_flow():
    """RefSwitch, RefMerge and RefIdentity on a VariableV2's ref, as TF1 graphs hold them."""
    def build():
        w = tf.compat.v1.get_variable("w", initializer=_val(3), use_resource=False)
        u = tf.compat.v1.get_variable("u", initializer=_val(3), use_resource=False)
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        ref = w._ref()  # pylint: disable=protected-access
        f, t = tf.raw_ops.RefSwitch(data=ref, pred=p)
        merged = tf.raw_ops.RefMerge(inputs=[tf.raw_ops.RefIdentity(input=f), t]).output
        y = tf.square(merged) * tf.raw_ops.RefIdentity(input=u._ref())  # pylint: disable=protected-access
        return [w.name, u.name], [y.name], {p.name: np.asarray(True)}
    return _v1_graph(build)


def _ref_v1_cond():
    """tf.compat.v1.cond (v1 control flow: Switch/Merge) over ref variables."""
    def build():
        w = tf.compat.v1.get_variable("w", initializer=_val(3), use_resource=False)
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        y = tf.compat.v1.cond(p, lambda: w * w, lambda: tf.sin(w))
        return [w.name], [y.name], {p.name: np.asarray(False)}
    prev = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        return _v1_graph(build)
    finally:
        if prev:
            tf.compat.v1.enable_control_flow_v2()


def _tensor_array_v1():
    """TF1 TensorArrays (TensorArrayV3 and its Write/Read/Scatter/Gather/Stack/Concat ops), no loop."""
    def build():
        x = tf.compat.v1.placeholder(F64, [3, 2], name="x")
        y = tf.compat.v1.placeholder(F64, [2], name="y")
        ta = tf.TensorArray(F64, size=4, element_shape=[2], clear_after_read=False).unstack(tf.sin(x))
        ta = ta.write(3, ta.read(0) * y)
        tb = tf.TensorArray(F64, size=2, element_shape=[2], clear_after_read=False).scatter([1, 0], tf.stack([y * y, ta.read(2)]))
        out = ta.stack() * tf.reduce_sum(tb.gather([0, 1]), 0) + tb.concat()[:2]
        return [x.name, y.name], [out.name], {x.name: _val(3, 2), y.name: _val(2)}
    prev = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        return _v1_graph(build)
    finally:
        if prev:
            tf.compat.v1.enable_control_flow_v2()


def _v1_while():
    """tf.compat.v1.while_loop with v1 control flow (Enter/Merge/Switch/NextIteration/Exit)."""
    def build():
        x = tf.compat.v1.placeholder(F64, [3], name="x")
        y = tf.compat.v1.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), [0, x])[1]
        return [x.name], [y.name], {x.name: _val(3)}
    prev = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        return _v1_graph(build)
    finally:
        if prev:
            tf.compat.v1.enable_control_flow_v2()


# --- Split with one piece ------------------------------------------------------------------------

def _split_one():
    def f(x):
        (a,) = tf.split(x, 1, axis=1)
        (b,) = tf.split(x * x, [3], axis=0)
        return a * tf.sin(b)
    return _concrete(f, [_spec(3, 2)], [_val(3, 2)])


def _split_raw():
    def build():
        x = tf.compat.v1.placeholder(F64, [3, 2], name="x")
        (a,) = tf.raw_ops.Split(axis=tf.constant(0), value=tf.square(x), num_split=1)
        (b,) = tf.raw_ops.SplitV(value=tf.sin(x), size_splits=tf.constant([2]), axis=tf.constant(1), num_split=1)
        return [x.name], [(a * b).name], {x.name: _val(3, 2)}
    return _v1_graph(build)


CASES: dict[str, Callable[[], tuple]] = {
    "cond_true": lambda: _cond(True),
    "cond_false": lambda: _cond(False),
    "cond_stateful": lambda: _cond(True, stateful=True),
    "while": _while,
    "while_stateful": lambda: _while(stateful=True),
    "while_max_iterations": _while_max_iterations,
    "case_0": lambda: _case(0),
    "case_2": lambda: _case(2),
    "case_default": lambda: _case(7),
    "case_stateful": lambda: _case(0, stateful=True),
    "nested": _nested,
    "nested_loops": _nested_loops,
    "tensor_array": _tensor_array,
    "tensor_array_read": _tensor_array_read,
    "call_in_function": _call_in_function,
    "call_with_cond": lambda: _call_in_function("cond"),
    "call_with_loop": lambda: _call_in_function("loop"),
    "ref_variable": _ref_variable,
    "ref_control_flow": _ref_control_flow,
    "ref_v1_cond": _ref_v1_cond,
    "tensor_array_v1": _tensor_array_v1,
    "v1_while": _v1_while,
    "split_one": _split_one,
    "split_raw": _split_raw,
}


#: Differentiated with TF v1 control flow: TF's TensorArray gradients assert under v2 that
#: no handle was captured (as in graph_gradients.py).
V1_GRADIENTS = {"tensor_array_v1", "v1_while"}


def _op_types(gd) -> list[str]:
    types = {n.op for n in gd.node}
    for fdef in gd.library.function:
        types.update(n.op for n in fdef.node_def)
    return sorted(types)


def _with_seeds(gd, xs, ys, feed) -> tuple:
    """The GraphDef with placeholders ``gy<k>`` and ``v<k>`` added (by TF), and their feeds."""
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(gd, name="")
        get = graph.get_tensor_by_name
        grad_ys, vs = [], []
        for k, y in enumerate(ys):
            t = get(y)
            shape = _static_shape(graph, t, feed)
            ph = tf.compat.v1.placeholder(t.dtype, shape, name=f"gy{k}")
            grad_ys.append(ph.name)
            feed[ph.name] = _val(*shape)
        for k, x in enumerate(xs):
            t = get(x)
            dtype = t.dtype.base_dtype
            shape = _static_shape(graph, t, feed)
            ph = tf.compat.v1.placeholder(dtype, shape, name=f"v{k}")
            vs.append(ph.name)
            feed[ph.name] = _val(*shape)
    return graph.as_graph_def(), grad_ys, vs


def _static_shape(graph, t, feed) -> tuple:
    if t.shape.is_fully_defined():
        return tuple(t.shape.as_list())
    with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
        return np.shape(sess.run(t, {graph.get_tensor_by_name(k): v for k, v in feed.items()}))


def _dense(g):
    return None if g is None else tf.convert_to_tensor(g)


def eval_case(name: str) -> dict | str:
    global _rng
    _rng = np.random.default_rng(zlib.crc32(name.encode()))
    try:
        gd, xs, ys, feed, init = CASES[name]()
        gd, grad_ys, vs = _with_seeds(gd, xs, ys, feed)
    except Exception as exc:
        return _common.error_string(exc)
    case = {"graph_def": gd.SerializeToString(), "xs": xs, "ys": ys, "grad_ys": grad_ys, "vs": vs,
            "init": [op.split(":")[0] for op in init], "feed": feed, "op_types": _op_types(gd)}
    if name in V1_GRADIENTS:
        tf.compat.v1.disable_control_flow_v2()
    else:
        tf.compat.v1.enable_control_flow_v2()
    try:
        graph = _common.import_graph(gd.SerializeToString())
        with graph.as_default():
            get = graph.get_tensor_by_name
            x_t = [get(n) for n in xs]
            first = [_dense(g) for g in tf.compat.v1.gradients([get(n) for n in ys], x_t,
                                                                grad_ys=[get(n) for n in grad_ys])]
            second, second_error = None, None
            parts = [tf.reduce_sum(tf.reshape(g * get(v), [-1]), 0)
                     for g, v in zip(first, vs, strict=True) if g is not None]
            if parts:
                try:
                    z = tf.add_n(parts) if len(parts) > 1 else parts[0]
                    second = [_dense(g) for g in tf.compat.v1.gradients(z, x_t, grad_ys=tf.ones_like(z))]
                except Exception as exc:  # TF has no second order here: say so
                    second_error = _common.error_string(exc)
        feeds = {graph.get_tensor_by_name(k): v for k, v in feed.items()}
        with tf.compat.v1.Session(graph=graph, config=_common.SESSION_CONFIG) as sess:
            for op in init:
                sess.run(graph.get_operation_by_name(op.split(":")[0]))
            got_first = sess.run([g for g in first if g is not None], feeds)
            got_second = None
            if second is not None:
                try:
                    got_second = sess.run([g for g in second if g is not None], feeds)
                except Exception as exc:
                    second_error, second = _common.error_string(exc), None
    except Exception as exc:  # TF's gradient failed: the graph is still there for the bridge
        return {**case, "first": _common.error_string(exc), "second": None}

    def regroup(grads, values):
        it = iter(values)
        return [None if g is None else _common.to_numpy(next(it)) for g in grads]

    return {**case, "first": regroup(first, got_first),
            "second": second_error if second_error else (None if second is None else regroup(second, got_second))}


class _LoopModule(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(_val(3), name="w")

    @tf.function(input_signature=[tf.TensorSpec([3], F64, name="x")])
    def predict(self, x):
        # (The variable read outside the loop: TF2 cannot differentiate its loaded model when
        # the loop captures the variable's handle: "a variable without handle data".)
        w = self.w.read_value()

        def body(i, v):
            v = tf.cond(tf.reduce_sum(v) > 0.0, lambda: v * w, lambda: tf.sin(v) + w)
            return i + 1, v
        return {"y": tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1] * x}


def saved_model(out_dir: Path) -> dict:
    """A TF2 SavedModel whose signature holds a while loop with a cond (behind a
    StatefulPartitionedCall), and the gradients TF2 gives through the loaded model
    (``tf.GradientTape`` over ``tf.saved_model.load``'s signature, which differentiates
    the functions themselves, not the call op)."""
    global _rng
    _rng = np.random.default_rng(zlib.crc32(b"saved_model"))
    path = out_dir / "loop_module"
    module = _LoopModule()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.predict})
    x, gy, v = _val(3), _val(3), _val(3)
    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures["serving_default"]
    xt = tf.constant(x)
    with tf.GradientTape() as outer:
        outer.watch(xt)
        with tf.GradientTape() as inner:
            inner.watch(xt)
            y = fn(x=xt)["y"]
        first = inner.gradient(y, xt, output_gradients=tf.constant(gy))
        z = tf.reduce_sum(first * v)
    second = outer.gradient(z, xt)
    return {"path": str(path), "x": x, "gy": gy, "v": v,
            "first": first.numpy(), "second": second.numpy()}


def handle(request: Any, out_dir: Path) -> dict:
    request = request or {}
    if request.get("saved_model"):
        return {"saved_model": saved_model(out_dir)}
    names = request.get("cases") or list(CASES)
    return {"results": {name: eval_case(name) for name in names}}


if __name__ == "__main__":
    _common.main(handle)
