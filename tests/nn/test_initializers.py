"""bridge.initializers and seeds: TF's values, statistics and reproducibility.

TF's random kernels give the same numbers for the same (seed, seed2), so
with seeds chosen by TF's rules (bridge.framework.random_seed.get_seed) the bridge's
initializers, dropout masks and layer kernels equal stock TF's value for
value: with explicit op seeds, and with only a graph seed when the random
ops are created in the same order (one oracle call for the module).
Statistics (glorot limit, he stddev, truncation) and reproducibility across
graphs and sessions are checked on the bridge alone.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import bridge
from bridge import initializers as init
from bridge import layers, nn
from bridge.framework.random_seed import DEFAULT_GRAPH_SEED, get_seed
from support.oracle import run_oracle

EXPLICIT = [  # (name, constructor kwargs, shape, dtype)
    ("glorot_uniform", {"seed": 1}, [30, 40], "float32"),
    ("glorot_normal", {"seed": 2}, [3, 3, 4, 8], "float64"),
    ("he_normal", {"seed": 3}, [50, 20], "float32"),
    ("he_uniform", {"seed": 4}, [2, 2, 3, 5], "float64"),
    ("lecun_normal", {"seed": 5}, [10, 10], "float32"),
    ("lecun_uniform", {"seed": 6}, [10, 10], "float32"),
    ("random_normal", {"mean": 1.0, "stddev": 2.0, "seed": 7}, [6, 7], "float64"),
    ("truncated_normal", {"mean": 0.5, "stddev": 0.3, "seed": 8}, [100], "float32"),
    ("random_uniform", {"minval": -2.0, "maxval": 3.0, "seed": 9}, [5, 5], "float64"),
    ("random_uniform", {"seed": 10}, [5, 5], "float32"),
    ("variance_scaling", {"scale": 2.0, "mode": "fan_out", "distribution": "untruncated_normal", "seed": 11},
     [4, 6], "float64"),
    ("variance_scaling", {"scale": 0.5, "mode": "fan_avg", "distribution": "uniform", "seed": 0}, [4, 6],
     "float32"),
    ("zeros", {}, [2, 3], "float32"),
    ("ones", {}, [40, 30], "float64"),
    ("constant", {"value": [1.0, 2.0, 3.0]}, [3], "float32"),
    ("constant", {"value": 0.25}, [2, 2], "float64"),
]

# Only a graph seed: TF numbers the seedless random ops per graph, in creation order.
GRAPH_SEED_CALLS = [
    ("glorot_uniform", {}, [8, 5], "float32"),
    ("he_normal", {}, [3, 3, 2, 4], "float32"),
    ("random_normal", {"stddev": 0.1}, [7], "float64"),
    ("truncated_normal", {}, [20], "float32"),
    ("random_uniform", {"minval": 1.0, "maxval": 2.0}, [3, 3], "float64"),
]
DROP_X = np.arange(1.0, 31.0).reshape(5, 6)


def _bridge_values(calls, seed=None, dropout=False):
    g = bridge.Graph()
    with g.as_default():
        if seed is not None:
            bridge.set_random_seed(seed)
        outs = [getattr(init, name)(**kw)(shape, dtype) for name, kw, shape, dtype in calls]
        if dropout:
            outs.append(nn.dropout(bridge.constant(DROP_X), rate=0.5))
    with bridge.Session(g) as s:
        return s.run(outs)


@pytest.fixture(scope="module")
def answers():
    def calls(items):
        return [{"init": n, "kwargs": kw, "shape": sh, "dtype": dt} for n, kw, sh, dt in items]
    request = {"random": [
        {"seed": None, "calls": calls(EXPLICIT)},
        {"seed": 1234, "calls": calls(GRAPH_SEED_CALLS) + [{"dropout": DROP_X, "rate": 0.5, "seed": None}]},
        {"seed": None, "calls": [{"dropout": DROP_X, "rate": 0.5, "seed": 99, "noise_shape": [1, 6]}]},
    ]}
    got = run_oracle("nn_layers", request)["random"]
    for g in got:
        assert not isinstance(g, str), g
    return got


@pytest.mark.parametrize("index", range(len(EXPLICIT)))
def test_explicit_seed_gives_tensorflows_values(index, answers):
    name, kw, shape, dtype = EXPLICIT[index]
    got = _bridge_values([EXPLICIT[index]])[0]
    want = answers[0]["values"][index]
    assert got.dtype == want.dtype and got.shape == tuple(shape)
    np.testing.assert_array_equal(got, want)


def test_graph_seed_gives_tensorflows_values_in_creation_order(answers):
    assert answers[1]["graph_seed"] == 1234
    got = _bridge_values(GRAPH_SEED_CALLS, seed=1234, dropout=True)
    for i, (a, b) in enumerate(zip(got, answers[1]["values"], strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"call {i}")


def test_dropout_noise_shape_gives_tensorflows_mask(answers):
    g = bridge.Graph()
    with g.as_default():
        y = nn.dropout(bridge.constant(DROP_X), rate=0.5, seed=99, noise_shape=[1, 6])
    with bridge.Session(g) as s:
        np.testing.assert_array_equal(s.run(y), answers[2]["values"][0])


def test_get_seed_rules():
    g = bridge.Graph()
    with g.as_default():
        assert get_seed(None) == (None, None)
        assert get_seed(5) == (DEFAULT_GRAPH_SEED, 5)
        bridge.set_random_seed(17)
        assert [get_seed(None) for _ in range(3)] == [(17, 0), (17, 1), (17, 2)]
        assert get_seed(5) == (17, 5)
        assert get_seed(2 ** 31 + 3) == (17, 4)  # modulo 2**31 - 1
        bridge.set_random_seed(0)
        assert get_seed(0) == (0, 2 ** 31 - 1)  # (0, 0) means "unseeded" to the kernels
    assert bridge.Graph().seed is None
    with pytest.raises(TypeError, match="seed"):
        bridge.set_random_seed("1")


def test_same_graph_seed_reproduces_across_graphs_and_sessions():
    calls = GRAPH_SEED_CALLS[:3]
    a = _bridge_values(calls, seed=5)
    b = _bridge_values(calls, seed=5)
    c = _bridge_values(calls, seed=6)
    for x, y, z in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)
    # Without any seed every graph draws afresh.
    u, v = _bridge_values(calls[:1]), _bridge_values(calls[:1])
    assert not np.array_equal(u[0], v[0])


def test_seeded_layers_reproduce():
    def build():
        g = bridge.Graph()
        with g.as_default():
            bridge.set_random_seed(3)
            x = bridge.placeholder(bridge.float32, [None, 6])
            h = layers.dense(x, 4, activation=nn.relu, kernel_initializer=init.he_normal())
            layers.conv2d(bridge.placeholder(bridge.float32, [None, 5, 5, 2]), 3, 3)
            layers.dense(h, 2)
            i = bridge.global_variables_initializer()
            reads = [v.read_value() for v in bridge.global_variables()]
        with bridge.Session(g) as s:
            s.run(i)
            return s.run(reads)
    for a, b in zip(build(), build(), strict=True):
        np.testing.assert_array_equal(a, b)


def _values(initializer, shape, dtype="float64"):
    g = bridge.Graph()
    with g.as_default():
        out = initializer(shape, dtype)
    assert out.dtype == bridge.as_dtype(dtype) and list(out.shape) == list(shape)
    with bridge.Session(g) as s:
        return s.run(out)


def test_glorot_uniform_limit():
    fan_in, fan_out = 200, 300
    w = _values(init.glorot_uniform(seed=1), [fan_in, fan_out])
    limit = math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit
    assert abs(w.var() / (limit ** 2 / 3) - 1) < 0.02
    assert abs(w.mean()) < 0.01 * limit


def test_glorot_normal_and_he_normal_stddev():
    w = _values(init.he_normal(seed=2), [400, 300])
    assert abs(w.std() / math.sqrt(2 / 400) - 1) < 0.02
    # Truncated at two stddevs of the underlying normal (stddev / 0.8796...).
    assert np.abs(w).max() <= 2 * math.sqrt(2 / 400) / init.TRUNCATED_NORMAL_STDDEV
    w = _values(init.glorot_normal(seed=3), [300, 500])
    assert abs(w.std() / math.sqrt(2 / 800) - 1) < 0.02


def test_he_uniform_and_conv_kernel_fans():
    assert init.compute_fans([3, 3, 16, 32]) == (144, 288)
    assert init.compute_fans([7]) == (7, 7)
    assert init.compute_fans([]) == (1, 1)
    w = _values(init.he_uniform(seed=4), [3, 3, 16, 32])
    limit = math.sqrt(6 / 144)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit


def test_simple_initializers_and_errors():
    np.testing.assert_array_equal(_values(init.zeros(), [2, 3], "float32"), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(_values(init.ones(), [50, 40]), np.ones((50, 40)))  # a Fill above 1000
    np.testing.assert_array_equal(_values(init.constant([[1, 2], [3, 4]]), [4]), [1.0, 2.0, 3.0, 4.0])
    u = _values(init.random_uniform(seed=1), [1000])
    assert u.min() >= 0 and u.max() < 1
    ints = _values(init.random_uniform(0, 10, seed=1), [1000], "int32")
    assert ints.min() >= 0 and ints.max() < 10
    assert init.get("glorot_uniform").get_config()["seed"] is None
    with pytest.raises(ValueError, match="mode"):
        init.variance_scaling(mode="fan_sum")
    with pytest.raises(ValueError, match="floating"):
        init.glorot_uniform()([2, 2], "int32")
    with pytest.raises(ValueError, match="cannot fill"):
        init.constant([1, 2, 3])([2, 2])
    with pytest.raises(ValueError, match="unknown initializer"):
        init.get("xavier")
