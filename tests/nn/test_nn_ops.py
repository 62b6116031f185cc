"""bridge.nn against stock TensorFlow's tf.nn: values and gradients.

Every case runs the bridge function and TF's (tests/oracle/nn_layers.py,
one oracle call for the module) on the same float64 inputs (float32 for
the fused batch norm, which has no float64 kernel) and compares outputs and
the gradients of sum(sin(outputs)) to 1e-12 relative (1e-6 in float32).
Dropout with an explicit seed is compared value for value: same
(seed, seed2), same Philox numbers.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import nn, ops
from support.nn import compare, oracle_answers, run_function

RNG = np.random.default_rng(20261124)


def _u(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _probs(*shape):
    p = RNG.uniform(0.1, 1.0, shape)
    return p / p.sum(axis=-1, keepdims=True)


def _case(fn, wrt=None, none_dims=None, **kwargs):
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    plain = {k: v for k, v in kwargs.items() if not isinstance(v, np.ndarray)}
    return {"fn": fn, "tensors": tensors, "kwargs": plain,
            "wrt": list(tensors) if wrt is None else wrt, "none_dims": none_dims or {}}


X34 = _u(3, 4)
IMG = _u(2, 7, 7, 3)
FILT = _u(3, 3, 3, 4, lo=-1, hi=1)

CASES = {
    "relu": _case("nn.relu", features=X34),
    "relu6": _case("nn.relu6", features=X34 * 4),
    "leaky_relu": _case("nn.leaky_relu", features=X34, alpha=0.1),
    "elu": _case("nn.elu", features=X34),
    "selu": _case("nn.selu", features=X34),
    "softplus": _case("nn.softplus", features=X34 * 10),
    "softsign": _case("nn.softsign", features=X34),
    "sigmoid": _case("nn.sigmoid", x=X34),
    "tanh": _case("nn.tanh", x=X34),
    "softmax": _case("nn.softmax", logits=_u(3, 4, 2)),
    "softmax_axis1": _case("nn.softmax", logits=_u(3, 4, 2), axis=1),
    "log_softmax": _case("nn.log_softmax", logits=_u(3, 4)),
    "log_softmax_axis0": _case("nn.log_softmax", logits=_u(3, 4), axis=0),
    "bias_add": _case("nn.bias_add", value=_u(2, 3, 4), bias=_u(4)),
    "bias_add_nchw": _case("nn.bias_add", value=_u(2, 3, 4, 5), bias=_u(3), data_format="NCHW"),
    "conv2d_valid": _case("nn.conv2d", input=IMG, filters=FILT, strides=1, padding="VALID"),
    "conv2d_same_stride2": _case("nn.conv2d", input=IMG, filters=FILT, strides=[2, 2], padding="SAME"),
    # TF's CPU kernels have no dilated Conv2DBackpropInput: values only.
    "conv2d_dilated": _case("nn.conv2d", input=IMG, filters=FILT, strides=1, padding="VALID", dilations=2, wrt=[]),
    "conv2d_explicit": _case("nn.conv2d", input=IMG, filters=FILT, strides=[1, 2, 1, 1],
                             padding=[[0, 0], [1, 2], [2, 1], [0, 0]]),
    "max_pool2d": _case("nn.max_pool2d", input=IMG, ksize=2, strides=2, padding="VALID"),
    "max_pool2d_same": _case("nn.max_pool2d", input=IMG, ksize=[3, 3], strides=2, padding="SAME"),
    "avg_pool2d": _case("nn.avg_pool2d", input=IMG, ksize=2, strides=2, padding="VALID"),
    "avg_pool2d_same": _case("nn.avg_pool2d", input=IMG, ksize=3, strides=[2, 1], padding="SAME"),
    "moments": _case("nn.moments", x=_u(4, 3), axes=[0]),
    "moments_keepdims": _case("nn.moments", x=_u(4, 3, 2, 5), axes=[0, 1, 2], keepdims=True),
    "batch_normalization": _case("nn.batch_normalization", x=_u(4, 3), mean=_u(3), variance=_u(3, lo=0.5),
                                 offset=_u(3), scale=_u(3), variance_epsilon=1e-3),
    "batch_normalization_no_affine": _case("nn.batch_normalization", x=_u(4, 3), mean=_u(3),
                                           variance=_u(3, lo=0.5), offset=None, scale=None, variance_epsilon=0.01),
    "fused_batch_norm_training": _case("nn.fused_batch_norm", x=_u(2, 3, 3, 4, dtype=np.float32),
                                       scale=_u(4, dtype=np.float32), offset=_u(4, dtype=np.float32),
                                       epsilon=0.001, is_training=True),
    "fused_batch_norm_inference": _case("nn.fused_batch_norm", x=_u(2, 3, 3, 4, dtype=np.float32),
                                        scale=_u(4, dtype=np.float32), offset=_u(4, dtype=np.float32),
                                        mean=_u(4, dtype=np.float32), variance=_u(4, lo=0.5, dtype=np.float32),
                                        epsilon=0.001, is_training=False, wrt=["x", "scale", "offset"]),
    "l2_loss": _case("nn.l2_loss", t=X34),
    "softmax_xent": _case("nn.softmax_cross_entropy_with_logits", labels=_probs(5, 4), logits=_u(5, 4)),
    "softmax_xent_axis0": _case("nn.softmax_cross_entropy_with_logits", labels=_probs(5, 4).T.copy(),
                                logits=_u(4, 5), axis=0),
    "softmax_xent_rank3_dynamic": _case("nn.softmax_cross_entropy_with_logits", labels=_probs(2, 3, 4),
                                        logits=_u(2, 3, 4), none_dims={"labels": [0], "logits": [0]}),
    "sparse_xent": _case("nn.sparse_softmax_cross_entropy_with_logits", labels=np.array([0, 3, 1, 1, 2], np.int32),
                         logits=_u(5, 4), wrt=["logits"]),
    "sparse_xent_rank3": _case("nn.sparse_softmax_cross_entropy_with_logits",
                               labels=np.array([[0, 3, 1], [2, 2, 0]], np.int64), logits=_u(2, 3, 4),
                               wrt=["logits"], none_dims={"labels": [0], "logits": [0]}),
    "sigmoid_xent": _case("nn.sigmoid_cross_entropy_with_logits", labels=_u(3, 4, lo=0, hi=1), logits=_u(3, 4) * 5),
    "dropout_seeded": _case("nn.dropout", x=_u(6, 5), rate=0.3, seed=7),
    "dropout_noise_shape": _case("nn.dropout", x=_u(6, 5), rate=0.5, seed=11, noise_shape=[6, 1]),
    "dropout_rate0": _case("nn.dropout", x=_u(6, 5), rate=0.0, seed=3),
}

BRIDGE = {f"nn.{name}": getattr(nn, name) for name in nn.__all__}


@pytest.fixture(scope="module")
def answers():
    return oracle_answers(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_tensorflow(name, answers):
    case = CASES[name]
    compare(run_function(BRIDGE[case["fn"]], case), answers[name], name)


def test_fused_kernels_are_used():
    g = bridge.Graph()
    with g.as_default():
        logits = bridge.placeholder(bridge.float64, [5, 4])
        nn.softmax_cross_entropy_with_logits(labels=_probs(5, 4), logits=logits)
        nn.sparse_softmax_cross_entropy_with_logits(labels=np.zeros(5, np.int32), logits=logits)
    types = {op.type for op in g.get_operations()}
    assert {"SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits"} <= types


def test_dropout_statistics_and_scaling():
    rate = 0.25
    x = np.full((200, 500), 3.0)
    g = bridge.Graph()
    with g.as_default():
        y = nn.dropout(x, rate=rate, seed=5)
        y_again = nn.dropout(x, rate=rate, seed=5)
        y_other = nn.dropout(x, rate=rate, seed=6)
    with bridge.Session(g) as s:
        a, b, c = s.run([y, y_again, y_other])
        a2 = s.run(y)
    kept = a != 0
    assert abs(kept.mean() - (1 - rate)) < 0.01
    np.testing.assert_allclose(a[kept], 3.0 / (1 - rate), rtol=1e-15)
    np.testing.assert_array_equal(a, b)  # same (graph default seed, op seed): same mask
    assert (a != c).any()
    assert (a != a2).any()  # a stateful op: the next run draws new numbers


def test_dropout_keep_prob_and_errors():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [3])
        nn.dropout(x, keep_prob=0.5)
        with pytest.raises(ValueError, match="rate"):
            nn.dropout(x, rate=1.0)
        with pytest.raises(ValueError, match="floating"):
            nn.dropout(bridge.placeholder(bridge.int32, [3]), rate=0.5)
        with pytest.raises(ValueError, match="both"):
            nn.dropout(x, rate=0.5, keep_prob=0.5)


def test_dropout_rate_tensor():
    g = bridge.Graph()
    with g.as_default():
        rate = bridge.placeholder(bridge.float64, [], name="rate")
        y = nn.dropout(np.ones((100, 100)), rate=rate, seed=1)
    with bridge.Session(g) as s:
        out = s.run(y, {rate: 0.5})
    assert set(np.unique(out)) <= {0.0, 2.0}
    assert abs((out != 0).mean() - 0.5) < 0.03


def test_errors_name_the_argument():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3, 4], name="feat")
        with pytest.raises(ValueError, match="axis 5"):
            nn.softmax(x, axis=5)
        with pytest.raises(ValueError, match="labels.shape"):
            nn.sparse_softmax_cross_entropy_with_logits(labels=np.zeros([4], np.int32), logits=x)
        with pytest.raises(TypeError, match="int32 or int64"):
            nn.sparse_softmax_cross_entropy_with_logits(labels=np.zeros([3], np.float32), logits=x)
        with pytest.raises(ValueError, match="strides"):
            nn.conv2d(bridge.placeholder(bridge.float64, [1, 4, 4, 1]), np.ones((2, 2, 1, 1)), [1, 1, 1], "VALID")
        with pytest.raises(ValueError, match="padding"):
            nn.max_pool2d(bridge.placeholder(bridge.float64, [1, 4, 4, 1]), 2, 2, "FULL")


def test_moments_in_a_function_graph_and_operators():
    # nn functions build in the default graph's scope, so they work inside bridge.function too.
    @bridge.function(input_signature=[bridge.TensorSpec([4, 3], bridge.float64)])
    def standardize(x):
        m, v = nn.moments(x, [0])
        return (x - m) * ops.rsqrt(v + 1e-12)

    data = _u(4, 3)
    g = bridge.Graph()
    with g.as_default():
        out = standardize(bridge.constant(data))
    with bridge.Session(g) as s:
        got = s.run(out)
    want = (data - data.mean(0)) / np.sqrt(data.var(0) + 1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-12)
