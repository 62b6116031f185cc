"""SavedModels: loading any (TF1 or TF2) with its signatures, and writing one
that stock TensorFlow loads and serves.

- :func:`load_saved_model` (:mod:`.load`): TF_LoadSessionFromSavedModel, the
  signatures as callables, custom op libraries loaded first (``op_libraries``),
  a TF2 model's variables restored through its object graph (:mod:`.objects`);
- :func:`save` (:mod:`.save`): a session's graph, variables and signatures
  as TF1's SavedModel builder writes them.
"""
from __future__ import annotations

from .load import INIT_OP_SIGNATURE_KEY, SavedModel, Signature, load_saved_model, recorded_op_libraries
from .save import PREDICT_METHOD, SERVING_DEFAULT, save

__all__ = ["SavedModel", "Signature", "load_saved_model", "save", "recorded_op_libraries",
           "INIT_OP_SIGNATURE_KEY", "PREDICT_METHOD", "SERVING_DEFAULT"]
