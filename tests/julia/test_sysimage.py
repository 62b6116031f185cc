"""Julia's system image with TFBridge built in (issue 27, item 1; bridge/julia/sysimage.py).

The image is built by `make setup` (`tfbridge julia build-image`), never by a
test: a build takes minutes.  The tests that run with it skip, saying so,
where it is not built; `make test` builds it first.  Every start runs in a
fresh child process with a time limit (Julia starts once per process).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bridge.julia import buildtools
from bridge.julia import runtime as julia_runtime
from bridge.julia import sysimage
from bridge.platform import paths
from support.build import toolchain_missing
from support import REPO


EXAMPLE = REPO / "examples" / "twolayer"
DEPOT = os.environ.get("TFBRIDGE_JULIA_DEPOT", "")

MISSING = toolchain_missing()
needs_toolchain = pytest.mark.skipif(bool(MISSING), reason=f"cannot compile custom ops: {MISSING}")


def _image_or_skip() -> Path:
    image = sysimage.current_image()
    if image is None:
        pytest.skip(f"Julia's system image with TFBridge is not built for these sources ({sysimage.image_path()}): "
                    "`make julia-image` (or `tfbridge julia build-image`) builds it; `make test` does first")
    return image


def _child(code: str, timeout: float = 600, **env_vars: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_vars)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def _output(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"


# What a child reports of the Julia it started, then an op of the template
# (Twice, y = 2x) and, where ForwardDiff is there, the TwoLayer example's
# Jacobian by ForwardDiff against the analytic one.
_START_AND_RUN = """
import os, sys, time
import numpy as np
t0 = time.perf_counter()
import bridge, bridge.julia
bridge.julia.init()
print("init-seconds", time.perf_counter() - t0)
print("image", bridge.julia.eval("unsafe_string(Base.JLOptions().image_file)"))
print("env-image", os.environ["TFBRIDGE_JULIA_IMAGE"])
print("threads", bridge.julia.eval("Threads.nthreads()"), bridge.julia.eval("length(TFBridge.LAST_FAILURE)"))
print("depots", bridge.julia.eval("join(DEPOT_PATH, ';')"))
print("init-errors", bridge.julia.eval("length(TFBridge.INIT_ERROR)"))
twice = bridge.customop.load(os.environ["TWICE_DIR"]).twice
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float64, [3], name="x")
    y = twice(x)
    dx, = bridge.gradients(bridge.ops.sum(y, 0), x)
with bridge.Session(g) as sess:
    print("twice", sess.run([y, dx], {x: np.array([1.0, 2.0, 3.0])}))
# A Julia error still arrives as a TF error, formatted by the image's TFBridge.
try:
    bridge.julia.eval("error(\\"from the image\\")")
except bridge.julia.JuliaError as e:
    print("error-text", str(e).splitlines()[0])
two_layer = bridge.customop.load(os.environ["EXAMPLE_DIR"]).two_layer
print("method", bridge.julia.eval("two_layer_method()").split(" ")[0])
rng = np.random.default_rng(4)
n = 10
xs, w1, b1, w2, b2 = (rng.standard_normal(n), rng.standard_normal((n, n)) / 3, rng.standard_normal(n),
                      rng.standard_normal((n, n)) / 3, rng.standard_normal(n))
g = bridge.Graph()
with g.as_default():
    jac = two_layer(*(bridge.constant(v, bridge.float64) for v in (xs, w1, b1, w2, b2)))
with bridge.Session(g) as sess:
    got = sess.run(jac).reshape(n, n)
analytic = w2 @ np.diag(1 - np.tanh(w1 @ xs + b1) ** 2) @ w1
print("jacobian-error", float(np.abs(got - analytic).max()))
"""


def _report(proc: subprocess.CompletedProcess) -> dict[str, str]:
    assert proc.returncode == 0, _output(proc)
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in proc.stdout.splitlines() if " " in line}


@pytest.fixture(scope="module")
def twice_dir(twice_folder) -> Path:
    if MISSING:
        pytest.skip(f"cannot compile custom ops: {MISSING}")
    from bridge import customop
    customop.build(EXAMPLE)
    return twice_folder


def _check_ops(report: dict[str, str], proc: subprocess.CompletedProcess) -> None:
    assert report["twice"] == "[array([2., 4., 6.]), array([2., 2., 2.])]", _output(proc)
    assert report["error-text"] == "ErrorException: from the image", _output(proc)
    assert float(report["jacobian-error"]) < 1e-12, _output(proc)
    threads, failures = report["threads"].split()
    assert int(threads) >= 1 and failures == threads, _output(proc)  # TFBridge.__init__ sized it here
    assert report["init-errors"] == "0", _output(proc)
    if DEPOT:
        assert report["method"] == "ForwardDiff.jacobian", _output(proc)
        assert DEPOT in report["depots"].split(";"), _output(proc)  # __init__ added it in this process


@needs_toolchain
def test_a_fresh_process_starts_from_the_image_and_runs_julia_and_forwarddiff_ops(twice_dir):
    image = _image_or_skip()
    proc = _child(_START_AND_RUN, TWICE_DIR=str(twice_dir), EXAMPLE_DIR=str(EXAMPLE))
    report = _report(proc)
    assert report["image"] == str(image) and report["env-image"] == str(image), _output(proc)
    # The module came with the image: nothing included TFBridge.jl over it.
    assert "replacing module TFBridge" not in proc.stderr, _output(proc)
    _check_ops(report, proc)


@needs_toolchain
def test_without_the_image_julia_starts_from_its_own_and_includes_tfbridge(twice_dir, tmp_path):
    # A cache holding the runtime but no image: what a machine has before
    # `make julia-image`, or after an edit of julia/ made the image stale.
    config = buildtools.julia_config()
    cache_dir = tmp_path / "cache"
    (cache_dir / "runtime").mkdir(parents=True)
    runtime = julia_runtime.runtime_dir()
    (cache_dir / "runtime" / runtime.name).symlink_to(runtime)
    proc = _child(_START_AND_RUN, TWICE_DIR=str(twice_dir), EXAMPLE_DIR=str(EXAMPLE),
                  TFBRIDGE_CACHE_DIR=str(cache_dir))
    report = _report(proc)
    assert report["image"] == config.image and report["env-image"] == config.image, _output(proc)
    assert not (cache_dir / "julia-image").exists(), "a start built the image"
    _check_ops(report, proc)


def test_turned_off_the_image_is_not_used(monkeypatch):
    monkeypatch.setenv(sysimage.DISABLE_VARIABLE, "0")
    assert sysimage.current_image() is None


# ------------------------------------------------------------------ the key

@pytest.fixture
def julia_copy(tmp_path, monkeypatch) -> Path:
    """A copy of julia/ that paths.julia_dir() returns."""
    copy = tmp_path / "julia"
    shutil.copytree(paths.julia_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(paths, "julia_dir", lambda: copy)
    return copy


def test_the_image_key_changes_with_every_julia_file_it_is_built_from(julia_copy):
    config = buildtools.julia_config()
    key = sysimage.image_key(config)
    sources = sysimage.image_sources()
    names = {p.relative_to(julia_copy).as_posix() for p in sources}
    # TFBridge.jl, the generated contract, every part under TFBridge/ (found
    # through the include lines) and the build script.
    assert {"TFBridge.jl", "contract.jl", "TFBridge/threads.jl", "build_image.jl"} <= names, names
    assert names >= {p.relative_to(julia_copy).as_posix() for p in (julia_copy / "TFBridge").glob("*.jl")}
    for path in sources:
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        assert sysimage.image_key(config) != key, f"editing {path.name} left the image's key as it was"
        path.write_bytes(original)
    assert sysimage.image_key(config) == key
    # A new part joins through its include line.
    (julia_copy / "TFBridge" / "extra.jl").write_text("const EXTRA = 1\n")
    assert sysimage.image_key(config) == key  # not included: not part of the image
    bridge_jl = julia_copy / "TFBridge.jl"
    bridge_jl.write_text(bridge_jl.read_text().replace('include("TFBridge/environments.jl")',
                                                       'include("TFBridge/environments.jl")\ninclude("TFBridge/extra.jl")'))
    changed = sysimage.image_key(config)
    assert changed != key
    (julia_copy / "TFBridge" / "extra.jl").write_text("const EXTRA = 2\n")
    assert sysimage.image_key(config) != changed
    # Files the image is not built from leave it alone.
    (julia_copy / "install-julia.sh").write_text("# edited\n")
    assert sysimage.image_path(config).parent.name == sysimage.image_key(config)


def test_the_image_key_changes_with_julia(julia_copy):
    config = buildtools.julia_config()
    key = sysimage.image_key(config)
    assert sysimage.image_key(config) == key  # stable
    assert sysimage.image_key(dataclasses.replace(config, version="1.5.4")) != key
    assert sysimage.image_key(dataclasses.replace(config, executable="/opt/julia/bin/julia")) != key
    other = julia_copy.parent / "other-sys.so"
    shutil.copyfile(__file__, other)  # any file: the key reads its path, size and time, not its content
    assert sysimage.image_key(dataclasses.replace(config, image=str(other))) != key


def test_a_stale_image_is_not_used(julia_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("TFBRIDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(sysimage.DISABLE_VARIABLE, raising=False)
    config = buildtools.julia_config()
    built = sysimage.image_path(config)
    built.parent.mkdir(parents=True)
    built.write_bytes(b"stands for an image built from these sources")
    assert sysimage.current_image(config) == built
    part = julia_copy / "TFBridge" / "errors.jl"
    part.write_text(part.read_text() + "\n# an edit\n")
    assert sysimage.current_image(config) is None


# ------------------------------------------------------------------ building

def test_building_into_an_unwritable_cache_fails_naming_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    cache_dir = blocker / "cache"
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "julia", "build-image"], capture_output=True,
                          text=True, timeout=300, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO), TFBRIDGE_CACHE_DIR=str(cache_dir)))
    assert proc.returncode == 1, _output(proc)
    assert "Traceback" not in proc.stderr, _output(proc)
    assert f"the cache folder {cache_dir} (from TFBRIDGE_CACHE_DIR) cannot be written" in proc.stderr, _output(proc)


def test_a_killed_build_leaves_no_image(tmp_path):
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(REPO), TFBRIDGE_CACHE_DIR=str(cache_dir))
    proc = subprocess.Popen([sys.executable, "-m", "bridge.cli", "julia", "build-image"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        images = cache_dir / "julia-image"
        # Julia is compiling once the staging folder holds its log.
        while time.monotonic() < deadline and not list(images.glob(".*/build.log")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        time.sleep(2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    assert "building Julia's system image with TFBridge" in err, err
    assert "system image built" not in err, err
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TFBRIDGE_CACHE_DIR", str(cache_dir))
        assert sysimage.current_image() is None
        assert not sysimage.image_path().parent.exists()
    # What it left is a hidden staging folder, which cache.prune removes once stale.
    assert all(p.name.startswith(".") for p in images.iterdir()), list(images.iterdir())


def test_building_an_image_already_built_is_quick_and_says_so():
    image = _image_or_skip()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "julia", "build-image"], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, _output(proc)
    assert time.monotonic() - start < 60
    said = [line for line in proc.stderr.splitlines() if line.startswith("tf-julia-bridge:")]
    assert said == [f"tf-julia-bridge: Julia's system image with TFBridge is up to date: {image}"], _output(proc)



# ------------------------------------------------------------------ TFBridge.__init__

_INIT_DIRECTLY = """
import ctypes, os, sys
from bridge.julia import runtime as julia_runtime
config = julia_runtime.julia_config()
ctypes.CDLL("libgcc_s.so.1", mode=os.RTLD_GLOBAL | os.RTLD_NOW)
ctypes.CDLL(config.libjulia, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
rt = ctypes.CDLL(str(julia_runtime.runtime_library()))
err = ctypes.create_string_buffer(4096)
status = rt.tfjl_init(config.bindir.encode(), sys.argv[1].encode(), sys.argv[2].encode(), err, 4096)
print("status", status)
print("error", err.value.decode())
"""


@pytest.mark.parametrize("start", ["image", "include"])
def test_a_failing_tfbridge_init_is_reported_as_a_failed_start(start, tmp_path):
    """``__init__`` runs as the image starts, where a throw would end the
    process: its failure (here TFBRIDGE_JULIA_DEPOT naming no folder, which
    bridge.julia.init checks first, but a kernel's lazy start does not) is
    kept and reported by tfjl_init, the same way whichever way TFBridge came."""
    image = _image_or_skip() if start == "image" else Path(buildtools.julia_config().image)
    missing = tmp_path / "no-depot"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFBRIDGE_JULIA_")}
    env.update(PYTHONPATH=str(REPO), TFBRIDGE_JULIA_DEPOT=str(missing))
    proc = subprocess.run([sys.executable, "-c", _INIT_DIRECTLY, str(image),
                           str(paths.julia_dir() / julia_runtime.BRIDGE_JL)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    report = _report(proc)
    assert report["status"] != "0", _output(proc)
    assert report["error"].startswith(f"TFBridge.__init__ failed: ArgumentError: TFBRIDGE_JULIA_DEPOT={missing}: "
                                      f"{missing} is not a folder"), _output(proc)
