"""Placement: TF's ``replica_device_setter`` and its ps strategies.

``with bridge.device(replica_device_setter(cluster=cluster)):`` puts every
variable (the op types of ``STANDARD_PS_OPS``) on a ps task, round-robin or
by a strategy, and everything else on the worker device; the variable's
initializer and reads follow its handle (as TF's resource variables), and
the optimizer's updates are colocated with it.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np

from bridge.framework import dtypes
from bridge.framework.device import device_fields, device_string

from .cluster import ClusterSpec

__all__ = ["replica_device_setter", "GreedyLoadBalancingStrategy", "byte_size_load_fn",
           "STANDARD_PS_OPS"]

#: TF's list (tensorflow/python/training/device_setter.py).
STANDARD_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable", "MutableHashTableV2",
                   "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
                   "MutableDenseHashTableV2", "VarHandleOp", "BoostedTreesEnsembleResourceHandleOp",
                   "BoostedTreesQuantileStreamResourceHandleOp", "ResourceConditionalAccumulator",
                   "DecisionTree", "DecisionTreeResource")


def _merge(spec: str, current: str) -> str:
    """TF's ``DeviceSpec(spec).make_merged_spec(current)``: current's fields win."""
    merged = tuple(c if c is not None else s for s, c in zip(device_fields(spec), device_fields(current)))
    return device_string(merged)


class _RoundRobinStrategy:
    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op: Any) -> int:
        task = self._next_task
        self._next_task = (self._next_task + 1) % self._num_tasks
        return task


def byte_size_load_fn(op: Any) -> int:
    """The bytes a variable op holds: its ``shape`` attribute times its
    ``dtype``'s size.  (TF's function reads the op's output, which for a
    resource variable is the scalar handle, one "byte"; the bridge measures
    the variable itself, which is what the load is meant to balance.)"""
    try:
        shape, dtype = op.get_attr("shape"), op.get_attr("dtype")
    except (ValueError, KeyError) as exc:
        raise ValueError(f"byte_size_load_fn: op '{op.name}' ({op.type}) has no shape and dtype "
                         f"attributes: {exc}") from None
    dims = None if shape is None or getattr(shape, "unknown_rank", False) else list(shape)
    if dims is None or any(d is None or d < 0 for d in dims):
        raise ValueError(f"byte_size_load_fn: op '{op.name}' has shape {shape!r}, not fully defined")
    return int(np.prod(dims, dtype=np.int64)) * dtypes.as_dtype(dtype).size


class GreedyLoadBalancingStrategy:
    """TF's ``GreedyLoadBalancingStrategy(num_tasks, load_fn)``: each op to the
    ps task with the least load so far (ties to the lowest index)."""

    def __init__(self, num_tasks: int, load_fn: Callable[[Any], int] = byte_size_load_fn):
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op: Any) -> int:
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task

    @property
    def loads(self) -> list[float]:
        return list(self._ps_loads)


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks: int, ps_device: str, worker_device: str, merge_devices: bool,
                 ps_ops: Sequence[str], ps_strategy: Callable[[Any], int]):
        self._ps_tasks, self._ps_device, self._worker_device = ps_tasks, ps_device, worker_device
        self._merge_devices, self._ps_ops, self._ps_strategy = merge_devices, set(ps_ops), ps_strategy

    def device_function(self, op: Any) -> str:
        current = op.device or ""
        if not self._merge_devices and current:
            return current
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps = device_fields(self._ps_device)
            current_job, ps_job = device_fields(current)[0], ps[0]
            if ps_job and (not current_job or current_job == ps_job):
                ps = ps[:2] + (self._ps_strategy(op),) + ps[3:]
            return _merge(device_string(ps), current)
        return _merge(self._worker_device or "", current)


def replica_device_setter(ps_tasks: int = 0, ps_device: str = "/job:ps", worker_device: str = "/job:worker",
                          merge_devices: bool = True,
                          cluster: Union[ClusterSpec, Mapping[str, Any], None] = None,
                          ps_ops: Optional[Sequence[str]] = None,
                          ps_strategy: Optional[Callable[[Any], int]] = None) -> Optional[Callable[[Any], str]]:
    """A device function for ``bridge.device``, as TF's ``tf.compat.v1.train.replica_device_setter``:
    ops of ``ps_ops`` types (default :data:`STANDARD_PS_OPS`: variables) go to
    ``ps_device`` with the task ``ps_strategy(op)`` chooses (default round-robin
    over ``ps_tasks``, or over the ps job of ``cluster``), all others to
    ``worker_device``; with ``merge_devices``, fields an inner device scope set
    win.  None when there are no ps tasks (TF's answer too)."""
    if cluster is not None:
        spec = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        ps_job = device_fields(ps_device)[0]
        if ps_job not in spec.jobs:
            return None
        ps_tasks = spec.num_tasks(ps_job)
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    return _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices, ps_ops,
                                 ps_strategy).device_function
