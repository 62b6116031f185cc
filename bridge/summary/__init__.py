"""Summaries for TensorBoard, with TF1's names (``tf.compat.v1.summary``).

``scalar``, ``histogram``, ``image``, ``audio``, ``text`` build TF's summary ops (their value is a
serialized ``Summary`` protobuf); ``merge_all`` joins the ones of a graph;
``FileWriter`` writes them as TensorBoard event files; ``hparams`` has
TensorBoard's HParams dashboard's summaries::

    loss_summary = bridge.summary.scalar("loss", loss)
    with bridge.summary.FileWriter("runs/fit", graph) as writer:
        for step in range(100):
            _, s = sess.run([train_op, loss_summary])
            writer.add_summary(s, step)
"""
from __future__ import annotations

from .summary_ops import (SUMMARIES, audio, figures_to_array, histogram, image, merge, merge_all, plugin_metadata,
                          scalar, tensor_summary, text)
from . import hparams
from .writer import FileWriter

__all__ = ["SUMMARIES", "FileWriter", "hparams", "audio", "figures_to_array", "histogram", "image", "merge",
           "merge_all", "plugin_metadata", "scalar", "tensor_summary", "text"]
