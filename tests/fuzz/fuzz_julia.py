"""Fuzz Julia ops with what users feed them, under glibc's heap checker.

One op built from a spec, ``FuzzJl``, takes an input of every dtype a Julia
op takes (double, float, int32, int64, bool, string; ranks 0-3) and gives a
static output and dynamic outputs (assigned by Julia, sized by the values).
Each example feeds it values of random shapes (empty ones too), values
(non-finite, extreme, arbitrary bytes) and layouts (Fortran order, steps,
negative strides, Python lists), sometimes of the wrong rank, and runs it in
a random one of the scheduling modes (docs/internals/threads.md: posted from TF's
pool threads, a graph run by the caller's thread, ``TFBRIDGE_JULIA_ASYNC=0``,
a ``julia_thread`` session).

The contract checked: a feed of the spec's ranks runs, and every output
equals what numpy computes from the fed values, exactly; a feed of another
rank raises InvalidArgumentError or ValueError; after any exception the
session still runs; the process never dies (tests/customop/test_fuzz.py runs this
script as a child, under ``LD_PRELOAD=libc_malloc_debug.so.0 MALLOC_CHECK_=3``).

The op is built once into the bridge's cache (``<cache>/fuzz/FuzzJl``), by a
child process without the heap checker (a compiler under it is only slower).
Property: ``ops``.

    python tests/fuzz/fuzz_julia.py --examples 200 --derandomize
"""
from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

PROPERTIES = ["ops"]
args = _common.parse_args(__doc__.split("\n\n")[0], PROPERTIES)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import bridge  # noqa: E402
from bridge import customop, julia  # noqa: E402
from bridge.framework.errors import InvalidArgumentError  # noqa: E402
from bridge.platform import cache  # noqa: E402

trace = _common.Tracer(args.trace)
STATS: Counter = Counter()

SPEC = """FuzzJl
double a(n)
float b(?, ?)
int32 c(?)
int64 d(?, ?, ?)
bool e()
string w(?)
double a2(n) -> output
float b2(?, ?) -> output
int32 c2(?) -> output
int64 d2(?, ?, ?) -> output
bool e2() -> output
string w2(?) -> output
double count() -> output
"""

JL = """
function fuzz_jl(a2, b2, c2, d2, e2, w2, count, a, b, c, d, e, w)
    a2 .= 2 .* a
    b2[] = b .* 2f0                  # from a lazy transpose: one transposing pass back
    c2[] = vcat(c, reverse(c))
    d2[] = d                         # a PermutedDimsArray, as it came
    e2 .= .!e
    w2[] = w .* "|"
    count[] = Base.count(isfinite, a)
    return nothing
end
"""

# Inputs in spec order: (name, numpy dtype, rank).
INPUTS = [("a", np.float64, 1), ("b", np.float32, 2), ("c", np.int32, 1), ("d", np.int64, 3),
          ("e", np.bool_, 0), ("w", object, 1)]
MODES = ["posted", "caller", "synchronous", "julia_thread"]


def _op_folder() -> Path:
    """The op's folder in the bridge's cache, built (by a child without the heap checker)."""
    folder = cache.root() / "fuzz" / "FuzzJl"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("custom_op.txt", SPEC), ("fuzz_jl.jl", JL)):
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            tmp = folder / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            os.replace(tmp, path)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CHECK_", "MALLOC_PERTURB_")}
    subprocess.run([sys.executable, "-c", "import sys; from bridge import customop; customop.build(sys.argv[1])",
                    str(folder)], env=env, check=True)
    return folder


# Julia takes SIGSEGV for its GC's safepoints: faulthandler installed after
# Julia (as _common.run does) would take each for a crash.  Enabled first,
# Julia's handlers go in front, and _common.run's enable() changes nothing.
faulthandler.enable()
OPS = customop.load(_op_folder())
julia.init()


def _session(mode: str):
    if mode == "synchronous":  # read as the kernels are made: by the first run
        os.environ["TFBRIDGE_JULIA_ASYNC"] = "0"
    g = bridge.Graph()
    with g.as_default():
        feeds = [bridge.placeholder(bridge.string if dt is object else bridge.as_dtype(np.dtype(dt)), None,
                                    name=name) for name, dt, _ in INPUTS]
        outputs = OPS.fuzz_jl(*feeds)
    config = {"posted": dict(inline_small_graphs=0), "caller": {}, "synchronous": dict(inline_small_graphs=0),
              "julia_thread": dict(julia_thread=True)}[mode]
    sess = bridge.Session(g, config=bridge.SessionConfig(**config))
    sess.run(outputs, dict(zip(feeds, VALID, strict=True)))
    os.environ.pop("TFBRIDGE_JULIA_ASYNC", None)
    return sess, feeds, list(outputs)


VALID = [np.arange(3.0), np.ones((2, 2), np.float32), np.arange(2, dtype=np.int32),
         np.zeros((1, 2, 3), np.int64), np.bool_(True), np.array([b"x"], dtype=object)]
SESSIONS = {mode: _session(mode) for mode in MODES}


def expected(values: list) -> list:
    a, b, c, d, e = (np.asarray(v, dtype=dt) for v, (_, dt, _) in zip(values[:5], INPUTS[:5], strict=True))
    w = np.asarray(values[5], dtype=object)
    with np.errstate(over="ignore"):  # 2x overflows to inf, in Julia too
        a2, b2 = 2 * a, b * np.float32(2)
    w = [x.encode() if isinstance(x, str) else bytes(x) for x in w.ravel()]
    return [a2, b2, np.concatenate([c, c[::-1]]), d, ~e,
            np.array([x + b"|" for x in w], dtype=object), np.float64(np.isfinite(a).sum())]


def same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype == object:
        return [bytes(x) for x in got.ravel()] == list(want.ravel())
    return got.dtype == want.dtype and np.array_equal(got, want, equal_nan=want.dtype.kind == "f")


# ---------------------------------------------------------------- values

def _dims(draw, rank: int) -> tuple:
    big = draw(st.integers(0, 9)) == 0
    sizes = st.integers(0, 300 if big and rank == 1 else 40 if big else 6)
    return tuple(draw(sizes) for _ in range(rank))


def _elements(dt):
    if dt is np.float64:
        return st.floats(width=64)
    if dt is np.float32:
        return st.floats(width=32)
    if dt is np.int32:
        return st.integers(-2**31, 2**31 - 1)
    if dt is np.int64:
        return st.integers(-2**63, 2**63 - 1)
    if dt is np.bool_:
        return st.booleans()
    return st.one_of(st.binary(max_size=40), st.text(max_size=20),
                     st.binary(min_size=1000, max_size=5000))


@st.composite
def feed(draw, dt, rank: int):
    shape = _dims(draw, rank)
    n = int(np.prod(shape)) if shape else 1
    if n <= 64:
        items = draw(st.lists(_elements(dt), min_size=n, max_size=n))
    else:  # large: a few drawn values spread over the array
        pool = draw(st.lists(_elements(dt), min_size=1, max_size=8))
        items = [pool[i % len(pool)] for i in range(n)]
    if dt is object:
        arr = np.empty(n, dtype=object)
        arr[:] = items
        arr = arr.reshape(shape)
    else:
        arr = np.array(items, dtype=dt).reshape(shape)
    layout = draw(st.sampled_from(["c", "fortran", "reversed", "stepped", "list"]))
    if layout == "fortran" and rank:  # (asfortranarray makes a 0-d array 1-d)
        arr = np.asfortranarray(arr)
    elif layout == "reversed" and rank:
        arr = arr[::-1]
    elif layout == "stepped" and rank:
        arr = np.repeat(arr, 2, axis=0)[::2]
    elif layout == "list" and dt is not object and 0 < arr.size <= 64:  # ([] would lose the shape)
        return arr.tolist()
    return arr


@st.composite
def example(draw):
    mode = draw(st.sampled_from(MODES))
    values = [draw(feed(dt, rank)) for _, dt, rank in INPUTS]
    wrong = draw(st.integers(-1, 2 * len(INPUTS) - 1))  # >= 0 half the time: that input gets another rank
    if 0 <= wrong < len(INPUTS):
        _, dt, rank = INPUTS[wrong]
        values[wrong] = draw(feed(dt, draw(st.sampled_from([r for r in range(4) if r != rank]))))
    else:
        wrong = -1
    return mode, values, wrong


@given(example())
def prop_ops(ex) -> None:
    mode, values, wrong = ex
    text = f"mode {mode}, wrong rank: {INPUTS[wrong][0] if wrong >= 0 else None}\n" + \
        "\n".join(f"{name}: {_common.short(v, 300)}" for (name, _, _), v in zip(INPUTS, values, strict=True))
    trace(text)
    note(text)
    sess, feeds, outputs = SESSIONS[mode]
    try:
        got = sess.run(outputs, dict(zip(feeds, values, strict=True)))
    except (InvalidArgumentError, ValueError) as exc:
        assert wrong >= 0, f"a valid feed was refused: {exc}"
        STATS["refused " + mode] += 1
    else:
        STATS["ran " + mode] += 1
        assert wrong < 0, "a feed of the wrong rank ran"
        for name, g, w in zip(["a2", "b2", "c2", "d2", "e2", "w2", "count"], got, expected(values), strict=True):
            assert same(g, w), f"{name}: got {_common.short(g)}, want {_common.short(w)}"
    again = sess.run(outputs, dict(zip(feeds, VALID, strict=True)))
    assert same(again[0], 2 * VALID[0]), "the session no longer runs"


def main() -> int:
    status = _common.run("fuzz_julia.py", args, {"ops": prop_ops})
    print("runs:", dict(sorted(STATS.items())), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
