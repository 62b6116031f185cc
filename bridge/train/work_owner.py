"""Whether the writer of a checkpoint work folder is gone: a lock it holds on a file inside.

A save writes into a hidden work folder of its own (:mod:`bridge.train.checkpoint_commit`)
and, for as long as that folder exists, holds an ``fcntl`` lock on the file
``OWNER`` inside it.  Another process asks the lock, not a process id: a
process id means nothing to a process in another PID namespace (another
container on a shared volume) or on another host sharing the file system,
where an id that is not alive *there* may be a save running *here*.  The
kernel, or the file server, drops a lock when its holder dies, so a lock that
can be taken proves the writer gone; one that cannot be taken, or a file
system that refuses locks, proves nothing, and the folder stays.

POSIX (``fcntl``) record locks rather than ``flock``: NFS (NLM, NFSv4) and SMB
servers see them across hosts, and the kernel across PID namespaces.  They
belong to a process, not to an open file: a process taking the lock of one of
its own saves succeeds, and closing any descriptor of the file drops the
lock.  So a process never asks about its own folders in flight (checkpoint_commit's
``_working``), and nothing but :func:`take` and :func:`claim` opens the file
(checkpoint_commit's fsync of a work folder skips it).

``OWNER`` appears under its name only once locked (it is created as
``OWNER.new`` and renamed), so an ``OWNER`` file that can be locked was
locked by a writer that is gone.  A folder without one is either a save
killed between ``mkdir`` and the rename or one in that window: the saver
creates work folders under the checkpoint folder's inter-process lock, so a
process holding that lock sees only the former.
"""
from __future__ import annotations

import errno
import os
from typing import Optional

__all__ = ["OWNER", "Owner", "take", "claim", "ALIVE", "GONE", "MISSING", "UNKNOWN"]

#: The lock file inside a work folder.
OWNER = ".owner"
_NEW = OWNER + ".new"

#: What :func:`claim` finds.
ALIVE = "alive"        # the lock is held: its writer runs (here, in another namespace, or on another host)
GONE = "gone"          # the lock was taken: its writer is gone, and the caller now holds the lock
MISSING = "missing"    # no OWNER file: killed before it took the lock, or (without the folder lock) about to
UNKNOWN = "unknown"    # the file system refuses locks (or the file cannot be opened): nothing is proven

_BUSY = (errno.EACCES, errno.EAGAIN)


class Owner:
    """A held lock on a work folder's ``OWNER`` file (or none, where the file
    system refuses locks); :meth:`release` drops it."""

    def __init__(self, fd: Optional[int]):
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> "Owner":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _lock(fd: int) -> None:
    import fcntl
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def take(folder: str) -> Owner:
    """Lock the new work folder ``folder`` for this process, for as long as
    the returned Owner is held.  On a file system without locks nothing is
    held, and a kill leaves the folder for good: nothing could prove its
    writer gone."""
    new = os.path.join(folder, _NEW)
    fd = os.open(new, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _lock(fd)
    except OSError:   # no locks here: OWNER is still named, so that a clean-up finds it, fails to lock it, and stays
        os.close(fd)
        fd = None
    try:
        os.rename(new, os.path.join(folder, OWNER))
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return Owner(fd)


def claim(folder: str) -> tuple[str, Owner]:
    """Ask the lock of ``folder`` (a work folder of another process, or a
    leftover of this one's): ALIVE, GONE (the returned Owner holds the lock:
    keep it while finishing or removing the folder), MISSING or UNKNOWN."""
    try:
        fd = os.open(os.path.join(folder, OWNER), os.O_RDWR)
    except FileNotFoundError:
        return (MISSING if os.path.isdir(folder) else UNKNOWN), Owner(None)
    except OSError:
        return UNKNOWN, Owner(None)
    try:
        _lock(fd)
    except OSError as exc:
        os.close(fd)
        return (ALIVE if exc.errno in _BUSY else UNKNOWN), Owner(None)
    return GONE, Owner(fd)
