"""Writes tf_bridge_{from,to,view,alloc}.f90: the typed procedures behind tf_bridge's generic
tf_tensor_from, tf_to_array, tf_view and tf_allocate, one per element type and
rank 0-4 (Fortran 2008 has no generic over rank, so each is spelled out; every
one of them calls the type-free code of tf_bridge_core).

Maintainers run ``python kernels_cpp/fortran/make_arrays.py`` after changing
it; tests/fortran/test_build.py checks that the file is current.  Users never
run it: the generated file is part of the sources.
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RANKS = range(5)
#: suffix, Fortran type, TF_DataType constant, bytes per element
TYPES = [("r32", "real(c_float)", "TF_FLOAT", 4), ("r64", "real(c_double)", "TF_DOUBLE", 8),
         ("i32", "integer(c_int32_t)", "TF_INT32", 4), ("i64", "integer(c_int64_t)", "TF_INT64", 8),
         ("b8", "logical(c_bool)", "TF_BOOL", 1)]
#: default logical: 4 bytes in gfortran, converted to and from TF's 1-byte bool (always a copy)
LOGICAL = ("lg", "logical", "TF_BOOL", 1)


def dims(rank: int) -> str:
    return "" if rank == 0 else "(" + ",".join(":" * rank) + ")"


def from_proc(suffix: str, ftype: str, dtype: str, size: int, rank: int) -> str:
    name = f"from_{suffix}_{rank}"
    head = (f"  subroutine {name}(t, x, st, transpose, copy)\n"
            f"    type(tf_tensor), intent(inout) :: t\n"
            f"    {ftype}, intent(in), target :: x{dims(rank)}\n"
            f"    type(tf_status), intent(out) :: st\n"
            f"    logical, intent(in), optional :: transpose, copy\n")
    call = f"call make_tensor(t, {dtype}, {{ptr}}, shape(x, int64), {size}_c_size_t, flag(transpose), {{copy}}, st)"
    if suffix == "lg":
        tmp = f"    logical(c_bool), allocatable, target :: tmp{dims(rank)}\n"
        if rank == 0:
            tmp = "    logical(c_bool), target :: tmp\n"
        body = ("    tmp = x\n"
                f"    {call.format(ptr='c_loc(tmp)', copy='.true.')}\n")
        if rank > 0:
            body = (f"    if (size(x) == 0) then\n      {call.format(ptr='c_null_ptr', copy='.true.')}\n"
                    f"      return\n    end if\n" + body)
        return head + tmp + body + f"  end subroutine {name}\n"
    if rank == 0:
        return head + f"    {call.format(ptr='c_loc(x)', copy='flag(copy)')}\n  end subroutine {name}\n"
    return (head + f"    {ftype}, allocatable, target :: tmp{dims(rank)}\n"
            f"    if (size(x) == 0) then\n      {call.format(ptr='c_null_ptr', copy='.true.')}\n"
            f"    else if (is_contiguous(x)) then\n      {call.format(ptr='c_loc(x)', copy='flag(copy)')}\n"
            f"    else\n      tmp = x   ! a strided section: TensorFlow needs one block\n"
            f"      {call.format(ptr='c_loc(tmp)', copy='.true.')}\n    end if\n  end subroutine {name}\n")


def to_proc(suffix: str, ftype: str, dtype: str, size: int, rank: int) -> str:
    name = f"to_{suffix}_{rank}"
    contiguous = ", contiguous" if rank else ""
    head = (f"  subroutine {name}(t, x, st, transpose)\n"
            f"    type(tf_tensor), intent(in) :: t\n"
            f"    {ftype}, intent(inout), target{contiguous} :: x{dims(rank)}\n"
            f"    type(tf_status), intent(out) :: st\n"
            f"    logical, intent(in), optional :: transpose\n")
    call = f"call read_tensor(t, {dtype}, {{ptr}}, shape(x, int64), {size}_c_size_t, flag(transpose), st)"
    if suffix == "lg":
        decl = (f"    logical(c_bool), allocatable, target :: tmp{dims(rank)}\n" if rank
                else "    logical(c_bool), target :: tmp\n")
        alloc = "    tmp = logical(x, c_bool)   ! its shape\n" if rank else ""
        ptr = "c_loc(tmp)"
        body = alloc
        if rank:
            body += (f"    if (size(x) == 0) then\n      {call.format(ptr='c_null_ptr')}\n"
                     f"      return\n    end if\n")
        body += f"    {call.format(ptr=ptr)}\n    if (st%ok()) x = logical(tmp)\n"
        return head + decl + body + f"  end subroutine {name}\n"
    if rank == 0:
        return head + f"    {call.format(ptr='c_loc(x)')}\n  end subroutine {name}\n"
    return (head + f"    if (size(x) == 0) then\n      {call.format(ptr='c_null_ptr')}\n"
            f"    else\n      {call.format(ptr='c_loc(x)')}\n    end if\n  end subroutine {name}\n")


def view_proc(suffix: str, ftype: str, dtype: str, size: int, rank: int) -> str:
    name = f"view_{suffix}_{rank}"
    shape = ", fs" if rank else ""
    return (f"  subroutine {name}(t, p, st)\n"
            f"    type(tf_tensor), intent(in) :: t\n"
            f"    {ftype}, pointer, intent(out) :: p{dims(rank)}\n"
            f"    type(tf_status), intent(out) :: st\n"
            f"    type(c_ptr) :: ptr\n    integer(int64) :: fs({rank})\n"
            f"    nullify(p)\n"
            f"    call tensor_view(t, {dtype}, {rank}, ptr, fs, st)\n"
            f"    if (st%ok() .and. c_associated(ptr)) call c_f_pointer(ptr, p{shape})\n"
            f"  end subroutine {name}\n")


def alloc_proc(suffix: str, ftype: str, dtype: str, size: int, rank: int) -> str:
    """Two procedures: the shape as integer(int64) (what TensorFlow counts in), and as a
    default integer, which calls the first."""
    name = f"alloc_{suffix}_{rank}"
    shape = ", fshape" if rank else ""
    return (f"  subroutine {name}(t, p, fshape, st)\n"
            f"    type(tf_tensor), intent(inout) :: t\n"
            f"    {ftype}, pointer, intent(out) :: p{dims(rank)}\n"
            f"    integer(int64), intent(in) :: fshape(:)\n"
            f"    type(tf_status), intent(out) :: st\n"
            f"    type(c_ptr) :: ptr\n"
            f"    nullify(p)\n"
            f"    call alloc_tensor(t, {dtype}, {rank}, fshape, {size}_c_size_t, ptr, st)\n"
            f"    if (st%ok() .and. c_associated(ptr)) call c_f_pointer(ptr, p{shape})\n"
            f"  end subroutine {name}\n\n"
            f"  subroutine {name}_i4(t, p, fshape, st)\n"
            f"    type(tf_tensor), intent(inout) :: t\n"
            f"    {ftype}, pointer, intent(out) :: p{dims(rank)}\n"
            f"    integer, intent(in) :: fshape(:)\n"
            f"    type(tf_status), intent(out) :: st\n"
            f"    call {name}(t, p, int(fshape, int64), st)\n"
            f"  end subroutine {name}_i4\n")


FAMILIES = [("from", "tf_tensor_from", from_proc, TYPES + [LOGICAL]),
            ("to", "tf_to_array", to_proc, TYPES + [LOGICAL]),
            ("view", "tf_view", view_proc, TYPES), ("alloc", "tf_allocate", alloc_proc, TYPES)]


def generate(prefix: str, generic: str, proc, types) -> str:
    """The module tf_bridge_<prefix>: the generic and its typed procedures."""
    names = [f"{prefix}_{t[0]}_{r}{v}" for t in types for r in RANKS
             for v in (("", "_i4") if prefix == "alloc" else ("",))]
    out = ["! Generated by make_arrays.py: do not edit.  The typed procedures behind",
           f"! tf_bridge's generic {generic}, one per element type and rank 0-4.",
           f"module tf_bridge_{prefix}", "  use, intrinsic :: iso_c_binding",
           "  use, intrinsic :: iso_fortran_env, only: int64", "  use tf_bridge_core", "  implicit none",
           "  private", f"  public :: {generic}", "", f"  interface {generic}"]
    per_line = 10 if prefix == "alloc" else 5   # a type's procedures on one line
    for i in range(0, len(names), per_line):
        out.append("    module procedure " + ", ".join(names[i:i + per_line]))
    out += ["  end interface", "", "contains", ""]
    if prefix in ("from", "to"):
        out.append("  logical function flag(value)\n    logical, intent(in), optional :: value\n"
                   "    flag = .false.\n    if (present(value)) flag = value\n  end function\n")
    out += [proc(*t, r) for t in types for r in RANKS]
    out.append(f"end module tf_bridge_{prefix}")
    return "\n".join(out) + "\n"


def outputs() -> dict[Path, str]:
    """Each generated file and its text."""
    return {HERE / f"tf_bridge_{f[0]}.f90": generate(*f) for f in FAMILIES}


if __name__ == "__main__":
    for path, text in outputs().items():
        path.write_text(text)
    sys.exit(0)
