"""``SyncReplicasOptimizer``: synchronous between-graph training, as TF1's.

Each worker runs its own graph (one client per worker).  The optimizer
wraps another one; its ``apply_gradients`` builds TF's layout:

- per variable a ``ResourceConditionalAccumulator`` on the variable's
  device (shared name ``<var>:0/grad_accum``, so every worker's graph finds
  the same one on the ps); a worker's ``train_op`` puts its gradients in
  them, tagged with its local step (gradients older than the accumulator's
  step are dropped as stale), then takes a token from the ``sync_token_q``
  queue (on the global step's device) and makes it its local step;
- the chief's ``sync_op`` takes the average of ``replicas_to_aggregate``
  gradients from every accumulator, applies it with the wrapped optimizer
  (incrementing the global step), and puts ``max(total_num_replicas,
  replicas_to_aggregate)`` tokens (the new global step) in the queue, which
  lets the workers start their next step.  The chief runs it in a thread,
  :meth:`SyncReplicasOptimizer.get_chief_queue_runner`.

TF runs the set-up in a session hook; here the hook's method is called
directly after the session exists (and its variables are initialized)::

    hook = opt.make_session_run_hook(is_chief)
    sess.prepare()                       # the chief initializes, the others wait
    hook.after_create_session(sess)      # the chief starts its sync thread
    ... train ...
    hook.end(sess)                       # the chief stops it

With ``replicas_to_aggregate == total_num_replicas`` and ``num_tokens=0``
every step averages one gradient per worker computed from the same
variables, as synchronous in-graph replication does, and every worker runs
the same number of steps.  Otherwise (TF's default, ``num_tokens=-1``) a
fast worker may take more tokens than a slow one, so stop the workers on
the global step, as TF's ``StopAtStepHook`` does (a ``train_loop`` callback
``lambda step, loss: sess.run(global_step) >= last_step``), and let the
chief's ``hook.end(sess)`` release the workers still waiting for a token.
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

import numpy as np

from bridge import ops
from bridge.framework import dtypes
from bridge.framework.builders import Variable, constant
from bridge.framework.errors import CancelledError, OpError
from bridge.framework.graph import Operation, Output
from bridge.framework.indexed_slices import IndexedSlices, indexed_slices_to_tensor

from .optimizer import Optimizer, group

__all__ = ["SyncReplicasOptimizer"]

#: How long the chief's sync thread lets one sync step wait for the workers' gradients.
SYNC_STEP_TIMEOUT = 7 * 24 * 3600.0


class SyncReplicasOptimizer(Optimizer):
    """TF's ``tf.compat.v1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate,
    total_num_replicas=None, variable_averages=None, variables_to_average=None,
    use_locking=False, name="sync_replicas")``; see the module docstring.
    ``variable_averages`` is not supported (None only)."""

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int, total_num_replicas: Optional[int] = None,
                 variable_averages: Any = None, variables_to_average: Any = None, use_locking: bool = False,
                 name: str = "sync_replicas"):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        if variable_averages is not None or variables_to_average is not None:
            raise NotImplementedError("SyncReplicasOptimizer: variable_averages is not supported by the bridge")
        if replicas_to_aggregate < 1 or total_num_replicas < 1:
            raise ValueError(f"SyncReplicasOptimizer: replicas_to_aggregate ({replicas_to_aggregate}) and "
                             f"total_num_replicas ({total_num_replicas}) must be positive")
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas)
        self._tokens_per_step = max(self._total_num_replicas, self._replicas_to_aggregate)
        self._gradients_applied = False
        self._global_step: Optional[Variable] = None
        self._sync_token_queue: Optional[Output] = None
        self._sync_op: Optional[Operation] = None
        self._accumulator_list: list[tuple[Output, str]] = []
        self._local_step: Optional[Variable] = None
        self.local_step_init_op: Optional[Operation] = None
        self.chief_init_op: Optional[Operation] = None
        self._release_op: Optional[Operation] = None

    def compute_gradients(self, *args: Any, **kwargs: Any):
        """The wrapped optimizer's ``compute_gradients``."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars: Sequence[tuple[Any, Any]], global_step: Optional[Variable] = None,
                        name: Optional[str] = None) -> Operation:
        """The worker's train op: gradients into the accumulators, then wait
        for a token (the chief's next update).  Builds the chief's
        ``sync_op`` and init ops too.  ``global_step`` is required."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        if global_step.dtype != dtypes.int64:
            raise TypeError(f"SyncReplicasOptimizer: the global step must be int64 (the accumulators' step), "
                            f"not {global_step.dtype.name}")
        self._global_step = global_step
        graph = global_step.graph
        with graph.as_default():
            local_anchor = graph.create_op("NoOp", name="NoOp")
            with graph.colocate_with(local_anchor), graph.control_dependencies(None):
                # A local variable, on this worker: out of the global collection (not saved, not the chief's).
                local_step = Variable(np.zeros((), global_step.dtype.as_numpy_dtype), name="sync_rep_local_step",
                                      trainable=False, graph=graph)
            graph.collections["variables"].remove(local_step)
            graph.collections.setdefault("local_variables", []).append(local_step)
            self._local_step = local_step
            with graph.colocate_with(local_step):
                self.local_step_init_op = ops.assign_variable_op(local_step.handle, global_step.value(),
                                                                 name="Assign")
            chief_init_ops = [self.local_step_init_op]
            train_ops, aggregated = [], []
            with graph.name_scope(self._name):
                for grad, var in grads_and_vars:
                    if grad is None:
                        aggregated.append(None)
                        continue
                    with graph.device(var.handle.op.device or None):
                        if isinstance(grad, IndexedSlices):
                            # TF keeps a SparseConditionalAccumulator; the bridge averages them densely.
                            grad = indexed_slices_to_tensor(grad, warn=False)
                        accum = ops.resource_conditional_accumulator(
                            dtype=grad.dtype, shape=var.shape, shared_name=f"{var.name}:0/grad_accum",
                            name="conditional_accumulator")
                        train_ops.append(ops.resource_accumulator_apply_gradient(
                            accum, local_step.value(), grad, name="AccumulatorApplyGradient"))
                        aggregated.append(ops.resource_accumulator_take_gradient(
                            accum, _int32(self._replicas_to_aggregate), dtype=grad.dtype,
                            name="AccumulatorTakeGradient"))
                        self._accumulator_list.append((accum, var.handle.op.device))
                step_device = global_step.handle.op.device or None
                with graph.device(step_device), graph.name_scope(None):
                    update_op = self._opt.apply_gradients(list(zip(aggregated, [v for _, v in grads_and_vars])),
                                                          global_step)
                    queue = ops.fifo_queue_v2(component_types=[global_step.dtype], shapes=[[]], capacity=-1,
                                              shared_name="sync_token_q", name="sync_token_q")
                    self._sync_token_queue = queue
                    with graph.control_dependencies(train_ops):
                        token = ops.queue_dequeue_v2(queue, component_types=[global_step.dtype])
                        token = token[0] if isinstance(token, (list, tuple)) else token
                    with graph.colocate_with(local_step):
                        train_op = ops.assign_variable_op(local_step.handle, token, name=name or "train_op")
                    with graph.control_dependencies([update_op]):
                        # A read after the update (the cached read would give the step before it).
                        tokens = ops.fill(_int32([self._tokens_per_step]), global_step.read_value())
                        self._sync_op = ops.queue_enqueue_many_v2(queue, [tokens], name="sync_op")
                    # A token for every worker, which the chief's hook.end puts in the queue.
                    release = ops.fill(_int32([self._total_num_replicas]), global_step.read_value())
                    self._release_op = ops.queue_enqueue_many_v2(queue, [release], name="release_tokens")
            for accum, device in self._accumulator_list:
                with graph.device(device or None):
                    chief_init_ops.append(ops.resource_accumulator_set_global_step(
                        accum, global_step.value(), name="SetGlobalStep"))
            self.chief_init_op = group(chief_init_ops, "sync_replicas_chief_init")
        self._gradients_applied = True
        train_ops_list = graph.collections.setdefault("train_op", [])
        if train_op not in train_ops_list:
            train_ops_list.append(train_op)
        return train_op

    def _check_applied(self, what: str) -> None:
        if not self._gradients_applied:
            raise ValueError(f"SyncReplicasOptimizer.{what}: call apply_gradients (or minimize) first")

    def get_chief_queue_runner(self) -> "_ChiefQueueRunner":
        """What runs the chief's ``sync_op`` in a loop (TF's QueueRunner):
        ``create_threads(sess, daemon=True, start=True)``, ``stop()``."""
        self._check_applied("get_chief_queue_runner")
        return _ChiefQueueRunner(self._sync_op)

    def get_init_tokens_op(self, num_tokens: int = -1) -> Operation:
        """Put ``num_tokens`` tokens in the queue (default -1:
        ``replicas_to_aggregate``), letting workers run that many steps ahead."""
        self._check_applied("get_init_tokens_op")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} (given) vs "
                             f"{tokens_needed} (needed)")
        graph = self._global_step.graph
        with graph.as_default(), graph.device(self._global_step.handle.op.device or None), graph.name_scope(None):
            if num_tokens > 0:
                tokens = ops.fill(_int32([num_tokens]), self._global_step.value())
                return ops.queue_enqueue_many_v2(self._sync_token_queue, [tokens], name="init_tokens")
            return graph.create_op("NoOp", name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> "_SyncReplicasOptimizerHook":
        """The set-up each worker runs once its session exists (TF's hook):
        ``after_create_session(session)``, ``end(session)``."""
        self._check_applied("make_session_run_hook")
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)

    # The wrapped optimizer's slots, as TF's.
    def get_slot(self, *args: Any, **kwargs: Any):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()


def _int32(value: Any) -> Output:
    return constant(np.asarray(value, np.int32))


class _ChiefQueueRunner:
    """Runs ``sync_op`` again and again in a thread until stopped or the session closes."""

    def __init__(self, sync_op: Operation):
        self._sync_op = sync_op
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.exceptions: list[BaseException] = []

    def _run(self, sess: Any) -> None:
        while not self._stop.is_set():
            try:
                sess.run(self._sync_op, timeout=SYNC_STEP_TIMEOUT)
            except (CancelledError, RuntimeError):
                return   # the session closed
            except OpError as exc:
                if not self._stop.is_set():
                    self.exceptions.append(exc)
                return

    def create_threads(self, sess: Any, coord: Any = None, daemon: bool = True,
                       start: bool = True) -> list[threading.Thread]:
        thread = threading.Thread(target=self._run, args=(sess,), daemon=daemon, name="sync_replicas_chief")
        self._threads.append(thread)
        if start:
            thread.start()
        return [thread]

    def stop(self, sess: Any = None, timeout: float = 0.0) -> None:
        """Run no further sync step.  The one in flight waits for gradients
        until the session closes (which cancels it); ``timeout`` > 0 joins
        the thread that long."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)


class _SyncReplicasOptimizerHook:
    """TF's ``_SyncReplicasOptimizerHook``, called by hand."""

    def __init__(self, opt: SyncReplicasOptimizer, is_chief: bool, num_tokens: int):
        self._opt, self._is_chief, self._num_tokens = opt, is_chief, num_tokens
        self._runner: Optional[_ChiefQueueRunner] = None

    def after_create_session(self, session: Any, coord: Any = None) -> None:
        """Chief: initialize the local step and the accumulators' steps, put the
        initial tokens in the queue, start the sync thread.  Others: the local step."""
        if self._is_chief:
            session.run(self._opt.chief_init_op)
            session.run(self._opt.get_init_tokens_op(self._num_tokens))
            self._runner = self._opt.get_chief_queue_runner()
            self._runner.create_threads(session, coord=coord, daemon=True, start=True)
        else:
            session.run(self._opt.local_step_init_op)

    def end(self, session: Any) -> None:
        """Chief: run no further sync step (the thread ends when the session
        closes), and put ``total_num_replicas`` tokens in the queue, so that
        workers waiting for their next step's token are released (their
        gradients are never applied) instead of waiting until their deadline."""
        if self._runner is not None:
            self._runner.stop(session)
            session.run(self._opt._release_op)

    @property
    def exceptions(self) -> list[BaseException]:
        """Errors the chief's sync thread stopped on (a closed session aside)."""
        return self._runner.exceptions if self._runner is not None else []
