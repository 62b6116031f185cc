"""The Saver's graph: save and restore ops, one shard or one per device.

Laid out as TensorFlow's Saver lays out a sharded V2 checkpoint:

- ``save/Const``, the checkpoint prefix to feed (a PlaceholderWithDefault);
- saving: per shard a ``SaveV2`` writing ``<prefix>_temp/part-<k>-of-<n>``,
  then ``MergeV2Checkpoints`` moving the shards to ``<prefix>.index`` and
  ``<prefix>.data-<k>-of-<n>`` (and removing the temporary folder), and
  ``save/Identity`` returning the prefix;
- restoring: per shard one ``RestoreV2`` and an ``AssignVariableOp`` per
  variable, grouped in ``save/restore_shard``, all in ``save/restore_all``.

Unsharded, everything is one shard at the graph's root device.  Sharded
(TF's ``sharded=True``), the variables are grouped by the device of their
handle (on a cluster: their ps task), sorted by device name as TF sorts
them; each shard's ``SaveV2`` and ``RestoreV2`` run on that device's CPU, so
each ps task writes and reads its own variables, and the merge runs on the
last shard's device.
"""
from __future__ import annotations

import numpy as np

from bridge import ops
from bridge.framework.builders import Variable, constant
from bridge.framework.device import device_fields, device_string
from bridge.framework.graph import Graph, Operation, Output

__all__ = ["SaverOps", "build_saver_ops", "shard_device"]


class SaverOps:
    """The ops a Saver runs: ``filename`` (to feed), ``save_tensor``, ``restore_op``,
    and ``shards`` (each shard's device and checkpoint keys)."""

    def __init__(self, filename: Output, save_tensor: Output, restore_op: Operation,
                 shards: list[tuple[str, list[str]]]):
        self.filename, self.save_tensor, self.restore_op, self.shards = filename, save_tensor, restore_op, shards


def shard_device(device: str) -> str:
    """The device a variable placed on ``device`` is saved from: its job,
    replica and task, on that task's CPU:0 (TF's ``set_cpu0``); "" for a
    variable with no job (a local one)."""
    job, replica, task, _, _ = device_fields(device or "")
    if job is None and replica is None and task is None:
        return ""
    return device_string((job, replica, task, "CPU", 0))


def _shards(variables: dict[str, Variable], sharded: bool) -> list[tuple[str, list[str]]]:
    if not sharded:
        return [("", list(variables))]
    per_device: dict[str, list[str]] = {}
    for key, var in variables.items():
        per_device.setdefault(shard_device(var.handle.op.device), []).append(key)
    return sorted(per_device.items())


def build_saver_ops(graph: Graph, variables: dict[str, Variable], name: str, sharded: bool = False) -> SaverOps:
    """Build the save and restore ops of ``variables`` (checkpoint key ->
    Variable, sorted by key) under the name scope ``name``."""
    shards = _shards(variables, sharded)
    # Saving never waits on the caller's control dependencies, and sits at the root device.
    with graph.as_default(), graph.control_dependencies(None), graph.device(None), graph.name_scope(name):
        default = ops.placeholder_with_default("model", shape=[], name="filename")
        filename = ops.placeholder_with_default(default, shape=[], name="Const")
        # As TF: S3 has no folders, so there the temporary shard sits beside the prefix.
        on_s3 = ops.static_regex_full_match(filename, pattern="^s3://.*")
        suffix = ops.select(on_s3, constant(".part"), constant("_temp/part"))
        temp_prefix = ops.string_join([filename, suffix])
        num_shards = constant(np.int32(len(shards)), name="num_shards")
        names, written = [], []
        for k, (device, keys) in enumerate(shards):
            with graph.device(device or None):
                index = constant(np.int32(k), name="ShardedFilename/shard")
                shard = ops.sharded_filename(temp_prefix, index, num_shards, name="ShardedFilename")
                save_op = ops.save_v2(shard, keys, [""] * len(keys), [variables[key].value() for key in keys],
                                      name="SaveV2")
                with graph.control_dependencies([save_op]):
                    written.append(ops.identity(shard, name="control_dependency"))
                names.append(shard)
        with graph.device(shards[-1][0] or None), graph.control_dependencies(written):
            prefixes = ops.pack(names, name="MergeV2Checkpoints/checkpoint_prefixes")
            merge = ops.merge_v2_checkpoints(prefixes, filename, delete_old_dirs=True, name="MergeV2Checkpoints")
            with graph.control_dependencies([merge]):
                save_tensor = ops.identity(filename, name="Identity")
        restores = []
        for device, keys in shards:
            with graph.device(device or None):
                restored = ops.restore_v2(filename, keys, [""] * len(keys),
                                          dtypes=[variables[key].dtype for key in keys], name="RestoreV2")
                restored = restored if isinstance(restored, (list, tuple)) else [restored]
                assigns = [ops.assign_variable_op(variables[key].handle, ops.identity(t))
                           for key, t in zip(keys, restored)]
                with graph.control_dependencies(assigns):
                    restores.append(ops.no_op(name="restore_shard"))
        with graph.control_dependencies(restores):
            restore_op = ops.no_op(name="restore_all")
    return SaverOps(filename, save_tensor, restore_op, shards)

