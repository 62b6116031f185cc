"""The Python types of fetched values are TF1's: a 0-d tensor is a numpy scalar (bytes for a string).

tests/oracle/fetch_types.py builds a graph with stock TF (a 0-d and a 1-d
tensor of every dtype, placeholders, a resource and a ref variable, a TF1
SavedModel of scalar outputs) and fetches them with ``tf.compat.v1.Session``
in each way checked here: one at a time, in a list, nested, through
``make_callable``, fed and fetched, variables, a SavedModel signature.  The
bridge imports the same GraphDef and must give the same types (module and
name), dtypes, shapes and values.  A tensor both fed and fetched is TF1's
``np.asarray`` of the fed value, a 0-d array; the bridge gives the fed value
as converted for TensorFlow (a string comes back as bytes where TF1 returns
the str that was fed).
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import bridge
from support.oracle import run_oracle

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "string"]
NAMES = [f"{d}_{r}:0" for d in DTYPES for r in ("0d", "1d")]

Pair = collections.namedtuple("Pair", "first second")


def describe(x: Any) -> Any:
    """As the oracle describes TF's results (tests/oracle/fetch_types.py)."""
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return [type(x).__name__, [describe(v) for v in x]]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__, [describe(v) for v in x]]
    if isinstance(x, dict):
        return ["dict", {k: describe(v) for k, v in x.items()}]
    kind = type(x)
    return {"type": f"{kind.__module__}.{kind.__qualname__}",
            "dtype": str(x.dtype) if hasattr(x, "dtype") else None,
            "shape": tuple(np.shape(x)) if hasattr(x, "shape") else None,
            "value": x}


def assert_same(got: Any, want: Any, where: str, values: bool = True) -> None:
    """``got`` (described) is ``want``: containers alike, leaves of one type, dtype, shape and value."""
    if isinstance(want, list):
        assert isinstance(got, list) and got[0] == want[0], f"{where}: {got!r} is not a {want[0]}"
        if want[0] == "dict":
            assert got[1].keys() == want[1].keys(), where
            for k in want[1]:
                assert_same(got[1][k], want[1][k], f"{where}[{k!r}]", values)
        else:
            assert len(got[1]) == len(want[1]), where
            for i, (g, w) in enumerate(zip(got[1], want[1], strict=True)):
                assert_same(g, w, f"{where}[{i}]", values)
        return
    leaf = {k: got[k] for k in ("type", "dtype", "shape")}
    assert leaf == {k: want[k] for k in ("type", "dtype", "shape")}, f"{where}: got {got!r}, TF1 gives {want!r}"
    if values:
        g, w = got["value"], want["value"]
        assert np.array_equal(np.asarray(g), np.asarray(w)) and np.asarray(g).dtype == np.asarray(w).dtype, \
            f"{where}: got {g!r}, TF1 gives {w!r}"


@pytest.fixture(scope="module")
def want() -> dict:
    return run_oracle("fetch_types")


@pytest.fixture(scope="module")
def session(want: dict):
    graph = bridge.Graph()
    graph.import_graph_def(want["graph_def"])
    with bridge.Session(graph) as sess:
        for op in want["init"]:
            sess.run(op)
        yield sess


def fed_value(dtype: str) -> Any:
    """What the oracle feeds (tests/oracle/fetch_types.py)."""
    return {"string": "fed", "bool": True}.get(dtype, complex(7, 1) if dtype.startswith("complex") else 7)


@pytest.mark.parametrize("name", NAMES)
def test_a_fetch_has_tf1s_type(want: dict, session, name: str) -> None:
    assert_same(describe(session.run(name)), want["single"][name], name)


def test_listed_and_nested_fetches_have_tf1s_types(want: dict, session) -> None:
    assert_same(describe(session.run(NAMES)), want["listed"], "listed")
    nested = {"scalars": [f"{d}_0d:0" for d in DTYPES],
              "pair": Pair("float64_0d:0", ("int32_0d:0", "string_0d:0")), "vector": "float32_1d:0"}
    assert_same(describe(session.run(nested)), want["nested"], "nested")


def test_callables_give_tf1s_types(want: dict, session) -> None:
    fed = [f"{d}_fed:0" for d in DTYPES[:2]]
    run = session.make_callable({"out": NAMES[:6] + ["string_0d:0"], "fed": fed}, fed)
    assert_same(describe(run(*[fed_value(d) for d in DTYPES[:2]])), want["callable"], "make_callable")


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_fed_and_fetched_scalar_is_a_0d_array_as_in_tf1(want: dict, session, dtype: str) -> None:
    name = f"{dtype}_fed:0"
    got = describe(session.run(name, {name: fed_value(dtype)}))
    assert_same(got, want["fed"][name], name, values=dtype != "string")
    if dtype == "string":
        assert want["fed"][name]["value"][()] == "fed" and got["value"][()] == b"fed"


def test_variables_fetch_as_tf1s_scalars(want: dict, session) -> None:
    names = want["variable_names"]
    graph = session.graph
    fetches = [graph.get_tensor_by_name(names["read"]), graph.get_tensor_by_name(names["read"]),
               graph.get_tensor_by_name(names["ref"])]
    assert_same(describe(session.run(fetches)), want["variables"], "variables")


def test_a_saved_model_signature_gives_tf1s_types(want: dict) -> None:
    sm = want["saved_model"]
    with bridge.load_saved_model(sm["path"]) as model:
        got = model.signatures[sm["signature"]](x=2.5)
    assert_same(describe(got), ["dict", sm["outputs"]], "signature")


def test_prepared_runs_give_tf1s_scalar_types(want: dict, session) -> None:
    """A PreparedRun (what ScipyOptimizer evaluates with) of a 0-d fetch, by run() and caller()."""
    graph = session.graph
    x = graph.get_tensor_by_name("float64_fed:0")
    with graph.as_default():
        y = x * graph.get_tensor_by_name("float64_0d:0")
    run = session._prepare(y, [x])
    try:
        run.feed(0, np.float64(3.0))
        by_run = run.run()
        by_caller = run.caller(0)(np.array(2.0))
    finally:
        run.close()
    template = want["single"]["float64_0d:0"]
    assert_same(describe(by_run), {**template, "value": np.float64(15.0)}, "run()")
    assert_same(describe(by_caller), {**template, "value": np.float64(10.0)}, "caller()")


def test_the_paths_that_do_not_copy_give_tf1s_types_too() -> None:
    """A string (converted element by element) and a large tensor (a view of TensorFlow's
    buffer) take another path than small numbers: a string scalar is bytes there too, a large
    1-d result an array; a 0-d number beside them is a numpy scalar."""
    graph = bridge.Graph()
    with graph.as_default():
        s = bridge.constant(b"\x00bytes")
        big = bridge.constant(np.arange(20000.0))
        picked = bridge.ops.sum(big, [0])
    with bridge.Session(graph) as sess:
        got_s, got_big, got_sum = sess.run([s, big, picked])
    assert type(got_s) is bytes and got_s == b"\x00bytes"
    assert type(got_big) is np.ndarray and got_big.shape == (20000,)
    assert type(got_sum) is np.float64 and got_sum == np.float64(np.arange(20000.0).sum())
