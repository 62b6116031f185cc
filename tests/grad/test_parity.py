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

import re
import zlib

import pytest

from support.ci import skip_unavailable
from support.grad_cases import (FAMILIES, NO_CPU_KERNEL, PLUMBING, assert_close, bridge_gradient_types,
                                bridge_gradients, build_case, load_family, load_pending, oracle_request)
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
        for k, a in zip(keys, answers, strict=True):
            result[k] = (built[k], a)
        _answers[family] = result
    return _answers[family]


_NO_KERNEL = re.compile(r"No OpKernel was registered to support Op '(\w+)'")


@pytest.mark.parametrize("family,index,dtype", _PARAMS,
                         ids=[f"{f}-{load_family(f)[i].id(d)}" for f, i, d in _PARAMS])
def test_gradient_matches_tensorflow(family: str, index: int, dtype: str, record_property) -> None:
    """Each outcome is recorded as the ``gradient_parity`` property: "numeric..." (values
    compared), "structure", "raises" or "no CPU kernel".  The summary tests/conftest.py
    prints at the end of the run counts only the first as parity."""
    c = load_family(family)[index]
    record_property("gradient_parity_op", c.op)
    built, want = _family_answers(family)[(index, dtype)]
    if isinstance(built, str):
        missing = _NO_KERNEL.search(built)
        if missing is None:
            pytest.fail(f"building the case failed: {built}")
        record_property("gradient_parity", "no CPU kernel")
        skip_unavailable(f"{c.op} {dtype}: stock TF has no CPU kernel for {missing[1]} in {dtype} ({built[:200]})")
    what = f"{c.id(dtype)}"
    if c.raises:
        assert isinstance(want, str), f"{what}: TF's gradient was expected to raise, it gave {want}"
        assert want.startswith(c.raises.tf), f"{what}: TF raised {want!r}, not {c.raises.tf!r}..."
        with pytest.raises(c.raises.bridge, match=c.raises.match):
            bridge_gradients(c, built)
        record_property("gradient_parity", "raises")
        return
    if built.structural:
        assert not isinstance(want, str), f"{what}: no CPU kernel, and stock TF cannot differentiate the graph: {want}"
        has, types = bridge_gradient_types(built)
        assert has == want["has_gradient"], f"{what}: gradients for {has}, TF's for {want['has_gradient']}"
        assert types == set(want["types"]) - PLUMBING, \
            f"{what}: the bridge's gradient is made of {sorted(types)}, TF's of {sorted(set(want['types']) - PLUMBING)}"
        record_property("gradient_parity", "structure")
        return
    assert not isinstance(want, str), f"{what}: stock TF failed on the same graph: {want}"
    first, second = bridge_gradients(c, built)
    assert_close(first, want["first"], dtype, f"{what}, first order", c.rtol)
    if not c.second:
        record_property("gradient_parity", "numeric, first order only")
        return
    if isinstance(want["second"], str):
        # TF has no second order here (its error is the answer): nothing to match.
        record_property("gradient_parity", "numeric, first order; TF raises for the second")
        return
    assert not isinstance(second, str), f"{what}: TF has a second order, the bridge failed: {second}"
    if want["second"] is None:
        assert second is None or all(g is None for g in second), f"{what}: TF has no second order"
    else:
        assert_close(second, want["second"], dtype, f"{what}, second order", c.rtol)
    record_property("gradient_parity", "numeric")


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


def test_at_least_405_op_types_tf_differentiates_are_covered_369_numerically(tf_registry: dict) -> None:
    """Issue #16's bar: a checked gradient for at least 405 of the op types TF Python
    differentiates.  Checked is not compared: an op type without any CPU kernel is
    compared by structure, and one whose gradient TF refuses by the errors both raise.
    The parity figure counts only op types with a case compared by value (at least 369)."""
    tf_diff = set(tf_registry["differentiable"])
    cases = [c for family in FAMILIES for c in load_family(family)]
    covered = {c.op for c in cases} & tf_diff
    numeric = {c.op for c in cases if not c.raises and c.op not in NO_CPU_KERNEL} & tf_diff
    assert not PENDING
    print(f"op types TF differentiates: {len(tf_diff)}; with a checked gradient: {len(covered)}, "
          f"of which compared by value: {len(numeric)}")
    assert len(covered) >= 405, f"{len(covered)} of {len(tf_diff)} op types have cases"
    assert len(numeric) >= 369, f"{len(numeric)} of {len(tf_diff)} op types have a case compared by value"


def test_not_differentiable_list_is_tf_pythons(tf_registry: dict) -> None:
    """bridge.grad.not_differentiable lists what TF Python declares NotDifferentiable, and
    each of those ops gives None (none has a gradient function in the bridge)."""
    from bridge.grad.not_differentiable import NOT_DIFFERENTIABLE
    from bridge.grad.registry import registered
    assert sorted(NOT_DIFFERENTIABLE) == sorted(tf_registry["not_differentiable"])
    with_function = [op for op in NOT_DIFFERENTIABLE if registered(op)[1] is not None]
    assert not with_function, f"TF declares these not differentiable, the bridge gives them gradients: {with_function}"
    assert all(registered(op)[0] for op in NOT_DIFFERENTIABLE)
