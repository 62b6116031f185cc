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

TF runs the set-up in a session hook; here ``train_loop`` runs it (and
again after every recovery: ``_SyncReplicasOptimizerHook``), or call its
methods after the session exists (and its variables are initialized)::

    hook = opt.make_session_run_hook(is_chief)
    sess.prepare()                       # the chief initializes, the others wait
    train_loop(sess, train_op, steps, hooks=[hook], checkpoint_dir=...)
    # or by hand: hook.after_create_session(sess) (the chief starts its sync
    # thread), ... train ..., hook.end(sess) (the chief stops it)

``variable_averages`` (an ``ExponentialMovingAverage``): the chief's
``sync_op`` applies it to ``variables_to_average`` after putting the tokens
in the queue, as TF's.

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

import logging
import threading
import time
from typing import Any, Optional, Sequence

import numpy as np

from bridge import ops
from bridge.framework import dtypes
from bridge.framework.builders import Variable, constant, placeholder
from bridge.framework.errors import CancelledError, DeadlineExceededError, OpError
from bridge.framework.graph import Operation, Output
from bridge.framework.indexed_slices import IndexedSlices, indexed_slices_to_tensor

from .optimizer import Optimizer, group

__all__ = ["SyncReplicasOptimizer"]

logger = logging.getLogger("bridge.train")

#: How long the chief's sync thread lets one sync step wait for the workers' gradients.
SYNC_STEP_TIMEOUT = 7 * 24 * 3600.0


class SyncReplicasOptimizer(Optimizer):
    """TF's ``tf.compat.v1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate,
    total_num_replicas=None, variable_averages=None, variables_to_average=None,
    use_locking=False, name="sync_replicas")``; see the module docstring.
    ``variable_averages``: an :class:`ExponentialMovingAverage` the chief's
    ``sync_op`` applies to ``variables_to_average`` (default: the trainable
    variables) after each update, once the tokens are in the queue, as TF's."""

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int, total_num_replicas: Optional[int] = None,
                 variable_averages: Any = None, variables_to_average: Any = None, use_locking: bool = False,
                 name: str = "sync_replicas"):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        if variable_averages is None and variables_to_average is not None:
            raise ValueError("SyncReplicasOptimizer: variables_to_average needs variable_averages (an "
                             "ExponentialMovingAverage)")
        if variable_averages is not None and not hasattr(variable_averages, "apply"):
            raise TypeError(f"SyncReplicasOptimizer: variable_averages must be an ExponentialMovingAverage, "
                            f"not {type(variable_averages).__name__}")
        if replicas_to_aggregate < 1 or total_num_replicas < 1:
            raise ValueError(f"SyncReplicasOptimizer: replicas_to_aggregate ({replicas_to_aggregate}) and "
                             f"total_num_replicas ({total_num_replicas}) must be positive")
        self._opt = opt
        self._variable_averages = variable_averages
        self._variables_to_average = None if variables_to_average is None else list(variables_to_average)
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
        self._recovery: Optional[_RecoveryOps] = None

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
                            dtype=grad.dtype, shape=var.shape, shared_name=f"{var.name}/grad_accum",
                            name="conditional_accumulator")
                        train_ops.append(ops.resource_accumulator_apply_gradient(
                            accum, local_step.value(), grad, name="AccumulatorApplyGradient"))
                        aggregated.append(ops.resource_accumulator_take_gradient(
                            accum, _int32(self._replicas_to_aggregate), dtype=grad.dtype,
                            name="AccumulatorTakeGradient"))
                        self._accumulator_list.append((accum, var.handle.op.device, grad.dtype))
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
                    if self._variable_averages is not None:
                        # TF's order: the averages follow the tokens, reading the variables just updated.
                        with graph.control_dependencies([self._sync_op]):
                            self._sync_op = self._variable_averages.apply(self._variables_to_average)
                    # A token for every worker, which the chief's hook.end puts in the queue.
                    release = ops.fill(_int32([self._total_num_replicas]), global_step.read_value())
                    self._release_op = ops.queue_enqueue_many_v2(queue, [release], name="release_tokens")
                    with graph.control_dependencies(None), graph.name_scope(f"{self._name}_recovery"):
                        self._recovery = _RecoveryOps(self._accumulator_list, queue, global_step, local_step,
                                                      self._total_num_replicas - 1)
            for accum, device, _ in self._accumulator_list:
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


class _RecoveryOps:
    """What ``train_loop`` runs to bring a synchronous run back after a task
    died (see ``_SyncReplicasOptimizerHook.after_recovery``): the sync state on
    the ps (token queue, accumulators) drained, and a barrier of two queues
    beside the token queue, ``sync_recovery_checkin_q`` (each other worker
    puts its task index there once its failed session is gone) and
    ``sync_recovery_go_q`` (the chief puts the restored global step there
    for each of them once the sync state is reset)."""

    def __init__(self, accumulators: list, token_queue: Output, global_step: Variable, local_step: Variable,
                 others: int):
        def queue(shared_name: str) -> Output:
            return ops.fifo_queue_v2(component_types=[dtypes.int64], shapes=[[]], capacity=-1,
                                     shared_name=shared_name, name=shared_name)

        def first(out: Any) -> Output:
            return out[0] if isinstance(out, (list, tuple)) else out

        def drain(handle: Output, name: str) -> tuple[Output, Output, Output]:
            count = placeholder(dtypes.int32, [], name=f"{name}_count")
            return (ops.queue_size_v2(handle, name=f"{name}_size"), count,
                    ops.queue_dequeue_many_v2(handle, count, component_types=[dtypes.int64], name=f"{name}_drain"))

        graph = global_step.graph
        self.others = others
        self.local_step = local_step.read_value()
        checkin, go = queue("sync_recovery_checkin_q"), queue("sync_recovery_go_q")
        self.task = placeholder(dtypes.int64, [], name="task")
        self.check_in = ops.queue_enqueue_v2(checkin, [self.task], name="check_in")
        self.next_check_in = first(ops.queue_dequeue_v2(checkin, component_types=[dtypes.int64],
                                                        name="next_check_in"))
        self.wait_go = first(ops.queue_dequeue_v2(go, component_types=[dtypes.int64], name="wait_go"))
        self.go = ops.queue_enqueue_many_v2(go, [ops.fill(_int32([max(others, 1)]), global_step.read_value())],
                                            name="go")
        self.queues = [drain(token_queue, "tokens"), drain(checkin, "check_ins")]
        self.accumulators = []
        for i, (accum, device, dtype) in enumerate(accumulators):
            with graph.device(device or None):
                count = placeholder(dtypes.int32, [], name=f"accumulator_{i}_count")
                self.accumulators.append((ops.resource_accumulator_num_accumulated(accum, name=f"accumulated_{i}"),
                                          count, ops.resource_accumulator_take_gradient(
                                              accum, count, dtype=dtype, name=f"drain_accumulator_{i}")))

    def drain(self, session: Any) -> dict:
        """Take what the token queue, the check-in queue and the accumulators
        hold (tokens and gradients of the steps before the failure); return the
        counts taken, by what."""
        parts = self.queues + self.accumulators
        counts = session.run([size for size, _, _ in parts])
        fetches, feed = [], {}
        for (_, count, take), n in zip(parts, counts):
            if int(n) > 0:
                fetches.append(take)
                feed[count] = np.int32(n)
        if fetches:
            session.run(fetches, feed)
        names = ["tokens", "check_ins"] + [f"accumulator_{i}" for i in range(len(self.accumulators))]
        return {name: int(n) for name, n in zip(names, counts) if int(n) > 0}


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


def _watch_replicas(session: Any) -> None:
    """Make a distributed session watch the other replicas (the tasks of its
    cluster's "chief" and "worker" jobs): a step waits for their gradients
    without its graph naming them, so TensorFlow would not notice one dying
    before the step's deadline (``distribute.Session.watch_tasks``)."""
    watch = getattr(session, "watch_tasks", None)
    if watch is None:
        return
    cluster = session.cluster
    watch([(job, i) for job in ("chief", "worker") if job in cluster.jobs for i in cluster.task_indices(job)
           if (job, i) != tuple(session.task)])


class _SyncReplicasOptimizerHook:
    """TF's ``_SyncReplicasOptimizerHook``: ``train_loop(..., hooks=[hook])``
    calls it (or call ``after_create_session`` and ``end`` by hand).

    Recovery (``train_loop`` with a ``checkpoint_dir``): a task that dies
    stalls every worker of a synchronous run, so each one's step fails (at
    the latest at its run's deadline) and each recovers.  As TF's
    ``MonitoredSession``, every worker then runs the hook's set-up again on its
    new session; before it, a barrier makes the rollback the same for all:
    each other worker checks in once its failed session is gone and waits;
    the chief, having restored the newest checkpoint (the global step with
    it), waits for every check-in, drains what the ps still holds from
    before (tokens; gradients in the accumulators, whose step goes back to
    the restored one), runs its set-up (``chief_init_op``, the initial
    tokens, a new sync thread) and lets the others go; each sets its local
    step from the restored global step (``local_step_init_op``) and resumes
    there."""

    def __init__(self, opt: SyncReplicasOptimizer, is_chief: bool, num_tokens: int):
        self._opt, self._is_chief, self._num_tokens = opt, is_chief, num_tokens
        self._runner: Optional[_ChiefQueueRunner] = None
        self._init_tokens: Optional[Operation] = opt.get_init_tokens_op(num_tokens) if is_chief else None

    def after_create_session(self, session: Any, coord: Any = None) -> None:
        """Chief: initialize the local step and the accumulators' steps, put the
        initial tokens in the queue, start the sync thread.  Others: the local step.
        Every worker's session (a distributed one) watches the other replicas."""
        _watch_replicas(session)
        if self._is_chief:
            self._stop_runner()
            session.run(self._opt.chief_init_op)
            session.run(self._init_tokens)
            self._runner = self._opt.get_chief_queue_runner()
            self._runner.create_threads(session, coord=coord, daemon=True, start=True)
        else:
            session.run(self._opt.local_step_init_op)

    def first_step(self, session: Any, step: int) -> int:
        """The step ``train_loop`` starts at: the chief's (its checkpoint's);
        another worker's local step, the global step it just read."""
        return step if self._is_chief else int(session.run(self._opt._recovery.local_step))

    def begin_recovery(self, session: Any) -> None:
        """A step failed: the chief's sync thread runs no further sync step."""
        if self._runner is not None:
            self._runner.stop()

    def after_recovery(self, session: Any, step: int, timeout: float) -> int:
        """After ``session`` reconnected (and the chief restored the checkpoint
        of ``step``): the barrier and set-up of the class docstring, within
        ``timeout`` seconds; returns the step to resume at."""
        rec = self._opt._recovery
        deadline = time.monotonic() + timeout
        where = f"/job:{session.task[0]}/task:{session.task[1]}" if hasattr(session, "task") else "this worker"

        def left(what: str) -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceededError(f"SyncReplicasOptimizer: {where} waited {timeout:.3g} s for {what}")
            return remaining

        def run(fetches: Any, what: str, feed: Optional[dict] = None) -> Any:
            try:
                return session.run(fetches, feed, timeout=left(what))
            except DeadlineExceededError as exc:
                raise DeadlineExceededError(f"SyncReplicasOptimizer: {where} waited {timeout:.3g} s for {what} "
                                            f"({exc.message.splitlines()[0]})") from None

        _watch_replicas(session)
        if not self._is_chief:
            task = session.task[1] if hasattr(session, "task") else 0
            run(rec.check_in, "the check-in queue on the ps", {rec.task: np.int64(task)})
            run(rec.wait_go, "the chief to restore its checkpoint and reset the sync state")
            session.run(self._opt.local_step_init_op)
            return int(session.run(rec.local_step))
        self._stop_runner(join=min(5.0, left("the old sync thread to end")))
        seen: set[int] = set()
        while len(seen) < rec.others:
            seen.add(int(run(rec.next_check_in, f"the other workers to check in ({len(seen)} of {rec.others})")))
        drained = rec.drain(session)
        if drained:
            logger.info("SyncReplicasOptimizer: drained from before the failure: %s",
                        ", ".join(f"{n} {what}" for what, n in drained.items()))
        self.after_create_session(session)
        if rec.others:
            session.run(rec.go)
        return step

    def _stop_runner(self, join: float = 0.0) -> None:
        if self._runner is not None:
            self._runner.stop(timeout=join)
            self._runner = None

    def end(self, session: Any) -> None:
        """Chief: run no further sync step (the thread ends when the session
        closes), and put ``total_num_replicas`` tokens in the queue, so that
        workers waiting for their next step's token are released (their
        gradients are never applied) instead of waiting until their deadline."""
        if hasattr(session, "watch_tasks"):
            session.watch_tasks(())
        if self._runner is not None:
            self._runner.stop(session)
            session.run(self._opt._release_op)

    @property
    def exceptions(self) -> list[BaseException]:
        """Errors the chief's sync thread stopped on (a closed session aside)."""
        return self._runner.exceptions if self._runner is not None else []
