"""TensorFlow's V2 checkpoints: ``Saver`` and ``latest_checkpoint``, as ``tf.compat.v1.train`` has them.

A Saver builds its ops once, under a ``save`` name scope, laid out as
TensorFlow's Saver lays out a sharded V2 checkpoint (the kind TF's
SavedModel builder writes; :mod:`bridge.train.saver_ops`): one shard, or
with ``sharded=True`` one per device holding variables (on a cluster, each
ps task writes and restores its own), merged into one index.
``<prefix>.index`` and ``<prefix>.data-<k>-of-<n>`` are the checkpoint.

``save`` and ``restore`` are one ``Session.run`` each; ``as_saver_def()``
names these ops for a MetaGraphDef.  Checkpoint keys are the variables'
names ("dense/kernel"), as TF's Saver keys resource variables.  Before a
restore changes anything, the checkpoint's index is checked against the
variables (names, dtypes, shapes; :mod:`bridge.train.bundle`).

Saves are atomic (killed at any point, a save leaves the checkpoint of its
prefix as it was or as it wrote it; concurrent saves to one prefix all
succeed): the commit protocol is :mod:`bridge.train.checkpoint_commit`.  The
state file beside the checkpoints (``checkpoint``), ``latest_checkpoint`` and
the other functions of TF's ``checkpoint_management`` are
:mod:`bridge.train.checkpoint_management`; they are importable from here too,
as they always were.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from bridge.framework import _proto as pb
from bridge.framework import errors
from bridge.framework.attrs import Shape
from bridge.framework.builders import Variable, global_variables
from bridge.framework.graph import Graph, Output
from bridge.framework.session import Session
from .bundle import BundleFormatError, read_index
from .checkpoint_commit import atomic_save, delete_checkpoint, settled
from .checkpoint_management import (CHECKPOINT_STATE_FILE, CheckpointState, checked_path, checkpoint_exists,
                                    get_checkpoint_state, latest_checkpoint, list_variables,
                                    write_checkpoint_state)
from .saver_ops import build_saver_ops

__all__ = ["Saver", "CHECKPOINT_STATE_FILE", "CheckpointState", "checkpoint_exists", "get_checkpoint_state",
           "latest_checkpoint", "list_variables", "write_checkpoint_state"]

_SAVER_DEF_V2 = 2                      # SaverDef.CheckpointFormatVersion.V2
_KEEP_EVERY_N_HOURS = 10000.0          # TF's default, which keeps nothing extra

VarList = Union[None, Sequence[Variable], Mapping[str, Variable]]
PathLike = Union[str, os.PathLike]


def _variables_by_key(var_list: VarList) -> dict[str, Variable]:
    """Checkpoint key -> Variable, sorted by key as TF's Saver orders them."""
    if var_list is None:
        var_list = global_variables()
    if isinstance(var_list, Mapping):
        items = list(var_list.items())
    elif isinstance(var_list, (list, tuple)):
        # As TF's Saver: a variable is saved under its op's name ("dense/kernel", not "dense/kernel:0").
        items = [(v.op.name if isinstance(v, Variable) else None, v) for v in var_list]
    else:
        raise TypeError(f"Saver: var_list must be None, a list of Variables or a dict name -> Variable, "
                        f"not {type(var_list).__name__}")
    by_key: dict[str, Variable] = {}
    for key, var in items:
        if not isinstance(var, Variable):
            raise TypeError(f"Saver: var_list holds {var!r} ({type(var).__name__}), not a bridge.Variable")
        if not isinstance(key, str) or not key:
            raise TypeError(f"Saver: checkpoint names must be non-empty strings, got {key!r} for {var!r}")
        if key in by_key:
            raise ValueError(f"Saver: two variables would be saved under the name '{key}' "
                             f"({by_key[key]!r} and {var!r})")
        by_key[key] = var
    return dict(sorted(by_key.items()))


def _shape_text(shape: Shape) -> str:
    if shape.unknown_rank:
        return "<unknown shape>"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _compatible(stored: Shape, wanted: Shape) -> bool:
    if stored.unknown_rank or wanted.unknown_rank:
        return True
    return len(stored) == len(wanted) and all(a is None or b is None or a == b for a, b in zip(stored, wanted))


class Saver:
    """Saves and restores variables as TensorFlow's V2 checkpoints.

    ``var_list``: None (every global variable of the default graph), a list
    of Variables (saved under their names) or a dict checkpoint name ->
    Variable.  ``max_to_keep``: how many recent checkpoints stay on disk
    (None or 0: all, the state file naming only the newest, as TF does).

    ``sharded=True`` (TF's): one shard per device holding variables, saved
    and restored on that device, so on a cluster each ps task writes its
    own variables' data file and restores them (into a restarted, empty ps
    task too); the merge runs on the last shard's task.  As with TF, every
    task then needs the checkpoint folder at the same path (a shared file
    system), and so does this process, which commits the save.
    ``shards`` lists each shard's device and checkpoint names."""

    def __init__(self, var_list: VarList = None, max_to_keep: Optional[int] = 5, name: Optional[str] = None,
                 allow_empty: bool = False, sharded: bool = False):
        self._variables = _variables_by_key(var_list)
        self.sharded = bool(sharded)
        self.shards: list[tuple[str, list[str]]] = []
        self.max_to_keep = max_to_keep
        self._last: list[tuple[str, float]] = []   # (prefix, time saved), oldest first
        self._lock = threading.Lock()
        if not self._variables:
            if not allow_empty:
                raise ValueError("Saver: no variables to save (pass allow_empty=True for a Saver that does nothing)")
            self.graph: Optional[Graph] = None
            return
        graphs = {id(v.graph): v.graph for v in self._variables.values()}
        if len(graphs) > 1:
            raise ValueError("Saver: the variables belong to different graphs: "
                             + ", ".join(f"'{k}'" for k in self._variables))
        self.graph = next(iter(graphs.values()))
        self._build(name)

    # --- the graph ---------------------------------------------------------------
    def _build(self, name: Optional[str]) -> None:
        built = build_saver_ops(self.graph, self._variables, name or "save", self.sharded)
        self._filename, self._save_tensor, self._restore_op = built.filename, built.save_tensor, built.restore_op
        self.shards = built.shards

    @property
    def variables(self) -> dict[str, Variable]:
        """Checkpoint name -> Variable, in the order saved."""
        return dict(self._variables)

    def as_saver_def(self) -> bytes:
        """The serialized SaverDef naming this Saver's ops (for a MetaGraphDef)."""
        if self.graph is None:
            raise ValueError("Saver: an empty Saver (allow_empty=True without variables) has no SaverDef")
        return (pb.field_bytes(1, self._filename.name) + pb.field_bytes(2, self._save_tensor.name)
                + pb.field_bytes(3, self._restore_op.name) + pb.field_varint(4, self.max_to_keep or 0)
                + pb.field_varint(5, 1) + pb.field_float(6, _KEEP_EVERY_N_HOURS)   # 5: the layout is always sharded
                + pb.field_varint(7, _SAVER_DEF_V2))

    def _check_session(self, sess: Session, what: str) -> None:
        if not isinstance(sess, Session):
            raise TypeError(f"Saver.{what}: sess must be a bridge.Session, not {type(sess).__name__}")
        if sess.graph is not self.graph:
            raise ValueError(f"Saver.{what}: the session runs another graph than the Saver's variables'")

    # --- saving ----------------------------------------------------------------
    def save(self, sess: Session, save_path: PathLike, global_step: Any = None,
             latest_filename: Optional[str] = None, write_state: bool = True) -> Optional[str]:
        """Write the variables to the checkpoint ``save_path`` (with
        ``-<global_step>`` appended when given: an int, or a Variable or
        Output to read) and return its prefix.  Updates the state file
        ``latest_filename`` ("checkpoint") beside it, and deletes the
        checkpoints beyond ``max_to_keep``.

        The save is atomic (see the module doc): killed at any point, it
        leaves the checkpoint ``save_path`` as it was or as this save wrote
        it; concurrent saves to one prefix all succeed, the last to finish
        being the one on disk.  A ``save_path`` that is empty, names a
        folder (ends with a separator) or holds a NUL byte is refused with a
        ValueError before anything is written."""
        prefix = checked_path(save_path, "Saver.save", "save_path")
        if latest_filename is not None:
            checked_path(latest_filename, "Saver.save", "latest_filename")
        if global_step is not None:
            prefix = f"{prefix}-{self._step(sess, global_step)}"
        if self.graph is None:
            return None
        self._check_session(sess, "save")
        parent = os.path.dirname(prefix) or "."
        if not os.path.isdir(parent):
            raise ValueError(f"Saver.save: the folder of {prefix}, {parent}, does not exist")

        def write(path: str) -> None:
            try:
                sess.run(self._save_tensor, {self._filename: path})
            except errors.OpError as exc:
                raise type(exc)(f"saving checkpoint '{prefix}' failed (a checkpoint saved there before "
                                f"is unchanged): {exc.message}") from exc

        def finish() -> None:
            if write_state:
                with self._lock:
                    doomed = self._record(prefix)
                    self._write_state(prefix, latest_filename)
                    for old in doomed:
                        delete_checkpoint(old)

        atomic_save(prefix, write, finish)
        return prefix

    def _step(self, sess: Session, global_step: Any) -> int:
        if isinstance(global_step, (Variable, Output)):
            self._check_session(sess, "save")
            value = sess.run(global_step.value() if isinstance(global_step, Variable) else global_step)
        else:
            value = global_step
        value = np.asarray(value)
        if value.shape != () or value.dtype.kind not in "iu":
            raise TypeError(f"Saver.save: global_step must be an integer (or an integer Variable or Output), "
                            f"got {global_step!r}")
        return int(value)

    def _record(self, prefix: str) -> list[str]:
        """Put ``prefix`` last among the kept checkpoints; return those to delete."""
        if not self.max_to_keep:
            return []
        self._last = [(p, t) for p, t in self._last if p != prefix]
        self._last.append((prefix, time.time()))
        doomed = []
        while len(self._last) > self.max_to_keep:
            doomed.append(self._last.pop(0)[0])
        return doomed

    def _write_state(self, prefix: str, latest_filename: Optional[str]) -> None:
        folder = os.path.dirname(prefix) or "."
        kept = self._last or [(prefix, time.time())]
        write_checkpoint_state(folder, prefix, [p for p, _ in kept], [t for _, t in kept],
                               latest_filename or CHECKPOINT_STATE_FILE)

    @property
    def last_checkpoints(self) -> list[str]:
        """The checkpoints this Saver keeps (not deleted yet), oldest first."""
        return [p for p, _ in self._last]

    def recover_last_checkpoints(self, checkpoint_paths: Sequence[PathLike]) -> None:
        """Take over checkpoints saved earlier (those that still exist), as the oldest kept ones."""
        found = [os.fspath(p) for p in checkpoint_paths if checkpoint_exists(p)]
        now = time.time()
        with self._lock:
            self._last = [(p, now) for p in found] + [(p, t) for p, t in self._last if p not in found]

    # --- restoring -------------------------------------------------------------
    def restore(self, sess: Session, save_path: Optional[PathLike]) -> None:
        """Assign every variable its value from the checkpoint ``save_path`` (a prefix).

        Refused before any variable changes when the checkpoint lacks one of
        the names or holds another dtype or shape for it."""
        if save_path is None:
            raise ValueError("Saver.restore: save_path is None (latest_checkpoint found no checkpoint?)")
        prefix = checked_path(save_path, "Saver.restore", "save_path", folder_ok=True)
        if self.graph is None:
            return
        self._check_session(sess, "restore")
        parent = os.path.dirname(prefix) or "."
        # Under the folder's lock: a save to the same prefix waits, and one killed midway is finished first.
        with settled(parent):
            if not checkpoint_exists(prefix):
                hint = (f"; {prefix} is a folder: bridge.train.latest_checkpoint({prefix!r}) names its newest "
                        "checkpoint" if os.path.isdir(prefix) else "")
                raise ValueError(f"Saver.restore: '{prefix}' is not a checkpoint (no file {prefix}.index){hint}")
            self._check_index(prefix)
            try:
                sess.run(self._restore_op, {self._filename: os.path.abspath(prefix)})
            except errors.OpError as exc:
                raise type(exc)(f"restoring checkpoint '{prefix}' failed: {exc.message}") from exc

    def _check_index(self, prefix: str) -> None:
        try:
            entries = read_index(prefix)
        except (BundleFormatError, OSError):
            return   # RestoreV2 reports what it finds wrong
        missing = [k for k in self._variables if k not in entries]
        if missing:
            held = sorted(entries)
            shown = ", ".join(held[:20]) + (f", ... ({len(held)} in all)" if len(held) > 20 else "")
            raise errors.NotFoundError(
                f"checkpoint '{prefix}' has no variable named {', '.join(repr(k) for k in missing)}; "
                f"it holds: {shown or 'nothing'}")
        problems = []
        for key, var in self._variables.items():
            entry = entries[key]
            if entry.dtype != var.dtype or not _compatible(entry.shape, var.shape):
                graph_side = f"the graph's variable '{var.op.name}'" if var.op.name != key else "the variable"
                problems.append(f"'{key}' is {entry.dtype.name} {_shape_text(entry.shape)} there, but "
                                f"{graph_side} is {var.dtype.name} {_shape_text(var.shape)}")
        if problems:
            raise errors.InvalidArgumentError(f"checkpoint '{prefix}' does not fit the Saver's variables: "
                                              + "; ".join(problems))
