"""Tensor: a TF_Tensor value, converted to and from numpy.

Numeric tensors cross without copying where the layouts allow:
- numpy -> Tensor: a C-contiguous array whose data is aligned as TensorFlow
  requires (64 bytes) is handed over as is; TensorFlow calls back when it is
  done, and until then the array is kept alive here.  Other arrays are copied
  once.  :func:`aligned_empty` makes arrays that always qualify.
- Tensor -> numpy: a read-only view of TensorFlow's buffer that keeps the
  Tensor alive for as long as the view lives (``.copy()`` for a writable one).
String tensors are converted element by element (TF_TString).
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Optional

import numpy as np

from . import dtypes
from ._lib import CTypes as C
from ._lib import ffi, lib

ALIGNMENT = 64  # EIGEN_MAX_ALIGN_BYTES of the TF wheels: TF copies less-aligned buffers

_keepalive: dict[int, object] = {}
_keepalive_lock = threading.Lock()
_next_key = itertools.count(1)


@ffi.callback("void(void*, size_t, void*)")
def _release_numpy(data, length, arg):  # called by TF, possibly on one of its threads
    with _keepalive_lock:
        _keepalive.pop(int(ffi.cast("intptr_t", arg)), None)


def aligned_empty(shape, dtype=np.float64) -> np.ndarray:
    """An uninitialised array whose buffer TensorFlow can use without a copy."""
    dtype = np.dtype(dtype)
    shape = tuple(shape) if np.iterable(shape) else (int(shape),)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


class Tensor:
    """A TensorFlow tensor value (TF_Tensor).

    ``Tensor(value, dtype=None)`` converts numpy arrays, Python scalars and
    nested lists, and bytes/str (string tensors).
    """

    __slots__ = ("_ptr", "__weakref__")

    def __init__(self, value: Any, dtype: Any = None):
        if isinstance(value, Tensor):
            value = value.numpy()
        self._ptr = _from_numpy(value, None if dtype is None else dtypes.as_dtype(dtype))

    @classmethod
    def _adopt(cls, ptr) -> "Tensor":
        """Take ownership of a TF_Tensor* returned by the C API."""
        self = cls.__new__(cls)
        self._ptr = ffi.gc(ptr, lib.TF_DeleteTensor)
        return self

    @property
    def dtype(self) -> dtypes.DType:
        return dtypes.as_dtype(lib.TF_TensorType(self._ptr))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(lib.TF_Dim(self._ptr, i) for i in range(lib.TF_NumDims(self._ptr)))

    @property
    def ndim(self) -> int:
        return lib.TF_NumDims(self._ptr)

    @property
    def size(self) -> int:
        return lib.TF_TensorElementCount(self._ptr)

    @property
    def nbytes(self) -> int:
        return lib.TF_TensorByteSize(self._ptr)

    def numpy(self) -> np.ndarray:
        """The value as numpy: a read-only zero-copy view for numeric types,
        an object array of bytes for strings."""
        return to_numpy(self._ptr, self)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr.astype(dtype) if dtype is not None else arr

    def __repr__(self) -> str:
        try:
            body = np.array2string(self.numpy(), threshold=20)
        except TypeError:
            body = "<no numpy value>"
        return f"bridge.Tensor({body}, dtype={self.dtype.name}, shape={self.shape})"


def to_numpy(ptr, owner: object) -> np.ndarray:
    """numpy value of the TF_Tensor* ``ptr``; a numeric result is a read-only
    view of TensorFlow's buffer that keeps ``owner`` alive."""
    dtype = dtypes.from_enum(lib.TF_TensorType(ptr))
    shape = tuple([lib.TF_Dim(ptr, i) for i in range(lib.TF_NumDims(ptr))])
    if dtype.name == "string":
        return _strings_to_numpy(ptr, shape)
    np_dtype = dtype.as_numpy_dtype
    if np_dtype is None or dtype.size == 0:
        raise TypeError(f"a {dtype.name} tensor has no numpy value")
    nbytes = lib.TF_TensorByteSize(ptr)
    if nbytes == 0:
        return np.empty(shape, np_dtype)
    # The buffer object holds `data`, whose destructor closure holds `owner`:
    # the array keeps the TF_Tensor alive without a copy.
    data = ffi.gc(ffi.cast(C.char_ptr, lib.TF_TensorData(ptr)), lambda _, keep=owner: None)
    arr = np.frombuffer(ffi.buffer(data, nbytes), np_dtype).reshape(shape)
    arr.flags.writeable = False
    return arr


def _as_array(value: Any, dtype: Optional[dtypes.DType]) -> np.ndarray:
    if dtype is not None and dtype.name == "string":
        return np.asarray(value, dtype=object)
    if dtype is not None:
        np_dtype = dtype.as_numpy_dtype
        if np_dtype is None:
            raise TypeError(f"cannot build a {dtype.name} tensor from Python values")
        arr = np.asarray(value)
        if arr.dtype.kind in "OSU":
            raise TypeError(f"cannot convert {value!r} to a {dtype.name} tensor")
        if arr.dtype != np_dtype:
            with np.errstate(all="ignore"):
                cast = arr.astype(np_dtype)
            # Refuse lossy conversions (3.5 or 2**40 into int32), as TensorFlow does.
            if np_dtype.kind in "iub" and arr.dtype.kind in "fciub" and not np.array_equal(cast, arr):
                raise TypeError(f"cannot convert {value!r} to {dtype.name} without losing information")
            arr = cast
        return arr
    arr = np.asarray(value)
    if arr.dtype.kind in "SU":
        arr = arr.astype(object)
    return arr


def _from_numpy(value: Any, dtype: Optional[dtypes.DType]):
    arr = _as_array(value, dtype)
    tf_dtype = dtypes.string if arr.dtype == object else dtypes.as_dtype(arr.dtype)
    dims = ffi.new(C.int64_array, arr.shape) if arr.ndim else ffi.NULL
    if tf_dtype.name == "string":
        return _strings_from_numpy(arr, dims)
    nbytes = arr.nbytes
    if nbytes == 0:
        return ffi.gc(lib.TF_AllocateTensor(tf_dtype.enum, dims, arr.ndim, 0), lib.TF_DeleteTensor)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    buf = ffi.from_buffer(C.char_array, arr, require_writable=False)
    if int(ffi.cast(C.uintptr, buf)) % ALIGNMENT:
        # TensorFlow would copy a less-aligned buffer anyway; copy it here
        # instead of registering a deallocator for it.
        ptr = lib.TF_AllocateTensor(tf_dtype.enum, dims, arr.ndim, nbytes)
        ffi.memmove(lib.TF_TensorData(ptr), buf, nbytes)
        return ffi.gc(ptr, lib.TF_DeleteTensor)
    key = next(_next_key)
    with _keepalive_lock:
        _keepalive[key] = buf  # holds the array until TensorFlow releases it
    ptr = lib.TF_NewTensor(tf_dtype.enum, dims, arr.ndim, buf, nbytes, _release_numpy, ffi.cast(C.void_ptr, key))
    return ffi.gc(ptr, lib.TF_DeleteTensor)


def _strings_from_numpy(arr: np.ndarray, dims):
    flat = arr.reshape(-1)
    ptr = lib.TF_AllocateTensor(dtypes.string.enum, dims, arr.ndim, flat.size * ffi.sizeof("TF_TString"))
    tensor = ffi.gc(ptr, lib.TF_DeleteTensor)
    elems = ffi.cast("TF_TString*", lib.TF_TensorData(ptr))
    for i, item in enumerate(flat):
        if isinstance(item, str):
            item = item.encode()
        elif not isinstance(item, (bytes, bytearray, memoryview)):
            raise TypeError(f"string tensor element {i} is {type(item).__name__}, not bytes or str")
        item = bytes(item)
        lib.TF_StringInit(elems + i)
        lib.TF_StringCopy(elems + i, item, len(item))
    return tensor


def _strings_to_numpy(ptr, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    elems = ffi.cast("TF_TString*", lib.TF_TensorData(ptr))
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = ffi.unpack(lib.TF_StringGetDataPointer(elems + i), lib.TF_StringGetSize(elems + i))
    return out.reshape(shape)


def as_tensor(value: Any, dtype: Any = None) -> Tensor:
    """``value`` if it is already a Tensor of that dtype, else a new Tensor."""
    if isinstance(value, Tensor) and (dtype is None or value.dtype == dtype):
        return value
    return Tensor(value, dtype)
