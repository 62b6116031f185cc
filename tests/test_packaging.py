"""The wheel carries everything an installed bridge needs outside the source tree."""
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_ships_templates_runtime_and_julia_module(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           str(REPO), "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel, = tmp_path.glob("tf_julia_bridge-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, resource in [("templates", "templates"), ("kernels_cpp", "kernels_cpp"), ("julia", "julia")]:
        expected = {f"bridge/_resources/{resource}/{p.relative_to(REPO / folder).as_posix()}"
                    for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        assert expected <= names, sorted(expected - names)[:5]
    assert {"bridge/framework/decl/c_api.h", "bridge/ops/__init__.py", "bridge/customop/spec.py"} <= names
    assert not any(n.endswith(".so") or "/build/" in n for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "tfbridge = bridge.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
