"""Gradients of GraphDefs stock TensorFlow writes, against stock TF's ``tf.gradients`` on them.

tests/oracle/tf_written_gradients.py builds each graph with TF's own builders
(``tf.function`` with ``tf.cond``/``tf.while_loop``/``tf.switch_case`` and
TensorArrays: functional ``If``/``While``/``Case`` and their Stateless forms,
whose branches and bodies exist only as FunctionDefs in the library; TF1 ref
variables; ``Split``/``SplitV`` with one piece), differentiates it, and sends
the GraphDef.  The bridge imports it unchanged and differentiates it to first
and second order.
"""
from __future__ import annotations

import numpy as np
import pytest

from oracle_client import run_oracle

NAMES = ["cond_true", "cond_false", "cond_stateful", "while", "while_stateful", "while_max_iterations",
         "case_0", "case_2", "case_default", "case_stateful", "nested", "nested_loops", "tensor_array",
         "tensor_array_read", "call_in_function", "ref_variable", "ref_control_flow", "ref_v1_cond",
         "split_one", "split_raw"]


@pytest.fixture(scope="module")
def answers() -> dict:
    return run_oracle("tf_written_gradients", {"cases": NAMES})["results"]


def _bridge_gradients(want: dict):
    import bridge
    from bridge import ops

    graph = bridge.Graph()
    graph.import_graph_def(want["graph_def"])
    get = graph.get_tensor_by_name
    xs, ys = [get(n) for n in want["xs"]], [get(n) for n in want["ys"]]
    gys, vs = [get(n) for n in want["grad_ys"]], [get(n) for n in want["vs"]]
    with graph.as_default():
        first = bridge.gradients(ys, xs, grad_ys=gys)
        parts = [ops.sum(ops.reshape(ops.mul(g, v), [-1]), 0) for g, v in zip(first, vs) if g is not None]
        z = ops.add_n(parts) if len(parts) > 1 else parts[0]
        second = bridge.gradients(z, xs)
    feed = {get(k): v for k, v in want["feed"].items()}
    with bridge.Session(graph) as sess:
        for name in want["init"]:
            sess.run(name)
        got = sess.run([g for g in first + second if g is not None], feed)
    it = iter(got)
    return [None if g is None else next(it) for g in first], [None if g is None else next(it) for g in second]


def _close(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert (g is None) == (w is None), f"{what}, x{k}: bridge {g is None and 'None'}, TF {w is None and 'None'}"
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-10, err_msg=f"{what}, x{k}")


@pytest.mark.parametrize("name", NAMES)
def test_matches_tensorflow(answers: dict, name: str) -> None:
    want = answers[name]
    assert not isinstance(want, str), f"stock TF failed: {want}"
    first, second = _bridge_gradients(want)
    _close(first, want["first"], f"{name}, first order")
    if isinstance(want["second"], str):
        return  # TF has no second order here (its error is the answer)
    _close(second, want["second"], f"{name}, second order")


def test_the_cases_hold_the_op_types(answers: dict) -> None:
    """The graphs hold what this file is about, as TF wrote them."""
    types = set().union(*(set(a["op_types"]) for a in answers.values() if not isinstance(a, str)))
    wanted = {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase", "VariableV2",
              "RefSwitch", "RefMerge", "RefIdentity", "Split", "SplitV", "TensorListSetItem",
              "TensorListGetItem", "PartitionedCall"}
    assert wanted <= types, sorted(wanted - types)
