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
import warnings
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

    # _meta: (dtype enum, shape), read once from TF when a session checks a feed
    __slots__ = ("_ptr", "_meta", "__weakref__")

    def __init__(self, value: Any, dtype: Any = None):
        if isinstance(value, Tensor):
            value = value.numpy()
        self._ptr = _from_numpy(value, None if dtype is None else dtypes.as_dtype(dtype))

    @classmethod
    def _for_feed(cls, value: Any, dtype: dtypes.DType, target: str, shape: Optional[tuple] = None) -> "Tensor":
        """A Tensor of ``value`` for ``target`` (say "placeholder 'x:0'"), which
        conversion errors name; ``shape``: the static shape it must fit (None
        for a dimension of any size, or None for any shape)."""
        self = cls.__new__(cls)
        self._ptr = _from_numpy(value.numpy() if isinstance(value, Tensor) else value, dtype, target, shape)
        return self

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


def _as_array(value: Any, dtype: Optional[dtypes.DType], target: str) -> np.ndarray:
    """``value`` as a numpy array for a tensor of ``dtype`` (None: inferred).

    Raises TypeError for values of the wrong kind and for conversions that
    would lose information (:func:`_check_lossless`), ValueError for values
    that are not arrays (ragged lists).  ``target`` names what is being
    converted, for the messages (a placeholder when feeding)."""
    if dtype is not None and dtype.name == "string":
        return _array_of(value, target, object)
    if dtype is not None:
        np_dtype = dtype.as_numpy_dtype
        if np_dtype is None:
            raise TypeError(f"cannot build {target} from Python values: {dtype.name} has no numpy type")
        arr = _array_of(value, target)
        if arr.dtype.kind in "OSUVMm" and arr.dtype != np_dtype:
            raise TypeError(f"cannot convert {_short(value)} (numpy {arr.dtype}) to {target}, "
                            f"which holds {dtype.name}")
        if arr.dtype != np_dtype:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy's ComplexWarning: _check_lossless refuses those casts
                cast = arr.astype(np_dtype)
            _check_lossless(arr, cast, dtype, target)
            arr = cast
        return arr
    arr = _array_of(value, target)
    if arr.dtype.kind in "SU":
        # numpy turns [b"x", 3] into strings and drops trailing NULs: keep the
        # elements as given (_strings_from_numpy refuses what is not str/bytes).
        arr = arr.astype(object) if isinstance(value, (np.ndarray, np.generic)) else _array_of(value, target, object)
    return arr


def _array_of(value: Any, target: str, dtype: Any = None) -> np.ndarray:
    try:
        return np.asarray(value, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        kind = TypeError if isinstance(exc, (TypeError, OverflowError)) else ValueError
        raise kind(f"cannot convert {_short(value)} to {target}: {exc}") from None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _integer_range(np_dtype: np.dtype) -> tuple[int, int]:
    if np_dtype.kind == "b":
        return 0, 1
    info = np.iinfo(np_dtype)
    return int(info.min), int(info.max)


def _check_lossless(arr: np.ndarray, cast: np.ndarray, dtype: dtypes.DType, target: str) -> None:
    """Refuse a cast of ``arr`` to ``dtype`` that changes values.

    Refused: complex to a real type (the imaginary part would be dropped);
    to an integer or bool type, values that are not integral, not finite or
    out of the type's range; to a float type, finite values that overflow to
    infinity.  Kept: lost precision (float64 to float32, large ints to float)."""
    src, dst = arr.dtype, cast.dtype
    if arr.size == 0:
        return
    bad = None
    if src.kind == "c" and dst.kind != "c":
        nonzero = arr.imag != 0
        bad = nonzero if nonzero.any() else np.ones(arr.shape, bool)
        reason = "complex values would lose their imaginary part (pass .real explicitly)"
    elif dst.kind in "iub" and src.kind in "iubf":
        low, high = _integer_range(dst)
        if src.kind == "f":
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(arr) | (arr != np.trunc(arr)) | (arr < low) | (arr >= float(high) + 1)
            reason = (f"the {dst.name} values must be integers in [{low}, {high}]")
        else:
            bad = (arr < low) | (arr > high) if src.kind != "b" else None
            reason = f"{dst.name} holds integers in [{low}, {high}]"
    elif dst.kind in "fc" and src.kind in "iubfc":
        with np.errstate(invalid="ignore"):
            if dst.kind == "c":  # each component overflows on its own
                parts = [(np.real(arr), np.real(cast)), (np.imag(arr), np.imag(cast))]
            else:
                parts = [(arr, cast)]
            bad = np.zeros(arr.shape, bool)
            for before, after in parts:
                bad |= np.isinf(after) & np.isfinite(before)
        reason = f"the values overflow {dst.name} (they would become inf)"
    elif dst.kind == "V" and src.kind in "iubf":  # ml_dtypes' bfloat16, float8, float4, int4, ...
        with np.errstate(all="ignore"):
            back = cast.astype(np.float64)
            wide = arr.astype(np.float64)
            if dtype.name.startswith(("int", "uint")):
                bad = back != wide
            else:
                # Some of these have no inf (they saturate, or make nan): refuse
                # what lies beyond the largest value by more than rounding does,
                # and values whose finiteness the cast changes.
                import ml_dtypes
                info = ml_dtypes.finfo(dst)
                top = float(info.max)
                limit = top + (top - float(np.nextafter(info.max, dst.type(0)))) / 2
                bad = (np.isfinite(wide) & (np.abs(wide) > limit)) | (np.isfinite(wide) != np.isfinite(back))
        reason = f"the values do not fit in {dtype.name}"
    if bad is None or not bad.any():
        return
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), arr.shape)) if arr.ndim else ()
    where = f" at index {list(index)}" if arr.ndim else ""
    raise TypeError(f"cannot convert {src.name} values to {target} ({dtype.name}) without losing information: "
                    f"{reason}; the first offending value is {arr[index].item()!r}{where}")


def _from_numpy(value: Any, dtype: Optional[dtypes.DType], target: str = "a tensor",
                shape: Optional[tuple] = None):
    arr = _as_array(value, dtype, target)
    if shape is not None and (len(shape) != arr.ndim or any(d is not None and d != n for d, n in zip(shape, arr.shape))):
        expected = "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"cannot feed a value of shape {arr.shape} to {target}, which has shape {expected}")
    tf_dtype = dtypes.string if arr.dtype == object else dtypes.as_dtype(arr.dtype)
    if tf_dtype.name == "string":
        return _strings_from_numpy(arr, target)
    dims = ffi.new(C.int64_array, arr.shape) if arr.ndim else ffi.NULL
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


def _string_bytes(item: Any, index: int, target: str) -> bytes:
    if isinstance(item, str):
        try:
            return item.encode()
        except UnicodeEncodeError as exc:  # lone surrogates
            raise TypeError(f"string element {index} of {target} is not valid Unicode: {exc}") from None
    if isinstance(item, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(item)
    raise TypeError(f"string element {index} of {target} is {type(item).__name__} ({_short(item, 40)}), "
                    "not bytes or str")


def _strings_from_numpy(arr: np.ndarray, target: str):
    # Every element is converted before the tensor exists: a refused element
    # must not leave TF_TString slots uninitialised for TF_DeleteTensor to free.
    items = [_string_bytes(item, i, target) for i, item in enumerate(arr.reshape(-1))]
    dims = ffi.new(C.int64_array, arr.shape) if arr.ndim else ffi.NULL
    ptr = lib.TF_AllocateTensor(dtypes.string.enum, dims, arr.ndim, len(items) * ffi.sizeof("TF_TString"))
    elems = ffi.cast("TF_TString*", lib.TF_TensorData(ptr))
    for i in range(len(items)):
        lib.TF_StringInit(elems + i)
    tensor = ffi.gc(ptr, lib.TF_DeleteTensor)
    for i, item in enumerate(items):
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
