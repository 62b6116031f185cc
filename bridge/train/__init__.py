"""Training, with TensorFlow's ``tf.compat.v1.train`` names.

- Optimizers on TF's resource training kernels (``ResourceApplyAdam``, ...):
  ``GradientDescentOptimizer``, ``MomentumOptimizer``, ``AdamOptimizer``,
  ``RMSPropOptimizer``, ``AdagradOptimizer``; ``opt.minimize(loss)`` returns
  the train op.
- Learning-rate schedules over a global step: ``exponential_decay``,
  ``piecewise_constant``, ``get_or_create_global_step``.
- Gradient clipping: ``clip_by_norm``, ``clip_by_global_norm``.
- ``ScipyOptimizer``: ``scipy.optimize.minimize`` (L-BFGS-B, BFGS, CG,
  Newton-CG) over a loss and its gradient, one ``Session.run`` per call.
- ``Saver``: TensorFlow's V2 checkpoints (SaveV2/RestoreV2).
- ``train_loop``: steps with a progress bar (tqdm) and a callback; with a
  ``checkpoint_dir``, checkpoints and recovery from tasks that die.
- ``SyncReplicasOptimizer``: synchronous between-graph training (TF1's);
  ``ExponentialMovingAverage`` (its ``variable_averages``).

The submodules load on first use.
"""
from __future__ import annotations

_LAZY = {
    "Optimizer": "optimizer",
    "GradientDescentOptimizer": "optimizers",
    "MomentumOptimizer": "optimizers",
    "AdamOptimizer": "optimizers",
    "RMSPropOptimizer": "optimizers",
    "AdagradOptimizer": "optimizers",
    "exponential_decay": "learning_rate",
    "piecewise_constant": "learning_rate",
    "get_global_step": "learning_rate",
    "get_or_create_global_step": "learning_rate",
    "create_global_step": "learning_rate",
    "clip_by_norm": "clip",
    "clip_by_global_norm": "clip",
    "global_norm": "clip",
    "ScipyOptimizer": "scipy_optimizer",
    "Saver": "saver",
    "latest_checkpoint": "checkpoint_management",
    "list_variables": "checkpoint_management",
    "get_checkpoint_state": "checkpoint_management",
    "train_loop": "loop",
    "SyncReplicasOptimizer": "sync_replicas",
    "ExponentialMovingAverage": "moving_averages",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'bridge.train' has no attribute '{name}'")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
