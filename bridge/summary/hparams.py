"""Hyperparameters for TensorBoard's HParams dashboard, with the names of
TensorBoard's own API (``tensorboard.plugins.hparams.api``)::

    from bridge.summary import hparams as hp

    LR = hp.HParam("learning_rate", hp.RealInterval(1e-4, 1.0))
    with FileWriter("runs") as root:                       # the experiment, once
        root.add_summary(hp.hparams_config_pb([LR], [hp.Metric("loss")]))
    with FileWriter("runs/lr=0.1") as run:                 # one run of the sweep
        run.add_summary(hp.hparams_pb({LR: 0.1}))
        ...                                                # scalars tagged "loss"
        run.add_summary(hp.session_end_pb("success"))

Each ``*_pb`` function returns a serialized ``Summary`` (what a summary op's
run gives) for ``FileWriter.add_summary``; the values are TensorBoard's
``HParamsPluginData`` messages, written without TensorBoard or protobuf.
"""
from __future__ import annotations

import hashlib
import json
import math
import struct
import time
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from bridge.framework import _proto

from .summary_ops import plugin_metadata

__all__ = ["HParam", "Discrete", "IntInterval", "RealInterval", "Metric", "hparams_config_pb", "hparams_pb",
           "session_end_pb", "EXPERIMENT_TAG", "SESSION_START_INFO_TAG", "SESSION_END_INFO_TAG"]

PLUGIN_NAME = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_INFO_TAG = "_hparams_/session_start_info"
SESSION_END_INFO_TAG = "_hparams_/session_end_info"

# tensorboard.hparams' enums (api.proto).
_DATA_TYPE = {str: 1, bool: 2, float: 3, int: 3}   # TensorBoard has no int type: ints are FLOAT64
_STATUS = {"unknown": 0, "success": 1, "failure": 2, "running": 3}
_DATASET = {None: 0, "training": 1, "validation": 2}

#: HParamsPluginData's fields: version = 1, experiment = 2, session_start_info = 3, session_end_info = 4.
_PLUGIN_EXPERIMENT, _PLUGIN_START, _PLUGIN_END = 2, 3, 4
#: The empty float tensor every hparams value carries (TensorBoard's ``metadata.NULL_TENSOR``):
#: dtype DT_FLOAT (1), shape [0].
_NULL_TENSOR = _proto.field_varint(1, 1) + _proto.field_bytes(2, _proto.field_bytes(2, b""))


def _double(number: int, value: float) -> bytes:
    return _proto._varint(number << 3 | _proto.I64) + struct.pack("<d", float(value))


def _double_field(number: int, value: float) -> bytes:
    """A proto3 double outside a oneof: absent when 0, as protobuf writes it."""
    return _double(number, value) if value else b""


def _string(number: int, value: Optional[str]) -> bytes:
    return _proto.field_bytes(number, value.encode()) if value else b""


def _plain(value: Any, what: str) -> Union[bool, int, float, str]:
    """A Python or numpy scalar as a Python bool, int, float or str."""
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"{what} = {value!r}: a hyperparameter's value must be a bool, int, float or str, "
                        f"not {type(value).__name__}")
    return value


def _value(value: Union[bool, int, float, str]) -> bytes:
    """A ``google.protobuf.Value``: number_value = 2, string_value = 3, bool_value = 4."""
    if isinstance(value, bool):
        return _proto.field_varint(4, int(value))   # written when False too: a oneof member has presence
    if isinstance(value, str):
        return _proto.field_bytes(3, value.encode())
    return _double(2, value)


class Domain:
    """The values a hyperparameter ranges over."""

    dtype: type

    def _info(self) -> bytes:
        raise NotImplementedError


class IntInterval(Domain):
    """Integers from ``min_value`` to ``max_value`` (both included)."""

    dtype = int

    def __init__(self, min_value: int, max_value: int):
        if min_value > max_value:
            raise ValueError(f"IntInterval: {min_value!r} > {max_value!r}")
        self.min_value, self.max_value = int(min_value), int(max_value)

    def __repr__(self) -> str:
        return f"IntInterval({self.min_value!r}, {self.max_value!r})"

    def _info(self) -> bytes:
        return _proto.field_varint(4, _DATA_TYPE[float]) + _proto.field_bytes(
            6, _double_field(1, self.min_value) + _double_field(2, self.max_value))


class RealInterval(Domain):
    """Reals from ``min_value`` to ``max_value``."""

    dtype = float

    def __init__(self, min_value: float, max_value: float):
        if min_value > max_value:
            raise ValueError(f"RealInterval: {min_value!r} > {max_value!r}")
        self.min_value, self.max_value = float(min_value), float(max_value)

    def __repr__(self) -> str:
        return f"RealInterval({self.min_value!r}, {self.max_value!r})"

    def _info(self) -> bytes:
        return _proto.field_varint(4, _DATA_TYPE[float]) + _proto.field_bytes(
            6, _double_field(1, self.min_value) + _double_field(2, self.max_value))


class Discrete(Domain):
    """A finite set of values of one type (bool, int, float or str)."""

    def __init__(self, values: Sequence[Any], dtype: Optional[type] = None):
        values = [_plain(v, "Discrete value") for v in values]
        if dtype is None:
            if not values:
                raise ValueError("Discrete: an empty domain needs a dtype")
            dtype = type(values[0])
        if dtype not in _DATA_TYPE:
            raise ValueError(f"Discrete: unknown dtype {dtype!r} (bool, int, float or str)")
        for v in values:
            if not (type(v) is dtype or (dtype is float and type(v) is int)):
                raise ValueError(f"Discrete: {v!r} is not of dtype {dtype.__name__}")
        self.dtype = dtype
        self.values = sorted(values) if dtype is not bool else sorted(set(values))

    def __repr__(self) -> str:
        return f"Discrete({self.values!r})"

    def _info(self) -> bytes:
        listed = b"".join(_proto.field_bytes(1, _value(v)) for v in self.values)
        # An empty domain leaves the field unset, as TensorBoard's does.
        return _proto.field_varint(4, _DATA_TYPE[self.dtype]) + (_proto.field_bytes(5, listed) if listed else b"")


class HParam:
    """A hyperparameter: its name (the key of ``hparams_pb``'s dict) and, optionally, its domain."""

    def __init__(self, name: str, domain: Optional[Domain] = None, display_name: Optional[str] = None,
                 description: Optional[str] = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"HParam: name must be a non-empty str, got {name!r}")
        if domain is not None and not isinstance(domain, Domain):
            raise ValueError(f"HParam {name!r}: not a domain: {domain!r}")
        self.name, self.domain, self.display_name, self.description = name, domain, display_name, description

    def __repr__(self) -> str:
        return f"HParam({self.name!r}, {self.domain!r})"

    def _info(self) -> bytes:
        return (_string(1, self.name) + _string(2, self.display_name) + _string(3, self.description)
                + (self.domain._info() if self.domain is not None else b""))


class Metric:
    """A metric the dashboard shows per run: the scalar summary tagged ``tag``
    (in the run's folder, or its ``group`` subfolder such as "train")."""

    TRAINING = "training"
    VALIDATION = "validation"

    def __init__(self, tag: str, group: Optional[str] = None, display_name: Optional[str] = None,
                 description: Optional[str] = None, dataset_type: Optional[str] = None):
        if dataset_type not in _DATASET:
            raise ValueError(f"Metric {tag!r}: dataset_type must be Metric.TRAINING, Metric.VALIDATION or None, "
                             f"got {dataset_type!r}")
        self.tag, self.group, self.display_name = tag, group, display_name
        self.description, self.dataset_type = description, dataset_type

    def __repr__(self) -> str:
        return f"Metric({self.tag!r}, group={self.group!r})"

    def _info(self) -> bytes:
        name = _string(1, self.group) + _string(2, self.tag)
        return (_proto.field_bytes(1, name) + _string(3, self.display_name) + _string(4, self.description)
                + (_proto.field_varint(5, _DATASET[self.dataset_type]) if self.dataset_type else b""))


def _summary(tag: str, field: int, message: bytes) -> bytes:
    """A Summary with one value: ``tag``, the hparams plugin's metadata holding
    ``HParamsPluginData{field: message}`` (version 0), the null tensor."""
    metadata = plugin_metadata(PLUGIN_NAME, _proto.field_bytes(field, message))
    value = _proto.field_bytes(1, tag.encode()) + _proto.field_bytes(8, _NULL_TENSOR) + _proto.field_bytes(9, metadata)
    return _proto.field_bytes(1, value)


def hparams_config_pb(hparams: Sequence[HParam], metrics: Sequence[Metric],
                      time_created_secs: Optional[float] = None) -> bytes:
    """The experiment: the hyperparameters and metrics the dashboard tabulates.
    Write it once, in the folder above the runs."""
    for h in hparams:
        if not isinstance(h, HParam):
            raise TypeError(f"hparams_config_pb: expected HParams, got {h!r}")
    for m in metrics:
        if not isinstance(m, Metric):
            raise TypeError(f"hparams_config_pb: expected Metrics, got {m!r}")
    created = time.time() if time_created_secs is None else float(time_created_secs)
    experiment = (_double_field(3, created) + b"".join(_proto.field_bytes(4, h._info()) for h in hparams)
                  + b"".join(_proto.field_bytes(5, m._info()) for m in metrics))
    return _summary(EXPERIMENT_TAG, _PLUGIN_EXPERIMENT, experiment)


def hparams_pb(hparams: Mapping[Union[str, HParam], Any], trial_id: Optional[str] = None,
               start_time_secs: Optional[float] = None) -> bytes:
    """One run's hyperparameter values (the start of a session): ``hparams`` maps
    names or ``HParam``s to bool, int, float or str values.  ``trial_id``
    groups runs of one set of values (default: a hash of the values, as
    TensorBoard derives it)."""
    values: dict[str, Any] = {}
    for key, value in hparams.items():
        name = key.name if isinstance(key, HParam) else key
        if not isinstance(name, str):
            raise TypeError(f"hparams_pb: keys must be str or HParam, got {key!r}")
        if name in values:
            raise ValueError(f"hparams_pb: multiple values for hparam {name!r}")
        values[name] = _plain(value, f"hparams[{name!r}]")
        if isinstance(values[name], float) and not math.isfinite(values[name]):
            raise ValueError(f"hparams_pb: hparams[{name!r}] = {values[name]!r} is not finite (JSON cannot hold it)")
    if trial_id is None:
        encoded = json.dumps(values, sort_keys=True, separators=(",", ":"))
        trial_id = hashlib.sha256(encoded.encode("utf-8")).hexdigest()
    elif not isinstance(trial_id, str):
        raise TypeError(f"hparams_pb: trial_id should be a str, got {trial_id!r}")
    start = time.time() if start_time_secs is None else float(start_time_secs)
    entries = b"".join(_proto.field_bytes(1, _proto.field_bytes(1, name.encode())
                                          + _proto.field_bytes(2, _value(values[name])))
                       for name in sorted(values))
    return _summary(SESSION_START_INFO_TAG, _PLUGIN_START, entries + _string(4, trial_id) + _double_field(5, start))


def session_end_pb(status: str = "success", end_time_secs: Optional[float] = None) -> bytes:
    """The end of a run's session: ``status`` "success", "failure", "running" or "unknown"."""
    if status not in _STATUS:
        raise ValueError(f"session_end_pb: status must be one of {sorted(_STATUS)}, got {status!r}")
    end = time.time() if end_time_secs is None else float(end_time_secs)
    message = (_proto.field_varint(1, _STATUS[status]) if _STATUS[status] else b"") + _double_field(2, end)
    return _summary(SESSION_END_INFO_TAG, _PLUGIN_END, message)
