"""bridge.summary.hparams against TensorBoard's own hparams summaries
(``tensorboard.plugins.hparams.summary_v2``, the reference implementation:
TensorFlow has none), message for message."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.plugins.hparams import summary_v2 as tb

from bridge.summary import hparams as hp


def _parsed(summary) -> tuple:
    """A Summary's single value: (tag, tensor, plugin name, the parsed HParamsPluginData).
    The plugin data is compared parsed: protobuf writes a map's entries in no fixed order."""
    if isinstance(summary, bytes):
        summary = summary_pb2.Summary.FromString(summary)
    (value,) = summary.value
    data = value.metadata.plugin_data
    return (value.tag, value.tensor, data.plugin_name, plugin_data_pb2.HParamsPluginData.FromString(data.content))


def _pairs():
    return [
        (hp.HParam("lr", hp.RealInterval(1e-4, 1.0), description="step size"),
         tb.HParam("lr", tb.RealInterval(1e-4, 1.0), description="step size")),
        (hp.HParam("opt", hp.Discrete(["sgd", "adam"])), tb.HParam("opt", tb.Discrete(["sgd", "adam"]))),
        (hp.HParam("layers", hp.IntInterval(1, 8), display_name="depth"),
         tb.HParam("layers", tb.IntInterval(1, 8), display_name="depth")),
        (hp.HParam("bn", hp.Discrete([True, False])), tb.HParam("bn", tb.Discrete([True, False]))),
        (hp.HParam("drop", hp.Discrete([0.5, 0.1, 0.25])), tb.HParam("drop", tb.Discrete([0.5, 0.1, 0.25]))),
        (hp.HParam("width", hp.Discrete([64, 8, 16])), tb.HParam("width", tb.Discrete([64, 8, 16]))),
        (hp.HParam("seed"), tb.HParam("seed")),
        (hp.HParam("empty", hp.Discrete([], dtype=str)), tb.HParam("empty", tb.Discrete([], dtype=str))),
    ]


def test_the_experiment_is_tensorboards():
    pairs = _pairs()
    metrics = [(hp.Metric("loss", display_name="Loss"), tb.Metric("loss", display_name="Loss")),
               (hp.Metric("acc", group="validation", dataset_type=hp.Metric.VALIDATION, description="accuracy"),
                tb.Metric("acc", group="validation", dataset_type=tb.Metric.VALIDATION, description="accuracy")),
               (hp.Metric("kappa_error", dataset_type=hp.Metric.TRAINING),
                tb.Metric("kappa_error", dataset_type=tb.Metric.TRAINING))]
    mine = hp.hparams_config_pb([a for a, _ in pairs], [a for a, _ in metrics], time_created_secs=1.7e9)
    theirs = tb.hparams_config_pb([b for _, b in pairs], [b for _, b in metrics], time_created_secs=1.7e9)
    assert _parsed(mine) == _parsed(theirs)
    assert _parsed(mine)[0] == "_hparams_/experiment"
    assert len(_parsed(mine)[3].experiment.hparam_infos) == len(pairs)


@pytest.mark.parametrize("values, trial_id", [
    ({"lr": 0.1, "opt": "adam", "layers": 3, "bn": False, "drop": np.float32(0.5), "seed": True}, None),
    ({"lr": 0.0, "bn": True, "width": np.int64(16)}, "trial-7"),
    ({}, None),
])
def test_a_runs_values_are_tensorboards(values, trial_id):
    assert _parsed(hp.hparams_pb(values, trial_id=trial_id, start_time_secs=12.25)) == \
        _parsed(tb.hparams_pb(values, trial_id=trial_id, start_time_secs=12.25))
    keyed = {hp.HParam(k): v for k, v in values.items()}
    assert _parsed(hp.hparams_pb(keyed, trial_id=trial_id, start_time_secs=1.0)) == \
        _parsed(tb.hparams_pb(values, trial_id=trial_id, start_time_secs=1.0))


@pytest.mark.parametrize("status", ["success", "failure", "running", "unknown"])
def test_the_session_end_is_tensorboards(status):
    from tensorboard.plugins.hparams import api_pb2

    # TensorBoard's session_end_pb needs TensorFlow (not in this process): the message it builds.
    want = plugin_data_pb2.HParamsPluginData(session_end_info=plugin_data_pb2.SessionEndInfo(
        status=getattr(api_pb2, f"STATUS_{status.upper()}"), end_time_secs=99.5))
    tag, tensor, plugin, data = _parsed(hp.session_end_pb(status, end_time_secs=99.5))
    assert (tag, plugin, data) == ("_hparams_/session_end_info", "hparams", want)
    assert tensor == _parsed(tb.hparams_pb({}, start_time_secs=1.0))[1]   # TensorBoard's null tensor


def test_bad_hyperparameters_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"RealInterval: 2\.0 > 1\.0"):
        hp.RealInterval(2.0, 1.0)
    with pytest.raises(ValueError, match="Discrete: 'x' is not of dtype int"):
        hp.Discrete([1, "x"])
    with pytest.raises(ValueError, match="an empty domain needs a dtype"):
        hp.Discrete([])
    with pytest.raises(TypeError, match=r"hparams\['lr'\] = \[0\.1\]: a hyperparameter's value must be"):
        hp.hparams_pb({"lr": [0.1]})
    with pytest.raises(ValueError, match="multiple values for hparam 'lr'"):
        hp.hparams_pb({"lr": 0.1, hp.HParam("lr"): 0.2})
    with pytest.raises(ValueError, match=r"hparams\['lr'\] = nan is not finite"):
        hp.hparams_pb({"lr": float("nan")})
    with pytest.raises(ValueError, match="status must be one of"):
        hp.session_end_pb("done")
    with pytest.raises(ValueError, match="dataset_type must be"):
        hp.Metric("loss", dataset_type="test")
