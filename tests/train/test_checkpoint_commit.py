"""The checkpoint folder's lock in bridge/train/checkpoint_commit.py (issue 41):
a nested ``folder_lock`` says whether the inter-process lock is held by what
the outermost call got.

Before, a nested call answered True whenever an outer call of the thread held
the folder, although that call had no ``flock`` (a folder it could not open,
a file system without locks): a clean-up nested inside then took itself for
the only process looking at the folder and removed a work folder another
process had just created and not locked yet.
"""
from __future__ import annotations

import errno
import fcntl
import os
import threading

import pytest

from bridge import train
from bridge.train import checkpoint_commit, checkpoint_management, saver
from bridge.train.checkpoint_commit import folder_lock


@pytest.fixture
def no_flock(monkeypatch):
    """A file system that refuses ``flock`` (NFS mounted without locks: ENOLCK)."""
    def refuse(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, "flock", refuse)


def test_a_nested_lock_reports_what_the_outer_call_got(tmp_path):
    missing = str(tmp_path / "not-there")   # cannot be opened: the thread lock alone
    with folder_lock(missing, must=False) as outer:
        with folder_lock(missing, must=False) as inner:
            with folder_lock(missing, must=False) as innermost:
                assert (outer, inner, innermost) == (False, False, False)
    with folder_lock(str(tmp_path)) as outer:
        with folder_lock(str(tmp_path), must=False) as inner:
            assert (outer, inner) == (True, True)
    # Once released, the next outermost call asks again.
    os.mkdir(missing)
    with folder_lock(missing, must=False) as outer:
        with folder_lock(missing) as inner:
            assert (outer, inner) == (True, True)


def test_a_nested_lock_on_a_file_system_without_flock_says_so(tmp_path, no_flock):
    with folder_lock(str(tmp_path)) as outer:
        with folder_lock(str(tmp_path)) as inner:
            assert (outer, inner) == (False, False)


def test_a_nested_clean_up_without_the_flock_leaves_a_save_being_created(tmp_path, no_flock):
    """A save of another process between its mkdir and its owner lock holds
    no ``.owner`` yet: only a clean-up holding the folder's inter-process lock
    may take it for a killed one.  Nested in a call that got no flock, the
    clean-up must not."""
    creating = tmp_path / ".model.save-0123456789abcdef"
    creating.mkdir()
    with folder_lock(str(tmp_path)) as outer:
        assert outer is False
        checkpoint_commit.settle(str(tmp_path))
        assert train.latest_checkpoint(tmp_path) is None
    assert sorted(os.listdir(tmp_path)) == [creating.name]


def test_a_clean_up_holding_the_flock_removes_a_work_folder_without_owner(tmp_path):
    """The other side: with the flock held, a work folder without ``.owner``
    was made by a save killed before it locked it, and goes."""
    (tmp_path / ".model.save-0123456789abcdef").mkdir()
    with folder_lock(str(tmp_path)) as outer:
        assert outer is True
        checkpoint_commit.settle(str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_the_lock_is_per_thread_nesting(tmp_path):
    """Another thread waits for the folder, and its own outermost call takes the flock."""
    order, got = [], []
    with folder_lock(str(tmp_path)):
        def other():
            with folder_lock(str(tmp_path)) as held:
                got.append(held)
                order.append("other")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(0.2)
        order.append("first")
    thread.join(10)
    assert (order, got) == (["first", "other"], [True])


def test_the_saver_modules_public_names_are_unchanged():
    """The split of saver.py (issue 41) keeps every name where it was, and bridge.train's."""
    for name in ("Saver", "CHECKPOINT_STATE_FILE", "CheckpointState", "checkpoint_exists", "get_checkpoint_state",
                 "latest_checkpoint", "list_variables", "write_checkpoint_state"):
        assert hasattr(saver, name), name
    for name in ("CHECKPOINT_STATE_FILE", "CheckpointState", "checkpoint_exists", "get_checkpoint_state",
                 "latest_checkpoint", "list_variables", "write_checkpoint_state"):
        assert getattr(saver, name) is getattr(checkpoint_management, name), name
    assert (train.Saver, train.latest_checkpoint, train.list_variables, train.get_checkpoint_state) == (
        saver.Saver, saver.latest_checkpoint, saver.list_variables, saver.get_checkpoint_state)
