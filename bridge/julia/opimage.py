"""Julia system images that hold, besides TFBridge, the packages some op
folders use and the code a run of those ops compiled (docs/internals/julia-start.md).

Julia 1.5 keeps no machine code of packages: an op whose Julia file uses
ForwardDiff loads it and compiles its code at every start.  An *op image* is
what PackageCompiler builds for newer Julias, made with Julia's own
``--output-o`` (julia/build_op_image.jl): TFBridge as in the plain image
(``bridge.julia.sysimage``), the packages a traced run of the ops loaded, and
the precompile statements that run recorded (``--trace-compile``).  The ops'
Julia files are still included at every load (so editing or redefining them
works as ever); only the compiled code and the packages come from the image.

An image lives in ``cache.root()/julia-op-image/<key>/`` beside its record,
``image.json``: what it was built from (the plain image's key: Julia,
TFBridge's sources, the CPU; every op folder's sources; every package's
folder with a fingerprint of its files; the manifests and environment
variables that decided which packages Julia finds).  ``choose`` (asked by
``bridge.julia.init`` before Julia starts: one image per process) returns an
image only while every one of those is as recorded; a stale one is never
used, and a one-line note says why Julia starts from the plain image instead.
``build_image`` is called by ``bridge.customop.image`` (``tfbridge julia
build-image --ops DIR``), which runs the traced run first.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from bridge.platform import cache, paths
from . import buildtools
from . import sysimage
from .buildtools import JuliaConfig, julia_config

RECORD = "image.json"
BUILD_SCRIPT = "build_op_image.jl"
#: Op images kept besides the newest (each about 200 MB).
KEEP = 3
#: The environment variables that decide where Julia finds packages: an image
#: built under other values may hold other versions of them.
PACKAGE_VARIABLES = ("JULIA_DEPOT_PATH", "JULIA_LOAD_PATH", "JULIA_PROJECT", "TFBRIDGE_JULIA_DEPOT")
#: Files of an op folder whose change makes its image stale (besides its *.jl files).
OP_FILES = ("custom_op.txt", "Project.toml", "JuliaProject.toml", "Manifest.toml", "JuliaManifest.toml")
#: The form of a record's fingerprints: a record of another form (an image an
#: older bridge built, its files hashed otherwise) cannot be compared, so is stale.
RECORD_FORMAT = 2
#: Hex digits of each fingerprint (all of cache.Key's SHA-256).
_DIGITS = 64


@dataclass(frozen=True)
class Trace:
    """What a traced run of the ops reported (bridge.customop.image makes it)."""
    statements: Path                      # the precompile statements, one a line
    packages: Sequence[tuple[str, str, str]]  # (uuid, name, folder) of every package loaded
    environment_files: Sequence[str]      # the project and manifest files Julia's load path read
    modules: Sequence[str] = ()           # julia/ files the run included into TFBridge (ForwardDiffGradients.jl)


def image_root() -> Path:
    """The folder holding every op image, one subfolder per key."""
    return cache.root() / "julia-op-image"


def _hash_file(path: Path) -> str:
    """The key of a file's content (cache.Key, the one home for cache keys), or "missing"."""
    try:
        return cache.Key(path.read_bytes()).hexdigest(_DIGITS)
    except OSError:
        return "missing"


def op_files(folder: Path) -> list[Path]:
    """The files of an op folder an image depends on: its spec, environment
    and every Julia file outside its build folder."""
    found = [folder / name for name in OP_FILES if (folder / name).is_file()]
    found += [p for p in folder.rglob("*.jl") if "build" not in p.relative_to(folder).parts]
    return sorted(set(found))


def _op_fingerprint(folder: Path) -> dict[str, str]:
    return {os.path.relpath(p, folder): _hash_file(p) for p in op_files(folder)}


def _package_fingerprint(folder: str) -> str:
    """Every file of a package's Project.toml and src/, by name, size and
    time: a package installed by Pkg never changes, one under development
    (Pkg.develop) does."""
    key = cache.Key()
    root = Path(folder)
    files = [root / "Project.toml"] + sorted((root / "src").rglob("*"))
    for path in files:
        try:
            st = path.stat()
        except OSError:
            key.add(f"{path} missing")
            continue
        if path.is_file():
            key.add(f"{path.relative_to(root)} {st.st_size} {st.st_mtime_ns}")
    return key.hexdigest(_DIGITS)


def module_files(module: str) -> list[Path]:
    """The Julia files of a module the traced run included into TFBridge
    (``julia/<module>``): the file and those of the folder of its name."""
    main = paths.julia_dir() / module
    return [main] + sorted(p for p in main.with_suffix("").rglob("*.jl"))


def _module_fingerprint(module: str) -> dict[str, str]:
    julia = paths.julia_dir()
    return {os.path.relpath(p, julia): _hash_file(p) for p in module_files(module)}


def _variables() -> dict[str, str]:
    values = {name: os.environ.get(name, "") for name in PACKAGE_VARIABLES}
    if values["TFBRIDGE_JULIA_DEPOT"]:  # bridge.julia.init makes it absolute
        values["TFBRIDGE_JULIA_DEPOT"] = os.path.abspath(os.path.expanduser(values["TFBRIDGE_JULIA_DEPOT"]))
    return values


def _record(config: JuliaConfig, folders: Sequence[Path], trace: Trace) -> dict:
    return {
        "format": RECORD_FORMAT,
        "base": sysimage.image_key(config),
        "ops": {str(f): _op_fingerprint(f) for f in folders},
        "packages": {name: {"uuid": uuid, "folder": folder, "files": _package_fingerprint(folder)}
                     for uuid, name, folder in trace.packages},
        "environment": {path: _hash_file(Path(path)) for path in trace.environment_files},
        "variables": _variables(),
        "statements": _hash_file(trace.statements),
        "script": _hash_file(paths.julia_dir() / BUILD_SCRIPT),
        "modules": {module: _module_fingerprint(module) for module in trace.modules},
    }


def stale_reason(record: dict, config: Optional[JuliaConfig] = None) -> Optional[str]:
    """Why an image with this record must not be used now (one line), or None when it is current."""
    if record.get("format") != RECORD_FORMAT:
        return "it was recorded by another version of tf-julia-bridge"
    try:
        if record["base"] != sysimage.image_key(config or julia_config()):
            return "Julia, TFBridge's sources or the CPU changed"
    except OSError as exc:
        return f"cannot read TFBridge's sources: {exc}"
    if record.get("script") != _hash_file(paths.julia_dir() / BUILD_SCRIPT):
        return f"julia/{BUILD_SCRIPT} changed"
    for module, files in record.get("modules", {}).items():
        now = _module_fingerprint(module)
        if now != files:
            changed = sorted(set(now) ^ set(files) | {n for n in now.keys() & files.keys() if now[n] != files[n]})
            return f"the Julia module julia/{module} changed ({', '.join(changed)})"
    for folder, files in record["ops"].items():
        now = _op_fingerprint(Path(folder))
        if now != files:
            changed = sorted(set(now) ^ set(files) | {n for n in now.keys() & files.keys() if now[n] != files[n]})
            return f"the op folder {folder} changed ({', '.join(changed)})"
    for name, package in record["packages"].items():
        if _package_fingerprint(package["folder"]) != package["files"]:
            return f"the package {name} changed ({package['folder']})"
    for path, digest in record["environment"].items():
        if _hash_file(Path(path)) != digest:
            return f"{path} changed (other package versions)"
    now = _variables()
    for name, value in record["variables"].items():
        if now.get(name, "") != value:
            return f"{name} is {now.get(name, '')!r}, the image was built with {value!r}"
    return None


@dataclass(frozen=True)
class Image:
    """An op image in the cache."""
    path: Path     # its sys.so
    record: dict

    @property
    def ops(self) -> list[str]:
        return list(self.record["ops"])


def _read(entry: Path) -> Optional[Image]:
    try:
        record = json.loads((entry / RECORD).read_text())
    except (OSError, ValueError):
        return None
    image = entry / sysimage.IMAGE_NAME
    return Image(image, record) if image.is_file() and isinstance(record, dict) else None


def images() -> list[Image]:
    """Every op image in the cache, newest first."""
    root = image_root()
    try:
        entries = [p for p in root.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []
    found = [image for image in map(_read, entries) if image is not None]
    return sorted(found, key=lambda i: i.path.stat().st_mtime_ns, reverse=True)


def image_for(path: Path) -> Optional[Image]:
    """The op image whose sys.so is ``path``, or None for any other file."""
    return _read(Path(path).resolve().parent)


def choose(ops: Iterable[Path] = (), config: Optional[JuliaConfig] = None) -> tuple[Optional[Path], str]:
    """The op image to start Julia from for op folders ``ops`` (the newest
    current image holding all of them), and a one-line note for the user
    (empty when nothing is worth saying).  ``(None, note)``: none is current."""
    wanted = {str(Path(f).resolve()) for f in ops}
    if not wanted:
        return None, ""
    stale = []
    for image in images():
        if not wanted <= set(image.ops):
            continue
        reason = stale_reason(image.record, config)
        if reason is None:
            return image.path, ""
        stale.append(reason)
    if stale:
        return None, (f"tf-julia-bridge: not using the system image built for {', '.join(sorted(wanted))}: "
                      f"{stale[0]}; Julia starts from the image with TFBridge only (rebuild: "
                      f"tfbridge julia build-image --ops {' '.join(sorted(wanted))})")
    return None, ""


def check_explicit(path: Path, config: Optional[JuliaConfig] = None) -> Optional[str]:
    """Why the image a user named (TFBRIDGE_JULIA_SYSIMAGE=path, ``init(image=)``)
    must not be used, or None.  An image without a record is the user's own: used as given."""
    if not Path(path).is_file():
        return f"{path} does not exist"
    image = image_for(path)
    return None if image is None else stale_reason(image.record, config)


def find_built(folders: Sequence[Path], config: Optional[JuliaConfig] = None) -> Optional[Path]:
    """A current image built for exactly these op folders, if the cache has one."""
    wanted = {str(Path(f).resolve()) for f in folders}
    for image in images():
        if set(image.ops) == wanted and stale_reason(image.record, config) is None:
            return image.path
    return None


def _plan(folders: Sequence[Path], trace: Trace) -> str:
    lines = [f"environment {f}" for f in folders if any((f / n).is_file() for n in ("Project.toml",
                                                                                   "JuliaProject.toml"))]
    lines += [f"package {uuid} {name}" for uuid, name, _ in trace.packages]
    lines += [f"include {paths.julia_dir() / module}" for module in trace.modules]
    lines.append(f"statements {trace.statements}")
    return "\n".join(lines) + "\n"


def build_image(folders: Sequence[Path], trace: Trace,
                progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> Path:
    """Build the op image for ``folders`` from a traced run; its sys.so.  The
    entry appears whole (built in a hidden folder, then renamed).  Raises
    sysimage.ImageBuildError (the failed build kept with its log)."""
    config = julia_config()
    folders = [Path(f).resolve() for f in folders]
    record = _record(config, folders, trace)
    key = cache.Key(json.dumps(record, sort_keys=True)).hexdigest()
    entry = image_root() / key
    with cache.EntryLock(entry):
        if not (entry / sysimage.IMAGE_NAME).is_file():
            names = ", ".join(f.name for f in folders)
            progress(f"tf-julia-bridge: building Julia's system image with TFBridge, {len(trace.packages)} "
                     f"packages and the compiled code of {names} in {entry}: several minutes ...")
            start = time.monotonic()
            with cache.staged_dir(entry, failed=entry.with_name(f"{entry.name}.failed"),
                                  failure=sysimage.ImageBuildError) as work:
                (work / "plan.txt").write_text(_plan(folders, trace))
                log, obj = work / "build.log", work / "sys.o"
                buildtools.run([config.executable, "--startup-file=no", "--history-file=no", f"--output-o={obj}",
                                f"--sysimage={config.image}", str(paths.julia_dir() / BUILD_SCRIPT),
                                str(paths.julia_dir() / "TFBridge.jl"), str(work / "plan.txt")],
                               log, what=sysimage.IMAGE_NAME, step=f"compiling {names} into the image",
                               error=sysimage.ImageBuildError)
                sysimage._link(config, obj, work / sysimage.IMAGE_NAME, log)
                obj.unlink()
                (work / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
            size = (entry / sysimage.IMAGE_NAME).stat().st_size / 1e6
            progress(f"tf-julia-bridge: system image built in {time.monotonic() - start:.0f} s ({size:.0f} MB): "
                     f"{entry / sysimage.IMAGE_NAME}")
        cache.prune(image_root(), keep=key, newest=1 + KEEP, is_entry=lambda p: (p / RECORD).is_file())
    return entry / sysimage.IMAGE_NAME
