"""Float64 op attributes, exact: TensorFlow's float attribute and an int attribute with its bits.

TensorFlow's ``float`` attributes hold 32 bits, so a custom op's ``@attr
double r`` travels as two attributes:

* ``r: float``: the value rounded to 32 bits, as before (graphs saved by the
  bridge's versions before this hold only it, and TF's tools show it);
* ``r_f64bits: int``: the double's IEEE 754 bits as a signed int64, exact
  for every value, ``-0.0``, infinities and NaN payloads included.

The kernel takes the bits where they round to ``r`` (or both are NaN:
:func:`decode`), and ``r`` alone otherwise: a node whose bits do not match its float was written
by something that set only the float (a graph saved before the bits
existed, a GraphDef edited by hand, TF's own ``load_op_library`` wrapper), and
gets what that writer asked for.  The bits attribute's default is the spec's
default, so stripped default attributes still give it exactly; without a
default it is ``NO_DEFAULT_BITS``, the quiet NaN, which no float matches but
a NaN, and for a NaN it is what widening the float gives.

The rounding here and in the kernel (``DoubleAttr`` in
templates/op_registration.cc.j2) is done on the bits, with integers only:
TensorFlow's threads flush subnormals to zero, which a cast would follow.
"""
from __future__ import annotations

import math
import struct
from typing import Iterable, Optional

__all__ = ["BITS_SUFFIX", "NO_DEFAULT_BITS", "bits_name", "encode", "decode", "float32_bits", "to_bits",
           "from_bits", "pairs", "default_bits"]

#: The bits attribute of a double attribute ``r`` is ``r`` + BITS_SUFFIX.
BITS_SUFFIX = "_f64bits"
#: The bits attribute's default where the double has none: the quiet NaN (as a signed int64).
NO_DEFAULT_BITS = 0x7FF8000000000000

_F32_NAN = 0x7FC00000
_F32_INF = 0x7F800000


def bits_name(name: str) -> str:
    """The int attribute carrying the bits of double attribute ``name``."""
    return name + BITS_SUFFIX


def to_bits(value: float) -> int:
    """A float64's IEEE 754 bits as a signed int64 (TensorFlow's int attributes are signed)."""
    return struct.unpack("<q", struct.pack("<d", value))[0]


def from_bits(bits: int) -> float:
    """The float64 whose bits (signed or unsigned 64-bit) are ``bits``."""
    return struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]


def float32_bits(bits: int) -> int:
    """The float32 bits of the float64 with bits ``bits``: rounded to nearest,
    ties to even, subnormals kept, overflow to infinity; a NaN becomes the
    quiet NaN of its sign (what TensorFlow's float attribute then holds)."""
    d = bits & 0xFFFFFFFFFFFFFFFF
    sign = (d >> 32) & 0x80000000
    e = (d >> 52) & 0x7FF
    m = d & 0xFFFFFFFFFFFFF
    if e == 0x7FF:
        return sign | (_F32_NAN if m else _F32_INF)
    if e == 0:
        return sign  # zero, or a float64 subnormal: far below half float32's smallest subnormal
    fe = e - 1023 + 127
    mant = m | (1 << 52)
    shift = 29 if fe > 0 else 30 - fe
    if shift > 54:
        return sign
    kept, rest, half = mant >> shift, mant & ((1 << shift) - 1), 1 << (shift - 1)
    rounded = kept + (1 if rest > half or (rest == half and kept & 1) else 0)
    out = ((fe - 1) << 23 if fe > 0 else 0) + rounded
    return sign | (_F32_INF if out >= _F32_INF else out)


def _float32_value(bits32: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits32))[0]


def encode(value: float) -> tuple[float, int]:
    """The two attributes' values for the double ``value``: (the float
    attribute's, exactly a float32, and the bits attribute's)."""
    bits = to_bits(float(value))
    narrow = float32_bits(bits)
    if narrow & 0x7FFFFFFF == _F32_NAN:  # struct keeps NaN's sign; the C API's float conversion keeps it too
        return math.copysign(math.nan, -1.0 if narrow >> 31 else 1.0), bits
    return _float32_value(narrow), bits


def decode(f: float, bits: int) -> float:
    """What the kernel passes on for a float attribute ``f`` and bits attribute
    ``bits``: the bits where they round to ``f``, or both are NaN (a text
    GraphDef writes every NaN float as ``nan``); else ``f``."""
    value = from_bits(bits)
    if float32_bits(bits) == struct.unpack("<I", struct.pack("<f", f))[0] or (math.isnan(f) and math.isnan(value)):
        return value
    return float(f)


def pairs(attrs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The double attributes among (name, TF attr type) pairs: float name -> its
    bits attribute's name (an int attribute named ``name`` + BITS_SUFFIX)."""
    types = dict(attrs)
    return {name: bits_name(name) for name, t in types.items()
            if t == "float" and types.get(bits_name(name)) == "int"}


def default_bits(default: Optional[float]) -> int:
    """The bits attribute's default for a double attribute's default (None: none)."""
    return NO_DEFAULT_BITS if default is None else to_bits(float(default))
