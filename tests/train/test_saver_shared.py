"""Saves on a checkpoint folder that processes of other PID namespaces share
(issue 36 item 7): a work folder is stale only when its writer is provably
gone, i.e. the lock it holds inside (bridge/train/work_owner.py) can be
taken, never because its process id is not alive *here*.

Before, ``save``/``restore``/``latest_checkpoint`` removed every
``.save-<pid>-...`` folder whose pid was not alive locally: an evaluator
polling ``latest_checkpoint`` beside a saver in another container made 8 of
8 saves fail.  Here the other container is a real PID namespace
(``unshare --pid``), its saver given a process id that is free out here
(``ns_last_pid``), so the old rule would take it for dead.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import train
from bridge.train import work_owner

SIZE = 1_000_000          # 8 MB: a save takes a few tens of milliseconds
SAVES = 8

CHILD = r"""
import sys, time
import numpy as np
import bridge
from bridge import train
from bridge.train import checkpoint_commit

folder, mode, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("pid", __import__("os").getpid(), flush=True)
if mode == "poll":                       # an evaluator: polls until stdin closes
    import threading
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    polls = 0
    while not done.is_set():
        train.latest_checkpoint(folder)
        polls += 1
    print("polls", polls, flush=True)
    sys.exit(0)
g = bridge.Graph()
with g.as_default():
    v = bridge.Variable(np.zeros(size), name="big")
    fill = bridge.placeholder(bridge.float64, [], name="fill")
    assign = v.assign(bridge.ops.fill([size], fill))
    saver = train.Saver(max_to_keep=3)
    init = bridge.global_variables_initializer()
sess = bridge.Session(g)
sess.run(init)
if mode in ("hang_before_commit", "hang_in_commit"):   # the test kills it there
    def hang(*args):
        print("hanging", flush=True)
        time.sleep(600)
    if mode == "hang_before_commit":
        checkpoint_commit._sync_files = hang
    else:
        checkpoint_commit._apply = hang
    sess.run(assign, {fill: 1.0})
    saver.save(sess, folder + "/model", global_step=1)
    sys.exit(3)
for i in range(1, int(mode) + 1):
    sess.run(assign, {fill: float(i)})
    try:
        saver.save(sess, folder + "/model", global_step=i)
        print("saved", i, flush=True)
    except Exception as exc:
        print("failed", i, type(exc).__name__, str(exc).replace("\n", " ")[:300], flush=True)
"""


_PREFIX: list = []


def _unshare_prefix() -> list[str]:
    """The command that runs a child in a PID namespace of its own (as root,
    or in a user namespace of its own), or skip where neither is allowed."""
    if _PREFIX:
        return _PREFIX[0]
    # --kill-child: killing unshare kills the namespace's first process, and with it the namespace.
    for prefix in (["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"],
                   ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc"]):
        if shutil.which(prefix[0]) is None:
            break
        probe = subprocess.run(prefix + ["sh", "-c", "echo $$"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0 and probe.stdout.strip() == "1":
            _PREFIX.append(prefix)
            return prefix
    pytest.skip("unshare cannot make a PID namespace here (neither as root nor in a user namespace)")


def _free_pid() -> int:
    """A process id that no process of this namespace has now."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    rng = random.Random()
    while True:
        pid = rng.randrange(pid_max // 2, pid_max - 10)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass


# Run as process 1 of the new namespace: the next process it starts gets the id it is given.
LAUNCHER = r"""
import subprocess, sys
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(int(sys.argv[1]) - 1))
sys.exit(subprocess.call(sys.argv[2:]))
"""


def _namespaced(folder: Path, mode: str, **popen) -> tuple[subprocess.Popen, int]:
    """A CHILD in a PID namespace of its own, with a process id free out here."""
    pid = _free_pid()
    command = _unshare_prefix() + [sys.executable, "-c", LAUNCHER, str(pid),
                                   sys.executable, "-c", CHILD, str(folder), mode, str(SIZE)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    line = child.stdout.readline()
    if line != f"pid {pid}\n":
        child.kill()
        pytest.fail(f"the namespaced child said {line!r} (stderr: {child.communicate(timeout=30)[1][-2000:]})")
    return child, pid


def _graph():
    g = bridge.Graph()
    with g.as_default():
        v = bridge.Variable(np.zeros(SIZE), name="big")
        fill = bridge.placeholder(bridge.float64, [], name="fill")
        assign = v.assign(bridge.ops.fill([SIZE], fill))
        saver = train.Saver(max_to_keep=3)
        init = bridge.global_variables_initializer()
    return g, v, fill, assign, saver, init


def _restored(g, v, saver, prefix) -> np.ndarray:
    with bridge.Session(g) as sess:
        saver.restore(sess, prefix)
        return sess.run(v.value())


def _leftovers(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith(".") or n.endswith("_temp"))


def test_a_saver_in_another_pid_namespace_survives_an_evaluator_polling_here(tmp_path):
    """The issue's case: a save in another container on a shared volume, an
    evaluator here polling latest_checkpoint the whole time."""
    child, pid = _namespaced(tmp_path, str(SAVES))
    seen, polls = set(), 0
    deadline = time.monotonic() + 240
    while child.poll() is None and time.monotonic() < deadline:
        latest = train.latest_checkpoint(tmp_path)
        polls += 1
        if latest is not None:
            seen.add(os.path.basename(latest))
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err[-2000:]
    assert out.split("\n")[:-1] == [f"saved {i}" for i in range(1, SAVES + 1)], (pid, out)
    assert polls > SAVES, polls                               # the poller did overlap the saves
    assert seen <= {f"model-{i}" for i in range(1, SAVES + 1)}
    g, v, fill, assign, saver, init = _graph()
    latest = train.latest_checkpoint(tmp_path)
    assert latest == str(tmp_path / f"model-{SAVES}")
    np.testing.assert_array_equal(_restored(g, v, saver, latest), np.full(SIZE, float(SAVES)))
    assert _leftovers(tmp_path) == []


def test_an_evaluator_in_another_pid_namespace_leaves_the_saves_here_alone(tmp_path):
    """The other way round: the saves here, the evaluator in its own namespace,
    where this process's id names no process."""
    poller, _ = _namespaced(tmp_path, "poll", stdin=subprocess.PIPE)
    g, v, fill, assign, saver, init = _graph()
    with bridge.Session(g) as sess:
        sess.run(init)
        for i in range(1, SAVES + 1):
            sess.run(assign, {fill: float(i)})
            assert saver.save(sess, tmp_path / "model", global_step=i) == str(tmp_path / f"model-{i}")
    out, err = poller.communicate("", timeout=60)
    assert poller.returncode == 0, err[-2000:]
    assert int(out.split()[-1]) > SAVES, out
    np.testing.assert_array_equal(_restored(g, v, saver, train.latest_checkpoint(tmp_path)),
                                  np.full(SIZE, float(SAVES)))
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", ["hang_before_commit", "hang_in_commit"])
def test_a_saver_killed_in_another_pid_namespace_is_cleaned_up_here(tmp_path, mode):
    """The old case still holds across namespaces: once the writer is gone
    (SIGKILL), the next latest_checkpoint here removes its work folder, or
    finishes its committed save."""
    child, _ = _namespaced(tmp_path, mode)
    assert child.stdout.readline() == "hanging\n"
    kind = "save" if mode == "hang_before_commit" else "commit"
    (work,) = [n for n in os.listdir(tmp_path) if n.startswith(f".model-1.{kind}-")]
    if kind == "save":   # alive: a clean-up here leaves it
        assert train.latest_checkpoint(tmp_path) is None
        assert _leftovers(tmp_path) == [work]
    child.send_signal(signal.SIGKILL)   # unshare: its first process, then the whole namespace, follow
    child.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while (tmp_path / work / work_owner.OWNER).exists() and _lock_held(tmp_path / work) and time.monotonic() < deadline:
        time.sleep(0.05)   # the namespace's processes go down after unshare itself
    latest = train.latest_checkpoint(tmp_path)
    assert _leftovers(tmp_path) == []
    if kind == "save":
        assert latest is None
    else:   # committed: finished here, with the child's values
        g, v, fill, assign, saver, init = _graph()
        assert latest is None                                 # the state file was never written...
        np.testing.assert_array_equal(_restored(g, v, saver, str(tmp_path / "model-1")), np.full(SIZE, 1.0))


def _lock_held(folder: Path) -> bool:
    found, owner = work_owner.claim(str(folder))
    owner.release()
    return found == work_owner.ALIVE


def test_polling_in_the_saving_process_leaves_its_saves_alone(tmp_path):
    """fcntl locks belong to a process: a thread of the saving process that
    polled its own work folder's lock would take it (and, closing the file,
    drop it).  Its folders in flight are skipped instead."""
    g, v, fill, assign, saver, init = _graph()
    stop, polls, errors_seen = threading.Event(), [0], []

    def poll():
        while not stop.is_set():
            try:
                train.latest_checkpoint(tmp_path)
            except Exception as exc:  # noqa: BLE001 - any failure is the test's business
                errors_seen.append(repr(exc))
            polls[0] += 1

    poller = threading.Thread(target=poll)
    with bridge.Session(g) as sess:
        sess.run(init)
        poller.start()
        try:
            for i in range(1, SAVES + 1):
                sess.run(assign, {fill: float(i)})
                saver.save(sess, tmp_path / "model", global_step=i)
        finally:
            stop.set()
            poller.join()
    assert errors_seen == [] and polls[0] > SAVES
    np.testing.assert_array_equal(_restored(g, v, saver, train.latest_checkpoint(tmp_path)),
                                  np.full(SIZE, float(SAVES)))
    assert _leftovers(tmp_path) == []


LOCK_HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_which_leftovers_a_clean_up_removes(tmp_path):
    """Each kind of leftover, made by hand: a work folder whose lock another
    process holds stays, and goes once that process is gone; one whose
    OWNER file nobody holds goes; one without an OWNER file (a save killed
    before taking its lock: saves make their folders under the folder's
    lock, which the clean-up holds) goes; the bridge's older folders, named
    with a process id, go when no process of that id is alive here."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held, free, bare = (tmp_path / f".model.save-{n * 16}" for n in ("a", "b", "c"))
    for folder in (held, free, bare):
        folder.mkdir()
        (folder / "ckpt_temp").mkdir()
    for folder in (held, free):
        (folder / work_owner.OWNER).write_bytes(b"")
    legacy_dead = tmp_path / f".model.save-{dead.pid}-0123456789ab"
    legacy_live = tmp_path / f".model.save-{os.getppid()}-0123456789ab"
    state_tmp = tmp_path / ".checkpoint.0123456789abcdef.tmp"
    for folder in (legacy_dead, legacy_live):
        folder.mkdir()
    state_tmp.write_text("partial")
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(held / work_owner.OWNER)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert train.latest_checkpoint(tmp_path) is None
        assert _leftovers(tmp_path) == [legacy_live.name, held.name]
    finally:
        holder.communicate("", timeout=30)
    train.latest_checkpoint(tmp_path)
    assert _leftovers(tmp_path) == [legacy_live.name]


def test_a_save_leaves_its_owner_lock_only_while_it_runs(tmp_path):
    """What a save's work folder holds while it runs: the OWNER file, locked
    by the saving process, which no other process can take."""
    g, v, fill, assign, saver, init = _graph()
    from bridge.train import checkpoint_commit
    seen = []
    real = checkpoint_commit._sync_files

    def look(work):
        probe = subprocess.run([sys.executable, "-c", "import sys; from bridge.train import work_owner; "
                                "found, owner = work_owner.claim(sys.argv[1]); print(found)", work],
                               capture_output=True, text=True, timeout=60)
        seen.append((sorted(os.listdir(work)), probe.stdout.strip(), probe.stderr[-500:]))
        real(work)

    with bridge.Session(g) as sess:
        sess.run(init)
        checkpoint_commit._sync_files = look
        try:
            saver.save(sess, tmp_path / "model")
        finally:
            checkpoint_commit._sync_files = real
    assert seen == [([work_owner.OWNER, "ckpt.data-00000-of-00001", "ckpt.index"], work_owner.ALIVE, "")]
    assert _leftovers(tmp_path) == []
