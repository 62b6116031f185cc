"""A Julia system image for some op folders: their packages and compiled code
built in (``tfbridge julia build-image --ops DIR...``, ``tfbridge customop
build --image DIR...``; docs/internals/julia-start.md).

``build_image`` builds the ops, runs them once in a fresh process on their
gradient test's sample inputs (forward, then gradient) with Julia's
``--trace-compile`` on, and hands what that run compiled and loaded to
``bridge.julia.opimage.build_image``.  ``bridge.julia.init`` then starts a
process that loads one of these ops from the image (``customop.load`` asks
for it), as long as nothing it was built from changed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Callable, Sequence, Union

from bridge.julia import opimage
from bridge.julia.sysimage import ImageBuildError

#: How long the traced run may take (Julia's start, the packages' loading, compiling).
TRACE_SECONDS = 900

# Julia 1.5 reads --trace-compile's file name from jl_options each time it
# compiles, and opens the file the first time: setting the field turns it on.
_TRACE_ON = """
const TFBRIDGE_TRACE_FILE = {path}
let opts = cglobal(:jl_options, Base.JLOptions), i = findfirst(==(:trace_compile), fieldnames(Base.JLOptions))
    unsafe_store!(Ptr{{Ptr{{UInt8}}}}(opts + fieldoffset(Base.JLOptions, i)), pointer(TFBRIDGE_TRACE_FILE))
end
"""

_REPORT = """
let pkgs = String[], files = String[], stdlib = realpath(Sys.STDLIB)
    for (k, m) in Base.loaded_modules
        file = pathof(m)
        (k.uuid === nothing || file === nothing || !isfile(file)) && continue
        startswith(realpath(file), stdlib) && continue  # Julia's own, as the image it builds on
        push!(pkgs, string(k.uuid, " ", k.name, " ", dirname(dirname(file))))
    end
    for env in Base.load_path()
        isfile(env) || continue
        push!(files, env)
        manifest = Base.project_file_manifest_path(env)
        manifest === nothing || push!(files, manifest)
    end
    # Modules customop.load included into TFBridge (julia/ForwardDiffGradients.jl, for @gradient forwarddiff).
    modules = isdefined(Main.TFBridge, :ForwardDiffGradients) ? "ForwardDiffGradients.jl" : ""
    join(sort(pkgs), "\\n") * "\\n--\\n" * join(files, "\\n") * "\\n--\\n" * modules
end
"""

# The traced run, in a fresh process: TF, Julia from the plain image (code
# compiled at run time is what the trace records), each op on its samples.
_RUN = """
import importlib.util, json, pathlib, sys
import bridge, bridge.julia
from bridge import customop
from bridge.customop import gradtest
from bridge.customop.spec import grad_inputs, has_gradient, snake_case

folders, trace, report = sys.argv[1:-2], sys.argv[-2], sys.argv[-1]
bridge.julia.init()
bridge.julia.eval(TRACE_ON.format(path=json.dumps(trace)))
notes = []
for folder in folders:
    module = customop.load(folder)
    spec = customop.parse_file(pathlib.Path(folder) / customop.SPEC_FILE)
    script = customop.build(folder).parent / "gradtest.py"
    loaded = importlib.util.spec_from_file_location("tfbridge_samples", script)
    samples = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(samples)
    values = samples.sample_inputs()
    try:
        g = bridge.Graph()
        with g.as_default():
            floats = {a.name for a in grad_inputs(spec)} if has_gradient(spec) else set()
            xs = {name: bridge.constant(values[name]) for name in floats}
            outs = getattr(module, snake_case(spec.name))(*[xs.get(a.name, values[a.name]) for a in spec.inputs],
                                                          **gradtest._keywords(spec, samples.SAMPLE_ATTRS))
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            fetches = list(outs)
            if xs:
                diff = [o for o in outs if o.dtype.is_floating or o.dtype.is_complex]
                fetches += [d for d in bridge.gradients(diff, list(xs.values())) if d is not None]
        with bridge.Session(g) as sess:
            sess.run(fetches)
    except Exception as exc:  # what compiled until then is traced all the same
        notes.append(f"{folder}: the traced run stopped: {type(exc).__name__}: {str(exc).splitlines()[0]}")
with open(report, "w") as f:
    json.dump({"report": bridge.julia.eval(REPORT), "notes": notes}, f)
"""


def _trace(folders: Sequence[Path], work: Path) -> tuple[opimage.Trace, list[str]]:
    statements, report = work / "statements.jl", work / "report.json"
    code = f"TRACE_ON = {_TRACE_ON!r}\nREPORT = {_REPORT!r}\n" + _RUN
    env = dict(os.environ)
    env.pop("TFBRIDGE_JULIA_SYSIMAGE", None)  # the plain image: an op image would compile nothing to trace
    proc = subprocess.run([sys.executable, "-c", code, *map(str, folders), str(statements), str(report)],
                          capture_output=True, text=True, timeout=TRACE_SECONDS, env=env)
    if proc.returncode or not report.is_file():
        raise ImageBuildError(f"the traced run of {', '.join(map(str, folders))} failed (exit {proc.returncode}):\n"
                              f"{proc.stderr[-3000:]}")
    result = json.loads(report.read_text())
    packages_text, files_text, modules_text = result["report"].split("\n--\n")
    packages = [tuple(line.split(" ", 2)) for line in packages_text.splitlines() if line]
    if not statements.is_file():
        statements.write_text("")  # nothing compiled: the image still holds the packages
    return opimage.Trace(statements, packages, [f for f in files_text.splitlines() if f],
                         [m for m in modules_text.splitlines() if m]), result["notes"]


def build_image(folders: Sequence[Union[str, Path]],
                progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> Path:
    """Build (or find) the system image for these op folders; its path.
    Builds the ops first.  Raises ImageBuildError, or the ops' build errors."""
    from . import build

    folders = [Path(f).resolve() for f in folders]
    for folder in folders:
        build(folder)
    found = opimage.find_built(folders)
    if found is not None:
        progress(f"tf-julia-bridge: Julia's system image for {', '.join(f.name for f in folders)} is up to date: "
                 f"{found}")
        return found
    with tempfile.TemporaryDirectory(prefix="tfbridge-trace-") as tmp:
        progress(f"tf-julia-bridge: tracing a run of {', '.join(f.name for f in folders)} ...")
        trace, notes = _trace(folders, Path(tmp))
        for note in notes:
            progress(textwrap.shorten(f"tf-julia-bridge: {note}", 300))
        return opimage.build_image(folders, trace, progress)
