"""Fuzz what users feed the binding: Session.run feeds and bridge.Tensor.

A graph holds, for every dtype bridge has a numpy type for, a placeholder of
any shape feeding ``bridge.ops.identity``.  Values: numpy arrays of every
dtype (and of numpy types TensorFlow lacks: longdouble, datetime, structured,
byte-swapped), shapes of rank 0-4 and some larger, empty ones with huge other
dimensions, layouts (Fortran order, transposes, steps, negative and zero
strides, unaligned and 64-byte aligned buffers, read-only), Python scalars,
nested lists and tuples, ragged and over-deep lists, object arrays mixing
str/bytes/None/ints/floats, huge and non-finite values, strings for numeric
placeholders and numbers for string ones.

The contract checked (docs/guides/predefined-graphs.md; bridge/framework/tensor.py):

* a value is accepted, and the fetched value equals ``np.asarray(value)``
  cast to the placeholder's type exactly (shape, dtype, every bit but NaN
  payloads; a 0-d one fetched by Session.run is a numpy scalar, bytes for a
  string, as TF1 gives), or it raises TypeError (wrong type, lossy conversion) or
  ValueError (ragged lists, ...), or, from Session.run,
  bridge.errors.InvalidArgumentError;
* refused: complex into a real type; non-integral, non-finite or
  out-of-range values into an integer or bool type; finite values that would
  overflow a float type (to inf, or past the largest value of a type without
  inf); strings into numbers; anything but str/bytes into a string
  placeholder.  Kept: float64 -> float32 (precision), int -> float,
  bool -> any number;
* a refused feed's TypeError names the placeholder, both dtypes and the first
  offending value;
* after any exception the session still runs;
* the process never dies (tests/customop/test_fuzz.py runs this script as a child).

Properties: ``session`` (Session.run), ``tensor`` (bridge.Tensor(value,
dtype)), ``inferred`` (bridge.Tensor(value), dtype from the value),
``static_shape`` (a placeholder with a static shape refuses an incompatible
value, as stock TensorFlow's Session.run does).

    python tests/fuzz/fuzz_feeds.py --examples 2000 --derandomize
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

PROPERTIES = ["session", "tensor", "inferred", "static_shape"]
args = _common.parse_args(__doc__.split("\n\n")[0], PROPERTIES)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # ml_dtypes feeds make grappler log errors

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import note  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import bridge  # noqa: E402
from bridge import dtypes, ops  # noqa: E402
from bridge.framework.errors import InvalidArgumentError  # noqa: E402

trace = _common.Tracer(args.trace)
STATS: Counter = Counter()

# ---------------------------------------------------------------- the graph

TARGETS = [d for d in dtypes.all_dtypes() if d.as_numpy_dtype is not None]
GRAPH = bridge.Graph()
with GRAPH.as_default():
    PLACEHOLDERS = {d.name: bridge.placeholder(d, None, name=f"p_{d.name}") for d in TARGETS}
    IDENTITIES = {name: ops.identity(p) for name, p in PLACEHOLDERS.items()}
    STATIC = {f"s{i}_{d}": (bridge.placeholder(d, shape, name=f"s{i}_{d}"), shape, d)
              for i, (d, shape) in enumerate([("float64", [2, None]), ("float64", []), ("float64", [None, 3]),
                                               ("float64", [0]), ("string", [None]), ("string", [2, 2]),
                                               ("int32", [1, 1, 1])])}
    STATIC_IDENTITIES = {k: ops.identity(p) for k, (p, _, _) in STATIC.items()}
SESSION = bridge.Session(GRAPH)

# ---------------------------------------------------------------- dtype facts

def _ml(names):
    return [np.dtype(getattr(ml_dtypes, n)) for n in names if hasattr(ml_dtypes, n)]


ML_FLOATS = _ml(["bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
                 "float8_e5m2fnuz", "float4_e2m1fn"])
ML_INTS = _ml(["int4", "uint4", "int2", "uint2"])


def category(dt: np.dtype) -> str:
    """b(ool), i(nteger), f(loat), c(omplex), s(tring: S/U), o(bject), x (other: datetime, void...)."""
    if dt in ML_FLOATS:
        return "f"
    if dt in ML_INTS:
        return "i"
    return {"b": "b", "i": "i", "u": "i", "f": "f", "c": "c", "S": "s", "U": "s", "O": "o"}.get(dt.kind, "x")


def int_range(dt: np.dtype) -> tuple[int, int]:
    if dt.kind == "b":
        return 0, 1
    info = ml_dtypes.iinfo(dt) if dt in ML_INTS else np.iinfo(dt)
    return int(info.min), int(info.max)


def wide(a: np.ndarray) -> np.ndarray:
    """Exact values as longdouble (floats, ints) or clongdouble."""
    if category(a.dtype) == "c":
        return a.astype(np.clongdouble)
    if a.dtype in ML_FLOATS or a.dtype in ML_INTS:
        return a.astype(np.float64).astype(np.longdouble)
    return a.astype(np.longdouble)


def has_inf(dt: np.dtype) -> bool:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(np.isinf(np.array(np.inf).astype(dt).astype(np.float64)))


def overflow_threshold(dt: np.dtype) -> np.longdouble:
    """Half-way between the largest finite value and the next one: what rounds past it."""
    info = ml_dtypes.finfo(dt) if dt in ML_FLOATS else np.finfo(dt)
    top = np.array(info.max, dt)
    below = (top.view(f"u{dt.itemsize}") - 1).view(dt)
    big, prev = np.longdouble(float(top.astype(np.float64))), np.longdouble(float(below.astype(np.float64)))
    return big + (big - prev) / 2


def cast(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return a.astype(dt)
        except (TypeError, ValueError):
            via = np.int64 if category(a.dtype) in "bi" else np.float64
            return a.astype(via).astype(dt)


# ---------------------------------------------------------------- the oracle

class Expect:
    """What a conversion must do: "ok" (give ``value``), "refuse" (raise), or
    "either" (raise, or give ``value`` when it is known)."""

    def __init__(self, outcome, value=None, reason="", source=None, first_bad=None, check_values=True,
                 shape=None, dtype=None):
        self.outcome, self.value, self.reason = outcome, value, reason
        self.source, self.first_bad, self.check_values = source, first_bad, check_values
        self.shape, self.dtype = shape, dtype  # checked when there is no value (empty results)

    def __repr__(self):
        return f"Expect({self.outcome}: {self.reason})"


def _first(mask: np.ndarray, a: np.ndarray):
    flat = np.flatnonzero(np.asarray(mask).reshape(-1))
    return a.reshape(-1)[flat[0]] if flat.size else None


def _leaves(value, depth=0):
    """The leaves of nested lists/tuples (None when too deep or cyclic)."""
    if isinstance(value, (list, tuple)):
        if depth > 70:
            return None
        out = []
        for v in value:
            sub = _leaves(v, depth + 1)
            if sub is None:
                return None
            out += sub
        return out
    return [value]


def _is_text(x) -> bool:
    return isinstance(x, (str, bytes))


def _encoded(items) -> "list | None":
    out = []
    for x in items:
        if isinstance(x, str):
            try:
                out.append(x.encode("utf-8"))
            except UnicodeEncodeError:
                return None
        elif isinstance(x, bytes):
            out.append(bytes(x))
        else:
            return None
    return out


def as_array(value, dtype=None):
    """np.asarray(value, dtype), quietly; None where numpy finds no array in it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(value, dtype=dtype)
    except (ValueError, TypeError, OverflowError, RecursionError):
        return None


def expect_string(value) -> Expect:
    a = as_array(value, object)
    if a is None:
        return Expect("refuse", reason="not an array")
    if isinstance(value, np.ndarray) and value.dtype.kind in "SU":
        a = value.astype(object)
    if a.size == 0:
        return Expect("ok" if a.dtype.kind in "SUO" else "either", None, "empty", shape=a.shape,
                      dtype=np.dtype(object))
    items = _encoded(a.reshape(-1))
    if items is None:
        return Expect("refuse", reason="an element is not str/bytes (or not valid Unicode)")
    out = np.empty(a.size, object)
    out[:] = items
    return Expect("ok", out.reshape(a.shape), "strings")


def expect_numeric(value, dt: np.dtype) -> Expect:
    a = as_array(value)
    if a is None:
        return Expect("refuse", reason="not an array")
    src, dst = category(a.dtype), category(dt)
    if a.size == 0:  # nothing to lose: accepting or refusing are both fine
        return Expect("ok" if a.dtype == dt else "either", None, "empty", shape=a.shape, dtype=dt)
    if a.dtype == dt:
        return Expect("ok", a, "same dtype", source=a)
    if src in "sx":
        return Expect("refuse", reason=f"{a.dtype} is not a number")
    if src == "o":
        leaves = a.reshape(-1)
        numbers = all(isinstance(x, (int, float, complex, np.number, np.bool_)) for x in leaves)
        if numbers:  # e.g. [2**64, 1.5]: refusing is fine; accepting must keep the values
            return Expect("either", a, "object array of numbers", check_values=False)
        return Expect("refuse", reason="object array")
    out = cast(a, dt)
    if a.dtype in ML_FLOATS + ML_INTS and a.dtype != dt:
        lenient = True  # refusing ml_dtypes sources outright is fine; accepting must follow the rules
    else:
        lenient = False
    if src == "c" and dst != "c":
        return Expect("refuse", reason="complex to real", source=a)
    if dst in "bi":
        lo, hi = int_range(dt)
        if src == "b":
            bad = np.zeros(a.shape, bool)
        elif src == "i":
            w = wide(a) if a.dtype in ML_INTS else a
            bad = (w < lo) | (w > hi)
        else:  # float
            w = wide(a)
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(w) | (w != np.trunc(w)) | (w < np.longdouble(lo)) | (w >= np.longdouble(hi) + 1)
        if bad.any():
            return Expect("refuse", reason=f"not integers in [{lo}, {hi}]", source=a, first_bad=_first(bad, a))
        return Expect("either" if lenient else "ok", out, "integral and in range", source=a)
    # float or complex targets, component by component
    comps = [(a.real if src == "c" else a, out.real if dst == "c" else out)]
    if src == "c":
        comps.append((a.imag, out.imag))
    component = np.dtype(np.float32 if dt == np.complex64 else np.float64) if dst == "c" else dt
    inf_ok = has_inf(component)
    threshold = overflow_threshold(component)
    refuse = np.zeros(a.shape, bool)
    either = np.zeros(a.shape, bool)
    for x, y in comps:
        wx = wide(x) if x.dtype != bool else x.astype(np.longdouble)
        wy = wide(y)
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(wx)
            refuse |= finite & ~np.isfinite(wy)
            if not inf_ok:
                refuse |= finite & (np.abs(wx) > threshold)
                either |= finite & (np.abs(wx) == threshold)
                either |= np.isinf(wx) & np.isnan(wy)       # inf -> nan where no inf exists
                refuse |= np.isinf(wx) & np.isfinite(wy)    # inf became a number
            refuse |= np.isnan(wx) & ~np.isnan(wy)          # nan became a number
    if refuse.any():
        return Expect("refuse", reason="finite values overflow (or non-finite ones become numbers)",
                      source=a, first_bad=_first(refuse, a))
    if either.any() or lenient:
        return Expect("either", out, "rounding at the edge of the range" if either.any() else "ml_dtypes source",
                      source=a)
    return Expect("ok", out, "representable", source=a)


def expect_for(value, target: dtypes.DType) -> Expect:
    if target.name == "string":
        return expect_string(value)
    return expect_numeric(value, target.as_numpy_dtype)


def expect_inferred(value) -> Expect:
    """bridge.Tensor(value) without a dtype."""
    if isinstance(value, (np.ndarray, np.generic)):
        a = np.asarray(value)
        if a.dtype.kind in "SUO":
            return expect_string(a)
        if a.dtype.kind in "biufc" or a.dtype in ML_FLOATS + ML_INTS:
            try:
                dtypes.as_dtype(a.dtype.newbyteorder("="))
            except TypeError:
                return Expect("refuse", reason=f"{a.dtype} has no TensorFlow type")
            if a.size == 0:
                return Expect("ok" if a.dtype.isnative else "either", None, "empty", shape=a.shape,
                              dtype=a.dtype.newbyteorder("="))
            if not a.dtype.isnative:
                return Expect("either", a.astype(a.dtype.newbyteorder("=")), "byte-swapped")
            return Expect("ok", a, "numeric array")
        return Expect("refuse", reason=f"{a.dtype} has no TensorFlow type")
    leaves = _leaves(value)
    if leaves is None:
        return Expect("refuse", reason="too deep")
    texts = [x for x in leaves if _is_text(x)]
    if texts:
        if len(texts) < len(leaves):
            return Expect("refuse", reason="strings mixed with other values")
        e = expect_string(value)
        kinds = {type(x) for x in texts}
        if e.outcome == "ok" and (str in kinds and bytes in kinds or any(isinstance(x, str) and "\0" in x
                                                                          for x in texts)):
            e.outcome = "either"  # numpy's inference (np.str_ arrays) may refuse these
        return e
    a = as_array(value)
    if a is None:
        return Expect("refuse", reason="not an array")
    if a.dtype == object:
        return Expect("either" if a.size == 0 else "refuse", None, "object array")
    if a.size == 0 and a.dtype.kind in "biufc" and a.dtype != np.longdouble and a.dtype != np.clongdouble:
        return Expect("ok", None, "empty", shape=a.shape, dtype=a.dtype)
    if a.dtype.kind not in "biufc":
        return Expect("refuse", reason=f"{a.dtype}")
    if a.dtype == np.longdouble or a.dtype == np.clongdouble:
        return Expect("refuse", reason="longdouble")
    return Expect("ok", a, "numeric value")


def tensor_expect(value: "bridge.Tensor", target: dtypes.DType) -> Expect:
    """A Tensor given as a value: the same dtype gives its value back."""
    if value.dtype != target:
        return Expect("either", None, "a Tensor of another dtype")
    shape = value.shape
    if 0 in shape:
        return Expect("ok", None, "an empty Tensor", shape=shape, dtype=value.dtype.as_numpy_dtype)
    return Expect("ok", value.numpy(), "a Tensor")


# ---------------------------------------------------------------- comparing results

def same_values(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    if want.dtype == object:
        return got.dtype == object and got.reshape(-1).tolist() == want.reshape(-1).tolist()
    if got.dtype != want.dtype.newbyteorder("="):
        return False
    kind = category(want.dtype)
    if kind in "fc":
        g, w = wide(got), wide(want.astype(want.dtype.newbyteorder("=")))
        parts = [(g.real, w.real), (g.imag, w.imag)] if kind == "c" else [(g, w)]
        for x, y in parts:
            nx, ny = np.isnan(x), np.isnan(y)
            if not np.array_equal(nx, ny):
                return False
            if not np.array_equal(x[~nx], y[~ny]) or not np.array_equal(np.signbit(x[~nx]), np.signbit(y[~ny])):
                return False
        return True
    return np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want.astype(got.dtype)).tobytes()


def same_loose(got: np.ndarray, source: np.ndarray) -> bool:
    """An accepted object array of numbers: each element keeps its value."""
    if got.shape != source.shape:
        return False
    for g, s in zip(got.reshape(-1).tolist(), source.reshape(-1).tolist(), strict=True):
        if isinstance(s, float) and math.isnan(s):
            if not (isinstance(g, (float, complex)) and g != g):
                return False
        elif g != s:
            return False
    return True


def renderings(item) -> list[str]:
    out = [str(item), repr(item)]
    try:
        py = item.item()
        out += [str(py), repr(py)]
    except (AttributeError, ValueError, TypeError):
        pass
    return out


def check_message(exc: BaseException, expect: Expect, target: dtypes.DType, where: str = "") -> None:
    """A refused lossy conversion names what was fed (``where``), both dtypes and the first bad value."""
    text = str(exc)
    if where:
        assert where in text, f"the error does not name {where}: {text!r}"
    if expect.source is None or not isinstance(exc, TypeError):
        return
    assert target.name in text, f"the error does not name the target dtype {target.name}: {text!r}"
    src = expect.source.dtype
    assert src.name in text or str(src) in text, f"the error does not name the source dtype {src}: {text!r}"
    if expect.first_bad is not None:
        assert any(r in text for r in renderings(expect.first_bad)), \
            f"the error does not show the first offending value {expect.first_bad!r}: {text!r}"


ALLOWED = (TypeError, ValueError)


def result_array(got, fetched: bool):
    """``got`` as an array.  A Session.run result (``fetched``) has TF1's type: a 0-d one is a
    numpy scalar (bytes for a string), any other an ndarray; bridge.Tensor gives ndarrays."""
    if fetched and isinstance(got, bytes):
        return np.array(got, dtype=object)
    if fetched and isinstance(got, np.generic):
        return np.asarray(got)
    assert isinstance(got, np.ndarray), type(got)
    assert not (fetched and got.ndim == 0), f"fetched a 0-d {type(got).__name__}, not a scalar"
    return got


def judge(call, expect: Expect, target_dtype, allowed, on_error=None, result_dtype=None, fetched=False):
    """Run ``call``; check its outcome against ``expect``.  Returns the outcome's name."""
    try:
        got = _common.time_limited(args.example_timeout, call)
    except allowed as exc:
        note(f"raised {type(exc).__name__}: {exc}")
        if isinstance(exc, InvalidArgumentError):
            STATS[f"InvalidArgumentError ({str(exc).splitlines()[0][:60]})"] += 1
            return "tf-error"
        assert expect.outcome in ("refuse", "either"), \
            f"refused a value that should be accepted ({expect.reason}): {type(exc).__name__}: {exc}"
        if on_error is not None and expect.outcome == "refuse":
            on_error(exc)
        STATS["refused"] += 1
        return "refused"
    assert expect.outcome != "refuse", \
        f"accepted a value that must be refused ({expect.reason}); got {_common.short(got, 300)}"
    got = result_array(got, fetched)
    if result_dtype is not None:
        assert got.dtype == result_dtype, f"result dtype {got.dtype}, expected {result_dtype}"
    if expect.shape is not None:
        assert got.shape == expect.shape, f"result shape {got.shape}, expected {expect.shape}"
    if expect.dtype is not None:
        assert got.dtype == expect.dtype, f"result dtype {got.dtype}, expected {expect.dtype}"
    if expect.value is not None:
        if expect.check_values:
            assert same_values(got, expect.value), \
                (f"wrong result ({expect.reason}):\n got {_common.short(got, 500)} {got.dtype} {got.shape}\n"
                 f"want {_common.short(expect.value, 500)} {expect.value.dtype} {expect.value.shape}")
        else:
            assert same_loose(got, expect.value), f"values changed: {got!r} from {expect.value!r}"
    STATS["accepted"] += 1
    return "accepted"


def session_still_works() -> None:
    out = SESSION.run([IDENTITIES["float64"], IDENTITIES["string"]],
                      {PLACEHOLDERS["float64"]: np.array([1.5, -2.0]), PLACEHOLDERS["string"]: [b"ok", "\u00e9"]})
    assert out[0].tolist() == [1.5, -2.0] and out[1].tolist() == [b"ok", "\u00e9".encode()], out


# ---------------------------------------------------------------- values

SPECIAL_FLOATS = [0.0, -0.0, 0.5, 1.0, -1.0, 1.5, 2.0, 6.0, 7.0, 127.0, 128.0, 255.0, 256.0, -129.0, 448.0, 464.0,
                  480.0, 57344.0, 61440.0, 65504.0, 65519.99, 65520.0, 2.0**31, 2.0**32, 2.0**53 + 2, 2.0**63,
                  -2.0**63, 2.0**64, 3.3895313892515355e38, 3.4028234663852886e38, 3.4028235677973366e38, 1e39,
                  1e300, -1e300, 1e308, 1e-38, 1e-46, 1e-320, 5e-324, math.nan, math.inf, -math.inf]
SPECIAL_INTS = [0, 1, -1, 2, 3, 7, 8, -8, -9, 15, 16, 127, 128, -128, -129, 255, 256, 32767, 32768, 65504, 65535,
                65536, 2**24 + 1, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**40, 2**53 + 1, 2**63 - 1, 2**63,
                -2**63, 2**64 - 1, 2**64, -2**63 - 1, 10**30]

any_int = st.one_of(st.sampled_from(SPECIAL_INTS), st.integers())
any_float = st.one_of(st.sampled_from(SPECIAL_FLOATS), st.floats())
any_complex = st.one_of(st.builds(complex, any_float, any_float), st.complex_numbers(),
                        st.sampled_from([0j, 1 + 0j, complex(math.nan, 0), complex(0, math.inf), complex(1e300, 0)]))
any_text = st.text(max_size=8)  # includes NULs and lone surrogates
any_bytes = st.binary(max_size=8)
numpy_scalars = st.one_of(
    st.builds(np.float32, any_float), st.builds(np.float16, any_float), st.builds(np.float64, any_float),
    st.builds(lambda v: np.int8(v % 256 - 128), any_int), st.builds(lambda v: np.uint64(v % 2**64), any_int),
    st.builds(np.bool_, st.booleans()), st.builds(np.complex64, any_complex),
    st.builds(np.str_, any_text), st.builds(np.bytes_, any_bytes))
leaf = st.one_of(any_int, any_float, any_complex, st.booleans(), any_text, any_bytes, st.none())
numeric_leaf = st.one_of(any_int, any_float, st.booleans(), any_complex)

NUMPY_DTYPES = ([np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                        np.uint32, np.uint64, np.float16, np.float32, np.float64, np.longdouble,
                                        np.complex64, np.complex128, np.clongdouble)]
                + ML_FLOATS + ML_INTS
                + [np.dtype(t) for t in (">i2", ">i4", ">i8", ">u4", ">f4", ">f8", ">c8", ">c16", "S6", "U6", object,
                                         "M8[s]", "m8[ms]", "V3", [("a", "<i4"), ("b", "<f8")])])


def elements_for(dt: np.dtype):
    kind = category(dt)
    if kind == "b":
        return st.booleans()
    if kind == "i":
        lo, hi = int_range(dt)
        return st.one_of(st.integers(lo, hi), st.sampled_from([v for v in SPECIAL_INTS if lo <= v <= hi]))
    if kind == "f":
        return any_float
    if kind == "c":
        return any_complex
    if dt.kind == "S":
        return any_bytes
    if dt.kind == "U":
        return any_text
    if kind == "o":
        return leaf
    return st.integers(-2**40, 2**40)  # datetime, timedelta, void: built from ints below


def build_array(elements: list, dt: np.dtype, shape: tuple) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dt.kind == "O":
            a = np.empty(len(elements), object)
            a[:] = elements
        elif dt.kind in "SU":
            a = np.array(elements, dtype=dt) if elements else np.empty(0, dt)
        elif dt.kind in "Mm":
            a = np.array(elements, dtype=np.int64).astype(dt)
        elif dt.kind == "V":
            a = np.zeros(len(elements), dt)
        elif category(dt) == "i":
            a = np.array(elements, dtype=object).astype(np.int64 if dt in ML_INTS else dt) \
                if elements else np.empty(0, dt)
            a = a.astype(dt)
        else:
            a = np.array(elements, dtype=np.complex128 if category(dt) == "c" else np.float64).astype(dt) \
                if elements else np.empty(0, dt)
        return a.reshape(shape)


@st.composite
def shapes(draw):
    kind = draw(st.sampled_from(["small"] * 8 + ["big", "wide-empty", "high-rank"]))
    if kind == "small":
        return tuple(draw(st.lists(st.integers(0, 4), max_size=4)))
    if kind == "big":
        return draw(st.sampled_from([(1000,), (64, 65), (3, 1 << 10, 3), (1 << 20,)]))
    if kind == "wide-empty":
        return draw(st.sampled_from([(0, 2**40), (2**31, 0), (0,) * 8, (1, 0, 2**20), (0, 2**58), (2**58, 0, 4)]))
    return tuple(draw(st.lists(st.integers(1, 2), min_size=5, max_size=12)))


@st.composite
def numpy_array(draw, dt=None):
    dt = dt if dt is not None else draw(st.sampled_from(NUMPY_DTYPES))
    shape = draw(shapes())
    n = int(np.prod(shape, dtype=object))
    if n > 10000 and dt.kind in "SUOMmV":  # a million Python objects: slow, and no new ground
        shape, n = (1000,), 1000
    if n == 0:
        try:
            arr = build_array([], dt, shape)
        except ValueError:  # numpy cannot hold this empty shape with this item size
            arr = build_array([], dt, (0, 2**40))
    elif n <= 64:
        elements = draw(st.lists(elements_for(dt), min_size=n, max_size=n))
        arr = build_array(elements, dt, shape)
    else:  # large: random fill plus a few drawn values
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if dt.kind in "SUOV" or dt.kind in "Mm":
            base = draw(st.lists(elements_for(dt), min_size=1, max_size=4))
            arr = build_array([base[i % len(base)] for i in range(n)], dt, shape)
        else:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kind = category(dt)
                if kind in "bi":
                    lo, hi = int_range(dt)
                    raw = rng.integers(max(lo, -2**63), min(hi, 2**63 - 1), size=n, endpoint=True)
                else:
                    raw = rng.standard_normal(n) * 10.0 ** draw(st.integers(-5, 40))
                arr = raw.astype(dt).reshape(shape)
            flat = arr.reshape(-1)
            for v in draw(st.lists(elements_for(dt), max_size=3)):
                flat[draw(st.integers(0, n - 1))] = build_array([v], dt, (1,))[0]
    return apply_layout(draw, arr)


def apply_layout(draw, arr: np.ndarray) -> np.ndarray:
    layout = draw(st.sampled_from(["c", "c", "fortran", "transpose", "step", "negative", "unaligned", "aligned",
                                   "broadcast", "readonly", "byteswap", "scalar"]))
    note(f"layout: {layout}")
    if arr.size == 0 and layout not in ("c", "fortran", "transpose", "readonly"):
        return arr
    if layout == "fortran":
        return np.asfortranarray(arr)
    if layout == "transpose" and arr.ndim >= 2:
        perm = draw(st.permutations(range(arr.ndim)))
        return np.transpose(np.ascontiguousarray(np.transpose(arr, perm)), np.argsort(perm))
    if layout == "step" and arr.ndim >= 1:
        axis = draw(st.integers(0, arr.ndim - 1))
        step = draw(st.sampled_from([2, 3, -2]))
        big_shape = list(arr.shape)
        big_shape[axis] *= abs(step)
        big = np.empty(big_shape, arr.dtype)
        index = [slice(None)] * arr.ndim
        index[axis] = slice(None, None, step)
        big[tuple(index)] = arr
        return big[tuple(index)]
    if layout == "negative" and arr.ndim >= 1:
        axis = draw(st.integers(0, arr.ndim - 1))
        return np.flip(np.ascontiguousarray(np.flip(arr, axis)), axis)
    if layout == "unaligned" and arr.dtype != object and arr.dtype.itemsize:
        offset = draw(st.integers(1, 63))
        raw = np.empty(arr.nbytes + 64 + offset, np.uint8)
        start = (-raw.ctypes.data) % 64 + offset  # misaligned from 64, whatever the allocator gave
        out = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
        out[...] = arr
        return out
    if layout == "aligned" and arr.dtype != object and arr.dtype.itemsize and arr.dtype.isnative:
        out = bridge.aligned_empty(arr.shape, arr.dtype)
        out[...] = arr
        return out
    if layout == "broadcast" and arr.ndim >= 1:
        axis = draw(st.integers(0, arr.ndim - 1))
        return np.broadcast_to(np.take(arr, [0], axis=axis) if arr.shape[axis] else arr, arr.shape)
    if layout == "readonly":
        out = arr.copy()
        out.flags.writeable = False
        return out
    if layout == "byteswap" and arr.dtype.kind in "iufc" and arr.dtype.itemsize > 1 \
            and arr.dtype not in ML_FLOATS + ML_INTS:
        return arr.astype(arr.dtype.newbyteorder())
    if layout == "scalar" and arr.size:
        return arr.reshape(-1)[0]  # a numpy scalar
    return arr


@st.composite
def nested_list(draw):
    shape = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    mixed = draw(st.booleans())
    pick = leaf if mixed else draw(st.sampled_from([any_int, any_float, any_complex, st.booleans(), any_text,
                                                    any_bytes, numeric_leaf, st.one_of(any_text, any_bytes)]))
    seq = draw(st.sampled_from([list, tuple]))

    def build(dims):
        if not dims:
            return draw(pick)
        return seq(build(dims[1:]) for _ in range(dims[0]))
    return build(shape)


ragged = st.recursive(leaf, lambda inner: st.lists(inner, max_size=4), max_leaves=12)


@st.composite
def odd_value(draw):
    kind = draw(st.sampled_from(["deep", "cyclic", "mixed-object", "huge-string", "set", "dict", "generator",
                                 "tensor", "memoryview", "bytearray"]))
    if kind == "deep":
        v = draw(st.sampled_from([1, 1.5, "a", b"a"]))
        for _ in range(draw(st.sampled_from([32, 63, 64, 65, 100]))):
            v = [v]
        return v
    if kind == "cyclic":
        v: list = [1]
        v.append(v)
        return v
    if kind == "mixed-object":
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
        n = int(np.prod(shape))
        a = np.empty(n, object)
        a[:] = draw(st.lists(st.one_of(leaf, st.lists(leaf, max_size=2)), min_size=n, max_size=n))
        return a.reshape(shape)
    if kind == "huge-string":
        return [draw(st.sampled_from([b"x", "\u00e9", b"\0"])) * draw(st.sampled_from([1 << 16, 1 << 22]))]
    if kind == "set":
        return {1, 2}
    if kind == "dict":
        return {"a": 1}
    if kind == "generator":
        return (i for i in range(3))
    if kind == "tensor":
        arr = draw(numpy_array(draw(st.sampled_from([np.dtype(np.float64), np.dtype(np.int32),
                                                     np.dtype(np.float32)]))))
        return bridge.Tensor(np.asarray(arr).astype(np.asarray(arr).dtype.newbyteorder("=")))
    if kind == "memoryview":
        return memoryview(b"abc")
    return bytearray(b"abc")


feed_values = st.one_of(
    numpy_array(), numpy_array(), numpy_array(),
    any_int, any_float, any_complex, st.booleans(), any_text, any_bytes, st.none(), numpy_scalars,
    nested_list(), nested_list(), ragged, odd_value(),
)


def describe(value) -> str:
    if isinstance(value, np.ndarray):
        return (f"ndarray dtype={value.dtype} shape={value.shape} strides={value.strides} "
                f"c={value.flags.c_contiguous} f={value.flags.f_contiguous} aligned64={value.ctypes.data % 64 == 0} "
                f"writeable={value.flags.writeable}: {_common.short(value, 600)}")
    return f"{type(value).__name__}: {_common.short(value, 600)}"


def target_for(draw, value) -> dtypes.DType:
    """Half the time the type the value already has (so the accepted path is exercised)."""
    if isinstance(value, np.ndarray) and draw(st.booleans()):
        try:
            return dtypes.as_dtype(value.dtype.newbyteorder("="))
        except TypeError:
            pass
    return draw(st.sampled_from(TARGETS))


# ---------------------------------------------------------------- properties

@given(st.data())
def prop_session(data) -> None:
    value = data.draw(feed_values, label="value")
    target = target_for(data.draw, value)
    placeholder, identity = PLACEHOLDERS[target.name], IDENTITIES[target.name]
    key = data.draw(st.sampled_from([placeholder, placeholder.name]), label="feed key")
    trace(f"Session.run(identity, {{'{placeholder.name}': value}}) with value = {describe(value)}")
    note(f"target {target.name}; value {describe(value)}")
    if isinstance(value, bridge.Tensor):
        expect = tensor_expect(value, target)  # fed as is: TensorFlow refuses another dtype
    else:
        expect = expect_for(value, target)
    note(repr(expect))
    STATS[f"session {expect.outcome}"] += 1
    outcome = judge(lambda: SESSION.run(identity, {key: value}), expect, target,
                    ALLOWED + (InvalidArgumentError,),
                    on_error=lambda exc: check_message(exc, expect, target, f"'{placeholder.name}'"), fetched=True)
    if outcome != "accepted":
        session_still_works()


@given(st.data())
def prop_tensor(data) -> None:
    value = data.draw(feed_values, label="value")
    target = target_for(data.draw, value)
    trace(f"bridge.Tensor(value, {target.name}) with value = {describe(value)}")
    note(f"target {target.name}; value {describe(value)}")
    if isinstance(value, bridge.Tensor):
        expect = tensor_expect(value, target)
        expect.outcome = "either" if value.dtype != target else expect.outcome
        expect.value = expect.value if value.dtype == target else None
    else:
        expect = expect_for(value, target)
    note(repr(expect))
    STATS[f"tensor {expect.outcome}"] += 1

    def make():
        t = bridge.Tensor(value, target)
        assert t.dtype == target, f"Tensor dtype {t.dtype}, asked for {target}"
        repr(t)
        return t.numpy()
    outcome = judge(make, expect, target, ALLOWED, on_error=lambda exc: check_message(exc, expect, target))
    if outcome != "accepted":
        session_still_works()


@given(st.data())
def prop_inferred(data) -> None:
    value = data.draw(feed_values, label="value")
    trace(f"bridge.Tensor(value) with value = {describe(value)}")
    note(f"value {describe(value)}")
    if isinstance(value, bridge.Tensor):
        expect = tensor_expect(value, value.dtype)
    else:
        expect = expect_inferred(value)
    note(repr(expect))
    STATS[f"inferred {expect.outcome}"] += 1

    def make():
        t = bridge.Tensor(value)
        repr(t)
        return t.numpy()
    judge(make, expect, None, ALLOWED)


@given(st.data())
def prop_static_shape(data) -> None:
    name = data.draw(st.sampled_from(sorted(STATIC)), label="placeholder")
    placeholder, shape, dtype = STATIC[name]
    dt = np.dtype(object) if dtype == "string" else np.dtype(dtype)
    dims = data.draw(st.one_of(st.just(tuple(2 if s is None else s for s in shape)),
                               st.lists(st.integers(0, 3), max_size=3).map(tuple)), label="shape")
    value = np.full(dims, b"s" if dtype == "string" else 1, dtype=dt)
    compatible = len(dims) == len(shape) and all(s is None or s == d for s, d in zip(shape, dims, strict=True))
    trace(f"Session.run(identity, {{'{placeholder.name}' (shape {shape}): array of shape {dims}}})")
    expect = Expect("ok", value, "compatible shape") if compatible else \
        Expect("refuse", reason=f"shape {dims} is not compatible with {shape}")
    STATS[f"static {'compatible' if compatible else 'incompatible'}"] += 1
    outcome = judge(lambda: SESSION.run(STATIC_IDENTITIES[name], {placeholder: value}), expect,
                    dtypes.as_dtype(dtype), ALLOWED + (InvalidArgumentError,), fetched=True)
    assert compatible or outcome != "accepted", f"fed shape {dims} into a placeholder of shape {shape}"
    if outcome != "accepted":
        session_still_works()


def main() -> int:
    session_still_works()
    props = {"session": prop_session, "tensor": prop_tensor, "inferred": prop_inferred,
             "static_shape": prop_static_shape}
    status = _common.run("tests/fuzz/fuzz_feeds.py", args, props)
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(STATS.items())), flush=True)
    session_still_works()
    return status


if __name__ == "__main__":
    sys.exit(main())
