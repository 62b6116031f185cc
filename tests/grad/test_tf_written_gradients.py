"""Gradients of GraphDefs stock TensorFlow writes, against stock TF's ``tf.gradients`` on them.

tests/oracle/tf_written_gradients.py builds each graph with TF's own builders
(``tf.function`` with ``tf.cond``/``tf.while_loop``/``tf.switch_case`` and
TensorArrays: functional ``If``/``While``/``Case`` and their Stateless forms,
whose branches and bodies exist only as FunctionDefs in the library; TF1 ref
variables; ``Split``/``SplitV`` with one piece), differentiates it, and sends
the GraphDef.  The bridge imports it unchanged and differentiates it to first
and second order.

Where stock TF's own answer is wrong, the bridge is checked against central
differences instead (:data:`TF_WRONG`).
"""
from __future__ import annotations

import numpy as np
import pytest

from support.oracle import run_oracle

NAMES = ["cond_true", "cond_false", "cond_stateful", "while", "while_stateful", "while_max_iterations",
         "case_0", "case_2", "case_default", "case_stateful", "nested", "nested_loops", "tensor_array",
         "tensor_array_read", "call_in_function", "ref_variable", "ref_control_flow", "ref_v1_cond",
         "tensor_array_v1", "split_one", "split_raw"]


#: A tf.function calling one that holds control flow: TF differentiates the call op
#: (PartitionedCall) with a SymbolicGradient op, which fails at run time for a cond ("Retval[0]
#: does not have value") and leaves a while loop's contribution out (zeros).
TF_WRONG = {"call_with_cond": "InternalError", "call_with_loop": "wrong values"}


@pytest.fixture(scope="module")
def answers() -> dict:
    return run_oracle("tf_written_gradients", {"cases": NAMES + sorted(TF_WRONG)})["results"]


def _bridge_evaluator(want: dict, with_second: bool = True):
    """Build the bridge's first and second order gradients once; return a function of
    feeds overriding TF's giving (first, second, objective) values.  The objective is
    sum_k sum(y_k * gy_k), whose gradient the first order is."""
    import bridge
    from bridge import ops

    graph = bridge.Graph()
    graph.import_graph_def(want["graph_def"])
    get = graph.get_tensor_by_name
    xs, ys = [get(n) for n in want["xs"]], [get(n) for n in want["ys"]]
    gys, vs = [get(n) for n in want["grad_ys"]], [get(n) for n in want["vs"]]
    with graph.as_default():
        first = bridge.gradients(ys, xs, grad_ys=gys)
        second = [None] * len(xs)
        if with_second:
            parts = [ops.sum(ops.reshape(ops.mul(g, v), [-1]), 0)
                     for g, v in zip(first, vs, strict=True) if g is not None]
            z = ops.add_n(parts) if len(parts) > 1 else parts[0]
            second = bridge.gradients(z, xs)
        objective = ops.add_n([ops.sum(ops.reshape(ops.mul(y, g), [-1]), 0) for y, g in zip(ys, gys, strict=True)])
    sess = bridge.Session(graph)
    for name in want["init"]:
        sess.run(name)
    fetches = [g for g in first + second if g is not None] + [objective]

    def evaluate(at: dict | None = None):
        feed = {get(k): v for k, v in {**want["feed"], **(at or {})}.items()}
        got = iter(sess.run(fetches, feed))
        return ([None if g is None else next(got) for g in first],
                [None if g is None else next(got) for g in second], float(next(got)))
    return evaluate


def _bridge_gradients(want: dict):
    """(first, second) order; no second where TF has none (its error is the answer)."""
    return _bridge_evaluator(want, not isinstance(want["second"], str))()[:2]


def _close(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g is None) == (w is None), f"{what}, x{k}: bridge {g is None and 'None'}, TF {w is None and 'None'}"
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10, err_msg=f"{what}, x{k}")


@pytest.mark.parametrize("name", NAMES)
def test_matches_tensorflow(answers: dict, name: str) -> None:
    want = answers[name]
    assert not isinstance(want, str), f"stock TF could not write the graph: {want}"
    assert not isinstance(want["first"], str), f"stock TF failed: {want['first']}"
    first, second = _bridge_gradients(want)
    _close(first, want["first"], f"{name}, first order")
    if isinstance(want["second"], str):
        return  # TF has no second order here (its error is the answer)
    _close(second, want["second"], f"{name}, second order")


def _central(fn, want: dict, eps: float = 1e-5) -> list:
    """Central differences of ``fn(feeds)`` (a float, or a list of arrays) along each x."""
    out = []
    for x in want["xs"]:
        base = np.asarray(want["feed"][x], np.float64)
        d = []
        for i in range(base.size):
            step = np.zeros(base.size)
            step[i] = eps
            hi, lo = fn({x: base + step.reshape(base.shape)}), fn({x: base - step.reshape(base.shape)})
            d.append((hi - lo) / (2 * eps))
        out.append(np.asarray(d).reshape(base.shape))
    return out


@pytest.mark.parametrize("name", sorted(TF_WRONG))
def test_calls_of_functions_with_control_flow_match_differences(answers: dict, name: str) -> None:
    want = answers[name]
    assert not isinstance(want, str), f"stock TF could not write the graph: {want}"
    evaluate = _bridge_evaluator(want)
    first, second, _ = evaluate()
    for g, d in zip(first, _central(lambda at: evaluate(at)[2], want), strict=True):
        np.testing.assert_allclose(g, d, rtol=1e-6, atol=1e-8, err_msg=f"{name}, first order")
    vs = [want["feed"][v] for v in want["vs"]]
    dot = lambda at: sum(np.sum(g * v) for g, v in zip(evaluate(at)[0], vs, strict=True))  # noqa: E731
    for g, d in zip(second, _central(dot, want), strict=True):
        np.testing.assert_allclose(g, d, rtol=1e-6, atol=1e-8, err_msg=f"{name}, second order")


def test_the_cases_hold_the_op_types(answers: dict) -> None:
    """The graphs hold what this file is about, as TF wrote them."""
    assert not [n for n, a in answers.items() if isinstance(a, str)]
    types = set().union(*(set(a["op_types"]) for a in answers.values()))
    wanted = {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase", "VariableV2",
              "RefSwitch", "RefMerge", "RefIdentity", "Split", "SplitV", "TensorListSetItem",
              "TensorListGetItem", "PartitionedCall", "TensorArrayV3", "TensorArrayScatterV3",
              "TensorArrayGatherV3", "TensorArrayConcatV3"}
    assert wanted <= types, sorted(wanted - types)


def test_saved_model_with_a_loop_matches_tensorflow() -> None:
    """A TF2 SavedModel (tf.saved_model.save) whose signature runs a while loop holding a
    cond, behind a StatefulPartitionedCall: first and second order against TF2's
    GradientTape over the loaded model."""
    import bridge
    from bridge import ops

    want = run_oracle("tf_written_gradients", {"saved_model": True})["saved_model"]
    with bridge.load_saved_model(want["path"]) as model:
        sig = model.signatures["serving_default"]
        x, y = sig.inputs["x"], sig.outputs["y"]
        with model.graph.as_default():
            gy = bridge.constant(want["gy"])
            first = bridge.gradients(y, x, grad_ys=gy)[0]
            second = bridge.gradients(ops.sum(ops.mul(first, bridge.constant(want["v"])), [0]), x)[0]
        got_first, got_second = model.session.run([first, second], {x: want["x"]})
    np.testing.assert_allclose(got_first, want["first"], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(got_second, want["second"], rtol=1e-9, atol=1e-10)


def test_imported_v1_loops_have_no_gradient_in_tensorflow_either() -> None:
    """EXCLUDED's reason for Enter/Exit/NextIteration (tests/grad/test_parity.py): stock TF
    cannot differentiate a TF v1 while loop imported from a GraphDef, nor can the bridge."""
    import bridge

    want = run_oracle("tf_written_gradients", {"cases": ["v1_while"]})["results"]["v1_while"]
    assert {"Enter", "Exit", "NextIteration"} <= set(want["op_types"])
    assert isinstance(want["first"], str), "stock TF now differentiates imported v1 loops: revisit EXCLUDED"
    graph = bridge.Graph()
    graph.import_graph_def(want["graph_def"])
    get = graph.get_tensor_by_name
    with graph.as_default(), pytest.raises(LookupError, match="v1 control flow"):
        bridge.gradients([get(n) for n in want["ys"]], [get(n) for n in want["xs"]])


def test_an_attribute_a_while_lacks_is_its_default_and_other_errors_propagate() -> None:
    """An imported While's output_shapes and parallel_iterations (an older GraphDef may lack
    them): TF's InvalidArgument for a missing attribute gives the default, nothing else is caught."""
    import bridge
    from bridge.framework.control_flow import PARALLEL_ITERATIONS
    from bridge.grad.control_flow_grad import _attr_or

    g = bridge.Graph()
    with g.as_default():
        op = bridge.constant(1.0).op
    assert _attr_or(op, "parallel_iterations", PARALLEL_ITERATIONS) == 10
    assert _attr_or(op, "output_shapes", []) == []
    assert _attr_or(op, "dtype", None) == bridge.float32
    with pytest.raises(AttributeError):
        _attr_or(object(), "parallel_iterations", PARALLEL_ITERATIONS)
