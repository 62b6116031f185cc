"""Run the stock-TensorFlow oracle scripts (tests/oracle/*.py) from the test process.

The test process loads the bridge and Julia, so it must never
``import tensorflow`` (the two LLVMs clash: see docs/getting-started/install.md).  Stock TF
answers questions in a subprocess instead: :func:`run_oracle` pickles the
request, runs ``python tests/oracle/<script>.py REQ RESP OUT_DIR`` with this
interpreter and unpickles the response.  Nothing here imports tensorflow.

Answers are cached on disk, keyed by the script's source (and its shared
helpers), the request's content and the installed TensorFlow version, so a
repeated test run costs no TF start-up.  The cache lives in
``$TFBRIDGE_TEST_CACHE`` or ``<repo>/build/oracle-cache``; set
``TFBRIDGE_ORACLE_REFRESH=1`` to recompute every answer.  Processes that ask
the same question at once (`make test`'s parallel workers) compute it once:
the others wait on the entry's lock file (``.<entry>.lock``) and read it.

Each cache entry is a folder ``<key>/`` holding ``response.pkl``, and
``files/``: the OUT_DIR the script wrote into (the model fixtures of
make_models).  Paths in a response that point into ``files/`` stay valid for
as long as the cache entry does.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bridge.platform.cache import EntryLock
from . import REPO, TESTS


ORACLE_DIR = TESTS / "oracle"

#: Bump when the protocol or the cache layout changes, to drop old entries.
_CACHE_FORMAT = "1"


class OracleError(RuntimeError):
    """An oracle script failed (non-zero exit, timeout or no response)."""


def cache_root() -> Path:
    """Folder of the oracle cache ($TFBRIDGE_TEST_CACHE or <repo>/build/oracle-cache)."""
    root = os.environ.get("TFBRIDGE_TEST_CACHE")
    # Resolved: the scripts record their files' resolved paths, which loads re-root by prefix.
    return (Path(root) if root else REPO / "build" / "oracle-cache").resolve()


@functools.lru_cache(maxsize=None)
def tensorflow_version() -> str:
    """Installed TensorFlow version, from package metadata (no import).

    The wheel may be named tensorflow, tensorflow-cpu, tf-nightly, ...; ask
    which distribution provides the top-level ``tensorflow`` package.
    """
    dists = importlib.metadata.packages_distributions().get("tensorflow", [])
    for dist in dists + ["tensorflow", "tensorflow-cpu"]:
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    raise OracleError("no TensorFlow distribution is installed in this environment; "
                      "the oracle needs stock TensorFlow (pip install tensorflow-cpu)")


def _script_path(script_name: str) -> Path:
    name = script_name[:-3] if script_name.endswith(".py") else script_name
    path = ORACLE_DIR / f"{name}.py"
    if not path.is_file():
        available = sorted(p.stem for p in ORACLE_DIR.glob("[!_]*.py"))
        raise OracleError(f"no oracle script {path} (available: {available})")
    return path


def _feed(h: "hashlib._Hash", obj: Any) -> None:
    """Hash ``obj`` canonically: equal requests hash equal whatever their
    dict order or array memory layout (pickle bytes guarantee neither)."""
    if isinstance(obj, np.ndarray):
        h.update(f"nd|{obj.dtype.str}|{obj.shape}|".encode())
        if obj.dtype.hasobject:
            _feed(h, obj.ravel().tolist())
        else:
            h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, np.generic):
        _feed(h, np.asarray(obj))
        h.update(b"scalar")
    elif isinstance(obj, dict):
        h.update(f"dict|{len(obj)}|".encode())
        for key in sorted(obj, key=repr):
            _feed(h, key)
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}|{len(obj)}|".encode())
        for item in obj:
            _feed(h, item)
    elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        h.update(f"{type(obj).__name__}|{obj!r}|".encode())
    elif isinstance(obj, type) and issubclass(obj, np.generic):
        h.update(f"nptype|{np.dtype(obj).str}|".encode())  # e.g. attrs {"T": np.float32}
    elif isinstance(obj, np.dtype):
        h.update(f"dtype|{obj.str}|".encode())
    else:
        h.update(b"pickle|" + pickle.dumps(obj, protocol=4))


def cache_key(script_name: str, request: Any) -> str:
    """Hex key of (script source + helpers, request, TF version, cache format)."""
    h = hashlib.sha256()
    h.update(f"format {_CACHE_FORMAT}|{tensorflow_version()}|py{sys.version_info[:2]}|".encode())
    script = _script_path(script_name)
    # Shared helpers (_*.py) change what every script computes.
    for path in [script] + sorted(ORACLE_DIR.glob("_*.py")):
        h.update(path.name.encode() + b"|" + path.read_bytes())
    _feed(h, request)
    return h.hexdigest()[:32]


def _rebase(obj: Any, old: str, new: str) -> Any:
    """Copy of ``obj`` with every str starting with ``old`` re-rooted at ``new``."""
    if isinstance(obj, str):
        return new + obj[len(old):] if obj.startswith(old) else obj
    if isinstance(obj, dict):
        return {k: _rebase(v, old, new) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rebase(v, old, new) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_rebase(v, old, new) for v in obj)
    return obj


def _load_entry(entry: Path) -> dict | None:
    """The cached response in ``entry``, with its file paths pointing at ``entry/files``."""
    try:
        with open(entry / "response.pkl", "rb") as f:
            stored = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
    # Files paths were recorded under the folder the entry was created in; the
    # cache may have moved since (a renamed checkout, a copied CI cache), and a
    # script may have written them through the symbolic links of the cache's path resolved.
    response = stored["response"]
    for old in dict.fromkeys((stored["files_dir"], os.path.realpath(stored["files_dir"]))):
        response = _rebase(response, old, str(entry / "files"))
    return response


def _stderr_tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def run_oracle(script_name: str, request: dict | list | None = None, timeout: float = 600,
               refresh: bool = False) -> dict:
    """Run ``tests/oracle/<script_name>.py`` under stock TensorFlow; return its response dict.

    ``request`` is anything picklable (dicts, lists, numpy arrays, ...).
    Answers come from the disk cache when the script, the request and the
    TensorFlow version are unchanged.  Raises :class:`OracleError` with the
    tail of the script's stderr when it fails or exceeds ``timeout`` seconds.
    """
    key = cache_key(script_name, request)
    root = cache_root()
    entry = root / f"{Path(script_name).stem}-{key}"
    refresh = refresh or os.environ.get("TFBRIDGE_ORACLE_REFRESH", "") not in ("", "0")
    if not refresh and entry.is_dir():
        cached = _load_entry(entry)
        if cached is not None:
            return cached
    root.mkdir(parents=True, exist_ok=True)
    # Parallel test processes (make test's workers) asking the same question
    # at once: one computes it, the others wait and read its answer, rather
    # than each starting TensorFlow.
    with EntryLock(entry):
        if not refresh and entry.is_dir():
            cached = _load_entry(entry)
            if cached is not None:
                return cached
        return _compute(script_name, request, timeout, entry)


def _compute(script_name: str, request: Any, timeout: float, entry: Path) -> dict:
    """Run the script for ``request`` and store its answer as ``entry`` (replacing one there)."""
    root = entry.parent
    stale = entry.is_dir()  # refreshed or unreadable: replace it below
    # Compute in a private folder, then rename it into place in one step, so
    # parallel test runs never see a half-written entry.
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=root))
    try:
        files = work / "files"
        files.mkdir()
        with open(work / "request.pkl", "wb") as f:
            pickle.dump(request, f, protocol=pickle.HIGHEST_PROTOCOL)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                   PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
        cmd = [sys.executable, str(_script_path(script_name)),
               str(work / "request.pkl"), str(work / "response.raw.pkl"), str(files)]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) \
                else (exc.stderr or "")
            raise OracleError(f"oracle {script_name} timed out after {timeout} s; "
                              f"stderr tail:\n{_stderr_tail(err)}") from None
        if proc.returncode != 0 or not (work / "response.raw.pkl").is_file():
            raise OracleError(
                f"oracle {script_name} failed (exit {proc.returncode}, "
                f"{time.monotonic() - start:.1f} s); stderr tail:\n{_stderr_tail(proc.stderr)}")
        with open(work / "response.raw.pkl", "rb") as f:
            response = pickle.load(f)

        # Record where the files were written, so loads can re-root the paths.
        with open(work / "response.pkl", "wb") as f:
            pickle.dump({"response": response, "files_dir": str(files)}, f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        (work / "response.raw.pkl").unlink()
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(work, entry)
        except OSError:
            # Another process stored the same answer first: use theirs.
            if not entry.is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    loaded = _load_entry(entry)
    if loaded is None:
        raise OracleError(f"oracle cache entry {entry} is unreadable")
    return loaded


def fixtures_dir() -> Path:
    """Folder holding make_models' files (mlp.pb, conv.pb, strings.pb, saved_model/).

    Runs make_models (cached) when needed; its manifest, with the paths and
    expected values, is ``run_oracle("make_models")``.
    """
    return Path(run_oracle("make_models")["out_dir"])
