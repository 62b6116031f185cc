"""The one module that finds and loads the TensorFlow C API.

TensorFlow's libraries come from the installed ``tensorflow`` (or
``tensorflow-cpu``) wheel, located without importing it (``import tensorflow``
costs seconds and must never happen in a process that runs Julia).  A
standalone libtensorflow can be named with ``TFBRIDGE_LIBTENSORFLOW`` (the
folder holding ``libtensorflow_cc.so.2`` or ``libtensorflow.so.2``, and
``libtensorflow_framework.so.2``).

Both libraries are loaded RTLD_LOCAL|RTLD_NOW and must be loaded before
libjulia: they bundle an LLVM whose symbols clash with Julia's, and binding
every symbol now, privately, keeps later lazy bindings from landing in Julia's
copy (see ENVIRONMENT notes: other orders hang or segfault).

TensorFlow logs through absl, whose first message, written by a static
initialiser as the libraries load and so before TensorFlow reads
``TF_CPP_MIN_LOG_LEVEL``, comes with absl's notice that logging is not
initialised ("oneDNN custom operations are on" and "All log messages before
absl::InitializeLog() ..." on every start).  The loads run with stderr
captured, and what TF's level lets through is written back
(:func:`filter_tf_log`): quiet by default (level 1, set unless the user set
it), everything at ``TF_CPP_MIN_LOG_LEVEL=0``.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import re
import sys
import threading
from pathlib import Path
from typing import Iterator

from bridge.platform import ffi_modules

_DECL_DIR = Path(__file__).resolve().parent / "decl"
_DECL_FILES = ("types.h", "tf_status.h", "tf_buffer.h", "tf_tensor.h", "tf_tstring.h", "c_api.h", "tf_server.h")


def _make_ffi():
    """The FFI of decl/*.h. Parsing them with pycparser costs about 70 ms, so
    the parsed form is kept in the cache (bridge.platform.ffi_modules)."""
    source = "".join((_DECL_DIR / name).read_text() for name in _DECL_FILES)
    return ffi_modules.cached_ffi(source, "_bridge_tf_ffi")


ffi = _make_ffi()


class CTypes:
    """C types used on hot paths, parsed once (ffi.new("T[]") re-parses T each call)."""
    output_array = ffi.typeof("TF_Output[]")
    tensor_ptr_array = ffi.typeof("TF_Tensor*[]")
    operation_ptr_array = ffi.typeof("TF_Operation*[]")
    int64_array = ffi.typeof("int64_t[]")
    char_ptr = ffi.typeof("char*")
    char_array = ffi.typeof("char[]")
    void_ptr = ffi.typeof("void*")
    uintptr = ffi.typeof("uintptr_t")
    buffer_ptr = ffi.typeof("TF_Buffer*")


class LibraryNotFoundError(ImportError):
    """The TensorFlow C API libraries could not be found or loaded."""


def _tensorflow_dir() -> Path:
    override = os.environ.get("TFBRIDGE_LIBTENSORFLOW")
    if override:
        path = Path(override)
        if not path.is_dir():
            raise LibraryNotFoundError(f"TFBRIDGE_LIBTENSORFLOW={override} is not a folder")
        return path
    spec = importlib.util.find_spec("tensorflow")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise LibraryNotFoundError(
            "TensorFlow's C API was not found: install the 'tensorflow-cpu' (or 'tensorflow') wheel "
            "into this Python environment, or set TFBRIDGE_LIBTENSORFLOW to a folder holding "
            "libtensorflow_cc.so.2 and libtensorflow_framework.so.2")
    return Path(list(spec.submodule_search_locations)[0])


def library_paths() -> tuple[Path, Path]:
    """Return (framework library, C API library) paths, or raise naming what is missing."""
    folder = _tensorflow_dir()
    framework = folder / "libtensorflow_framework.so.2"
    candidates = [folder / "libtensorflow_cc.so.2", folder / "libtensorflow.so.2"]
    c_api = next((c for c in candidates if c.exists()), None)
    missing = [str(p) for p in [framework] if not p.exists()]
    if c_api is None:
        missing.append(" or ".join(str(c) for c in candidates))
    if missing:
        raise LibraryNotFoundError("TensorFlow C API library missing: " + "; ".join(missing))
    return framework, c_api


def include_dir() -> Path:
    """TensorFlow's C/C++ headers (shipped in the wheel)."""
    path = _tensorflow_dir() / "include"
    if not (path / "tensorflow" / "c" / "c_api.h").exists():
        raise LibraryNotFoundError(f"TensorFlow headers not found under {path}")
    return path


# --- TensorFlow's log lines written while its libraries load --------------------------

#: absl's glog-style prefix: severity, date, time, thread, file:line].
_TF_LOG_LINE = re.compile(rb"([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]\n]*\] ")
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def min_log_level() -> int:
    """TF_CPP_MIN_LOG_LEVEL as TensorFlow reads it (0: everything, 1: no INFO, 2: no WARNING, 3: no ERROR)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def filter_tf_log(data: bytes, level: int) -> bytes:
    """``data`` (stderr written while TF loaded) without TF's records below
    ``level`` (a record: a prefixed line and the unprefixed lines after it),
    and without absl's notice unless a record it announces is kept.  Lines
    before the first record (anything else that wrote meanwhile) are kept."""
    out: list[bytes] = []
    keep, notice = True, False
    for line in data.splitlines(keepends=True):
        if line.rstrip(b"\r\n") == _ABSL_NOTICE:
            notice = True
            continue
        m = _TF_LOG_LINE.match(line)
        if m is not None:
            keep = "IWEF".index(m.group(1).decode()) >= level
            if keep and notice:
                out.append(_ABSL_NOTICE + b"\n")
                notice = False
        if keep:
            out.append(line)
    return b"".join(out)


@contextlib.contextmanager
def _tf_log_filtered() -> Iterator[None]:
    """Capture fd 2 for the block and write back what filter_tf_log keeps."""
    level = min_log_level()
    if level <= 0:
        yield
        return
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no stderr to filter
        yield
        return
    import tempfile

    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = memoryview(filter_tf_log(capture.read(), level))
            while kept:
                kept = kept[os.write(2, kept):]


_lock = threading.Lock()
_lib = None
_pinned: list = []


_loader: threading.Thread | None = None  # start_loading's thread, joined by load()


def start_loading() -> None:
    """Begin loading the TF libraries on another thread, for a caller that
    will call ``load()`` after work of its own (``bridge.julia.init`` reads its
    configuration meanwhile); ``load()`` waits for the thread.  Binding every
    symbol takes about 0.25 s, inside glibc's loader lock: anything else that
    opens a library meanwhile (an extension module's import) waits for it.
    Failures are left to ``load()``, which opens the same files and says why."""
    global _loader
    with _lock:
        if _lib is not None or _loader is not None:
            return
        try:
            paths = [str(p).encode() for p in library_paths()]
        except LibraryNotFoundError:
            return
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # as load() does, before TF reads it
        # libc's dlopen, called through ctypes, which releases the GIL around
        # a foreign call: Python runs on meanwhile (what loads no library).
        dlopen = ctypes.CDLL(None).dlopen
        dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        flags = os.RTLD_LOCAL | os.RTLD_NOW

        def run() -> None:
            with _tf_log_filtered():
                for path in paths:  # the framework first, as load() opens them
                    if not dlopen(path, flags):
                        return  # load() opens it again and raises with dlerror's text
            # The handles are dropped, never closed: load()'s keep the libraries.

        # Not a daemon: an exit waits for it rather than running TF's static
        # destructors under its constructors.  A fork waits for it too: the
        # child would get TF half loaded, its constructors cut off with this
        # thread (measured: a segfault, or TF's op list 1/70 of its length).
        _loader = threading.Thread(target=run, name="bridge-tf-load")
        _loader.start()
        os.register_at_fork(before=_loader.join)


def load():
    """Load the TF libraries once (RTLD_LOCAL|RTLD_NOW) and return the cffi library."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            if _loader is not None:
                _loader.join()  # the libraries are loaded now, or failed to: opened again below
            framework, c_api = library_paths()
            flags = os.RTLD_LOCAL | os.RTLD_NOW
            # TF's INFO lines (oneDNN notices) are noise for a library user.
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
            try:
                # The framework first: the C API library and every custom-op
                # library resolve their framework symbols against this copy.
                # ctypes handles are never dlclose'd: unloading TF while its
                # threads or static objects live segfaults at exit.
                with _tf_log_filtered():
                    _pinned.append(ctypes.CDLL(str(framework), mode=flags))
                    _pinned.append(ctypes.CDLL(str(c_api), mode=flags))
                    _lib = ffi.dlopen(str(c_api), flags)
            except OSError as exc:
                raise LibraryNotFoundError(f"could not load TensorFlow from {c_api}: {exc}") from exc
    return _lib


def is_loaded() -> bool:
    return _lib is not None


class _LazyLib:
    """Module-level ``lib`` that loads TensorFlow on first use."""

    def __getattr__(self, name):
        value = getattr(load(), name)
        setattr(self, name, value)  # later lookups skip __getattr__ (hot paths call C often)
        return value


lib = _LazyLib()
