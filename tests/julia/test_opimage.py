"""Julia's system image with an op's packages and compiled code built in
(issue 27, item 1; bridge/julia/opimage.py, bridge/customop/image.py).

One real build, of a copy of examples/twolayer (its Jacobian is ForwardDiff's)
and of its twin TwoLayerAuto (`@gradient forwarddiff`: the image also holds
TFBridge.ForwardDiffGradients, issue 37) under build/test-op-image, kept in
the cache so a second run of these tests finds it.  Every start runs in a
fresh child process with a time limit (one image per process, chosen when
Julia starts).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bridge.julia import buildtools, opimage, sysimage
from support.build import toolchain_missing
from support import REPO
from support.cli import tfbridge


EXAMPLE = REPO / "examples" / "twolayer"
FOLDER = REPO / "build" / "test-op-image" / "twolayer"
AUTO = REPO / "build" / "test-op-image" / "twolayer_auto"   # TwoLayerAuto, including FOLDER's two_layer.jl
FORWARDDIFF = "f6369f11-7733-5829-9624-2563aa707210"

MISSING = toolchain_missing()
if MISSING:
    pytest.skip(f"cannot compile custom ops: {MISSING}", allow_module_level=True)
if not os.environ.get("TFBRIDGE_JULIA_DEPOT") and shutil.which("julia") is None:
    pytest.skip("no Julia", allow_module_level=True)


def _output(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-4000:]}"


# A child that loads the op (Julia starts there, choosing its image), reports
# the image, whether ForwardDiff was in it before the op's file ran, and the
# op's Jacobian and gradient on fixed inputs.
_LOAD_AND_RUN = """
import json, os, sys, time
import numpy as np
t0 = time.perf_counter()
import bridge, bridge.julia
folder = sys.argv[1]
bridge.julia.init(ops=[folder])
before = bridge.julia.eval('Base.root_module_exists(Base.PkgId(Base.UUID("{uuid}"), "ForwardDiff"))')
op = bridge.customop.load(folder)
rng = np.random.default_rng(4)
n = 10
values = (rng.standard_normal(n), rng.standard_normal((n, n)) / 3, rng.standard_normal(n),
          rng.standard_normal((n, n)) / 3, rng.standard_normal(n))
g = bridge.Graph()
with g.as_default():
    inputs = [bridge.constant(v, bridge.float64) for v in values]
    jac = op.two_layer(*inputs)
    grads = bridge.gradients(bridge.ops.sum(jac * jac, 0), inputs)
with bridge.Session(g) as sess:
    got, *dgot = sess.run([jac] + grads)
seconds = time.perf_counter() - t0
x, w1, b1, w2, b2 = values
analytic = w2 @ np.diag(1 - np.tanh(w1 @ x + b1) ** 2) @ w1
print(json.dumps({{
    "image": bridge.julia.image(),
    "image_file": bridge.julia.eval("unsafe_string(Base.JLOptions().image_file)"),
    "forwarddiff_in_image": before,
    "method": bridge.julia.eval("two_layer_method()"),
    "error": float(np.abs(got.reshape(n, n) - analytic).max()),
    "jac": got.tolist(), "grads": [d.tolist() for d in dgot], "seconds": seconds,
}}))
""".format(uuid=FORWARDDIFF)


def _load_and_run(**env_vars: str) -> tuple[dict, subprocess.CompletedProcess]:
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_vars)
    proc = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN, str(FOLDER)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, _output(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


def _plain_image() -> str:
    """The image a process starts from without an op image: TFBridge's, or Julia's own."""
    return str(sysimage.current_image() or buildtools.julia_config().image)


def _notes(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("tf-julia-bridge: not using")]


@pytest.fixture(scope="module")
def built() -> Path:
    if not os.environ.get("TFBRIDGE_JULIA_DEPOT"):
        pytest.skip("TFBRIDGE_JULIA_DEPOT names no depot holding ForwardDiff (`make test` sets it)")
    FOLDER.parent.mkdir(parents=True, exist_ok=True)
    for name in ("custom_op.txt", "two_layer.jl"):
        FOLDER.mkdir(exist_ok=True)
        shutil.copyfile(EXAMPLE / name, FOLDER / name)
    AUTO.mkdir(exist_ok=True)
    shutil.copyfile(EXAMPLE / "forwarddiff" / "custom_op.txt", AUTO / "custom_op.txt")
    julia_file = 'include(joinpath(@__DIR__, "..", "twolayer", "two_layer.jl"))\n'
    if not (AUTO / "two_layer_auto.jl").is_file() or (AUTO / "two_layer_auto.jl").read_text() != julia_file:
        (AUTO / "two_layer_auto.jl").write_text(julia_file)
    proc = tfbridge("julia", "build-image", "--ops", str(FOLDER), str(AUTO), timeout=2400)
    assert proc.returncode == 0, _output(proc)
    image = opimage.find_built([FOLDER, AUTO])
    assert image is not None and image.is_file(), _output(proc)
    return image


def test_the_op_image_is_built_with_its_packages_and_said_up_to_date_after(built):
    record = opimage.image_for(built).record
    assert list(record["ops"]) == [str(FOLDER), str(AUTO)]
    assert set(record["ops"][str(FOLDER)]) == {"custom_op.txt", "two_layer.jl"}
    assert list(record["modules"]) == ["ForwardDiffGradients.jl"]   # TwoLayerAuto's gradient code
    packages = {name: p["uuid"] for name, p in record["packages"].items()}
    assert packages.get("ForwardDiff") == FORWARDDIFF, packages
    assert {"DiffRules", "StaticArrays"} <= set(packages), packages
    start = time.monotonic()
    proc = tfbridge("julia", "build-image", "--ops", str(FOLDER), str(AUTO), timeout=600)
    assert proc.returncode == 0, _output(proc)
    assert time.monotonic() - start < 120
    assert f"Julia's system image for twolayer, twolayer_auto is up to date: {built}" in proc.stderr, _output(proc)


def test_a_process_loading_the_op_starts_from_its_image_with_the_same_results(built):
    report, proc = _load_and_run()
    assert report["image"] == str(built) and report["image_file"] == str(built), _output(proc)
    assert report["forwarddiff_in_image"] is True, _output(proc)  # loaded before the op's `import`
    assert report["method"] == "ForwardDiff.jacobian", _output(proc)
    assert report["error"] < 1e-12, _output(proc)
    assert not _notes(proc), _output(proc)
    # The same op from the image with TFBridge only (named explicitly: used as given).
    plain = _plain_image()
    other, proc2 = _load_and_run(TFBRIDGE_JULIA_SYSIMAGE=str(plain))
    assert other["image"] != str(built) and other["forwarddiff_in_image"] is False, _output(proc2)
    assert other["jac"] == report["jac"] and other["grads"] == report["grads"], _output(proc2)


def test_a_stale_image_is_not_used_and_says_why_in_one_line(built):
    source = FOLDER / "two_layer.jl"
    original = source.read_text()
    source.write_text(original + "\n# an edit after the image was built\n")
    try:
        report, proc = _load_and_run()
    finally:
        source.write_text(original)
    assert report["image"] != str(built) and report["forwarddiff_in_image"] is False, _output(proc)
    assert report["image"] == _plain_image(), _output(proc)
    notes = _notes(proc)
    assert len(notes) == 1 and f"the op folder {FOLDER} changed (two_layer.jl)" in notes[0], _output(proc)
    assert report["error"] < 1e-12 and report["method"] == "ForwardDiff.jacobian", _output(proc)
    assert opimage.choose([FOLDER])[0] == built  # the edit undone: current again


def test_an_image_named_in_the_environment_is_used_only_while_current(built, tmp_path):
    report, proc = _load_and_run(TFBRIDGE_JULIA_SYSIMAGE=str(built))
    assert report["image"] == str(built) and not _notes(proc), _output(proc)
    missing = tmp_path / "no-such-image.so"
    report, proc = _load_and_run(TFBRIDGE_JULIA_SYSIMAGE=str(missing))
    assert report["image"] != str(missing) and report["error"] < 1e-12, _output(proc)
    assert _notes(proc) == [f"tf-julia-bridge: not using the system image {missing}: {missing} does not exist; "
                            "Julia starts from the image with TFBridge"], _output(proc)


def test_what_makes_an_image_stale(built, monkeypatch):
    record = json.loads(json.dumps(opimage.image_for(built).record))
    assert opimage.stale_reason(record) is None
    changed = json.loads(json.dumps(record))
    changed["packages"]["ForwardDiff"]["files"] = "another version"
    assert opimage.stale_reason(changed).startswith("the package ForwardDiff changed")
    changed = json.loads(json.dumps(record))
    del changed["format"]  # an image an older bridge recorded: its fingerprints hashed otherwise
    assert opimage.stale_reason(changed) == "it was recorded by another version of tf-julia-bridge"
    changed = json.loads(json.dumps(record))
    changed["base"] = "another Julia"
    assert opimage.stale_reason(changed) == "Julia, TFBridge's sources or the CPU changed"
    changed = json.loads(json.dumps(record))
    changed["modules"]["ForwardDiffGradients.jl"]["ForwardDiffGradients/reverse.jl"] = "another version"
    assert opimage.stale_reason(changed) == ("the Julia module julia/ForwardDiffGradients.jl changed "
                                             "(ForwardDiffGradients/reverse.jl)")
    monkeypatch.setenv("JULIA_PROJECT", "/somewhere/else")
    assert opimage.stale_reason(record).startswith("JULIA_PROJECT is '/somewhere/else'")
    monkeypatch.delenv("JULIA_PROJECT")
    assert opimage.choose([]) == (None, "")  # no op asked for: the plain image
    assert opimage.choose([EXAMPLE])[0] != built  # another folder's op: not this image


# A child that loads TwoLayerAuto and reports whether its gradient code came
# with the image, the gradient, and how many methods the first gradient
# compiled (Julia's --trace-compile, turned on after the load).
_AUTO_GRADIENT = """
import json, os, sys, tempfile
import numpy as np
import bridge, bridge.julia
folder = sys.argv[1]
bridge.julia.init(ops=[folder])
in_image = bridge.julia.eval("isdefined(TFBridge, :ForwardDiffGradients)")
op = bridge.customop.load(folder).two_layer_auto
rng = np.random.default_rng(4)
n = 10
values = (rng.standard_normal(n), rng.standard_normal((n, n)) / 3, rng.standard_normal(n),
          rng.standard_normal((n, n)) / 3, rng.standard_normal(n))
g = bridge.Graph()
with g.as_default():
    inputs = [bridge.constant(v, bridge.float64) for v in values]
    jac = op(*inputs)
    grads = bridge.gradients(bridge.ops.sum(jac * jac, 0), inputs)
trace = tempfile.mktemp(suffix=".jl")
with bridge.Session(g) as sess:
    sess.run(jac)
    bridge.julia.eval(TRACE_ON.format(path=json.dumps(trace)))
    got = sess.run(grads)
bridge.julia.eval("ccall(:jl_flush_cstdio, Cvoid, ())")
compiled = sum(line.startswith("precompile(") for line in open(trace)) if os.path.exists(trace) else 0
print(json.dumps({"image": bridge.julia.image(), "in_image": in_image, "compiled": compiled,
                  "grads": [d.tolist() for d in got]}))
"""


def test_the_image_holds_the_gradient_code_of_forwarddiff_ops(built):
    """TwoLayerAuto from the image: TFBridge.ForwardDiffGradients is there
    before the load (no include, no compile of it), and its first gradient
    compiles fewer methods than from TFBridge's image (what is left is the op's
    own forward function on tracked numbers, which Julia 1.5 compiles after
    each include of its file), with the same result."""
    from bridge.customop.image import _TRACE_ON
    code = f"TRACE_ON = {_TRACE_ON!r}\n" + _AUTO_GRADIENT

    def child(**env_vars):
        env = dict(os.environ, PYTHONPATH=str(REPO), **env_vars)
        proc = subprocess.run([sys.executable, "-c", code, str(AUTO)], capture_output=True, text=True, timeout=600,
                              env=env, cwd=REPO)
        assert proc.returncode == 0, _output(proc)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    from_image = child()
    plain = child(TFBRIDGE_JULIA_SYSIMAGE=_plain_image())
    assert from_image["image"] == str(built) and from_image["in_image"] is True, from_image
    assert plain["image"] != str(built) and plain["in_image"] is False, plain
    assert from_image["grads"] == plain["grads"]
    assert 0 < from_image["compiled"] < plain["compiled"], (from_image["compiled"], plain["compiled"])
