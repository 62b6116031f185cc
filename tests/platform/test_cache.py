"""bridge.platform.cache: keys, entries published whole, the per-entry lock, pruning,
and the folder with its fallback where it cannot be written."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bridge.platform import cache
from support import REPO


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------ the folder

def test_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TFBRIDGE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.root() == tmp_path / "mine" and (tmp_path / "mine").is_dir()
    monkeypatch.delenv("TFBRIDGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.root() == tmp_path / "xdg" / "tf-julia-bridge"


def test_an_impossible_root_is_returned_and_named(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    impossible = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("TFBRIDGE_CACHE_DIR", str(impossible))
    assert cache.root() == impossible  # no error: writers fall back
    with pytest.raises(OSError) as info:
        impossible.mkdir()
    hint = cache.unwritable_hint(impossible, info.value)
    assert hint.startswith(f"the cache folder {impossible} (from TFBRIDGE_CACHE_DIR) cannot be written (")
    assert "set TFBRIDGE_CACHE_DIR to a writable folder" in hint


# ------------------------------------------------------------------ keys

def test_keys_are_stable_and_framed():
    assert cache.Key("a", b"b").hexdigest() == cache.Key("a").add("b").hexdigest()
    assert cache.Key("ab", "c").hexdigest() != cache.Key("a", "bc").hexdigest()
    assert cache.Key("é").digest() == cache.Key("é".encode()).digest()
    assert len(cache.Key().hexdigest()) == 16 and len(cache.Key().hexdigest(24)) == 24
    # The encoding, pinned (length, colon, bytes): changing it misses every cache entry once.
    expected = hashlib.sha256(b"15:tf-julia-bridge" + b"1:\0").hexdigest()[:16]
    assert cache.Key("tf-julia-bridge", b"\0").hexdigest() == expected


def test_a_file_key_covers_name_and_content(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("same")
    b.write_text("same")
    assert cache.Key().add_file(a).hexdigest() != cache.Key().add_file(b).hexdigest()
    assert cache.Key().add_file(a, "b.txt").hexdigest() == cache.Key().add_file(b).hexdigest()
    before = cache.Key().add_file(a).hexdigest()
    a.write_text("other")
    assert cache.Key().add_file(a).hexdigest() != before


#: Modules of bridge/ that may hash with hashlib themselves: the cache, home of
#: every cache key, and the HParams summary, whose trial id is TensorBoard's
#: SHA-256 of the values (no cache key).
HASHING_MODULES = {"bridge/platform/cache.py", "bridge/summary/hparams.py"}


def test_cache_keys_have_one_home():
    """Every other module keys what it caches or fingerprints with cache.Key."""
    hashing = {str(p.relative_to(REPO)) for p in (REPO / "bridge").rglob("*.py")
               if re.search(r"^\s*(import hashlib|from hashlib import)", p.read_text(), re.M)}
    assert hashing == HASHING_MODULES


# ------------------------------------------------------------------ files

def test_publish_file_writes_whole_files_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "entry.json"
    assert cache.publish_file(path, "first")
    assert cache.publish_file(path, b"second")
    assert path.read_bytes() == b"second"
    assert _names(path.parent) == ["entry.json"]


def test_publish_file_reports_an_unwritable_folder(tmp_path):
    (tmp_path / "a-file").write_text("")
    assert cache.publish_file(tmp_path / "a-file" / "entry", b"x") is False


def test_publishing_a_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "entry"
    with pytest.raises(ValueError):
        with cache.publishing(path) as tmp:
            tmp.write_text("half")
            raise ValueError("the writer failed")
    assert _names(tmp_path) == []


# ------------------------------------------------------------------ folders

def test_staged_dir_publishes_a_complete_folder(tmp_path):
    entry = tmp_path / "0123"
    with cache.staged_dir(entry) as work:
        assert work.parent == tmp_path and work.name.startswith(".0123.")
        assert not entry.exists()
        (work / "lib.so").write_text("built")
    assert (entry / "lib.so").read_text() == "built"
    assert entry.stat().st_mode & 0o777 == 0o755
    assert _names(tmp_path) == ["0123"]


class _Failed(RuntimeError):
    pass


def test_staged_dir_keeps_a_failed_build_and_names_it(tmp_path):
    entry, failed = tmp_path / "k", tmp_path / "k.failed"
    with pytest.raises(_Failed) as info:
        with cache.staged_dir(entry, failed=failed, failure=_Failed) as work:
            (work / "build.log").write_text("error: no")
            raise _Failed(f"see {work / 'build.log'}")
    assert str(info.value) == f"see {failed / 'build.log'}"
    assert (failed / "build.log").read_text() == "error: no"
    assert _names(tmp_path) == ["k.failed"]
    # Another kind of failure (an interrupt, say) leaves nothing; a success removes k.failed.
    with pytest.raises(KeyboardInterrupt):
        with cache.staged_dir(entry, failed=failed, failure=_Failed):
            raise KeyboardInterrupt
    assert _names(tmp_path) == ["k.failed"]
    with cache.staged_dir(entry, failed=failed, failure=_Failed):
        pass
    assert _names(tmp_path) == ["k"]


def test_staged_dir_without_failed_removes_the_attempt(tmp_path):
    with pytest.raises(_Failed):
        with cache.staged_dir(tmp_path / "k"):
            raise _Failed("no")
    assert _names(tmp_path) == []


# ------------------------------------------------------------------ the lock

def test_entry_lock_needs_a_writable_folder(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(OSError):
        cache.EntryLock(tmp_path / "a-file" / "runtime" / "k")


def test_entry_lock_serialises_threads(tmp_path):
    entry = tmp_path / "k"
    inside, overlaps, builds = [], [], []

    def build() -> None:
        with cache.EntryLock(entry):
            inside.append(1)
            overlaps.append(len(inside))
            if not entry.exists():  # checked again under the lock: built once
                time.sleep(0.05)
                entry.mkdir()
                builds.append(1)
            inside.pop()

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1, 1, 1, 1] and builds == [1]
    assert (tmp_path / ".k.lock").is_file()


_HOLD = """
import sys, time
from pathlib import Path
from bridge.platform import cache
with cache.EntryLock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(1.0)
    Path(sys.argv[1]).mkdir()
"""


def test_entry_lock_makes_another_process_wait(tmp_path):
    entry = tmp_path / "k"
    child = subprocess.Popen([sys.executable, "-c", _HOLD, str(entry)], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO)
    try:
        assert child.stdout.readline().strip() == "locked"
        with cache.EntryLock(entry):
            assert entry.is_dir()  # made by the holder before it let go
    finally:
        child.wait(timeout=60)
    assert child.returncode == 0


# ------------------------------------------------------------------ pruning

def test_prune_keeps_the_newest_and_what_may_be_running(tmp_path):
    now = time.time()
    for age, name in enumerate(["c", "b", "a"]):  # c newest
        (tmp_path / name).mkdir()
        (tmp_path / f".{name}.lock").write_text("")
        os.utime(tmp_path / name, (now - age * 60,) * 2)
    (tmp_path / "b.failed").mkdir()
    (tmp_path / ".c.running").mkdir()
    (tmp_path / ".a.killed").mkdir()
    os.utime(tmp_path / ".a.killed", (now - 2 * cache.STALE_SECONDS,) * 2)
    cache.prune(tmp_path, keep="a", newest=1, is_entry=lambda p: len(p.name) == 1)
    assert _names(tmp_path) == [".a.lock", ".c.lock", ".c.running", "a", "c"]
