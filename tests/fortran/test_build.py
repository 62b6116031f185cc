"""The tf_bridge Fortran module's build and array rules: `tfbridge fortran
--flags` builds it once and prints flags a program compiles with; the
generated sources are current with generate.py, and c_functions.txt spells
each C function as TensorFlow's headers declare it; every element type
(real32, real64, int8, int16, int32, int64, logical(c_bool), default logical)
and rank 0-5 goes through TensorFlow and back, TensorFlow seeing the
dimensions reversed by default and the same indices with transpose=.true.;
tf_view and tf_allocate point into TensorFlow's own buffer (no copy) for
every type and rank."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import fortran
from bridge.framework._lib import library_paths
from support.fortran import compile_program, generator, run_program
from support import REPO


SHAPE = (2, 3, 4, 5, 2)
RANKS = range(6)
#: suffix -> (Fortran type, numpy dtype, TF dtype, value of element k (1-based, column-major) in Fortran, in numpy)
TYPES = {
    "r32": ("real(c_float)", np.float32, bridge.float32, "real(k, c_float) * 0.5 - 3", lambda k: k * 0.5 - 3),
    "r64": ("real(c_double)", np.float64, bridge.float64, "real(k, c_double) / 3", lambda k: k / 3),
    "i8": ("integer(c_int8_t)", np.int8, bridge.int8, "int(mod(k * 37, 256) - 128, c_int8_t)",
           lambda k: (k * 37) % 256 - 128),
    "i16": ("integer(c_int16_t)", np.int16, bridge.int16, "int(k * 131 - 15000, c_int16_t)",
            lambda k: k * 131 - 15000),
    "i32": ("integer(c_int32_t)", np.int32, bridge.int32, "int(k * 37 - 100, c_int32_t)", lambda k: k * 37 - 100),
    "i64": ("integer(c_int64_t)", np.int64, bridge.int64, "int(k, c_int64_t) * 2_c_int64_t**33 + k",
            lambda k: k * 2**33 + k),
    "b8": ("logical(c_bool)", np.bool_, bridge.bool, "logical(mod(k, 3) == 0, c_bool)", lambda k: k % 3 == 0),
    "lg": ("logical", np.bool_, bridge.bool, "mod(k, 3) == 0", lambda k: k % 3 == 0),
}


def test_generated_sources_are_current():
    files = generator().outputs()
    assert {p.name for p in files} == {"tf_bridge_c.f90", "tf_bridge_from.f90", "tf_bridge_to.f90",
                                       "tf_bridge_view.f90", "tf_bridge_alloc.f90"}
    for path, text in files.items():
        assert path.read_text() == text, f"{path.name} is stale: run python kernels_cpp/fortran/generate.py"


def _header_prototypes() -> dict[str, str]:
    """Each TF_* function the C API headers of this TensorFlow declare -> its prototype, normalized."""
    include = library_paths()[1].parent / "include" / "tensorflow" / "c"
    found = {}
    for header in sorted(include.glob("*.h")):
        text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", header.read_text(), flags=re.S)
        for match in re.finditer(r"TF_CAPI_EXPORT\s+(?:extern\s+)?([^;{}#]*?\b(TF_\w+)\s*\([^;{}]*?\))\s*;", text):
            found.setdefault(match[2], _normalized(match[1]))
    return found


def _normalized(prototype: str) -> str:
    """A prototype without parameter names, `T a[]` as `T*`, and spaces only where C needs them."""
    head, params = prototype.split("(", 1)
    params = params.rsplit(")", 1)[0]
    kept = []
    for param in ([] if params.strip() in ("", "void") else params.split(",")):
        param = param.strip()
        array = param.endswith("[]")
        param = re.sub(r"(?<=[\w*\s])\b(?!const\b|char\b|int\b|void\b)[a-z_]\w*$", "",
                       param[:-2] if array else param).strip() + ("*" if array else "")
        kept.append(re.sub(r"\s*\*\s*", "*", re.sub(r"\s+", " ", param)))
    return re.sub(r"\s*\*\s*", "*", re.sub(r"\s+", " ", head.strip())) + "(" + ",".join(kept) + ")"


def test_every_c_function_is_spelled_as_tensorflows_headers_declare_it():
    """c_functions.txt is what the Fortran interfaces come from: a wrong parameter
    type there would be a wrong call, found only by a crash."""
    generate = generator()
    headers = _header_prototypes()
    functions = generate.c_functions()
    assert len(functions) > 50 and "TF_SessionRun" in headers
    for function in functions:
        prototype = function.prototype.rstrip(";").replace("TF_Deallocator deallocator",
                                                           "void (*deallocator)(void*, size_t, void*)")
        assert function.name in headers, f"{function.name} is not in TensorFlow's C API headers"
        if "TF_Deallocator" in function.prototype:   # a function pointer: compare the rest
            continue
        assert _normalized(prototype) == headers[function.name], (function.prototype, headers[function.name])


def test_tfbridge_fortran_flags_name_the_built_library_and_module():
    done = subprocess.run([sys.executable, "-m", "bridge.cli", "fortran", "--flags"], capture_output=True,
                          text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr
    flags = done.stdout.split()
    include = Path(next(f[2:] for f in flags if f.startswith("-I")))
    lib_dir = Path(next(f[2:] for f in flags if f.startswith("-L")))
    assert (include / fortran.MODULE).is_file() and (lib_dir / fortran.LIBRARY).is_file()
    assert "-ltf_bridge_fortran" in flags
    assert fortran.flags(quiet=True) == done.stdout.strip()


def test_tfbridge_fortran_names_its_cmake_config_and_pkg_config_file():
    """A checkout's (cached) build holds them too, beside the library the flags name."""
    def query(option: str) -> str:
        done = subprocess.run([sys.executable, "-m", "bridge.cli", "fortran", option], capture_output=True,
                              text=True, timeout=900, cwd=REPO)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()
    prefix = Path(query("--prefix"))
    assert f"-L{prefix}" in fortran.flags(quiet=True).split()
    assert query("--cmake-dir") == str(prefix / "lib" / "cmake" / "tf_bridge")
    assert query("--pkg-config-path") == str(prefix / "lib" / "pkgconfig")
    config = (prefix / fortran.CMAKE_CONFIG).read_text()
    assert "add_library(tf_bridge::tf_bridge SHARED IMPORTED)" in config
    assert (prefix / fortran.CMAKE_CONFIG).with_name("tf_bridge-config-version.cmake").is_file()
    pc = (prefix / fortran.PKG_CONFIG).read_text().splitlines()
    assert "Libs: -L${libdir} -ltf_bridge_fortran -Wl,-rpath,${libdir}" in pc and "Cflags: -I${includedir}" in pc


def test_tfbridge_fortran_without_a_compiler_says_how_to_get_one(tmp_path):
    env = {**os.environ, "FC": "no-such-gfortran", "TFBRIDGE_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "bridge.cli", "fortran", "--flags"], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)
    assert done.returncode == 1 and "-I" not in done.stdout   # (a fresh cache: cffi's "generating" line aside)
    assert "no Fortran compiler 'no-such-gfortran'" in done.stderr and "apt-get install -y gfortran" in done.stderr


def _case(suffix: str, rank: int, transpose: bool) -> str:
    ftype, _, _, value, _ = TYPES[suffix]
    dims = "" if rank == 0 else "(" + ",".join(str(n) for n in SHAPE[:rank]) + ")"
    n = int(np.prod(SHAPE[:rank]))
    fill = f"a = {value.replace('k', '1')}" if rank == 0 else \
        f"a = reshape([({value}, k = 1, {n})], shape(a))"
    same = "a .eqv. b" if suffix in ("b8", "lg") else "a == b"
    name = f"{suffix}_{rank}_{'t' if transpose else 'r'}"
    tr = ".true." if transpose else ".false."
    return f"""
  block
    {ftype}, target :: a{dims}, b{dims}
    integer(c_int8_t), pointer :: raw(:)
    {fill}
    call tf_tensor_from(x(1), a, st, transpose={tr})
    call check(st, "{name} from")
    call g%run_tensors(["in_{'b' if suffix in ('b8', 'lg') else suffix}:0"], x, &
         ["out_{'b' if suffix in ('b8', 'lg') else suffix}:0"], y, st)
    call check(st, "{name} run")
    call tf_to_array(y(1), b, st, transpose={tr})
    call check(st, "{name} to")
    if (.not. all([{same}])) print '(a)', "MISMATCH {name}"
    call c_f_pointer(y(1)%data(), raw, [{n * _size(suffix)}])
    open(newunit=u, file="{name}.bin", access="stream", form="unformatted", status="replace")
    write(u) raw
    close(u)
  end block"""


def _size(suffix: str) -> int:
    return {"r32": 4, "r64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "b8": 1, "lg": 1}[suffix]


def _pointer_case(suffix: str, rank: int) -> str:
    """tf_allocate, then tf_view of the same tensor: both point at TensorFlow's buffer, with
    the Fortran shape; what is written through one is read through the other."""
    ftype = TYPES[suffix][0]
    dims = "" if rank == 0 else "(" + ",".join(":" * rank) + ")"
    shape = "[integer ::]" if rank == 0 else "[" + ", ".join(str(n) for n in SHAPE[:rank]) + "]"
    value = "p = .true." if suffix == "b8" else "p = 3"
    check = "all([q .eqv. p])" if suffix == "b8" else "all([q == p])"
    return f"""
  block
    {ftype}, pointer :: p{dims}, q{dims}
    call tf_allocate(t, p, {shape}, st)
    call check(st, "allocate {suffix}_{rank}")
    {value}
    call tf_view(t, q, st)
    call check(st, "view {suffix}_{rank}")
    print '(a,l1,l1,l1)', "pointer_{suffix}_{rank} ", c_associated(c_loc(p), t%data()), &
         c_associated(c_loc(q), t%data()), {check} .and. all(shape(q) == shape(p))
  end block"""


def _program() -> str:
    cases = "".join(_case(s, r, t) for s in TYPES for r in RANKS for t in (False, True))
    pointers = "".join(_pointer_case(s, r) for s in TYPES if s != "lg" for r in RANKS)
    return f"""program roundtrip
  use tf_bridge
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int64
  implicit none
  type(tf_model) :: g
  type(tf_status) :: st
  type(tf_tensor) :: x(1), y(1), t
  real(c_double), pointer :: v(:,:), w(:,:)
  integer :: k, u
  character(len=1024) :: path
  call get_command_argument(1, path)
  call tf_load_graph_def(g, trim(path), st)
  call check(st, "load")
{cases}
{pointers}
  call tf_allocate(t, v, [3, 4], st)
  call check(st, "allocate")
  v = 1.5d0
  print '(a,l1)', "allocate_shares ", c_associated(c_loc(v), t%data())
  print '(a,i0,1x,i0)', "allocate_tf_shape ", t%shape()
  call tf_view(t, w, st)
  call check(st, "view")
  print '(a,l1,1x,i0,1x,i0)', "view_shares ", c_associated(c_loc(w), t%data()), shape(w)
  call t%delete()
  call tf_allocate(t, v, [2_int64, 5_int64], st)   ! a shape of integer(int64), as TensorFlow counts
  call check(st, "allocate int64")
  print '(a,i0,1x,i0)', "allocate_int64_shape ", t%shape()
  call t%delete()
  print '(a)', "done"
contains
  subroutine check(st, what)
    type(tf_status), intent(in) :: st
    character(*), intent(in) :: what
    if (.not. st%ok()) then
      print '(a)', "error in " // what // ": " // st%message
      error stop 1
    end if
  end subroutine
end program roundtrip
"""


@pytest.fixture(scope="module")
def roundtrip(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("roundtrip")
    g = bridge.Graph()
    with g.as_default():
        from bridge import ops
        for key, dtype in (("r32", bridge.float32), ("r64", bridge.float64), ("i8", bridge.int8),
                           ("i16", bridge.int16), ("i32", bridge.int32), ("i64", bridge.int64), ("b", bridge.bool)):
            ops.identity(bridge.placeholder(dtype, None, name=f"in_{key}"), name=f"out_{key}")
    (folder / "identity.pb").write_bytes(g.as_graph_def())
    exe = compile_program(_program(), folder, "roundtrip", optimize="-O0")   # 102 blocks: -O2 takes 7x the CPU
    return folder, run_program(exe, str(folder / "identity.pb"))


@pytest.mark.parametrize("suffix", sorted(TYPES))
def test_every_type_and_rank_round_trips_in_tensorflows_order(roundtrip, suffix):
    folder, printed = roundtrip
    assert "done" in printed and "MISMATCH" not in printed, printed
    _, np_dtype, _, _, value = TYPES[suffix]
    for rank in RANKS:
        fshape = SHAPE[:rank]
        n = int(np.prod(fshape))
        a = np.array([value(k) for k in range(1, n + 1)]).astype(np_dtype).reshape(fshape, order="F")
        reversed_tf = np.frombuffer((folder / f"{suffix}_{rank}_r.bin").read_bytes(), np_dtype)
        transposed_tf = np.frombuffer((folder / f"{suffix}_{rank}_t.bin").read_bytes(), np_dtype)
        # default: TF's tensor has the reversed shape, the Fortran bytes unchanged
        np.testing.assert_array_equal(reversed_tf, a.T.reshape(-1), err_msg=f"{suffix} rank {rank} reversed")
        # transpose=.true.: TF's tensor has the Fortran shape, element (i,j,..) at the same indices
        np.testing.assert_array_equal(transposed_tf, a.reshape(-1), err_msg=f"{suffix} rank {rank} transposed")


def test_allocate_and_view_share_tensorflows_buffer(roundtrip):
    _, printed = roundtrip
    lines = dict(line.split(" ", 1) for line in printed.splitlines() if " " in line)
    pointers = {k: v for k, v in lines.items() if k.startswith("pointer_")}
    assert pointers == {f"pointer_{s}_{r}": "TTT" for s in TYPES if s != "lg" for r in RANKS}
    assert lines["allocate_shares"] == "T"
    assert lines["allocate_tf_shape"].split() == ["4", "3"]
    assert lines["allocate_int64_shape"].split() == ["5", "2"]
    assert lines["view_shares"].split() == ["T", "3", "4"]
