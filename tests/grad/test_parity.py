"""Gradient parity with TF Python: every op type TF differentiates, checked numerically.

The cases live in ``tests/support/grad_cases/<family>.py`` (how a case is built and
compared: ``tests/support/grad_cases/__init__.py``).  Each family asks the oracle once
(cached on disk); each (case, dtype) is one test comparing first- and
second-order gradients with stock TensorFlow's ``tf.gradients`` on the same
GraphDef.

``test_every_op_type_tf_differentiates_has_a_case`` compares the op types
the cases cover with TF Python's gradient registry (listed by the oracle):
each must have a case, or be on :data:`EXCLUDED` with its reason.
"""
from __future__ import annotations

import zlib

import pytest

from support.grad_cases import (FAMILIES, PLUMBING, assert_close, bridge_gradient_types, bridge_gradients, build_case,
                        load_family, load_pending, oracle_request)
from support.oracle import run_oracle

_V1_LOOP = ("a TF v1 loop op: stock TF cannot differentiate an imported v1 loop (its gradient needs "
            "the Python-side WhileContext, which a GraphDef does not keep; TF fails with \"'NoneType' "
            "object has no attribute 'outer_context'\": tests/grad/test_tf_written_gradients.py)")

#: Op types TF differentiates that the bridge does not, each with its reason (at most 12).
#: The cases of the other op types build their graphs with the bridge; graphs stock TF writes
#: (functional If/While/Case from tf.function, TF1 reference tensors, Split with one piece,
#: SavedModels) are checked in tests/grad/test_tf_written_gradients.py.
EXCLUDED: dict[str, str] = {
    **{op: _V1_LOOP for op in ("Enter", "Exit", "NextIteration", "RefEnter", "RefExit", "RefNextIteration")},
    "EagerPyFunc": "tf.py_function's op: its Python callable (and the tape its gradient replays) lives "
                   "in TF Python's process; TF's C library has no kernel for it, so no bridge graph can "
                   "run it or a gradient of it",
    "TopK": "removed from GraphDefs at version 7 and without a kernel; TF's registered gradient "
            "cannot run on it (it returns 2 gradients for TopK's 1 input)",
    "QuantizeAndDequantizeV4Grad": "TF's registered gradient cannot run (TypeError: it takes 2 "
                                   "arguments, TF passes 4), so there is nothing to compare; the "
                                   "bridge gives the masked gradient TF's code intends",
}

#: Work in progress (issue #16): op types TF differentiates whose case is not written yet, from
#: each family's PENDING.  Shrinks to empty; a case for a pending op type fails the coverage
#: test until the op type leaves PENDING.
PENDING: frozenset[str] = frozenset().union(*(load_pending(f) for f in FAMILIES))

_PARAMS = [(family, index, dtype)
           for family in FAMILIES
           for index, c in enumerate(load_family(family))
           for dtype in c.dtype_list()]


def _seed(family: str, index: int, dtype: str) -> int:
    return zlib.crc32(f"{family}/{index}/{dtype}".encode())


_answers: dict[str, dict] = {}


def _family_answers(family: str) -> dict:
    """{(index, dtype): (Built or error string, oracle answer)} for one family."""
    if family not in _answers:
        cases = load_family(family)
        built, requests, keys = {}, [], []
        for index, c in enumerate(cases):
            for dtype in c.dtype_list():
                try:
                    b = build_case(c, dtype, _seed(family, index, dtype))
                except Exception as exc:
                    built[(index, dtype)] = f"{type(exc).__name__}: {exc}"
                    continue
                built[(index, dtype)] = b
                keys.append((index, dtype))
                requests.append(oracle_request(c, b))
        answers = run_oracle("graph_gradients", {"cases": requests})["results"] if requests else []
        result = {k: (built[k], None) for k in built}
        for k, a in zip(keys, answers):
            result[k] = (built[k], a)
        _answers[family] = result
    return _answers[family]


@pytest.mark.parametrize("family,index,dtype", _PARAMS,
                         ids=[f"{f}-{load_family(f)[i].id(d)}" for f, i, d in _PARAMS])
def test_gradient_matches_tensorflow(family: str, index: int, dtype: str) -> None:
    c = load_family(family)[index]
    built, want = _family_answers(family)[(index, dtype)]
    if isinstance(built, str):
        if "kernel" in built.lower() or "NotFound" in built:
            pytest.skip(f"{c.op} {dtype}: the bridge has no CPU kernel for it ({built[:200]})")
        pytest.fail(f"building the case failed: {built}")
    what = f"{c.id(dtype)}"
    if built.structural and not c.raises:
        if isinstance(want, str):  # e.g. NCCL wants devices, TPUEmbedding a TPU training loop
            pytest.skip(f"{what}: no CPU kernel, and stock TF cannot differentiate the graph here: {want[:300]}")
        has, types = bridge_gradient_types(built)
        assert has == want["has_gradient"], f"{what}: gradients for {has}, TF's for {want['has_gradient']}"
        assert types == set(want["types"]) - PLUMBING, \
            f"{what}: the bridge's gradient is made of {sorted(types)}, TF's of {sorted(set(want['types']) - PLUMBING)}"
        return
    if c.raises:
        assert isinstance(want, str), f"{what}: TF's gradient was expected to raise, it gave {want}"
        with pytest.raises(Exception) as info:
            bridge_gradients(c, built)
        assert not isinstance(info.value, AssertionError), info.value
        return
    assert not isinstance(want, str), f"{what}: stock TF failed on the same graph: {want}"
    first, second = bridge_gradients(c, built)
    assert_close(first, want["first"], dtype, f"{what}, first order", c.rtol)
    if not c.second:
        return
    if isinstance(want["second"], str):
        return  # TF has no second order here (its error is the answer): nothing to match
    assert not isinstance(second, str), f"{what}: TF has a second order, the bridge failed: {second}"
    if want["second"] is None:
        assert second is None or all(g is None for g in second), f"{what}: TF has no second order"
        return
    assert_close(second, want["second"], dtype, f"{what}, second order", c.rtol)


@pytest.fixture(scope="module")
def tf_registry() -> dict:
    return run_oracle("gradient_registry")


def test_every_op_type_tf_differentiates_has_a_case(tf_registry: dict) -> None:
    tf_diff = set(tf_registry["differentiable"])
    covered = {c.op for family in FAMILIES for c in load_family(family)}
    assert len(EXCLUDED) <= 12, f"the exclusion list may hold 12 op types, holds {len(EXCLUDED)}"
    assert not (set(EXCLUDED) & covered), f"excluded but covered: {sorted(set(EXCLUDED) & covered)}"
    done_but_pending = sorted(PENDING & covered)
    assert not done_but_pending, f"these have cases now: remove them from PENDING: {done_but_pending}"
    missing = sorted(tf_diff - covered - set(EXCLUDED) - PENDING)
    by_module = {}
    for op in missing:
        by_module.setdefault(tf_registry["modules"].get(op, "?"), []).append(op)
    assert not missing, f"{len(missing)} op types TF differentiates have no case: {by_module}"


def test_at_least_405_op_types_tf_differentiates_are_covered(tf_registry: dict) -> None:
    """Issue #16's bar: a checked gradient for at least 405 of the op types TF Python
    differentiates (each case compares values, or, without a CPU kernel, structure)."""
    tf_diff = set(tf_registry["differentiable"])
    covered = {c.op for family in FAMILIES for c in load_family(family)} & tf_diff
    assert not PENDING
    assert len(covered) >= 405, f"{len(covered)} of {len(tf_diff)} op types have cases"


def test_not_differentiable_list_is_tf_pythons(tf_registry: dict) -> None:
    """bridge.grad.not_differentiable lists what TF Python declares NotDifferentiable, and
    each of those ops gives None (none has a gradient function in the bridge)."""
    from bridge.grad.not_differentiable import NOT_DIFFERENTIABLE
    from bridge.grad.registry import registered
    assert sorted(NOT_DIFFERENTIABLE) == sorted(tf_registry["not_differentiable"])
    with_function = [op for op in NOT_DIFFERENTIABLE if registered(op)[1] is not None]
    assert not with_function, f"TF declares these not differentiable, the bridge gives them gradients: {with_function}"
    assert all(registered(op)[0] for op in NOT_DIFFERENTIABLE)
