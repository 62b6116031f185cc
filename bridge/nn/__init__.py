"""The neural-network library, with TensorFlow's names and formulas.

``bridge.nn`` is TF's ``tf.nn`` (the functions of ``nn_ops``); beside it,
``layers`` (``tf.compat.v1.layers``), ``losses`` (``tf.compat.v1.losses``),
``initializers`` and ``random_ops`` (random tensors), reached as
``bridge.layers``, ``bridge.losses`` and ``bridge.initializers`` too.
"""
from __future__ import annotations

from .nn_ops import *  # noqa: F401,F403  (tf.nn: nn_ops.__all__)
from .nn_ops import __all__  # noqa: F401
