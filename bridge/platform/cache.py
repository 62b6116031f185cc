"""Content-addressed caching, for every cache the bridge keeps.

An entry is named by a key hashed from everything it is made from
(:class:`Key`), so it never goes stale: changed inputs name another entry.
Entries appear whole or not at all: a file is written beside its name and
renamed onto it (:func:`publish_file`), a folder is built in a hidden folder
beside its name and renamed when complete (:func:`staged_dir`).  Where
several processes may build the same entry, :class:`EntryLock` makes the
second wait and then find it made.

The caches, each stating only its key and how to make its entry:

- ``bridge.platform.ffi_modules``: parsed cffi declarations (the C API's, the Julia runtime's), ``root()/ffi/``;
- ``bridge.ops.opgen``: generated op modules and their bytecode, ``root()/ops/``;
- ``bridge.julia.buildtools``: Julia's account of its installation, ``root()/julia-config/``;
- ``bridge.julia.runtime``: the built runtime, ``root()/runtime/<key>/``;
- ``bridge.julia.sysimage``: Julia's system image with TFBridge, ``root()/julia-image/<key>/``
  (built only on request, by ``make setup``; a start without it includes TFBridge.jl);
- ``bridge.customop.build``: built ops, ``<op folder>/build/<key>/``.

The per-user cache (:func:`root`) may be read-only or impossible to create
(a shared install, a read-only home).  Readers then find nothing and writers
fall back: declarations, op modules and Julia's configuration are made in
memory for the process (``publish_file`` returns False), and the runtime is
taken from a built op's folder, which carries a copy of the runtime it links
(``bridge.julia.runtime.loadable_runtime_library``), so ops already built
still load and run.  Only what needs the runtime built (the first op built
for a new Julia or new runtime sources) fails, with an error ending in
:func:`unwritable_hint`.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Union

# A hidden folder left this long ago by staged_dir belongs to a killed build.
STALE_SECONDS = 24 * 3600


def root() -> Path:
    """The per-user cache: ``TFBRIDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or
    ``~/.cache``, plus ``tf-julia-bridge``.  Created when possible; returned
    even when it cannot be (its writers then fall back, see the module's
    docstring)."""
    override = os.environ.get("TFBRIDGE_CACHE_DIR")
    if override:
        path = Path(override)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "tf-julia-bridge"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # unwritable: readers find nothing, writers fall back
    return path


def unwritable_hint(path: Path, exc: BaseException) -> str:
    """The end of an error about a cache folder that could not be written."""
    where = ("TFBRIDGE_CACHE_DIR" if os.environ.get("TFBRIDGE_CACHE_DIR")
             else "the default (TFBRIDGE_CACHE_DIR is not set)")
    reason = getattr(exc, "strerror", None) or str(exc)
    return (f"the cache folder {path} (from {where}) cannot be written ({reason}): "
            "set TFBRIDGE_CACHE_DIR to a writable folder, or make this one writable")


class Key:
    """A hash of an entry's inputs: the same inputs added in the same order
    give the same key.  Each input is prefixed with its length, so ("ab", "c")
    and ("a", "bc") differ."""

    def __init__(self, *parts: Union[bytes, str]) -> None:
        self._hash = hashlib.sha256()
        self.add(*parts)

    def add(self, *parts: Union[bytes, str]) -> "Key":
        """Add inputs (strings are UTF-8 encoded)."""
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            self._hash.update(b"%d:" % len(data))
            self._hash.update(data)
        return self

    def add_file(self, path: Path, name: str | None = None) -> "Key":
        """Add a file's name (``name``, else its base name) and its content."""
        return self.add(path.name if name is None else name, path.read_bytes())

    def add_modules(self, *modules: str) -> "Key":
        """Add the source of ``modules`` and of every bridge module they import
        (:func:`bridge.platform.sources.module_closure`), each under its path
        inside the package, so that an edit to anything they read changes the key."""
        from .sources import module_closure
        for path in module_closure(*modules):
            self.add_file(path, _package_relative(path))
        return self

    def digest(self) -> bytes:
        return self._hash.digest()

    def hexdigest(self, length: int = 16) -> str:
        """The key as ``length`` hex digits, for a file or folder name."""
        return self._hash.hexdigest()[:length]


def _package_relative(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[len(parts) - 1 - parts[::-1].index("bridge"):]) if "bridge" in parts else path.name


@contextlib.contextmanager
def publishing(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` for the block to write, renamed onto
    ``path`` when the block completes: readers see no file, the old one or
    the whole new one, never a part.  OSError (an unwritable folder) propagates."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def publish_file(path: Path, data: Union[bytes, str]) -> bool:
    """Write ``data`` to ``path`` atomically.  False where the folder cannot be
    written: the caller keeps the entry in memory for this process."""
    try:
        with publishing(path) as tmp:
            tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def staged_dir(entry: Path, failed: Path | None = None,
               failure: type[BaseException] | tuple[type[BaseException], ...] = Exception,
               ) -> Iterator[Path]:
    """A fresh hidden folder beside ``entry`` for the block to build the entry
    in, renamed to ``entry`` when the block completes, so a folder named by a
    key is always complete.

    When the block raises, the folder is removed; or, given ``failed`` and an
    exception of type ``failure``, kept as ``failed`` (replacing an earlier
    one) for inspection, the exception's message then naming ``failed``
    instead of the temporary folder.  A success removes ``failed``."""
    import shutil
    import tempfile  # both only needed when building: keeps `import bridge` light

    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    work.chmod(0o755)  # mkdtemp's 0700 would stay on the published folder
    try:
        yield work
    except BaseException as exc:
        if failed is None or not isinstance(exc, failure):
            shutil.rmtree(work, ignore_errors=True)
            raise
        shutil.rmtree(failed, ignore_errors=True)
        os.rename(work, failed)
        exc.args = tuple(a.replace(str(work), str(failed)) if isinstance(a, str) else a for a in exc.args)
        raise
    os.rename(work, entry)
    if failed is not None:
        shutil.rmtree(failed, ignore_errors=True)


def lock_path(entry: Path) -> Path:
    """The lock file of ``entry`` (see EntryLock)."""
    return entry.parent / f".{entry.name}.lock"


_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


class EntryLock:
    """The right to build ``entry``, held by one thread of one process at a
    time: an in-process lock, and ``flock`` on ``lock_path(entry)`` for other
    processes.  A second builder waits, then finds the entry made: check for
    it again once the lock is held.

    Made before entering, so that a folder that cannot be written (OSError
    here) is told apart from a failing build (inside the block)."""

    def __init__(self, entry: Path) -> None:
        path = lock_path(entry)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a")
        with _thread_locks_guard:
            self._thread_lock = _thread_locks.setdefault(path, threading.Lock())

    def __enter__(self) -> "EntryLock":
        self._thread_lock.acquire()
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX)
        except BaseException:
            self._thread_lock.release()
            self._file.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._file.close()  # releases the flock
        finally:
            self._thread_lock.release()


def prune(folder: Path, keep: str, newest: int, is_entry: Callable[[Path], bool]) -> None:
    """Remove from ``folder`` what earlier builds left: entries (folders for
    which ``is_entry`` holds) beyond the ``newest`` most recently made, with
    their lock files (``keep`` always stays), failed builds of other keys, and
    staging folders of killed builds.  A process that loaded a library removed
    here keeps its mapping (Linux unlinks, it does not unmap)."""
    import shutil

    folders = [p for p in folder.iterdir() if p.is_dir()]
    entries = sorted((p for p in folders if is_entry(p)), key=lambda p: p.stat().st_mtime, reverse=True)
    superseded = [p for p in entries[newest:] if p.name != keep]
    now = time.time()
    leftovers = [p for p in folders if (p.name.endswith(".failed") and p.name != f"{keep}.failed")
                 or (p.name.startswith(".") and now - p.stat().st_mtime > STALE_SECONDS)]
    for path in superseded + leftovers:
        shutil.rmtree(path, ignore_errors=True)
    for path in superseded:
        lock_path(path).unlink(missing_ok=True)
