"""A per-user cache that cannot be written (issue 12, item 6).

An op built with a writable cache must still load and run in a process whose
``TFBRIDGE_CACHE_DIR`` is an empty read-only folder, or a folder that cannot
be created; an op that still needs building must fail with an error naming
the folder and ``TFBRIDGE_CACHE_DIR``; an op folder where ``build/`` cannot
be created must fail naming that folder.  Real builds, real Julia, each
scenario in a fresh child process (Julia starts once per process).

How a folder is made unwritable, when the tests run as root (they do here
and on CI): root ignores permission bits through the CAP_DAC_OVERRIDE
capability, so the child first drops it from its bounding set
(``prctl(PR_CAPBSET_DROP)``, which root may do) and re-executes Python: the
new program starts without it and obeys the permission bits of the
root-owned folders like any user (it keeps CAP_DAC_READ_SEARCH, so reading
is unaffected).  A probe checks that a 0555 folder then really refuses a
file.  Where it does not, the folders are made read-only another way: a
read-only bind mount in the child's own mount namespace (``unshare -m``; a
user namespace too, ``-r``, when not root), which refuses every write with
EROFS, root's included.  That way also runs on its own, as the kind
"read-only-mount": a cache on a read-only file system.  A third way needs no
privileges at all and always runs: a cache path below a regular file,
which no one can create (ENOTDIR).  Where neither of the first two works
the cases skip, which fails on CI (tests/support/ci.py).
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Sequence

import pytest

from bridge.julia import runtime as julia_runtime
from bridge.customop import build, init
from support.build import toolchain_missing
from support import REPO


# Run as `python -c WRAPPER CODE`: drop CAP_DAC_OVERRIDE if root, then exec CODE.
_WRAPPER = r"""
import ctypes, os, sys
if os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(24, 1, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_DAC_OVERRIDE
        sys.exit("cannot drop CAP_DAC_OVERRIDE: " + os.strerror(ctypes.get_errno()))
os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
"""


MISSING = toolchain_missing()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"cannot compile custom ops: {MISSING}")


# Run as `sh -c MOUNT sh FOLDER... -- COMMAND...` inside `unshare -m`: each folder becomes a
# read-only bind mount of itself, in this namespace only, then COMMAND runs.
_MOUNT = """
while [ "$1" != -- ]; do
  mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 97
  shift
done
shift
exec "$@"
"""


def run_child(code: str, timeout: float = 300, read_only: Sequence[Path] = (),
              **env_vars: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that obeys permission bits even as root,
    with the folders ``read_only`` mounted read-only for it."""
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_vars)
    command = [sys.executable, "-c", _WRAPPER, textwrap.dedent(code)]
    if read_only:
        unshare = ["unshare", "-m", "--propagation", "private"] + ([] if os.geteuid() == 0 else ["-r"])
        command = [*unshare, "sh", "-c", _MOUNT, "sh", *map(str, read_only), "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def _output(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def _chmod_read_only(path: Path) -> Path:
    path.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return path


class ReadOnly:
    """One way of making folders read-only for a child (module doc): "permission
    bits" (mode 0555) or "mount" (read-only bind mounts in the child's namespace)."""

    def __init__(self, way: str):
        self.way = way
        self.mounted: list[Path] = []

    def make(self, path: Path) -> Path:
        if self.way == "permission bits":
            return _chmod_read_only(path)
        self.mounted.append(path)
        return path

    def run(self, code: str, **env_vars: str) -> subprocess.CompletedProcess:
        return run_child(code, read_only=self.mounted, **env_vars)


def _refused(way: str, tmp_path_factory) -> str:
    """'' when a child is refused a file in a folder made read-only ``way``, else what happened."""
    folder = tmp_path_factory.mktemp("probe")
    read_only = ReadOnly(way)
    read_only.make(folder)
    try:
        proc = read_only.run(f"open({str(folder / 'file')!r}, 'w')")
    finally:
        folder.chmod(0o755)
    want = "PermissionError" if way == "permission bits" else "OSError: [Errno 30] Read-only file system"
    return "" if proc.returncode == 1 and want in proc.stderr else _output(proc)


@pytest.fixture(scope="module")
def ways(tmp_path_factory) -> dict[str, str]:
    """{way: '' where it works here, else why not}."""
    return {way: _refused(way, tmp_path_factory) for way in ("permission bits", "mount")}


@pytest.fixture
def read_only(ways) -> ReadOnly:
    """The permission bits where they hold, else read-only mounts."""
    for way, failure in ways.items():
        if not failure:
            return ReadOnly(way)
    pytest.skip(f"no way to make a folder read-only for a child here: {ways}")


def _unwritable_cache(kind: str, tmp: Path, read_only: ReadOnly, ways: dict[str, str]) -> tuple[Path, ReadOnly]:
    """A cache folder that cannot be written, of the given kind, and how to run a child that sees it so."""
    if kind == "below-a-file":  # ENOTDIR for everyone, root included
        blocker = tmp / "a-file"
        blocker.write_text("not a folder\n")
        return blocker / "cache", read_only
    if kind == "read-only-mount":  # EROFS for everyone, root included
        if ways["mount"]:
            pytest.skip(f"a read-only bind mount cannot be made here: {ways['mount']}")
        read_only = ReadOnly("mount")
        cache = tmp / "cache"
        cache.mkdir()
        return read_only.make(cache), read_only
    if kind == "empty-read-only":
        cache = tmp / "cache"
        cache.mkdir()
        return read_only.make(cache), read_only
    if kind == "missing-in-read-only-parent":
        parent = tmp / "parent"
        parent.mkdir()
        read_only.make(parent)
        return parent / "cache", read_only
    raise AssertionError(kind)


@pytest.fixture
def restore_permissions(tmp_path):
    """Let pytest remove tmp_path afterwards, whatever a test made read-only."""
    yield
    for path in [tmp_path, *tmp_path.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    """The scaffolded op (y = 2x, with its gradient), built with the usual, writable cache."""
    directory = tmp_path_factory.mktemp("ops") / "twice"
    init("Twice", directory)
    library = build(directory, progress=lambda line: None)
    return directory, library


# ------------------------------------------------------------------ the built op folder

def test_a_built_op_carries_the_runtime_it_links(twice):
    _, library = twice
    folder = library.parent
    for name in julia_runtime.RUNTIME_FILES:
        assert (folder / name).is_file(), sorted(p.name for p in folder.iterdir())
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    rpath = next(line for line in dynamic.splitlines() if "(RPATH)" in line)
    assert "[$ORIGIN:" in rpath, rpath
    # Loaded on its own, the library finds the copy beside it first.
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True, env=env).stdout
    assert f"libtfjl_runtime.so => {folder / 'libtfjl_runtime.so'}" in ldd, ldd


# ------------------------------------------------------------------ an unwritable cache

_LOAD_AND_RUN = """
    import os
    from pathlib import Path

    import numpy as np

    import bridge

    cache = Path(os.environ["TFBRIDGE_CACHE_DIR"])
    assert callable(bridge.ops.mat_mul)                      # bridge.ops, generated in memory
    twice = bridge.customop.load(os.environ["OP_DIR"]).twice
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = twice(x)
        dy_dx, = bridge.gradients(bridge.ops.sum(y, 0), x)   # through TwiceGrad
    with bridge.Session(g) as sess:
        values, slopes = sess.run([y, dy_dx], {x: np.array([0.5, -1.0, 3.0])})
    np.testing.assert_allclose(values, [1.0, -2.0, 6.0])
    np.testing.assert_allclose(slopes, [2.0, 2.0, 2.0])
    with open("/proc/self/maps") as maps:
        loaded = sorted({line.split()[-1] for line in maps if line.rstrip().endswith("/libtfjl_runtime.so")})
    print("RUNTIME", loaded)
    print("CACHE", sorted(str(p) for p in cache.rglob("*")) if cache.is_dir() else "absent")
"""


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("kind", ["empty-read-only", "missing-in-read-only-parent", "below-a-file",
                                  "read-only-mount"])
def test_a_built_op_loads_and_runs_with_an_unwritable_cache(kind, twice, tmp_path, read_only, ways,
                                                            restore_permissions):
    directory, library = twice
    cache, read_only = _unwritable_cache(kind, tmp_path, read_only, ways)
    before = _listing(directory)
    proc = read_only.run(_LOAD_AND_RUN, TFBRIDGE_CACHE_DIR=str(cache), OP_DIR=str(directory))
    assert proc.returncode == 0, _output(proc)
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    # The runtime came from the op's own folder: the cache holds none.
    assert lines["RUNTIME"] == repr([str(library.parent / "libtfjl_runtime.so")]), _output(proc)
    assert lines["CACHE"] in ("[]", "absent"), _output(proc)
    assert _listing(directory) == before  # a cached build writes nothing in the op folder


def test_a_read_only_op_folder_with_a_built_op_loads(twice, tmp_path, read_only, restore_permissions):
    """Cache and op folder both read-only: an op shipped prebuilt, say."""
    source, library = twice
    directory = tmp_path / "twice"
    # A copy of the built op folder (cp -a keeps the build's mtimes), made read-only throughout.
    subprocess.run(["cp", "-a", str(source), str(directory)], check=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    for path in [cache, directory, *directory.rglob("*")]:
        if path.is_dir():
            read_only.make(path)
    proc = read_only.run(_LOAD_AND_RUN, TFBRIDGE_CACHE_DIR=str(cache), OP_DIR=str(directory))
    assert proc.returncode == 0, _output(proc)
    copied = directory / "build" / library.parent.name / "libtfjl_runtime.so"
    assert f"RUNTIME {[str(copied)]!r}" in proc.stdout, _output(proc)


def test_a_read_only_cache_holding_julias_image_starts_julia_from_it(twice, tmp_path, read_only,
                                                                     restore_permissions):
    """Julia's system image with TFBridge (bridge/julia/sysimage.py) is read
    from the cache as the runtime is: a read-only cache that holds it serves it."""
    from bridge.julia import sysimage

    image = sysimage.current_image()
    if image is None:
        pytest.skip("Julia's system image with TFBridge is not built: `make julia-image` builds it")
    directory, _ = twice
    cache = tmp_path / "cache"
    entry = cache / "julia-image" / image.parent.name
    entry.mkdir(parents=True)
    (entry / sysimage.IMAGE_NAME).symlink_to(image)  # the same file, in a read-only cache
    for folder in (entry, entry.parent, cache):
        read_only.make(folder)
    code = _LOAD_AND_RUN + ('\n    print("IMAGE", os.environ["TFBRIDGE_JULIA_IMAGE"])'
                            '\n    print("STARTED", bridge.julia.eval("unsafe_string(Base.JLOptions().image_file)"))\n')
    proc = read_only.run(code, TFBRIDGE_CACHE_DIR=str(cache), OP_DIR=str(directory))
    assert proc.returncode == 0, _output(proc)
    assert f"IMAGE {entry / sysimage.IMAGE_NAME}\n" in proc.stdout, _output(proc)
    assert f"STARTED {image}\n" in proc.stdout, _output(proc)  # Julia follows the link
    assert "replacing module TFBridge" not in proc.stderr, _output(proc)


# ------------------------------------------------------------------ what needs writing

_LOAD_UNBUILT = """
    import os

    import bridge
    from bridge.customop import BuildError

    if os.environ.get("LOADED_FIRST"):  # an op already built, whose runtime copy is then loaded
        bridge.customop.load(os.environ["LOADED_FIRST"])
    try:
        bridge.customop.load(os.environ["OP_DIR"])
    except BuildError as exc:
        print(exc)
    else:
        raise SystemExit("the load should have failed")
"""


@pytest.mark.parametrize("kind", ["empty-read-only", "below-a-file", "read-only-mount"])
def test_an_op_to_build_names_the_unwritable_cache(kind, twice, tmp_path, read_only, ways,
                                                   restore_permissions):
    """The op would link the runtime, which the cache does not hold and cannot build.
    An op loaded before in the same process does not change that: its runtime
    copy serves loading, not linking (a build links the cache's runtime)."""
    cache, read_only = _unwritable_cache(kind, tmp_path, read_only, ways)
    directory = tmp_path / "thrice"
    init("Thrice", directory)
    loaded_first = str(twice[0]) if kind == "below-a-file" else ""
    proc = read_only.run(_LOAD_UNBUILT, TFBRIDGE_CACHE_DIR=str(cache), OP_DIR=str(directory),
                         LOADED_FIRST=loaded_first)
    assert proc.returncode == 0, _output(proc)
    message = proc.stdout
    assert "cannot build Thrice" in message, message
    assert f"the cache folder {cache} (from TFBRIDGE_CACHE_DIR) cannot be written" in message, message
    assert "set TFBRIDGE_CACHE_DIR to a writable folder" in message, message
    assert not (directory / "build" / "libThrice.so").exists()


def test_an_unwritable_op_folder_is_named(tmp_path, read_only, restore_permissions):
    directory = tmp_path / "fourfold"
    init("Fourfold", directory)
    read_only.make(directory)
    proc = read_only.run(_LOAD_UNBUILT, OP_DIR=str(directory))
    assert proc.returncode == 0, _output(proc)
    message = proc.stdout
    assert f"cannot build Fourfold: its build folder {directory / 'build'} cannot be written" in message, message
    assert f"make {directory} writable" in message, message
    assert not (directory / "build").exists()
