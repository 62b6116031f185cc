"""Session behaviour: feeds, fetch structures, errors that keep the session usable."""
import re
from collections import namedtuple

import numpy as np
import pytest

import bridge
from bridge import dtypes, errors
from support.threads import run_threads


@pytest.fixture
def graph():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(dtypes.float64, [None, 3], name="x")
        g.create_op("Identity", [x], attrs={"T": dtypes.float64}, name="y")
        g.create_op("Square", [x], attrs={"T": dtypes.float64}, name="sq")
    return g


def test_fetch_structures(graph):
    Pair = namedtuple("Pair", "a b")
    y, sq = graph.get_tensor_by_name("y:0"), graph.get_tensor_by_name("sq:0")
    feed = {"x:0": np.arange(6.0).reshape(2, 3)}
    with bridge.Session(graph) as s:
        out = s.run({"list": [y, "sq:0"], "pair": Pair(y, sq), "op": "y"}, feed)
    np.testing.assert_array_equal(out["list"][1], np.arange(6.0).reshape(2, 3) ** 2)
    assert isinstance(out["pair"], Pair)
    assert out["op"] is None


def test_errors_carry_tf_message_and_session_stays_usable(graph):
    x = graph.get_tensor_by_name("x:0")
    s = bridge.Session(graph)
    with pytest.raises(errors.NotFoundError, match="no operation named 'missing'"):
        s.run("missing:0")
    with graph.as_default():
        bad = bridge.ops.reshape(x, [4, -1])
    with pytest.raises(errors.InvalidArgumentError, match="requested shape requires a multiple of 4"):
        s.run(bad, {x: bridge.Tensor(np.ones((1, 3)))})
    with pytest.raises(errors.InvalidArgumentError, match="You must feed a value for placeholder tensor 'x'"):
        s.run("y:0")
    np.testing.assert_array_equal(s.run("y:0", {x: np.ones((1, 3))}), np.ones((1, 3)))
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.run("y:0", {x: np.ones((1, 3))})


def test_closing_leaves_this_threads_shared_status_alone(graph):
    """close() also runs from __del__ in the interpreter's last garbage
    collection, which may free this thread's shared TF_Status first: close
    must use a status of its own (the end-to-end case, a process exiting with
    sessions open, is in test_julia_scheduling)."""
    from bridge.framework._lib import lib

    session = bridge.Session(graph)
    shared = errors.status()
    lib.TF_SetStatus(shared.ptr, 3, b"sentinel")  # 3: INVALID_ARGUMENT
    try:
        session.close()
        assert (shared.code, shared.message) == (3, "sentinel")
    finally:
        lib.TF_SetStatus(shared.ptr, 0, b"")


def test_malformed_graphdef_raises_invalid_argument():
    g = bridge.Graph()
    with pytest.raises(errors.InvalidArgumentError, match="Invalid GraphDef"):
        g.import_graph_def(b"\x0a\x05garbage")


def test_config_threads_and_inline_execution(graph):
    x = graph.get_tensor_by_name("x:0")
    for config in [bridge.SessionConfig(inter_op_parallelism_threads=-1),
                   {"intra_op_parallelism_threads": 1, "use_per_session_threads": True}]:
        with bridge.Session(graph, config=config) as s:
            np.testing.assert_array_equal(s.run("sq:0", {x: [[1.0, 2.0, 3.0]]}), [[1.0, 4.0, 9.0]])


def test_session_config_is_the_config_proto_stock_tf_reads(oracle):
    config = bridge.SessionConfig(inter_op_parallelism_threads=3, intra_op_parallelism_threads=2,
                                  use_per_session_threads=True, allow_soft_placement=True,
                                  disable_meta_optimizer=True)
    fields = oracle("config_proto", {"config": config.to_proto()})["fields"]
    assert fields == {"inter_op_parallelism_threads": 3, "intra_op_parallelism_threads": 2,
                      "use_per_session_threads": True, "allow_soft_placement": True,
                      "graph_options.rewrite_options.disable_meta_optimizer": True}
    assert oracle("config_proto", {"config": bridge.SessionConfig().to_proto()})["fields"] == {}


def test_graph_runs_as_written_without_the_meta_optimizer(graph):
    x = graph.get_tensor_by_name("x:0")
    with bridge.Session(graph, config=bridge.SessionConfig(disable_meta_optimizer=True)) as s:
        np.testing.assert_array_equal(s.run("sq:0", {x: [[1.0, 2.0, 3.0]]}), [[1.0, 4.0, 9.0]])


def test_concurrent_runs_from_threads(graph):
    x = graph.get_tensor_by_name("x:0")
    s = bridge.Session(graph)

    def work(k):
        for i in range(50):
            v = np.full((2, 3), float(k * 100 + i))
            np.testing.assert_array_equal(s.run("sq:0", {x: v}), v ** 2, err_msg=f"thread {k}, run {i}")

    run_threads(work, 8, timeout=60)
    s.close()


def test_graph_lookup_and_attrs(graph):
    op = graph.get_operation_by_name("sq")
    assert op.type == "Square" and op.inputs[0].name == "x:0"
    assert op.get_attr("T") == dtypes.float64
    assert graph.get_operation_by_name("x").get_attr("shape") == bridge.Shape([None, 3])
    assert [o.name for o in graph] == ["x", "y", "sq"]
    assert graph.get_tensor_by_name("x:0").consumers() == [graph.get_operation_by_name("y"), op]


def test_graphdef_round_trip_with_prefix_and_input_map(graph):
    gd = graph.as_graph_def()
    g2 = bridge.Graph()
    with g2.as_default():
        z = bridge.constant(np.full((1, 3), 2.0), name="z")
    sq, = g2.import_graph_def(gd, prefix="imp", input_map={"x:0": z}, return_elements=["sq:0"])
    assert sq.name == "imp/sq:0"
    with bridge.Session(g2) as s:
        np.testing.assert_array_equal(s.run(sq), np.full((1, 3), 4.0))


def test_small_graphs_run_in_the_caller_thread_large_ones_on_the_pool(graph):
    x = graph.get_tensor_by_name("x:0")
    s = bridge.Session(graph)
    np.testing.assert_array_equal(s.run("sq:0", {x: [[1.0, 2.0, 3.0]]}), [[1.0, 4.0, 9.0]])
    assert s._graph_is_small()
    with graph.as_default():  # the graph grows past the limit: the count resumes where it stopped
        y = x
        for _ in range(20):
            y = graph.create_op("Neg", [y], attrs={"T": dtypes.float64}).output(0)
    assert not s._graph_is_small()
    np.testing.assert_array_equal(s.run(y, {x: [[1.0, 2.0, 3.0]]}), [[1.0, 2.0, 3.0]])
    off = bridge.Session(graph, config=bridge.SessionConfig(inline_small_graphs=0))
    assert not off._graph_is_small()


def test_the_tf_binding_never_imports_the_julia_host():
    """Graphs, sessions, gradients and functions work without the Julia host
    loaded: only a julia_thread session brings it in (through the runner the
    package registers), so `bridge` without Julia stays a plain TF binding."""
    import subprocess
    import sys
    code = """
import sys
import numpy as np
import bridge
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [2], name="x")
    y = bridge.ops.square(x)
    dx, = bridge.gradients(y, [x])
    f = bridge.function(lambda a: a * 2.0, input_signature=[bridge.TensorSpec([2], bridge.float64)])
    z = f(x)
with bridge.Session(g) as s:
    print(s.run([y, dx, z], {x: np.array([1.0, 2.0])}))
host = sorted(m for m in sys.modules if m in ("bridge.julia", "bridge.julia.runtime", "bridge.customop"))
print("HOST", host)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "HOST []" in proc.stdout, proc.stdout


def test_julia_thread_session_without_a_registered_host_says_so(monkeypatch):
    from bridge.framework import session as session_module
    monkeypatch.setattr(session_module, "_julia_thread_runner", None)
    with pytest.raises(RuntimeError, match="needs a Julia host"):
        bridge.Session(bridge.Graph(), config=bridge.SessionConfig(julia_thread=True))


# --- feeds checked against the placeholder's static shape and dtype, as TF Python does ---

@pytest.mark.parametrize("make", [np.ones, lambda shape: bridge.Tensor(np.ones(shape))],
                         ids=["numpy", "Tensor"])
@pytest.mark.parametrize("shape", [(2, 4), (3,), (1, 1, 3), ()])
def test_feed_of_the_wrong_shape_names_placeholder_and_both_shapes(graph, make, shape):
    """TF Python: ValueError "Cannot feed value of shape (2, 4) for Tensor x:0, which has shape (?, 3)"."""
    x = graph.get_tensor_by_name("x:0")
    with bridge.Session(graph) as sess:
        want = rf"shape {re.escape(str(shape))} to placeholder 'x:0', which has shape \(\?, 3\)"
        with pytest.raises(ValueError, match=want):
            sess.run("y:0", {x: make(shape)})
        # The refused feed leaves the session usable.
        np.testing.assert_array_equal(sess.run("y:0", {x: make((2, 3))}), np.ones((2, 3)))


def test_tensor_feeds_are_converted_like_numpy_values(graph):
    """A Tensor of another dtype is converted where no value changes, else TypeError
    naming the placeholder (before, TF refused it with a bare InvalidArgumentError)."""
    x = graph.get_tensor_by_name("x:0")
    with bridge.Session(graph) as sess:
        same = bridge.Tensor(np.full((1, 3), 0.5))
        assert sess.run("y:0", {x: same}).tolist() == [[0.5] * 3]
        assert sess.run("y:0", {x: same}).tolist() == [[0.5] * 3]    # checked once, then remembered
        assert sess.run("y:0", {x: bridge.Tensor(np.arange(3, dtype=np.int32).reshape(1, 3))}).tolist() == [[0, 1, 2]]
        with pytest.raises(TypeError, match="placeholder 'x:0', which holds float64"):
            sess.run("y:0", {x: bridge.Tensor(np.array([[b"a", b"b", b"c"]], dtype=object))})
    g = bridge.Graph()
    with g.as_default():
        n = bridge.placeholder(dtypes.int32, [2], name="n")
        m = bridge.ops.identity(n)
    with bridge.Session(g) as sess:
        with pytest.raises(TypeError, match=r"placeholder 'n:0' \(int32\).*1.5"):
            sess.run(m, {n: bridge.Tensor(np.array([1.5, 2.0]))})
        # A Tensor that fitted one placeholder is checked again against another.
        ok = bridge.Tensor(np.array([1, 2], np.int32))
        assert sess.run(m, {n: ok}).tolist() == [1, 2]
    with bridge.Session(graph) as sess:
        with pytest.raises(ValueError, match=r"shape \(2,\)"):
            sess.run("y:0", {graph.get_tensor_by_name("x:0"): ok})


def test_unknown_rank_and_unknown_dims_accept_any_fitting_shape():
    g = bridge.Graph()
    with g.as_default():
        a = bridge.placeholder(dtypes.float32, None, name="a")
        b = bridge.placeholder(dtypes.float32, [None, None], name="b")
        out = [bridge.ops.identity(a), bridge.ops.identity(b)]
    with bridge.Session(g) as sess:
        for shape in [(), (4,), (2, 3, 1)]:
            assert sess.run(out[0], {a: np.zeros(shape)}).shape == shape
        assert sess.run(out[1], {b: bridge.Tensor(np.zeros((0, 5), np.float32))}).shape == (0, 5)
        with pytest.raises(ValueError, match=r"placeholder 'b:0', which has shape \(\?, \?\)"):
            sess.run(out[1], {b: np.zeros(5)})


def test_make_callable_runs_like_run(graph):
    Pair = namedtuple("Pair", "a b")
    x, y, sq = (graph.get_tensor_by_name(n) for n in ("x:0", "y:0", "sq:0"))
    with bridge.Session(graph) as s:
        step = s.make_callable({"pair": Pair(y, sq), "op": "y"}, [x])
        for k in range(3):
            value = np.full((2, 3), float(k))
            out = step(value)
            expected = s.run({"pair": Pair(y, sq), "op": "y"}, {x: value})
            assert isinstance(out["pair"], Pair) and out["op"] is None
            np.testing.assert_array_equal(out["pair"].b, expected["pair"].b)
            np.testing.assert_array_equal(out["pair"].a, value)
        # Feeds are converted and checked as run() checks them, naming the placeholder.
        with pytest.raises(ValueError, match=r"shape \(2, 4\) to placeholder 'x:0'"):
            step(np.zeros((2, 4)))
        with pytest.raises(TypeError, match=r"feeds 1 tensor\(s\) \(x:0\), got 2"):
            step(np.zeros((2, 3)), np.zeros((2, 3)))
        with pytest.raises(errors.InvalidArgumentError, match="placeholder"):
            s.make_callable(y)()  # x is not fed
        no_feed = s.make_callable([sq], ["x:0"])
        np.testing.assert_array_equal(no_feed(np.ones((1, 3)))[0], np.ones((1, 3)))
        # run()'s keywords: a deadline far away, explicit RunOptions.
        np.testing.assert_array_equal(no_feed(np.ones((1, 3)), timeout=60.0)[0], np.ones((1, 3)))
        np.testing.assert_array_equal(no_feed(np.ones((1, 3)), run_options=b"")[0], np.ones((1, 3)))
    with pytest.raises(RuntimeError, match="closed Session"):
        step(np.zeros((2, 3)))


def test_make_callable_from_threads(graph):
    x, sq = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("sq:0")
    with bridge.Session(graph) as s:
        step = s.make_callable(sq, [x])

        def work(i):
            for k in range(200):
                value = np.full((4, 3), float(i * 1000 + k))
                np.testing.assert_array_equal(step(value), value ** 2)
        run_threads(work, 4)
