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

Saves are atomic: a save killed at any point (SIGKILL, power aside) leaves
the checkpoint of its prefix either as it was or as the save wrote it, never
a data file that does not match its index, and saves to one prefix from
several threads or processes never disturb each other.  ``Saver.save`` does
not feed the prefix itself to the graph but a folder of its own,
``<folder>/.<name>.save-<random>/ckpt`` (so ``<prefix>_temp`` is never
shared), and when the run has written it:

1. flushes its files to disk and renames the folder to
   ``.<name>.commit-<random>``: the commit point;
2. holding a lock on the checkpoint folder (``flock`` on the folder itself,
   and a lock per folder in the process), removes ``<prefix>.index`` (and
   data files of another shard count), moves the new data files over
   ``<prefix>.data-<k>-of-<n>``, then the new index to ``<prefix>.index``,
   and removes the commit folder;
3. writes the state file aside and renames it into place (same lock).

Who may clean up: from creating its work folder (under the folder's lock)
to removing it, a save holds an ``fcntl`` lock on the file ``.owner``
inside it (:mod:`bridge.train.work_owner`).  A kill before the commit
leaves a ``.save-`` folder, which the next save, restore or
``latest_checkpoint`` in that folder removes once it can take that lock;
a kill after it leaves a ``.commit-`` folder, which they finish (step 2)
the same way.  A lock that cannot be taken means a live save, whatever
its process id says here: saves in other containers sharing the folder
(another PID namespace) or on other hosts sharing the file system are
never disturbed.  Folders of the bridge's versions before the lock
(``.save-<pid>-<random>``) are removed when no process of that id is
alive here, as those versions did.  Between steps 2's first and last
rename ``<prefix>.index`` is missing, never stale: TensorFlow itself sees
no checkpoint there until the bridge finishes it.
"""
from __future__ import annotations

import errno
import glob
import os
import re
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from bridge.framework import _proto as pb
from bridge.framework import errors
from bridge.framework.attrs import Shape
from bridge.framework.builders import Variable, global_variables
from bridge.framework.graph import Graph, Output
from bridge.framework.session import Session
from . import work_owner
from .bundle import BundleFormatError, read_index
from .saver_ops import build_saver_ops

#: The file beside the checkpoints that names the newest ones.
CHECKPOINT_STATE_FILE = "checkpoint"
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
        prefix = _checked_path(save_path, "Saver.save", "save_path")
        if latest_filename is not None:
            _checked_path(latest_filename, "Saver.save", "latest_filename")
        if global_step is not None:
            prefix = f"{prefix}-{self._step(sess, global_step)}"
        if self.graph is None:
            return None
        self._check_session(sess, "save")
        parent = os.path.dirname(prefix) or "."
        if not os.path.isdir(parent):
            raise ValueError(f"Saver.save: the folder of {prefix}, {parent}, does not exist")
        name = os.path.basename(prefix)
        token = secrets.token_hex(8)
        work = os.path.join(parent, f".{name}.save-{token}")
        with _in_flight(work):   # before it exists, so that no other thread's clean-up takes it for a leftover
            with _folder_lock(parent):   # so that no clean-up sees it before its owner lock is taken
                os.mkdir(work)
                owner = work_owner.take(work)
            with owner:
                try:
                    # Absolute: the tasks of a cluster that write shards have working folders of their own.
                    sess.run(self._save_tensor, {self._filename: os.path.abspath(os.path.join(work, _WORK_NAME))})
                    _sync_files(work)
                except BaseException as exc:
                    shutil.rmtree(work, ignore_errors=True)
                    if isinstance(exc, errors.OpError):
                        raise type(exc)(f"saving checkpoint '{prefix}' failed (a checkpoint saved there before "
                                        f"is unchanged): {exc.message}") from exc
                    raise
                with _folder_lock(parent) as exclusive:
                    committed = os.path.join(parent, f".{name}.commit-{token}")
                    os.rename(work, committed)   # the commit point: from here on the save is finished, if need be by others
                    _apply(committed, prefix)
                    _recover(parent, exclusive, must=False)   # leftovers of killed saves: best effort, the save is done
                    if write_state:
                        with self._lock:
                            doomed = self._record(prefix)
                            self._write_state(prefix, latest_filename)
                            for old in doomed:
                                _delete_checkpoint(old)
                    _sync_folder(parent)
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
        prefix = _checked_path(save_path, "Saver.restore", "save_path", folder_ok=True)
        if self.graph is None:
            return
        self._check_session(sess, "restore")
        parent = os.path.dirname(prefix) or "."
        # Under the folder's lock: a save to the same prefix waits, and one killed midway is finished first.
        with _folder_lock(parent, must=False) as exclusive:
            _recover(parent, exclusive, must=False)
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


# --- checkpoint files and the state file --------------------------------------------

def checkpoint_exists(prefix: PathLike) -> bool:
    """Whether the V2 checkpoint ``prefix`` exists (its .index file)."""
    return os.path.isfile(f"{os.fspath(prefix)}.index")


def _checked_path(path: Any, where: str, what: str, folder_ok: bool = False, empty_ok: bool = False) -> str:
    """``path`` as a str, refused (ValueError) when it holds a NUL byte
    (TensorFlow would cut it there, writing another file than the one named),
    unless ``empty_ok`` when it is empty, and unless ``folder_ok`` when it
    ends with a separator (a folder)."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise TypeError(f"{where}: {what} must be a str or os.PathLike, not {type(path).__name__}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text and not empty_ok:
        raise ValueError(f"{where}: {what} is empty; give a checkpoint prefix such as 'ckpt/model'")
    if "\0" in text:
        raise ValueError(f"{where}: {what} {text!r} holds a NUL byte, which no file name can hold; nothing "
                         "was written")
    if not folder_ok and text.endswith((os.sep, "/") if os.altsep is None else (os.sep, os.altsep)):
        raise ValueError(f"{where}: {what} {text!r} names a folder; give a checkpoint prefix inside it, such "
                         f"as {os.path.join(text, 'model')!r}")
    return text


# --- atomic saves: the work and commit folders, the folder lock ------------------------

_WORK_NAME = "ckpt"                                      # the prefix inside a work folder
_DATA_GLOB = ".data-?????-of-?????"                      # the data files of a checkpoint
# Work folders and state files being written; a pid in the name: the bridge's versions before the owner lock.
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>save|commit)-(?:(?P<pid>\d+)-)?[0-9a-f]+$")
_STATE_TMP = re.compile(r"^\..+\.(?:(?P<pid>\d+)-)?[0-9a-f]+\.tmp$")

_registry_lock = threading.Lock()
_folder_locks: dict[str, threading.RLock] = {}
_folder_depth: dict[str, int] = {}
_working: set[str] = set()                               # this process's work folders in use


@contextmanager
def _in_flight(work: str) -> Iterator[None]:
    """Mark ``work`` as this process's, so that no thread's cleanup removes it."""
    key = os.path.realpath(work)
    with _registry_lock:
        _working.add(key)
    try:
        yield
    finally:
        with _registry_lock:
            _working.discard(key)


@contextmanager
def _folder_lock(folder: str, must: bool = True) -> Iterator[bool]:
    """Hold the checkpoint folder's lock: a lock per folder among this
    process's threads (re-entrant), and ``flock`` on the folder itself among
    processes.  Yields whether the inter-process lock is held (a file system
    without ``flock``, or a folder that cannot be opened when not ``must``,
    goes on with the thread lock alone)."""
    key = os.path.realpath(folder)
    with _registry_lock:
        lock = _folder_locks.setdefault(key, threading.RLock())
    with lock:
        depth = _folder_depth.get(key, 0)
        _folder_depth[key] = depth + 1
        fd = None
        try:
            if depth == 0:
                import fcntl
                try:
                    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                except OSError:
                    if must:
                        raise
                else:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX)
                    except OSError:
                        os.close(fd)
                        fd = None
            yield fd is not None or depth > 0
        finally:
            if fd is not None:
                os.close(fd)   # releases the flock
            _folder_depth[key] = depth


def _sync_files(folder: str) -> None:
    """Flush the files of ``folder`` and the folder to disk (a commit must not
    name files a power cut would leave empty)."""
    for entry in os.scandir(folder):
        if entry.is_file() and entry.name != work_owner.OWNER:   # closing it would drop the save's lock
            fd = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _apply(committed: str, prefix: str) -> None:
    """Move a committed save's files to ``prefix`` (under the folder's lock):
    the old index goes first, the new index comes last, so a data file is
    never replaced under an index that does not describe it.  Finishes a
    move a kill interrupted: whatever the commit folder still holds is moved."""
    index = os.path.join(committed, _WORK_NAME + ".index")
    if os.path.exists(index):
        try:
            os.remove(f"{prefix}.index")
        except FileNotFoundError:
            pass
        data = sorted(glob.glob(os.path.join(glob.escape(committed), _WORK_NAME + _DATA_GLOB)))
        if data:
            # Data files of an earlier save with another number of shards would
            # outlive it: removed before the first new one moves in.
            count = data[0][-len("-of-00000"):]
            for old in glob.glob(glob.escape(prefix) + _DATA_GLOB):
                if not old.endswith(count):
                    os.remove(old)
        for path in data:
            os.replace(path, prefix + path[len(os.path.join(committed, _WORK_NAME)):])
        os.replace(index, f"{prefix}.index")
    shutil.rmtree(committed, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError as exc:   # EPERM: someone else's process
        return exc.errno == errno.EPERM
    return True


def _recover(folder: str, exclusive: bool, must: bool = True) -> None:
    """Under the folder's lock (``exclusive``: its inter-process part too):
    finish the committed saves a kill left in ``folder`` (oldest first),
    remove the work folders of saves whose writer is gone, and the state
    files they were writing.  A writer is gone when its lock can be taken
    (:mod:`bridge.train.work_owner`); a work folder without a lock file has
    none when ``exclusive``, since saves make their folders under that lock."""
    try:
        names = os.listdir(folder)
    except OSError:
        if must:
            raise
        return
    commits, stale, claimed = [], [], []
    try:
        for name in names:
            match = _LEFTOVER.match(name)
            path = os.path.join(folder, name)
            if match:
                if os.path.realpath(path) in _working:
                    continue   # this process's, in flight
                if match["pid"] is not None:   # by a version before the lock: commits are finished under
                    pid = int(match["pid"])    # the folder's lock, and saves known here are judged by their pid
                    gone = match["kind"] == "commit" or pid == os.getpid() or not _alive(pid)
                else:
                    found, owner = work_owner.claim(path)
                    claimed.append(owner)
                    gone = found == work_owner.GONE or (found == work_owner.MISSING and exclusive)
                if not gone:
                    continue
                if match["kind"] == "commit":
                    try:
                        commits.append((os.stat(path).st_mtime_ns, path, match["name"]))
                    except FileNotFoundError:
                        pass
                else:
                    stale.append(path)
            else:
                # A state file written under the inter-process lock: unfinished while we hold it, its writer is gone.
                match = _STATE_TMP.match(name)
                if match and (exclusive if match["pid"] is None else not _alive(int(match["pid"]))):
                    stale.append(path)
        for _, path, name in sorted(commits):
            _apply(path, os.path.join(folder, name))
        for path in stale:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
    except OSError:
        if must:
            raise
    finally:
        for owner in claimed:
            owner.release()


def _delete_checkpoint(prefix: str) -> None:
    for path in [f"{prefix}.index", f"{prefix}.meta"] + glob.glob(glob.escape(prefix) + _DATA_GLOB):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def list_variables(ckpt: PathLike) -> list[tuple[str, list[Optional[int]]]]:
    """(name, shape) of every tensor in a checkpoint (a prefix, or a folder
    with a state file), sorted by name, as ``tf.train.list_variables``."""
    prefix = os.fspath(ckpt)
    if os.path.isdir(prefix):
        found = latest_checkpoint(prefix)
        if found is None:
            raise ValueError(f"list_variables: no checkpoint in the folder {prefix}")
        prefix = found
    return [(name, list(entry.shape)) for name, entry in sorted(read_index(prefix).items())]


def _escape(text: str) -> str:
    """A text-format string literal's body (C escapes, as protobuf's CEscape)."""
    out = []
    for byte in text.encode():
        ch = chr(byte)
        if ch in "\"'\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def _unescape(body: str) -> str:
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8")


@dataclass
class CheckpointState:
    """The state file's content (TF's CheckpointState), paths joined to its folder."""
    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list[str] = field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = field(default_factory=list)
    last_preserved_timestamp: float = 0.0


def write_checkpoint_state(folder: PathLike, model_checkpoint_path: str, all_model_checkpoint_paths: Sequence[str],
                           timestamps: Sequence[float] = (), latest_filename: str = CHECKPOINT_STATE_FILE) -> Path:
    """Write ``folder/latest_filename`` in TF's text format, replacing it in
    one step; paths inside ``folder`` are written relative to it (so the
    folder can move), others as given."""
    folder = Path(os.fspath(folder) or ".")

    def shown(path: str) -> str:
        p = Path(path)
        try:
            return os.fspath(p.resolve().relative_to(folder.resolve()))
        except ValueError:
            return path

    lines = [f'model_checkpoint_path: "{_escape(shown(model_checkpoint_path))}"']
    lines += [f'all_model_checkpoint_paths: "{_escape(shown(p))}"' for p in all_model_checkpoint_paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in timestamps]
    if timestamps:
        lines.append("last_preserved_timestamp: 0.0")
    target = folder / latest_filename
    # Not tempfile.mkstemp: its file is private (0600); "x" mode keeps the usual permissions.  Written
    # under the folder's lock: a later save holding it removes the file, should this process die first.
    tmp = folder / f".{latest_filename}.{secrets.token_hex(8)}.tmp"
    with _folder_lock(os.fspath(folder)):
        try:
            with open(tmp, "x", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    return target


def get_checkpoint_state(checkpoint_dir: PathLike, latest_filename: Optional[str] = None) -> Optional[CheckpointState]:
    """The state file of ``checkpoint_dir`` (None if there is none), relative paths joined to the folder."""
    folder = _checked_path(checkpoint_dir, "get_checkpoint_state", "checkpoint_dir", folder_ok=True,
                           empty_ok=True)
    path = os.path.join(folder, _checked_path(latest_filename or CHECKPOINT_STATE_FILE, "get_checkpoint_state",
                                              "latest_filename"))
    if not os.path.isfile(path):
        return None
    state = CheckpointState()
    with open(path, "rb") as f:
        raw = f.read()
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"checkpoint state file {path} is not a text file (byte {raw[exc.start]:#04x} at offset "
                         f"{exc.start} is not UTF-8): it is corrupt, or not a state file; remove it or write "
                         "it again (Saver.save writes one)") from None
    if "\0" in content:
        raise ValueError(f"checkpoint state file {path} holds a NUL byte at offset {content.index(chr(0))}: it is "
                         "corrupt, or not a state file; remove it or write it again (Saver.save writes one)")
    for number, line in enumerate(content.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        value = value.strip()
        try:
            if key in ("model_checkpoint_path", "all_model_checkpoint_paths"):
                if not (sep and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"):
                    raise ValueError("expected a quoted string")
                text = _unescape(value[1:-1])
                if "\0" in text or not text:
                    raise ValueError("a checkpoint path must be non-empty and hold no NUL byte")
                text = text if os.path.isabs(text) else os.path.join(folder, text)
                if key == "model_checkpoint_path":
                    state.model_checkpoint_path = text
                else:
                    state.all_model_checkpoint_paths.append(text)
            elif key == "all_model_checkpoint_timestamps":
                state.all_model_checkpoint_timestamps.append(float(value))
            elif key == "last_preserved_timestamp":
                state.last_preserved_timestamp = float(value)
            else:
                raise ValueError(f"unknown field '{key}'")
        except (ValueError, UnicodeError) as exc:
            raise ValueError(f"checkpoint state file {path}, line {number}: {exc}: {line!r}") from None
    return state


def latest_checkpoint(checkpoint_dir: PathLike, latest_filename: Optional[str] = None) -> Optional[str]:
    """The prefix of the newest checkpoint the state file in ``checkpoint_dir``
    names, or None when there is none (or its files are gone).  A save to
    the folder that was killed after its commit is finished first (see the
    module doc)."""
    folder = _checked_path(checkpoint_dir, "latest_checkpoint", "checkpoint_dir", folder_ok=True,
                           empty_ok=True) or "."
    if os.path.isdir(folder):
        with _folder_lock(folder, must=False) as exclusive:
            _recover(folder, exclusive, must=False)
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix = state.model_checkpoint_path
    return prefix if checkpoint_exists(prefix) else None
