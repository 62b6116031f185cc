"""The crash-safe commit protocol of a checkpoint save, and the folder's lock.

A save killed at any point (SIGKILL, power aside) leaves the checkpoint of its
prefix either as it was or as the save wrote it, never a data file that does
not match its index, and saves to one prefix from several threads or
processes never disturb each other.  :func:`atomic_save` does not give the
prefix itself to the writer but a folder of its own,
``<folder>/.<name>.save-<random>/ckpt`` (so ``<prefix>_temp`` is never
shared), and when the writer has written it:

1. flushes its files to disk and renames the folder to
   ``.<name>.commit-<random>``: the commit point;
2. holding a lock on the checkpoint folder (:func:`folder_lock`: ``flock`` on
   the folder itself, and a lock per folder in the process), removes
   ``<prefix>.index`` (and data files of another shard count), moves the new
   data files over ``<prefix>.data-<k>-of-<n>``, then the new index to
   ``<prefix>.index``, and removes the commit folder;
3. runs the caller's ``finish`` (the Saver writes the state file aside and
   renames it into place: :mod:`bridge.train.checkpoint_management`) under
   the same lock.

Who may clean up: from creating its work folder (under the folder's lock)
to removing it, a save holds an ``fcntl`` lock on the file ``.owner``
inside it (:mod:`bridge.train.work_owner`).  A kill before the commit
leaves a ``.save-`` folder, which the next save, restore or
``latest_checkpoint`` in that folder removes once it can take that lock
(:func:`settled`); a kill after it leaves a ``.commit-`` folder, which they
finish (step 2) the same way.  A lock that cannot be taken means a live
save, whatever its process id says here: saves in other containers sharing
the folder (another PID namespace) or on other hosts sharing the file system
are never disturbed.  Folders of the bridge's versions before the lock
(``.save-<pid>-<random>``) are removed when no process of that id is alive
here, as those versions did.  Between step 2's first and last rename
``<prefix>.index`` is missing, never stale: TensorFlow itself sees no
checkpoint there until the bridge finishes it.
"""
from __future__ import annotations

import errno
import glob
import os
import re
import secrets
import shutil
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from . import work_owner

__all__ = ["WORK_NAME", "atomic_save", "settle", "settled", "folder_lock", "recover", "delete_checkpoint"]

WORK_NAME = "ckpt"                                      # the prefix inside a work folder
_DATA_GLOB = ".data-?????-of-?????"                      # the data files of a checkpoint
# Work folders and state files being written; a pid in the name: the bridge's versions before the owner lock.
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>save|commit)-(?:(?P<pid>\d+)-)?[0-9a-f]+$")
_STATE_TMP = re.compile(r"^\..+\.(?:(?P<pid>\d+)-)?[0-9a-f]+\.tmp$")

_registry_lock = threading.Lock()
_folder_locks: dict[str, threading.RLock] = {}
_folder_depth: dict[str, int] = {}                       # how deep this process's threads hold each folder's lock
_folder_held: dict[str, bool] = {}                       # whether the outermost of them got the inter-process lock
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
def folder_lock(folder: str, must: bool = True) -> Iterator[bool]:
    """Hold the checkpoint folder's lock: a lock per folder among this
    process's threads (re-entrant), and ``flock`` on the folder itself among
    processes.  Yields whether the inter-process lock is held (a file system
    without ``flock``, or a folder that cannot be opened when not ``must``,
    goes on with the thread lock alone).  A nested call (the same thread,
    inside another) holds what the outermost call got, and says so: the
    ``flock`` only if that call took it."""
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
                _folder_held[key] = fd is not None
            yield _folder_held[key]
        finally:
            if fd is not None:
                os.close(fd)   # releases the flock
            _folder_depth[key] = depth
            if depth == 0:
                _folder_held.pop(key, None)


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
    index = os.path.join(committed, WORK_NAME + ".index")
    if os.path.exists(index):
        try:
            os.remove(f"{prefix}.index")
        except FileNotFoundError:
            pass
        data = sorted(glob.glob(os.path.join(glob.escape(committed), WORK_NAME + _DATA_GLOB)))
        if data:
            # Data files of an earlier save with another number of shards would
            # outlive it: removed before the first new one moves in.
            count = data[0][-len("-of-00000"):]
            for old in glob.glob(glob.escape(prefix) + _DATA_GLOB):
                if not old.endswith(count):
                    os.remove(old)
        for path in data:
            os.replace(path, prefix + path[len(os.path.join(committed, WORK_NAME)):])
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


def recover(folder: str, exclusive: bool, must: bool = True) -> None:
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


def delete_checkpoint(prefix: str) -> None:
    for path in [f"{prefix}.index", f"{prefix}.meta"] + glob.glob(glob.escape(prefix) + _DATA_GLOB):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass



def atomic_save(prefix: str, write: Callable[[str], None], finish: Callable[[], None]) -> None:
    """Save the checkpoint ``prefix`` crash-safely (the module doc):
    ``write(path)`` writes a checkpoint to ``path`` (absolute, inside a work
    folder of this save's own); then the save is committed and moved to
    ``prefix``, and ``finish()`` runs under the folder's lock (the state file,
    old checkpoints to delete).  If ``write`` raises, the work folder is
    removed and the checkpoint ``prefix`` is as it was."""
    parent = os.path.dirname(prefix) or "."
    name = os.path.basename(prefix)
    token = secrets.token_hex(8)
    work = os.path.join(parent, f".{name}.save-{token}")
    with _in_flight(work):   # before it exists, so that no other thread's clean-up takes it for a leftover
        with folder_lock(parent):   # so that no clean-up sees it before its owner lock is taken
            os.mkdir(work)
            owner = work_owner.take(work)
        with owner:
            try:
                # Absolute: the tasks of a cluster that write shards have working folders of their own.
                write(os.path.abspath(os.path.join(work, WORK_NAME)))
                _sync_files(work)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            with folder_lock(parent) as exclusive:
                committed = os.path.join(parent, f".{name}.commit-{token}")
                os.rename(work, committed)   # the commit point: from here on the save is finished, if need be by others
                _apply(committed, prefix)
                recover(parent, exclusive, must=False)   # leftovers of killed saves: best effort, the save is done
                finish()
                _sync_folder(parent)


def settle(folder: str) -> None:
    """Finish or remove the saves a kill left in ``folder`` (:func:`settled`, held for no longer)."""
    with settled(folder):
        pass


@contextmanager
def settled(folder: str) -> Iterator[None]:
    """Hold ``folder``'s lock, the saves a kill left there finished or removed
    first (those whose writer is provably gone): what a restore, or a look for
    the newest checkpoint, sees is whole.  A folder that cannot be opened or
    locked goes on without (best effort: reading must not fail on it)."""
    with folder_lock(folder, must=False) as exclusive:
        recover(folder, exclusive, must=False)
        yield
