"""Numbers: ops built with bridge.ops give what stock TensorFlow gives.

Each case is one op with fixed inputs and attributes.  The bridge builds it
with the generated function (numpy inputs become Const ops) and runs it; the
oracle builds the same op with tf.raw_ops in a separate process (answers are
cached on disk, see tests/support/oracle.py).  Random and stateful ops are left out:
their values are not a property of the op's definition.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge.ops import opgen

rng = np.random.default_rng(20261122)
f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64


def U(*shape, lo=-0.9, hi=0.9, dtype=f32) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(dtype)


def P(*shape, dtype=f32) -> np.ndarray:
    """Positive values (logs, roots, gamma functions)."""
    return U(*shape, lo=0.2, hi=3.0, dtype=dtype)


def I(*shape, lo=-5, hi=6, dtype=i32) -> np.ndarray:
    return rng.integers(lo, hi, shape).astype(dtype)


def S(*items: str) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = [s.encode() for s in items]
    return out


def S0(item: str) -> np.ndarray:
    """A string scalar."""
    out = np.empty((), dtype=object)
    out[()] = item.encode()
    return out


def case(op: str, *inputs, id: str = "", feed: bool = False, undefined: tuple = (), **attrs) -> dict:
    """One op: OpDef inputs in order (a list for a list input), attrs by OpDef
    name.  ``feed=True`` gives the bridge's op Placeholders fed at run time
    (the oracle always does) instead of Const inputs, where TensorFlow's
    constant folding would get in the way.  ``undefined``: outputs whose
    values TensorFlow leaves unspecified (it allocates them without writing
    them), so only their shape and dtype are compared."""
    return {"op": op, "inputs": list(inputs), "attrs": attrs, "id": id or op, "feed": feed,
            "undefined": undefined}


X = U(3, 4)
Y = U(3, 4)
XP = P(3, 4)
YP = P(3, 4)
B1 = rng.random((3, 4)) > 0.5
B2 = rng.random((3, 4)) > 0.5
M = U(4, 4, dtype=f64) + 4 * np.eye(4)
SPD = (M @ M.T).astype(f64)
IMG = U(1, 5, 5, 2)
AX = i32(1)

UNARY_FLOAT = [
    "Abs", "Acos", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Erf", "Erfc", "Erfinv",
    "Exp", "Expm1", "Floor", "Log1p", "Neg", "Reciprocal", "Rint", "Round", "Sigmoid", "Sign", "Sin",
    "Sinh", "Softplus", "Softsign", "Square", "Tan", "Tanh", "Relu", "Relu6", "Elu", "Selu", "IsFinite",
    "IsInf", "IsNan", "BesselI0e", "BesselI1e", "BesselI0", "BesselI1", "BesselJ0", "BesselJ1",
    "Dawsn", "FresnelCos", "FresnelSin", "OnesLike", "ZerosLike", "Identity", "StopGradient",
    "Snapshot", "Inv",
]
UNARY_POSITIVE = ["Acosh", "Digamma", "Lgamma", "Log", "Rsqrt", "Sqrt", "BesselK0", "BesselK0e",
                  "BesselK1", "BesselK1e", "BesselY0", "BesselY1", "Expint", "Spence"]
BINARY_FLOAT = [
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv", "FloorMod", "Maximum",
    "Minimum", "SquaredDifference", "Atan2", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "Xdivy", "MulNoNan", "ReluGrad", "SigmoidGrad", "TanhGrad", "ReciprocalGrad",
    "Relu6Grad", "EluGrad", "SeluGrad", "SoftplusGrad", "SoftsignGrad", "NextAfter",
]
BINARY_POSITIVE = ["Pow", "Xlogy", "Xlog1py", "Igamma", "Igammac", "Zeta", "SqrtGrad", "RsqrtGrad",
                   "IgammaGradA", "RandomGammaGrad"]
BINARY_INT = ["TruncateDiv", "TruncateMod", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift",
              "RightShift", "FloorDiv", "FloorMod", "Maximum", "Mul"]
REDUCTIONS = ["Sum", "Prod", "Max", "Min", "Mean", "EuclideanNorm"]

CASES: list[dict] = (
    [case(op, X) for op in UNARY_FLOAT]
    + [case(op, XP) for op in UNARY_POSITIVE]
    + [case(op, X, Y) for op in BINARY_FLOAT]
    + [case(op, XP, YP) for op in BINARY_POSITIVE]
    + [case(op, I(3, 4, lo=1, hi=20), I(3, 4, lo=1, hi=5), id=f"{op}-int") for op in BINARY_INT]
    + [case(op, X, AX, keep_dims=kd, id=f"{op}-{kd}") for op in REDUCTIONS for kd in (False, True)]
    + [
        case("Polygamma", np.array([[0.0, 1.0], [2.0, 3.0]], f32), P(2, 2)),
        case("Betainc", P(3), P(3), U(3, lo=0.1, hi=0.9)),
        case("ApproximateEqual", X, X + 1e-6, tolerance=1e-5),
        case("ClipByValue", X, f32(-0.3), f32(0.4)),
        case("LeakyRelu", X, alpha=0.1),
        case("LeakyReluGrad", Y, X, alpha=0.3),
        case("Invert", I(5)),
        case("PopulationCount", I(5, lo=0, hi=1000)),
        case("LogicalNot", B1),
        case("LogicalAnd", B1, B2),
        case("LogicalOr", B1, B2),
        case("All", B1, AX),
        case("Any", B1, i32(0), keep_dims=True),
        case("ArgMax", X, AX),
        case("ArgMin", X, i32(0), output_type=i64),
        case("Cumsum", X, AX, exclusive=True),
        case("Cumprod", X, i32(0), reverse=True),
        case("CumulativeLogsumexp", X, AX),
        case("Complex", X, Y),
        case("Real", (X + 1j * Y).astype(np.complex64)),
        case("Imag", (X + 1j * Y).astype(np.complex64)),
        case("Conj", (X + 1j * Y).astype(np.complex128)),
        case("Angle", (X + 1j * Y).astype(np.complex64)),
        case("ComplexAbs", (X + 1j * Y).astype(np.complex64)),
        case("PreventGradient", X),
        case("Softmax", X),
        case("LogSoftmax", X),
        case("L2Loss", X),
        case("BiasAdd", X, U(4)),
        case("BiasAddGrad", X),
        case("Reshape", X, np.array([2, 6], i32)),
        case("Transpose", X, np.array([1, 0], i32)),
        case("ConcatV2", [X, Y], AX),
        case("Concat", i32(0), [X, Y, X]),
        case("Pack", [X, Y], axis=1),
        case("Unpack", X, num=3),
        case("Split", i32(1), X, num_split=2),
        case("SplitV", X, np.array([1, 3], i32), AX, num_split=2),
        case("Slice", X, np.array([1, 1], i32), np.array([2, 2], i32)),
        case("StridedSlice", X, np.array([0, 1], i32), np.array([3, 4], i32), np.array([2, 2], i32)),
        case("Tile", X, np.array([2, 1], i32)),
        case("Pad", X, np.array([[1, 0], [0, 2]], i32)),
        case("PadV2", X, np.array([[1, 1], [1, 1]], i32), f32(7)),
        case("MirrorPad", X, np.array([[1, 1], [2, 2]], i32), mode="REFLECT"),
        case("ReverseV2", X, np.array([1], i32)),
        case("ExpandDims", X, i32(0)),
        case("Squeeze", U(1, 3, 1), squeeze_dims=[0]),
        case("Shape", X),
        case("ShapeN", [X, U(2)], out_type=i64),
        case("Size", X),
        case("Rank", X),
        case("Fill", np.array([2, 3], i32), f32(1.5)),
        case("GatherV2", X, np.array([2, 0], i32), i32(0)),
        case("Gather", X, np.array([1, 1, 0], i64)),
        case("GatherNd", X, np.array([[0, 1], [2, 3]], i32)),
        case("ScatterNd", np.array([[0], [2]], i32), U(2, 4), np.array([3, 4], i32)),
        case("Where", B1),
        case("Select", B1, X, Y),
        case("SelectV2", B1, X, f32(0)),
        case("OneHot", np.array([0, 2, 1], i32), i32(3), f32(1), f32(0)),
        case("Range", i32(1), i32(10), i32(3)),
        case("LinSpace", f32(0), f32(1), i32(5)),
        case("Diag", U(3)),
        case("DiagPart", U(3, 3)),
        case("MatrixDiag", U(2, 3)),
        case("MatrixDiagPart", U(2, 3, 3)),
        case("MatrixBandPart", U(4, 4), i64(1), i64(0)),
        case("MatrixSetDiag", U(3, 3), U(3)),
        case("BroadcastTo", U(4), np.array([3, 4], i32)),
        case("BroadcastArgs", np.array([3, 1], i32), np.array([1, 4], i32)),
        case("BroadcastGradientArgs", np.array([3, 1], i32), np.array([1, 4], i32)),
        case("Cast", X, DstT=f64),
        case("Bitcast", X, type=i32),
        case("Unique", np.array([3, 1, 3, 2, 1], i32)),
        case("UniqueWithCounts", np.array([3, 1, 3, 2, 1], i32)),
        case("UniqueV2", np.array([[1, 2], [1, 2], [3, 4]], i32), np.array([0], i64)),
        case("TopKV2", U(6), i32(3)),
        case("InvertPermutation", np.array([2, 0, 1], i32)),
        case("ListDiff", np.array([1, 2, 3, 4], i32), np.array([2, 4], i32)),
        case("ReverseSequence", X, np.array([1, 2, 3], i64), seq_dim=1),
        case("SpaceToBatchND", U(1, 4, 4, 1), np.array([2, 2], i32), np.array([[0, 0], [0, 0]], i32)),
        case("BatchToSpaceND", U(4, 2, 2, 1), np.array([2, 2], i32), np.array([[0, 0], [0, 0]], i32)),
        case("SpaceToDepth", U(1, 4, 4, 1), block_size=2),
        case("DepthToSpace", U(1, 2, 2, 4), block_size=2),
        case("Roll", X, i32(1), AX),
        case("Bucketize", X, boundaries=[-0.5, 0.0, 0.5]),
        case("Cross", U(2, 3), U(2, 3)),
        case("AddN", [X, Y, X]),
        case("MatMul", X, U(4, 2), transpose_a=False),
        case("MatMul", X, Y, transpose_b=True, id="MatMul-transpose_b"),
        case("BatchMatMulV2", U(2, 3, 4), U(4, 2)),
        case("Einsum", [U(2, 3), U(3, 4)], equation="ij,jk->ik"),
        case("MatrixInverse", M),
        case("MatrixDeterminant", M),
        case("Cholesky", SPD),
        case("MatrixTriangularSolve", np.tril(M), U(4, 2, dtype=f64)),
        case("MatrixSolve", M, U(4, 2, dtype=f64)),
        case("Conv2D", IMG, U(3, 3, 2, 3), strides=[1, 1, 1, 1], padding="VALID"),
        case("DepthwiseConv2dNative", IMG, U(2, 2, 2, 1), strides=[1, 1, 1, 1], padding="SAME"),
        case("MaxPool", IMG, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        case("AvgPool", IMG, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="SAME"),
        case("LRN", IMG, depth_radius=1),
        case("InTopKV2", U(3, 5), np.array([0, 4, 2], i32), i32(2)),
        case("SegmentSum", X, np.array([0, 0, 1], i32)),
        case("SegmentMax", X, np.array([0, 1, 1], i32)),
        case("SegmentMean", X, np.array([0, 0, 0], i32)),
        case("UnsortedSegmentSum", X, np.array([1, 0, 1], i32), i32(2)),
        case("UnsortedSegmentMax", X, np.array([1, 0, 1], i32), i32(2)),
        case("SparseSegmentSum", X, np.array([0, 2], i32), np.array([0, 1], i32)),
        case("SparseToDense", np.array([[0, 1], [2, 3]], i64), np.array([3, 4], i64), U(2), f32(0)),
        case("TensorScatterUpdate", X, np.array([[0], [2]], i32), U(2, 4)),
        case("TensorScatterAdd", X, np.array([[1]], i32), U(1, 4)),
        case("EnsureShape", X, shape=[3, 4]),
        case("IdentityN", [X, I(2)]),
        case("HistogramFixedWidth", X, np.array([-1, 1], f32), i32(4)),
        # Constant folding would replace the op by a one-output Const: feed it.
        # In inference the CPU kernel allocates reserve_space_1..3 without writing them.
        case("FusedBatchNormV3", IMG, P(2), U(2), U(2), P(2), is_training=False, feed=True, undefined=(3, 4, 5)),
        case("ExtractImagePatches", IMG, ksizes=[1, 2, 2, 1], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1],
             padding="VALID"),
        case("DataFormatDimMap", np.array([0, 1, 3], i32)),
        case("StringJoin", [S("a", "b"), S("c", "d")], separator="-"),
        case("StringLength", S("", "abc", "hello")),
        case("Substr", S("hello", "world"), i32(1), i32(3)),
        case("StringToNumber", S("1.5", "-2")),
        case("AsString", X, precision=3),
        case("RegexReplace", S("aaa", "bab"), S0("a"), S0("x")),
        case("StaticRegexReplace", S("aaa", "bab"), pattern="a+", rewrite="<>"),
        case("StringUpper", S("MixEd", "low")),
        case("StringLower", S("MixEd", "UP")),
        case("StringStrip", S("  pad ", "x ")),
        case("ReduceJoin", S("a", "b", "c"), i32(0), separator="+"),
        case("EncodeBase64", S("hello", "tf")),
        case("DecodeBase64", S("aGVsbG8", "dGY")),
        case("StringToHashBucketFast", S("a", "b", "c"), num_buckets=10),
        case("StringSplitV2", S("a b", "c d e"), S0(" ")),
        case("Fingerprint", I(2, 3), S0("farmhash64")),
    ]
)


def _flatten(result) -> list:
    if isinstance(result, bridge.Operation):
        return []
    if isinstance(result, (list, tuple)):
        return [o for item in result for o in _flatten(item)]
    return [result]


@pytest.fixture(scope="module")
def expected(oracle) -> dict:
    """Stock TF's outputs per case id (one oracle run for all cases)."""
    request = [{k: v for k, v in c.items() if k not in ("id", "feed")} for c in CASES]
    results = oracle("eval_ops", request)["results"]
    return {c["id"]: r for c, r in zip(CASES, results, strict=True)}


def _placeholders(inputs: list, feeds: dict) -> list:
    def one(value):
        arr = np.asarray(value)
        ph = bridge.placeholder(bridge.string if arr.dtype == object else arr.dtype, arr.shape)
        feeds[ph] = arr
        return ph
    return [[one(v) for v in x] if isinstance(x, list) else one(x) for x in inputs]


@pytest.fixture(scope="module")
def built() -> tuple:
    """Every case built into one graph with bridge.ops:
    (graph, {id: outputs or the exception}, {id: feeds})."""
    from bridge import ops
    by_op = {v: k for k, v in ops.OP_TYPES.items()}
    g = bridge.Graph()
    out: dict = {}
    feeds: dict = {}
    with g.as_default():
        for c in CASES:
            fn = getattr(ops, by_op[c["op"]])
            names = opgen.param_names(_op_defs()[c["op"]])
            kwargs = {names[k]: v for k, v in c["attrs"].items()}
            feed = feeds[c["id"]] = {}
            inputs = _placeholders(c["inputs"], feed) if c["feed"] else c["inputs"]
            try:
                out[c["id"]] = _flatten(fn(*inputs, **kwargs))
            except Exception as exc:  # reported by the case's own test
                out[c["id"]] = exc
    return g, out, feeds


_OP_DEFS: dict = {}


def _op_defs() -> dict:
    if not _OP_DEFS:
        from bridge.framework.opdef import registry_op_defs
        _OP_DEFS.update((op.name, op) for op in registry_op_defs())
    return _OP_DEFS


def test_enough_different_ops() -> None:
    assert len({c["id"] for c in CASES}) == len(CASES), "case ids must be unique"
    ops = {c["op"] for c in CASES}
    assert len(ops) >= 150, len(ops)
    stateful = [op for op in ops if _op_defs()[op].is_stateful]
    assert not stateful, f"stateful ops do not belong here: {stateful}"


def _tolerance(dtype: np.dtype) -> dict:
    if dtype in (np.float16,):
        return {"rtol": 1e-3, "atol": 1e-3}
    if dtype in (np.float32, np.complex64):
        return {"rtol": 2e-5, "atol": 1e-6}
    return {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("c", CASES, ids=[c["id"] for c in CASES])
def test_matches_tensorflow(c: dict, built, expected) -> None:
    graph, outputs, feeds = built
    want = expected[c["id"]]
    assert not isinstance(want, str), f"stock TensorFlow rejected the case: {want}"
    got_outputs = outputs[c["id"]]
    if isinstance(got_outputs, Exception):
        raise got_outputs
    assert len(got_outputs) == len(want)
    with bridge.Session(graph) as sess:
        got = sess.run(got_outputs, feeds[c["id"]])
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"output {i}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "SO":  # strings: bytes objects either way
            assert g.astype(object).tolist() == w.astype(object).tolist(), f"output {i}"
            continue
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != {w.dtype}"
        if i in c["undefined"]:
            continue
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, equal_nan=True, err_msg=f"output {i}", **_tolerance(g.dtype))
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
