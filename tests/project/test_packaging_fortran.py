"""`pip install .` builds the tf_bridge Fortran module into the package
(hatch_build.py): libtf_bridge_fortran.so and tf_bridge.mod land in
site-packages/bridge/_resources/fortran, `tfbridge fortran --flags` names that
copy without building anything, and a program compiled with those flags runs a
SavedModel, finding TensorFlow beside the package (no TensorFlow path is baked
in at build time); moved away from it, the library says what it tried, and
TFBRIDGE_LIBTENSORFLOW still works.  The installed package's CMake package
config (`tfbridge fortran --cmake-dir`, or CMAKE_PREFIX_PATH=`--prefix`) and
tf_bridge.pc (`--pkg-config-path`) build examples/fortran_surrogate with plain
CMake and a program with pkg-config's flags.  A package built without
gfortran, or one whose TensorFlow is elsewhere, makes `tfbridge fortran
--flags` build into the cache, saying why."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import fortran, ops
from bridge.framework._lib import library_paths
from bridge.platform.version import VERSION
from support.fortran import read_array, require_gfortran, write_array
from support.wheels import REPO, Venv, build_wheel, clean_env

RUN_TIMEOUT = 120

PROGRAM = """program predict
  use tf_bridge
  use, intrinsic :: iso_c_binding
  implicit none
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1)
  real(c_float), target :: xs(3, 4)
  real(c_float) :: ys(2, 4)
  character(len=1024) :: dir
  integer :: u
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  if (.not. st%ok()) call fail(st)
  open(newunit=u, file="x.bin", access="stream", form="unformatted", status="old")
  read(u) xs
  close(u)
  call tf_tensor_from(x(1), xs, st)
  if (.not. st%ok()) call fail(st)
  call m%run("serving_default", ["x"], x, ["y"], y, st)
  if (.not. st%ok()) call fail(st)
  call tf_to_array(y(1), ys, st)
  if (.not. st%ok()) call fail(st)
  open(newunit=u, file="y.bin", access="stream", form="unformatted", status="replace")
  write(u) ys
  close(u)
  call x(1)%delete(); call y(1)%delete(); call m%close()
contains
  subroutine fail(st)
    type(tf_status), intent(in) :: st
    print '(a,i0,a)', "error ", st%code, ": " // st%message
    error stop 1
  end subroutine
end program predict
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> dict:
    """A SavedModel y = tanh(x w + b) made by the bridge, an input, and the bridge's output."""
    rng = np.random.default_rng(27)
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 3], name="x")
        w = bridge.Variable(rng.normal(0, 0.5, (3, 2)).astype(np.float32), name="w")
        b = bridge.Variable(rng.normal(0, 0.1, 2).astype(np.float32), name="b")
        y = ops.tanh(ops.bias_add(ops.mat_mul(x, w.value()), b.value()), name="y")
    folder = tmp_path_factory.mktemp("model")
    xs = rng.normal(0, 1, (4, 3)).astype(np.float32)
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, folder / "export", {"serving_default": ({"x": x}, {"y": y})})
        expected = sess.run(y, {x: xs})
    return {"dir": folder / "export", "x": xs, "y": expected}


def _flags(venv: Venv, cache: Path) -> tuple[list[str], str]:
    done = venv.run("tfbridge", "fortran", "--flags", TFBRIDGE_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    return done.stdout.split(), done.stderr


def _compile(flags: list[str], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "predict.f90").write_text(PROGRAM)
    done = subprocess.run([fortran.fortran_compiler(), "-o", "predict", "predict.f90", *flags],
                          capture_output=True, text=True, timeout=300, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "predict"


def _predict(exe: Path, model: dict, **env: str) -> subprocess.CompletedProcess:
    write_array(exe.parent / "x.bin", model["x"])
    return subprocess.run([str(exe), str(model["dir"])], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          cwd=exe.parent, env=clean_env(**env))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Venv:
    """A fresh venv with TensorFlow beside the package, and `pip install` of the checkout."""
    require_gfortran()
    venv = Venv(tmp_path_factory.mktemp("venv") / "venv", tensorflow_beside=True)
    venv.pip_install(REPO)
    return venv


def test_pip_install_puts_the_fortran_library_and_module_in_the_package(installed):
    folder = installed.site_packages / "bridge" / "_resources" / "fortran"
    assert (folder / fortran.LIBRARY).is_file() and (folder / "include" / fortran.MODULE).is_file()
    assert not (folder / "NOT_BUILT").exists()
    # The library is not linked against TensorFlow (it opens it RTLD_LOCAL at run time).
    needed = subprocess.run(["ldd", str(folder / fortran.LIBRARY)], capture_output=True, text=True, timeout=60)
    assert "tensorflow" not in needed.stdout and "libgfortran" in needed.stdout


def test_a_program_built_with_the_installed_flags_runs_a_saved_model(installed, model, tmp_path):
    cache = tmp_path / "cache"
    flags, said = _flags(installed, cache)
    folder = installed.site_packages / "bridge" / "_resources" / "fortran"
    assert f"-I{folder / 'include'}" in flags and f"-L{folder}" in flags and "-ltf_bridge_fortran" in flags, flags
    assert "building" not in said and not (cache / "fortran").exists()   # nothing was built into the cache
    exe = _compile(flags, tmp_path / "prog")
    done = _predict(exe, model)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    np.testing.assert_array_equal(read_array(exe.parent / "y.bin", np.float32, (4, 2)), model["y"])


def _query(venv: Venv, option: str, cache: Path) -> str:
    done = venv.run("tfbridge", "fortran", option, TFBRIDGE_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    assert not (cache / "fortran").exists()      # the installed copy: nothing built
    return done.stdout.strip()


def _cmake(*args: str, cwd: Path) -> None:
    done = subprocess.run([shutil.which("cmake"), *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


PROBE_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(probe LANGUAGES Fortran)
find_package(tf_bridge {version} EXACT REQUIRED)
message(STATUS "found tf_bridge ${{tf_bridge_VERSION}} in ${{tf_bridge_DIR}}")
add_executable(predict predict.f90)
target_link_libraries(predict PRIVATE tf_bridge::tf_bridge)
"""


def test_cmake_prefix_path_finds_the_installed_package_config(installed, model, tmp_path):
    folder = installed.site_packages / "bridge" / "_resources" / "fortran"
    prefix = _query(installed, "--prefix", tmp_path / "cache")
    assert prefix == str(folder)
    project = tmp_path / "probe"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(PROBE_CMAKE.format(version=VERSION))
    (project / "predict.f90").write_text(PROGRAM)
    _cmake("-S", str(project), "-B", str(project / "build"), f"-DCMAKE_PREFIX_PATH={prefix}",
           f"-DCMAKE_Fortran_COMPILER={fortran.fortran_compiler()}", cwd=tmp_path)
    cache = (project / "build" / "CMakeCache.txt").read_text()
    assert f"tf_bridge_DIR:PATH={folder}/lib/cmake/tf_bridge" in cache.splitlines()
    _cmake("--build", str(project / "build"), cwd=tmp_path)
    done = _predict(project / "build" / "predict", model)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    np.testing.assert_array_equal(read_array(project / "build" / "y.bin", np.float32, (4, 2)), model["y"])


def test_the_example_builds_with_plain_cmake_from_the_installed_package(installed, tmp_path):
    """examples/fortran_surrogate/CMakeLists.txt, -Dtf_bridge_DIR=`tfbridge fortran --cmake-dir`,
    runs 5 steps of its heat loop with a closure s = tanh(3u - 0.5) the bridge exported, as the
    same loop in numpy with the bridge's closure does."""
    folder = installed.site_packages / "bridge" / "_resources" / "fortran"
    cmake_dir = _query(installed, "--cmake-dir", tmp_path / "cache")
    assert cmake_dir == str(folder / "lib" / "cmake" / "tf_bridge")
    g = bridge.Graph()
    with g.as_default():
        u = bridge.placeholder(bridge.float32, [None, 1], name="u")
        w = bridge.Variable(np.full((1, 1), 3.0, np.float32), name="w")
        s = ops.tanh(ops.bias_add(ops.mat_mul(u, w.value()), bridge.constant(np.array([-0.5], np.float32))),
                     name="s")
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, tmp_path / "closure", ({"u": u}, {"s": s}))
    tree = tmp_path / "build"
    _cmake("-S", str(REPO / "examples" / "fortran_surrogate"), "-B", str(tree), f"-Dtf_bridge_DIR={cmake_dir}",
           f"-DCMAKE_Fortran_COMPILER={fortran.fortran_compiler()}", cwd=tmp_path)
    _cmake("--build", str(tree), cwd=tmp_path)
    done = subprocess.run([str(tree / "heat"), str(tmp_path / "closure"), "5"], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.splitlines()[0].split()[:2] == ["steps", "5"], done.stdout
    got = np.frombuffer((tmp_path / "u_final.bin").read_bytes(), np.float32)[:64]
    n, d = 64, np.float32(0.01)
    dx = np.float32(1.0) / np.float32(n)
    dt = np.float32(0.2) * dx**2 / d
    grid = np.arange(n, dtype=np.float32) * dx
    pi = np.float32(3.14159265)
    v = (np.float32(0.8) * np.sin(2 * pi * grid) + np.float32(0.3) * np.cos(6 * pi * grid)).astype(np.float32)
    with bridge.load_saved_model(tmp_path / "closure") as closure:
        for _ in range(5):
            source = closure.signatures["serving_default"](u=v.reshape(n, 1))["s"].reshape(n)
            lap = (np.roll(v, -1) - 2 * v + np.roll(v, 1)) / dx**2
            v = (v + dt * (d * lap + source)).astype(np.float32)
    np.testing.assert_allclose(got, v, rtol=0, atol=1e-5)
    assert np.abs(got - np.frombuffer((tmp_path / "u_final.bin").read_bytes(), np.float32)[64:]).max() > 1e-3


def test_pkg_config_builds_a_program_against_the_installed_package(installed, model, tmp_path):
    folder = installed.site_packages / "bridge" / "_resources" / "fortran"
    path = _query(installed, "--pkg-config-path", tmp_path / "cache")
    assert path == str(folder / "lib" / "pkgconfig")
    env = {**clean_env(), "PKG_CONFIG_PATH": path}
    version = subprocess.run(["pkg-config", "--modversion", "tf_bridge"], capture_output=True, text=True,
                             timeout=60, env=env)
    assert version.stdout.strip() == VERSION, version.stderr
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "tf_bridge"], capture_output=True, text=True,
                           timeout=60, env=env)
    assert flags.returncode == 0, flags.stderr
    exe = _compile(flags.stdout.split(), tmp_path / "prog")
    done = _predict(exe, model)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    np.testing.assert_array_equal(read_array(exe.parent / "y.bin", np.float32, (4, 2)), model["y"])


def test_the_installed_library_moved_away_from_tensorflow_says_what_it_tried(installed, model, tmp_path):
    moved = tmp_path / "a" / "b" / "c"
    shutil.copytree(installed.site_packages / "bridge" / "_resources" / "fortran", moved)
    exe = _compile([f"-I{moved / 'include'}", f"-L{moved}", "-ltf_bridge_fortran", f"-Wl,-rpath,{moved}"],
                   tmp_path / "prog")
    done = _predict(exe, model)
    assert done.returncode != 0
    assert "cannot find TensorFlow's C API; tried:" in done.stdout, done.stdout
    assert f"{moved}/{fortran.INSTALLED_TF_RELATIVE}" in done.stdout and "TFBRIDGE_LIBTENSORFLOW" in done.stdout
    tf = str(library_paths()[1].parent)
    done = _predict(exe, model, TFBRIDGE_LIBTENSORFLOW=tf)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    np.testing.assert_array_equal(read_array(exe.parent / "y.bin", np.float32, (4, 2)), model["y"])


def test_a_package_built_without_gfortran_builds_the_module_into_the_cache_saying_why(model, tmp_path):
    require_gfortran()
    wheel = build_wheel(tmp_path / "wheel", FC="no-such-gfortran")
    venv = Venv(tmp_path / "venv", tensorflow_beside=True)
    venv.pip_install(wheel)
    assert (venv.site_packages / "bridge" / "_resources" / "fortran" / "NOT_BUILT").is_file()
    cache = tmp_path / "cache"
    flags, said = _flags(venv, cache)
    assert "no Fortran compiler 'no-such-gfortran' was on PATH when the package was built" in said, said
    assert "building the tf_bridge Fortran module into" in said
    lib_dir = Path(next(f[2:] for f in flags if f.startswith("-L")))
    assert cache in lib_dir.parents and (lib_dir / fortran.LIBRARY).is_file()
    exe = _compile(flags, tmp_path / "prog")
    done = _predict(exe, model)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    np.testing.assert_array_equal(read_array(exe.parent / "y.bin", np.float32, (4, 2)), model["y"])


def test_an_installed_module_whose_tensorflow_is_elsewhere_is_not_used(tmp_path):
    """TensorFlow reached only through a .pth line, not beside the package: the installed
    copy would not find it, so `tfbridge fortran --flags` builds one that does, saying why."""
    venv = Venv(tmp_path / "venv", tensorflow_beside=False)
    wheel = build_wheel(tmp_path / "wheel")
    venv.pip_install(wheel)
    installed_lib = venv.site_packages / "bridge" / "_resources" / "fortran" / fortran.LIBRARY
    assert installed_lib.is_file()
    cache = tmp_path / "cache"
    flags, said = _flags(venv, cache)
    assert f"the installed tf_bridge ({installed_lib}) opens TensorFlow from" in said, said
    assert "building the tf_bridge Fortran module into" in said
    assert cache in Path(next(f[2:] for f in flags if f.startswith("-L"))).parents
