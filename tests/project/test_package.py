"""`import bridge` loads its names on first access (bridge/__init__.py): every
public name still resolves, the package's hooks are wired however a module
is reached, and `import bridge.julia` imports neither numpy nor the graph
modules, which Julia's start would otherwise wait for (docs/internals/julia-start.md).

Each check runs in a fresh interpreter: what a process has imported is the subject.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from support import REPO


#: Every name `import bridge` gave eagerly before its names became lazy
#: (the subpackages its imports brought in included).
ONCE_EAGER = ("framework", "platform", "saved_model", "ops", "dtypes", "errors", "DType", "as_dtype", "bfloat16", "bool", "complex64", "complex128", "float16",
              "float32", "float64", "int8", "int16", "int32", "int64", "resource", "string", "uint8", "uint16",
              "uint32", "uint64", "variant", "Tensor", "aligned_empty", "Shape", "Graph", "Operation", "Output",
              "get_default_graph", "reset_default_graph", "Session", "SessionConfig", "SavedModel", "Signature",
              "load_saved_model", "colocate_with", "control_dependencies", "device", "name_scope")


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_public_name_resolves_to_its_module_attribute() -> None:
    out = _run(f"""
import importlib, json
import bridge
names = sorted(set(bridge._LAZY) | set({ONCE_EAGER!r}))
bad = {{}}
for name in names:
    module_name, attr = bridge._LAZY[name]
    module = importlib.import_module(module_name)
    want = module if attr is None else getattr(module, attr)
    got = getattr(bridge, name)
    if got is not want:
        bad[name] = repr(got)
missing = [n for n in {ONCE_EAGER!r} if n not in dir(bridge)]
print(json.dumps({{"names": len(names), "bad": bad, "missing": missing}}))
""")
    assert out["bad"] == {} and out["missing"] == []
    assert out["names"] >= len(ONCE_EAGER) + 30
    assert _run("import json, bridge\ntry:\n    bridge.no_such_name\nexcept AttributeError as e:\n"
                "    print(json.dumps({'error': str(e)}))") == {"error": "module 'bridge' has no attribute "
                                                                       "'no_such_name'"}


def test_import_bridge_julia_imports_neither_numpy_nor_the_graph_modules() -> None:
    out = _run("""
import json, sys
import bridge.julia
heavy = [m for m in ("numpy", "bridge.framework.dtypes", "bridge.framework.graph", "bridge.framework.session",
                     "bridge.julia.contract", "pycparser", "tensorflow") if m in sys.modules]
print(json.dumps({"heavy": heavy}))
""")
    assert out["heavy"] == []


def test_hooks_are_wired_when_a_module_is_imported_directly() -> None:
    """Output's operators, the julia_thread runner and the SavedModel op-folder
    loader, with no `bridge.<name>` touched: the modules imported by name."""
    out = _run("""
import json
from bridge.framework.graph import Graph, Output
from bridge.framework import session
from bridge.saved_model import load
from bridge.framework.builders import placeholder
from bridge.framework import dtypes
g = Graph()
with g.as_default():
    x = placeholder(dtypes.float64, [2], name="x")
    y = x + 1.0
print(json.dumps({"add": y.op.type, "has_add": "__add__" in Output.__dict__,
                  "runner": session._julia_thread_runner is not None,
                  "loader": load._op_folder_loader is not None}))
""")
    assert out == {"add": "AddV2", "has_add": True, "runner": True, "loader": True}


def test_the_package_hooks_run_once_per_import_and_for_late_registrations() -> None:
    from bridge.platform import hooks
    seen = []
    hooks.on_import("tests.test_package.fake", seen.append)
    assert seen == []
    sys.modules["tests.test_package.fake"] = fake = type(sys)("tests.test_package.fake")
    try:
        hooks.imported("tests.test_package.fake")
        assert seen == [fake]
        hooks.on_import("tests.test_package.fake", seen.append)  # after the import: runs at once
        assert seen == [fake, fake]
    finally:
        del sys.modules["tests.test_package.fake"]


def test_tf_libraries_loading_on_a_thread_are_whole_in_a_forked_child() -> None:
    """bridge.julia.init() loads TF's libraries on a thread (_lib.start_loading);
    a fork meanwhile waits for it.  Without that wait the child got TF half
    loaded, its static constructors cut off with the thread that ran them
    (measured: a segfault, or TF's op list 5,270 bytes long instead of
    383,807), so the child's op list must be the parent's."""
    for delay in (0.05, 0.15):  # the fork falls inside the 0.25 s of loading
        out = _run(f"""
import json, os, time
from bridge.framework import _lib
_lib.start_loading()
time.sleep({delay})
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, str(_lib.load().TF_GetAllOpList().length).encode())
    os._exit(0)
os.close(write)
child = os.read(read, 100).decode()
_, status = os.waitpid(pid, 0)
print(json.dumps({{"exit": os.waitstatus_to_exitcode(status), "child": child,
                   "parent": str(_lib.load().TF_GetAllOpList().length)}}))
""")
        assert out["exit"] == 0 and out["child"] == out["parent"], (delay, out)
        assert int(out["parent"]) > 100_000, out
