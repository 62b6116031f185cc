"""Tensor <-> numpy round trips for every dtype numpy can hold."""
import gc

import numpy as np
import pytest

import bridge
from bridge import dtypes
from bridge.framework.tensor import ALIGNMENT, Tensor, _keepalive, aligned_empty

NUMPY_DTYPES = [d for d in dtypes.all_dtypes()
                if d.as_numpy_dtype is not None and d.name not in ("string",)]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: d.name)
def test_round_trip_every_numpy_dtype(dtype):
    np_dtype = dtype.as_numpy_dtype
    if dtype.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn"):
        values = np.array([[0, 1], [1, 0]]).astype(np_dtype)
    else:
        values = (np.arange(12).reshape(3, 4) % 3).astype(np_dtype)
    t = Tensor(values)
    assert t.dtype == dtype
    assert t.shape == values.shape
    out = t.numpy()
    assert out.dtype == np_dtype
    if dtype.is_complex:
        values = values + 1j * values[::-1]  # a nonzero imaginary part, so it is compared too
        out = Tensor(values).numpy()
        np.testing.assert_array_equal(out, values)
    else:  # through float64: ml_dtypes' types (bfloat16, int4, ...) compare that way
        np.testing.assert_array_equal(out.astype(np.float64), values.astype(np.float64))


def test_scalars_and_python_values():
    assert Tensor(3).dtype == dtypes.int64 and Tensor(3).shape == ()
    assert Tensor(2.5).numpy() == 2.5
    assert Tensor(True).dtype == dtypes.bool
    assert Tensor(1 + 2j).dtype == dtypes.complex128
    assert Tensor(3, dtype="float32").numpy().dtype == np.float32


def test_empty_tensors():
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        t = Tensor(np.zeros(shape, np.float32))
        assert t.shape == shape and t.size == 0
        assert t.numpy().shape == shape


def test_string_tensors():
    values = np.array([[b"a", b"bc"], ["déf", b"x" * 100]], dtype=object)
    t = Tensor(values)
    assert t.dtype == dtypes.string
    out = t.numpy()
    assert out.shape == (2, 2)
    assert out[0, 1] == b"bc" and out[1, 0] == "déf".encode() and out[1, 1] == b"x" * 100
    assert Tensor(b"scalar").numpy()[()] == b"scalar"


def test_aligned_numpy_is_shared_not_copied():
    a = aligned_empty((1000,), np.float64)
    assert a.ctypes.data % ALIGNMENT == 0
    a[:] = 7.0
    t = Tensor(a)
    view = t.numpy()
    assert view.ctypes.data == a.ctypes.data
    assert not view.flags.writeable


def test_lifetimes_neither_side_frees_memory_in_use():
    a = aligned_empty((256,), np.float32)
    a[:] = 1.0
    t = Tensor(a)
    key_count = len(_keepalive)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.ones(256, np.float32))  # TF still owns a reference
    view = t.numpy()
    del t
    gc.collect()
    np.testing.assert_array_equal(view, np.ones(256, np.float32))  # the view keeps the tensor alive
    del view
    gc.collect()
    assert len(_keepalive) == key_count - 1  # TF released the numpy buffer


def test_lossy_conversion_refused():
    with pytest.raises(TypeError, match="losing information"):
        Tensor([1.5, 2.0], dtype=dtypes.int32)
    with pytest.raises(TypeError):
        Tensor(["a"], dtype=dtypes.float32)


def test_dtype_conversions():
    assert dtypes.as_dtype(np.float32) == dtypes.float32
    assert dtypes.as_dtype("DT_INT64") == dtypes.int64
    assert dtypes.as_dtype(9) == dtypes.int64
    assert dtypes.float64 == "double"
    with pytest.raises(ValueError):
        dtypes.as_dtype(999)
    assert bridge.dtypes.resource.as_numpy_dtype is None


def test_integer_overflow_refused():
    with pytest.raises(TypeError, match="losing information"):
        Tensor([2 ** 40], dtype=dtypes.int32)
    assert Tensor([2 ** 40], dtype=dtypes.int64).numpy()[0] == 2 ** 40


def test_reference_dtypes_map_to_their_base():
    ref = dtypes.as_dtype(101)
    assert ref.name == "float32_ref" and dtypes.base_dtype(ref) == dtypes.float32
    assert ref.as_numpy_dtype == np.float32
