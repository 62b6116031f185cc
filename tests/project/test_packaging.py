"""The wheel carries everything an installed bridge needs outside the source
tree: the templates, the C++ runtime, the Julia module and (built by
hatch_build.py) the tf_bridge Fortran module; and it depends on one
TensorFlow wheel: tensorflow-cpu by default, the one TFBRIDGE_TENSORFLOW
names, or `tensorflow` where the target environment has that wheel already."""
import subprocess
import sys
import zipfile

import pytest

from bridge import fortran
from support.fortran import require_gfortran
from support.wheels import REPO, Venv, build_wheel, clean_env, tensorflow_requirements


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    require_gfortran()
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_ships_templates_runtime_and_julia_module(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, resource in [("templates", "templates"), ("kernels_cpp", "kernels_cpp"), ("julia", "julia")]:
        expected = {f"bridge/_resources/{resource}/{p.relative_to(REPO / folder).as_posix()}"
                    for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        assert expected <= names, sorted(expected - names)[:5]
    assert {"bridge/framework/decl/c_api.h", "bridge/ops/__init__.py", "bridge/customop/spec.py"} <= names
    # The one native file is the Fortran module's library; nothing of a checkout's builds.
    assert sorted(n for n in names if n.endswith(".so")) == [f"bridge/_resources/fortran/{fortran.LIBRARY}"]
    assert f"bridge/_resources/fortran/include/{fortran.MODULE}" in names
    assert not any("/build/" in n for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "tfbridge = bridge.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_wheel_with_the_fortran_library_is_tagged_for_its_platform_not_its_python(wheel):
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name


def test_the_wheel_depends_on_tensorflow_cpu_by_default(wheel):
    assert tensorflow_requirements(wheel) == ["tensorflow-cpu>=2.15"]


@pytest.mark.parametrize("choice, expected", [("tensorflow", ["tensorflow>=2.15"]),
                                              ("tensorflow-cpu", ["tensorflow-cpu>=2.15"]), ("none", [])])
def test_TFBRIDGE_TENSORFLOW_chooses_the_tensorflow_wheel(tmp_path, choice, expected):
    wheel = build_wheel(tmp_path, TFBRIDGE_TENSORFLOW=choice, TFBRIDGE_BUILD_FORTRAN="0")
    assert tensorflow_requirements(wheel) == expected
    assert "bridge/_resources/fortran/NOT_BUILT" in zipfile.ZipFile(wheel).namelist()


def test_an_unknown_TFBRIDGE_TENSORFLOW_stops_the_build_naming_the_choices(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           str(REPO), "-w", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=clean_env(TFBRIDGE_TENSORFLOW="tensorflow-gpu", TFBRIDGE_BUILD_FORTRAN="0"))
    assert done.returncode != 0 and not list(tmp_path.glob("*.whl"))
    assert "TFBRIDGE_TENSORFLOW='tensorflow-gpu': expected one of tensorflow-cpu, tensorflow, none" in \
        done.stdout + done.stderr


def _record_distribution(venv: Venv, name: str, version: str) -> None:
    """A distribution as pip records an installed wheel (its .dist-info), without its files:
    what the dependency choice reads."""
    info = venv.site_packages / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")


@pytest.mark.parametrize("recorded, expected", [(["tensorflow"], ["tensorflow>=2.15"]),
                                                (["tensorflow", "tensorflow-cpu"], ["tensorflow-cpu>=2.15"]),
                                                ([], ["tensorflow-cpu>=2.15"])])
def test_a_target_environment_with_the_tensorflow_wheel_gets_a_tensorflow_dependency(tmp_path, recorded, expected):
    venv = Venv(tmp_path / "venv", tensorflow_beside=False)
    for name in recorded:
        _record_distribution(venv, name, "2.21.0")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv.python), "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", str(REPO), "-w", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env=clean_env(TFBRIDGE_BUILD_FORTRAN="0"))
    assert done.returncode == 0, done.stderr[-3000:]
    wheel, = (tmp_path / "out").glob("*.whl")
    assert tensorflow_requirements(wheel) == expected
