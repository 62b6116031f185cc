"""Synchronous in-graph replication: one client, one tower per worker.

``replicate(model_fn, optimizer, cluster)`` builds TF1's "towers" layout
(TensorFlow's multi-GPU CIFAR-10 example, spread over the workers of a
cluster) in the default graph:

- the variables go to the ps tasks (``replica_device_setter``);
- tower ``i`` (name scope ``tower_<i>``) runs ``model_fn(i)`` on worker
  ``i`` and differentiates its loss there (gradient ops colocated with
  their forward ops, so Julia ops and their gradients run on that worker);
- each variable's gradients are averaged on the variable's own ps task
  (:func:`average_gradients`: the towers' sum, ``AddN``, divided by their
  number) and applied once by ``optimizer``.

One ``Session.run`` of ``train_op`` is one synchronous step over every
tower: the result does not depend on how fast each worker is, and
``cluster=None`` builds the same graph with no devices, so the local run of
the same towers gives the same values bit for bit.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np

from bridge import ops
from bridge.framework.builders import Variable, constant, global_variables, trainable_variables
from bridge.framework.graph import Graph, Operation, Output, get_default_graph
from bridge.framework.indexed_slices import IndexedSlices, indexed_slices_to_tensor

from .cluster import ClusterSpec
from .placement import _RoundRobinStrategy, replica_device_setter

__all__ = ["replicate", "average_gradients", "Replicated"]


@dataclass
class Replicated:
    """What :func:`replicate` built.

    ``train_op``: one synchronous step (every tower, averaged gradients,
    one update).  ``loss``: the mean of the towers' losses.
    ``tower_losses`` and ``tower_outputs`` (what ``model_fn`` returned) per
    tower; ``devices``: each tower's worker device ("" without a cluster);
    ``grads_and_vars``: the averaged gradients and their variables."""
    train_op: Operation
    loss: Output
    tower_losses: list[Output]
    tower_outputs: list[Any]
    devices: list[str]
    grads_and_vars: list[tuple[Any, Variable]] = field(default_factory=list)

    @property
    def num_replicas(self) -> int:
        return len(self.tower_losses)


def average_gradients(tower_grads: Sequence[Sequence[tuple[Any, Variable]]]) -> list[tuple[Any, Variable]]:
    """Average each variable's gradient over the towers (TF's CIFAR-10
    multi-GPU ``average_gradients``): ``tower_grads[i]`` is tower ``i``'s
    ``[(gradient, variable)]``, the variables in the same order in every
    tower.  The average (``AddN`` of the towers' gradients, divided by their
    number) is colocated with the variable, so on a cluster it runs on the
    variable's ps task; a variable no tower has a gradient for keeps None.
    IndexedSlices gradients are densified first."""
    if not tower_grads:
        raise ValueError("average_gradients: no towers")
    variables = [v for _, v in tower_grads[0]]
    for i, grads in enumerate(tower_grads):
        if [v for _, v in grads] != variables:
            raise ValueError(f"average_gradients: tower {i} lists other variables than tower 0 "
                             f"({[v.name for _, v in grads]} against {[v.name for v in variables]})")
    out = []
    n = len(tower_grads)
    for k, var in enumerate(variables):
        grads = [grads[k][0] for grads in tower_grads]
        present = [g for g in grads if g is not None]
        if not present:
            out.append((None, var))
            continue
        if len(present) != n:
            missing = [i for i, g in enumerate(grads) if g is None]
            raise ValueError(f"average_gradients: variable '{var.name}' has a gradient in some towers but "
                             f"none in towers {missing}: every tower must use the same variables")
        graph = var.graph
        with graph.as_default(), graph.colocate_with(var.op), graph.name_scope(f"average_{var.op.name}"):
            dense = [indexed_slices_to_tensor(g, warn=False) if isinstance(g, IndexedSlices) else g
                     for g in present]
            total = dense[0] if n == 1 else ops.add_n(dense, name="sum")
            count = constant(np.asarray(n, var.dtype.as_numpy_dtype), name="num_towers")
            out.append((ops.real_div(total, count, name="average"), var))
    return out


def _loss_of(result: Any, i: int) -> Output:
    if isinstance(result, Output):
        return result
    if isinstance(result, Mapping) and isinstance(result.get("loss"), Output):
        return result["loss"]
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], Output):
        return result[0]
    raise TypeError(f"replicate: model_fn({i}) returned {type(result).__name__}; return the tower's loss "
                    "(an Output), a tuple (loss, ...) or a dict with a 'loss'")


def replicate(model_fn: Callable[[int], Any], optimizer: Any,
              cluster: Union[ClusterSpec, Mapping[str, Any], None] = None, num_replicas: Optional[int] = None,
              worker_job: str = "worker", ps_device: str = "/job:ps", ps_strategy: Optional[Callable] = None,
              var_list: Optional[Sequence[Variable]] = None, global_step: Optional[Variable] = None,
              colocate_gradients_with_ops: bool = True, name: Optional[str] = None) -> Replicated:
    """Build synchronous in-graph replicated training in the default graph.

    ``model_fn(i)`` builds tower ``i`` and returns its loss (an Output), a
    tuple ``(loss, ...)`` or a dict with a ``"loss"``.  The first call
    creates the variables (on the ps tasks); later calls must reuse them
    (create them outside ``model_fn``, once, or pass ``reuse=i > 0`` to the
    layers): a tower that creates variables is a ValueError naming them.
    Inputs are usually placeholders made inside ``model_fn``, one per
    tower, fed each step with that tower's shard of the data.

    ``cluster``: towers on the tasks of ``worker_job`` (one per task, or the
    first ``num_replicas``), variables on the ``ps`` job's tasks (by
    ``ps_strategy``, default round-robin).  ``cluster=None``: the same graph
    with no devices and ``num_replicas`` towers, to run locally.

    ``optimizer``: a ``bridge.train`` optimizer; ``var_list``: the variables
    to train (default: the trainable variables once the towers are built);
    ``global_step`` is incremented once per step.  Returns a
    :class:`Replicated` (``train_op``, ``loss``, ...)."""
    if cluster is not None:
        cluster = ClusterSpec(cluster)
        if worker_job not in cluster.jobs:
            raise ValueError(f"replicate: the cluster has no job '{worker_job}' (jobs: {', '.join(cluster.jobs)})")
        tasks = cluster.task_indices(worker_job)
        if num_replicas is None:
            num_replicas = len(tasks)
        if not 0 < num_replicas <= len(tasks):
            raise ValueError(f"replicate: num_replicas={num_replicas}, but job '{worker_job}' has "
                             f"{len(tasks)} tasks")
        devices = [f"/job:{worker_job}/task:{t}" for t in tasks[:num_replicas]]
        if ps_strategy is None:
            ps_job = ps_device.split("/job:")[-1].split("/")[0]
            # One strategy for every tower (the variables are made once, in tower 0).
            ps_strategy = _RoundRobinStrategy(cluster.num_tasks(ps_job)) if ps_job in cluster.jobs else None
    else:
        if num_replicas is None or isinstance(num_replicas, bool) or int(num_replicas) < 1:
            raise ValueError(f"replicate: without a cluster, give num_replicas >= 1 (got {num_replicas!r})")
        devices = [""] * int(num_replicas)
    graph = get_default_graph()

    def placement(device: str):
        if cluster is None:
            return contextlib.nullcontext()
        setter = replica_device_setter(cluster=cluster, worker_device=device, ps_device=ps_device,
                                       ps_strategy=ps_strategy)
        return graph.device(setter if setter is not None else device)

    outputs, losses, tower_grads = [], [], []
    existing = set(map(id, global_variables(graph)))
    for i, device in enumerate(devices):
        with placement(device), graph.name_scope(f"tower_{i}"):
            result = model_fn(i)
            loss = _loss_of(result, i)
            if i == 0:
                existing = set(map(id, global_variables(graph)))
            else:
                created = [v.name for v in global_variables(graph) if id(v) not in existing]
                if created:
                    raise ValueError(f"replicate: tower {i} created the variables {', '.join(created)}; towers "
                                     "share tower 0's variables: create them once (outside model_fn, or with "
                                     "reuse=i > 0)")
            train_vars = list(var_list) if var_list is not None else trainable_variables(graph)
            tower_grads.append(optimizer.compute_gradients(
                loss, var_list=train_vars, colocate_gradients_with_ops=colocate_gradients_with_ops))
        outputs.append(result)
        losses.append(loss)
    with placement(devices[0]), graph.name_scope(name or "replicated"):
        averaged = average_gradients(tower_grads)
        with graph.name_scope("loss"):
            total = losses[0] if len(losses) == 1 else ops.add_n(losses, name="sum")
            mean_loss = ops.real_div(total, constant(np.asarray(len(losses), total.dtype.as_numpy_dtype),
                                                     name="num_towers"), name="mean")
    with placement(devices[0]):
        train_op = optimizer.apply_gradients(averaged, global_step=global_step)
    return Replicated(train_op, mean_loss, losses, outputs, devices, averaged)

