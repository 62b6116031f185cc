"""bridge.losses against stock TensorFlow's tf.compat.v1.losses: values and gradients.

TF's v1 losses weight and reduce in float32 whatever the input dtype (and
cast the result back), so float64 inputs give float32-accurate results on
both sides: the comparison is to 1e-6 relative.  One oracle call for the module.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge import losses
from support.nn import compare, oracle_answers, run_function

RNG = np.random.default_rng(1117)
R = losses.Reduction


def _u(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _onehot(labels, n):
    return np.eye(n)[labels]


def _case(fn, wrt, **kwargs):
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    plain = {k: v for k, v in kwargs.items() if not isinstance(v, np.ndarray)}
    return {"fn": fn, "tensors": tensors, "kwargs": plain, "wrt": wrt}


LAB = np.array([0, 3, 1, 1, 2], np.int32)
W_ZEROS = np.array([[1.0, 0.0, 2.0], [0.5, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 3.0, 1.0]])

CASES = {
    "mse": _case("losses.mean_squared_error", ["labels", "predictions"], labels=_u(4, 3), predictions=_u(4, 3)),
    "mse_float32": _case("losses.mean_squared_error", ["predictions"], labels=_u(4, 3, dtype=np.float32),
                         predictions=_u(4, 3, dtype=np.float32)),
    "mse_scalar_weight": _case("losses.mean_squared_error", ["predictions"], labels=_u(4, 3),
                               predictions=_u(4, 3), weights=2.5),
    "mse_row_weights": _case("losses.mean_squared_error", ["predictions", "weights"], labels=_u(4, 3),
                             predictions=_u(4, 3), weights=np.array([[1.0], [0.0], [2.0], [0.5]])),
    "mse_elementwise_weights": _case("losses.mean_squared_error", ["predictions"], labels=_u(4, 3),
                                     predictions=_u(4, 3), weights=W_ZEROS),
    "absolute_difference": _case("losses.absolute_difference", ["predictions"], labels=_u(4, 3),
                                 predictions=_u(4, 3)),
    "absolute_difference_weights": _case("losses.absolute_difference", ["predictions"], labels=_u(4, 3),
                                         predictions=_u(4, 3), weights=W_ZEROS),
    "softmax_xent": _case("losses.softmax_cross_entropy", ["logits"], onehot_labels=_onehot(LAB, 4),
                          logits=_u(5, 4)),
    "softmax_xent_smoothing": _case("losses.softmax_cross_entropy", ["logits"], onehot_labels=_onehot(LAB, 4),
                                    logits=_u(5, 4), label_smoothing=0.1),
    "softmax_xent_weights": _case("losses.softmax_cross_entropy", ["logits"], onehot_labels=_onehot(LAB, 4),
                                  logits=_u(5, 4), weights=np.array([1.0, 0.0, 2.0, 0.5, 1.0])),
    "softmax_xent_int_labels": _case("losses.softmax_cross_entropy", ["logits"],
                                     onehot_labels=_onehot(LAB, 4).astype(np.int32), logits=_u(5, 4)),
    "sparse_xent": _case("losses.sparse_softmax_cross_entropy", ["logits"], labels=LAB, logits=_u(5, 4)),
    "sparse_xent_column_labels": _case("losses.sparse_softmax_cross_entropy", ["logits"],
                                       labels=LAB.reshape(5, 1).astype(np.int64), logits=_u(5, 4)),
    "sparse_xent_weights": _case("losses.sparse_softmax_cross_entropy", ["logits"], labels=LAB, logits=_u(5, 4),
                                 weights=np.array([0.0, 1.0, 2.0, 0.0, 1.0])),
    "sigmoid_xent": _case("losses.sigmoid_cross_entropy", ["logits"], multi_class_labels=_u(3, 4, lo=0, hi=1),
                          logits=_u(3, 4) * 3),
    "sigmoid_xent_smoothing": _case("losses.sigmoid_cross_entropy", ["logits"],
                                    multi_class_labels=_u(3, 4, lo=0, hi=1).round(), logits=_u(3, 4),
                                    label_smoothing=0.2),
}
for _r in (R.NONE, R.SUM, R.MEAN, R.SUM_OVER_BATCH_SIZE, R.SUM_BY_NONZERO_WEIGHTS):
    CASES[f"weighted_{_r}"] = _case("losses.compute_weighted_loss", ["losses", "weights"], losses=_u(4, 3, lo=0),
                                    weights=W_ZEROS, reduction=_r)
CASES["weighted_all_zero_weights"] = _case("losses.compute_weighted_loss", ["losses"], losses=_u(4, 3, lo=0),
                                           weights=np.zeros((4, 1)))

BRIDGE = {f"losses.{name}": getattr(losses, name) for name in losses.__all__ if name[0].islower()}


@pytest.fixture(scope="module")
def answers():
    return oracle_answers(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_tensorflow(name, answers):
    case = CASES[name]
    compare(run_function(BRIDGE[case["fn"]], case), answers[name], name, rtol=1e-6)


def test_default_reduction_is_the_mean_and_losses_are_collected():
    labels, preds = _u(4, 3), _u(4, 3)
    g = bridge.Graph()
    with g.as_default():
        mse = losses.mean_squared_error(labels, preds)
        mae = losses.absolute_difference(labels, preds, loss_collection=None)
        total = losses.get_total_loss()
    assert losses.get_losses(graph=g) == [mse]
    # As TF: mean_squared_error casts its inputs to float32, so the loss is float32.
    assert mse.dtype == bridge.float32 and mse.shape == bridge.Shape([])
    with bridge.Session(g) as s:
        got_mse, got_mae, got_total = s.run([mse, mae, total])
    np.testing.assert_allclose(got_mse, np.mean((labels - preds) ** 2), rtol=1e-6)
    np.testing.assert_allclose(got_mae, np.mean(np.abs(labels - preds)), rtol=1e-6)
    assert got_total == got_mse


def test_errors():
    g = bridge.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="incompatible"):
            losses.mean_squared_error(np.zeros((4, 3)), np.zeros((4, 2)))
        with pytest.raises(ValueError, match="broadcast"):
            losses.mean_squared_error(np.zeros((4, 3)), np.zeros((4, 3)), weights=np.ones((2, 3)))
        with pytest.raises(ValueError, match="reduction"):
            losses.compute_weighted_loss(np.zeros(3), reduction="average")
        with pytest.raises(ValueError, match="labels"):
            losses.sparse_softmax_cross_entropy(None, np.zeros((2, 3)))
