"""bridge.layers against stock TensorFlow's TF1 layers (tf.compat.v1.layers).

Each case builds one layer on both sides with the same weights (constant
initializers) and inputs, and compares: the output, the gradients of
sum(sin(output)) against the input and every trainable variable, the
variables' names (TF's ``global_variables()``), and for batch
normalization the moving statistics after running the "update_ops" once.
float64 to 1e-12 relative; the fused float32 batch norm to 1e-6.  The
variable-name programs build several layers in one graph on both sides.
One oracle call for the module (tests/oracle/nn_layers.py).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bridge
from bridge import layers, nn
from support.nn import assert_close, compare, run_layer
from support import TESTS
from support.oracle import run_oracle

RNG = np.random.default_rng(4242)


def _u(*shape, lo=-1.0, hi=1.0, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _bn_weights(n, dtype=np.float64):
    return {"gamma": _u(n, lo=0.5, hi=1.5, dtype=dtype), "beta": _u(n, dtype=dtype),
            "moving_mean": _u(n, dtype=dtype), "moving_variance": _u(n, lo=0.5, hi=2.0, dtype=dtype)}


def _layer(layer, x, activation=None, weights=None, training=None, **kwargs):
    return {"layer": layer, "x": x, "kwargs": kwargs, "activation": activation, "weights": weights or {},
            "training": training}


IMG = _u(2, 7, 7, 3) * 2
X54 = _u(5, 4) * 2

CASES = {
    "dense": _layer("dense", X54, weights={"kernel": _u(4, 3), "bias": _u(3)}, units=3),
    "dense_relu": _layer("dense", X54, "relu", {"kernel": _u(4, 3), "bias": _u(3)}, units=3),
    "dense_no_bias_tanh": _layer("dense", X54, "tanh", {"kernel": _u(4, 2)}, units=2, use_bias=False),
    "dense_rank3": _layer("dense", _u(2, 5, 4), "sigmoid", {"kernel": _u(4, 3), "bias": _u(3)}, units=3),
    "dense_default_bias": _layer("dense", X54, weights={"kernel": _u(4, 3)}, units=3),
    "conv2d_valid": _layer("conv2d", IMG, weights={"kernel": _u(3, 3, 3, 4), "bias": _u(4)}, filters=4,
                           kernel_size=3),
    "conv2d_same_strided": _layer("conv2d", IMG, "relu", {"kernel": _u(3, 3, 3, 2), "bias": _u(2)}, filters=2,
                                  kernel_size=3, strides=2, padding="same"),
    "conv2d_rect": _layer("conv2d", IMG, "elu", {"kernel": _u(2, 3, 3, 5), "bias": _u(5)}, filters=5,
                          kernel_size=(2, 3), strides=(1, 2), padding="valid"),
    "max_pooling2d": _layer("max_pooling2d", IMG, pool_size=2, strides=2),
    "average_pooling2d_same": _layer("average_pooling2d", IMG, pool_size=3, strides=2, padding="same"),
    "flatten": _layer("flatten", _u(2, 3, 4, 2)),
    "dropout_inference": _layer("dropout", X54, training=False, rate=0.5),
    "dropout_training": _layer("dropout", _u(6, 8), training=True, rate=0.4, seed=3),
    "dropout_feed_true": _layer("dropout", _u(6, 8), training="feed_true", rate=0.4, seed=3),
    "dropout_feed_false": _layer("dropout", _u(6, 8), training="feed_false", rate=0.4, seed=3),
    "bn_inference": _layer("batch_normalization", _u(6, 3) * 3, weights=_bn_weights(3), training=False),
    "bn_training": _layer("batch_normalization", _u(6, 3) * 3 + 1, weights=_bn_weights(3), training=True),
    "bn_feed_true": _layer("batch_normalization", _u(6, 3) * 3, weights=_bn_weights(3), training="feed_true"),
    "bn_feed_false": _layer("batch_normalization", _u(6, 3) * 3, weights=_bn_weights(3), training="feed_false"),
    "bn_training_rank4_f64": _layer("batch_normalization", _u(4, 3, 3, 2) * 2, weights=_bn_weights(2),
                                    training=True, momentum=0.9, epsilon=1e-2),
    "bn_training_axis1": _layer("batch_normalization", _u(6, 3, 2) * 2, weights=_bn_weights(3), training=True,
                                axis=1),
    "bn_training_no_affine": _layer("batch_normalization", _u(6, 3) * 2, training=True, center=False, scale=False),
    "bn_fused_training": _layer("batch_normalization", _u(4, 3, 3, 2, dtype=np.float32) * 2,
                                weights=_bn_weights(2, np.float32), training=True),
    "bn_fused_inference": _layer("batch_normalization", _u(4, 3, 3, 2, dtype=np.float32) * 2,
                                 weights=_bn_weights(2, np.float32), training=False),
    "bn_fused_feed_true": _layer("batch_normalization", _u(4, 3, 3, 2, dtype=np.float32) * 2,
                                 weights=_bn_weights(2, np.float32), training="feed_true"),
    "bn_fused_feed_false": _layer("batch_normalization", _u(4, 3, 3, 2, dtype=np.float32) * 2,
                                  weights=_bn_weights(2, np.float32), training="feed_false"),
}

# Several layers in one graph: default names count per graph, name scopes do not prefix variables.
NAMES = [
    [{"layer": "dense", "shape": [2, 3], "kwargs": {"units": 4}},
     {"layer": "dense", "shape": [2, 4], "kwargs": {"units": 2}},
     {"layer": "dense", "shape": [2, 4], "kwargs": {"units": 2, "name": "out"}},
     {"layer": "conv2d", "shape": [1, 5, 5, 2], "kwargs": {"filters": 3, "kernel_size": 3}},
     {"layer": "batch_normalization", "shape": [2, 4], "kwargs": {}},
     {"layer": "dense", "shape": [2, 3], "kwargs": {"units": 1, "use_bias": False}, "scope": "block"},
     {"layer": "batch_normalization", "shape": [1, 5, 5, 2], "kwargs": {"name": "bn", "center": False}},
     {"layer": "dropout", "shape": [2, 3], "kwargs": {"rate": 0.5}},
     {"layer": "flatten", "shape": [2, 3, 3], "kwargs": {}},
     {"layer": "conv2d", "shape": [1, 5, 5, 2], "kwargs": {"filters": 1, "kernel_size": 1, "name": "c"},
      "scope": "block"},
     {"layer": "dense", "shape": [2, 3], "kwargs": {"units": 1}}],
]


@pytest.fixture(scope="module")
def answers():
    got = run_oracle("nn_layers", {"layers": list(CASES.values()), "names": NAMES})
    return {"batch_normalization_module": got["batch_normalization_module"], "names": got["names"],
            **dict(zip(CASES, got["layers"], strict=True))}


@pytest.mark.parametrize("name", list(CASES))
def test_layer_matches_tensorflow(name, answers):
    want = answers[name]
    assert not isinstance(want, str), want
    got = run_layer(CASES[name])
    rtol = 1e-6 if CASES[name]["x"].dtype == np.float32 else 1e-12
    compare(got, want, name, rtol)
    assert got["variables"] == want["variables"]
    assert got["trainable"] == want["trainable"]
    assert got["update_ops"] == want["update_ops"]
    assert set(got["after_update"]) == set(want["after_update"])
    for var, value in want["after_update"].items():
        assert_close(got["after_update"][var], value, f"{name}: {var} after the update", rtol)


def _build_names(program):
    g = bridge.Graph()
    with g.as_default():
        for step in program:
            x = bridge.placeholder(bridge.float32, step["shape"])
            fn = getattr(layers, step["layer"])
            if step.get("scope"):
                with g.name_scope(step["scope"]):
                    fn(x, **step["kwargs"])
            else:
                fn(x, **step["kwargs"])
    return [v.op.name for v in bridge.global_variables(g)], [v.op.name for v in bridge.trainable_variables(g)]


@pytest.mark.parametrize("index", range(len(NAMES)))
def test_variable_names_match_tensorflow(index, answers):
    want = answers["names"][index]
    assert not isinstance(want, str), want
    names, trainable = _build_names(NAMES[index])
    assert names == want["variables"]
    assert trainable == want["trainable"]


def test_batch_norm_answers_come_from_tf_kerass_tf1_layer(answers):
    # tf.compat.v1.layers.batch_normalization is tf_keras' layer: no copy of it answers.
    assert answers["batch_normalization_module"] == "tf_keras.src.legacy_tf_layers.normalization"


def test_the_layers_oracle_fails_without_tf_keras(tmp_path):
    """Where tf_keras is missing the oracle exits saying how to install it
    (before importing TensorFlow): the layer tests then fail, never skip."""
    hide = ("import importlib.util, runpy, sys\n"
            "find = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'tf_keras' else find(name, *a)\n"
            "sys.argv = [sys.argv[1], 'request', 'response', 'out']\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    script = TESTS / "oracle" / "nn_layers.py"
    proc = subprocess.run([sys.executable, "-c", hide, str(script)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert proc.stderr == ("nn_layers oracle: the tf_keras package is not installed, and TF's TF1 "
                           "layers.batch_normalization lives there; install it as `make setup` does: "
                           "pip install --no-deps 'tf-keras~=<TensorFlow's major.minor>.0'\n")
    assert not (tmp_path / "response").exists()


def test_seeded_dense_equals_tensorflow_default_initialization(answers_random):
    # Same graph seed and construction order: TF's glorot_uniform draws the same kernels.
    got, want = answers_random
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def answers_random():
    x = _u(3, 4).astype(np.float32)
    want = run_oracle("nn_layers", {"random": [{"seed": 77, "calls": [{"dense": x, "units": 5},
                                                                      {"dense": x, "units": 2}]}]})["random"][0]
    assert not isinstance(want, str), want
    g = bridge.Graph()
    with g.as_default():
        bridge.set_random_seed(77)
        outs = [layers.dense(bridge.constant(x), 5), layers.dense(bridge.constant(x), 2)]
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        got = s.run(outs)
    return got, want["values"]


def test_reuse_shares_variables_and_duplicates_are_refused():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None, 3])
        a = layers.dense(x, 2, name="shared")
        n = len(bridge.global_variables())
        b = layers.dense(x, 2, name="shared", reuse=True)
        assert len(bridge.global_variables()) == n
        with pytest.raises(ValueError, match="shared/kernel already exists"):
            layers.dense(x, 2, name="shared")
        with pytest.raises(ValueError, match="shape"):
            layers.dense(x, 3, name="shared", reuse=True)
        with pytest.raises(ValueError, match="does not exist"):
            layers.dense(x, 2, name="fresh", reuse=True)
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        va, vb = s.run([a, b], {x: np.ones((1, 3))})
    np.testing.assert_array_equal(va, vb)


def test_update_ops_collection_and_training_loop():
    # Moving statistics converge to the data's statistics when the updates run with each step.
    data = RNG.normal(3.0, 2.0, (64, 2))
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None, 2])
        layers.batch_normalization(x, training=True, momentum=0.5)
        updates = layers.update_ops()
        assert [op.type for op in updates] == ["AssignSubVariableOp"] * 2
        assert updates == g.collections[layers.UPDATE_OPS]
        mm = [v for v in bridge.global_variables() if v.op.name.endswith("moving_mean")][0]
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        for _ in range(40):
            s.run(updates, {x: data})
        np.testing.assert_allclose(s.run(mm.read_value()), data.mean(0), rtol=1e-9)


def test_dropout_layer_inference_is_identity_and_training_scales():
    x = np.full((100, 100), 2.0)
    g = bridge.Graph()
    with g.as_default():
        off = layers.dropout(x, rate=0.3)
        on = layers.dropout(x, rate=0.3, training=True)
    assert off.op.type == "Identity"
    with bridge.Session(g) as s:
        a, b = s.run([off, on])
    np.testing.assert_array_equal(a, x)
    assert set(np.unique(b)) <= {0.0, 2.0 / 0.7}
    assert abs((b != 0).mean() - 0.7) < 0.02


def test_layer_errors_name_the_input():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, None], name="feat")
        with pytest.raises(ValueError, match="feat"):
            layers.dense(x, 3)
        with pytest.raises(TypeError, match="floating"):
            layers.dense(bridge.placeholder(bridge.int32, [2, 3]), 3)
        with pytest.raises(TypeError, match="training"):
            layers.dropout(bridge.placeholder(bridge.float32, [2]), training=bridge.placeholder(bridge.float32, []))
        with pytest.raises(ValueError, match="padding"):
            layers.conv2d(bridge.placeholder(bridge.float32, [1, 4, 4, 1]), 2, 3, padding="full")


def test_activation_names_and_regularizers():
    w = _u(3, 2, dtype=np.float32)  # float32: TF's v1 losses are float32, and AddN needs one dtype
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 3])
        y = layers.dense(x, 2, activation="relu", kernel_initializer=bridge.initializers.constant(w),
                         kernel_regularizer=lambda k: 0.01 * nn.l2_loss(k))
        loss = bridge.losses.mean_squared_error(np.zeros((1, 2)), y)
        total = bridge.losses.get_total_loss()
        penalty, = g.collections[layers.REGULARIZATION_LOSSES]
        init = bridge.global_variables_initializer()
        with pytest.raises(ValueError, match="unknown activation"):
            layers.dense(x, 2, activation="swoosh")
    assert y.op.type == "Relu" and penalty.op.name.startswith("dense/kernel/Regularizer/")
    with bridge.Session(g) as s:
        s.run(init)
        got_y, got_p, got_loss, got_total = s.run([y, penalty, loss, total], {x: np.ones((1, 3), np.float32)})
    np.testing.assert_allclose(got_y, np.maximum(np.ones((1, 3)) @ w, 0), rtol=1e-6)
    np.testing.assert_allclose(got_p, 0.01 * 0.5 * (w ** 2).sum(), rtol=1e-6)
    np.testing.assert_allclose(got_total, got_loss + got_p, rtol=1e-6)
