"""Python's operators on Outputs (bridge/ops/operators.py): each builds the graph
TF Python's Tensor operators build in graph mode, checked node by node (names,
op types, inputs, attributes) against stock TensorFlow (the build_expressions
oracle), with the values of a run and, for slices, their gradients."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import bridge
from bridge.ops.operators import OPERATORS

X = np.array([[1.5, -2.0], [0.5, 3.0]])
Y = np.array([[2.0, 0.25], [-1.0, 4.0]])

rng = np.random.default_rng(7)
F = rng.standard_normal((2, 3)).astype(np.float32)
G = (rng.standard_normal((2, 3)) + 0.5).astype(np.float32)
POS = (np.abs(F) + 0.5).astype(np.float32)
W = rng.standard_normal((3, 2)).astype(np.float32)
D = rng.standard_normal((2, 3))                       # float64
A = np.array([[7, -3, 12], [5, 9, -8]], np.int32)
B = np.array([[2, 5, -5], [3, -4, 3]], np.int32)
L = np.array([10, -7, 2**40], np.int64)
U8 = np.array([200, 3, 9], np.uint8)
P = np.array([True, False, True, False])
Q = np.array([True, True, False, False])
Z = np.array([3 + 4j, -1 + 0.5j], np.complex128)
B3 = rng.standard_normal((2, 2, 3)).astype(np.float32)
C3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
T = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6) / 7
S = np.array([b"ab", b"c"], dtype=object)

# id -> (inputs, expression, gradient check)
EXPRESSIONS = {
    # arithmetic, forward and reflected, Python scalars taking the tensor's dtype
    "add": ({"x": F, "y": G}, "x + y"), "add_scalar": ({"x": F}, "x + 2"), "radd": ({"x": F}, "2 + x"),
    "add_string": ({"s": S}, "s + b'!'"),
    "sub": ({"x": F}, "x - 1.5"), "rsub": ({"x": F}, "1.5 - x"), "sub_int": ({"a": A}, "3 - a"),
    "mul": ({"x": F, "y": G}, "x * y"), "rmul": ({"x": F}, "3 * x"),
    "mul_bool": ({"p": P, "q": Q}, "p * q"),
    "truediv": ({"x": F, "y": G}, "x / y"), "truediv_scalar": ({"x": F}, "x / 2"), "rtruediv": ({"x": G}, "2 / x"),
    "truediv_int32": ({"a": A, "b": B}, "a / b"), "truediv_int_scalar": ({"a": A}, "a / 2"),
    "rtruediv_int": ({"a": B}, "7 / a"), "truediv_int64": ({"l": L}, "l / 4"),
    "truediv_uint8": ({"u": U8}, "u / u"), "truediv_f64": ({"d": D}, "d / 3"),
    "floordiv": ({"a": A, "b": B}, "a // b"), "floordiv_f": ({"x": F}, "x // 0.5"),
    "rfloordiv": ({"a": B}, "20 // a"),
    "mod": ({"a": A, "b": B}, "a % b"), "mod_scalar": ({"a": A}, "a % 5"), "rmod": ({"x": G}, "5.0 % x"),
    "pow": ({"x": POS}, "x ** 2"), "rpow": ({"x": F}, "2 ** x"), "pow_tensors": ({"x": POS, "y": G}, "x ** y"),
    "pow_int": ({"a": A}, "a ** 2"),
    "matmul": ({"x": F, "w": W}, "x @ w"), "matmul_array": ({"x": F}, "x @ np.ones((3, 2), np.float32)"),
    "rmatmul": ({"x": F}, "np.ones((4, 2), np.float32) @ x"),
    "batch_matmul": ({"b": B3, "c": C3}, "b @ c"),
    "matmul_unknown_rank": ({"x": {"value": F, "shape": None}, "w": W}, "x @ w"),
    "matmul_f64": ({"d": D}, "d @ np.ones((3, 3))"),
    # unary
    "neg": ({"x": F}, "-x"), "neg_int": ({"a": A}, "-a"), "abs": ({"x": F}, "abs(x)"),
    "abs_int": ({"a": A}, "abs(a)"), "abs_complex": ({"z": Z}, "abs(z)"),
    "invert_bool": ({"p": P}, "~p"), "invert_int": ({"a": A}, "~a"),
    # logical on bool, bitwise on integers
    "and_bool": ({"p": P, "q": Q}, "p & q"), "or_bool": ({"p": P, "q": Q}, "p | q"),
    "xor_bool": ({"p": P, "q": Q}, "p ^ q"), "and_python": ({"p": P}, "p & True"),
    "ror_python": ({"p": P}, "False | p"), "rxor_python": ({"p": P}, "True ^ p"),
    "and_int": ({"a": A, "b": B}, "a & b"), "or_int": ({"a": A}, "a | 6"), "xor_int": ({"a": A, "b": B}, "a ^ b"),
    "rand_int": ({"a": A}, "12 & a"),
    # comparisons (a Python scalar on the left flips the comparison)
    "less": ({"x": F, "y": G}, "x < y"), "less_equal": ({"x": F}, "x <= 0.5"), "greater": ({"a": A}, "a > 3"),
    "greater_equal": ({"x": F, "y": G}, "x >= y"), "flipped": ({"a": A}, "3 < a"),
    "chain": ({"x": F, "y": G}, "(x * 2 + y) / (abs(y) + 1) - x ** 2"),
    # __getitem__ (with gradients for float tensors)
    "index": ({"t": T}, "t[1]"), "index_neg": ({"t": T}, "t[-1]"), "slice": ({"t": T}, "t[1:3]"),
    "slice_step": ({"t": T}, "t[::2]"), "slice_reverse": ({"t": T}, "t[::-1]"),
    "slices": ({"t": T}, "t[1:-1, ::2]"), "slice_neg_step": ({"t": T}, "t[3:0:-2, -2:]"),
    "ellipsis_index": ({"t": T}, "t[..., 0]"), "newaxis": ({"t": T}, "t[None]"),
    "newaxis_index": ({"t": T}, "t[:, None, 2]"), "mixed": ({"t": T}, "t[1, ..., None, ::-2]"),
    "ellipsis_only": ({"t": T}, "t[...]"), "empty_tuple": ({"t": T}, "t[()]"),
    "scalar_index": ({"t": T}, "t[2, 3, 4]"),
    "tensor_index": ({"t": T, "i": np.int32(2)}, "t[i]"),
    "tensor_slice": ({"t": T, "i": np.int32(1)}, "t[i:i + 2, 1:i]"),
    "tensor_int64": ({"t": T, "j": np.int64(3)}, "t[:, j]"),
    "tensor_int64_slice": ({"t": T, "j": np.int64(1)}, "t[1:, j:]"),
    "index_of_op": ({"x": F}, "(x * 2)[1, :2]"),
    "index_int": ({"a": A}, "a[:, 1]"),
    "list_spec": ({"t": T}, "t[[1, 2]]"),             # a list is a tuple of indices, as in TF
    # boolean masks: x[mask] is tf.boolean_mask(x, mask)
    "mask": ({"t": T, "m": P}, "t[m]"),
    "mask_2d": ({"t": T, "k": T[:, :, 0] > 1.5}, "t[k]"),
    "mask_numpy": ({"t": T}, "t[np.array([False, True, True, False])]"),
    "mask_unknown_sizes": ({"t": {"value": T, "shape": [None, 5, None]}, "m": {"value": P, "shape": [None]}},
                           "t[m]"),
    "mask_int": ({"a": A}, "a[np.array([False, True])]"),
    "mask_of_op": ({"x": F}, "(x * 2)[x > 0]"),
    "boolean_mask_axis": ({"t": T, "n": T[0, :, 0] > 1}, "boolean_mask(t, n, axis=1)"),
    "boolean_mask_axis_2d": ({"t": T, "k": T[0] > 1}, "boolean_mask(t, k, axis=1)"),
    # TF Python's reductions and matmul by TF's names: `tf` is tensorflow in the
    # oracle and `bridge` here (bridge/ops/math_ops.py)
    "reduce_sum_all": ({"t": T}, "tf.reduce_sum(t)"),
    "reduce_sum_axis": ({"t": T}, "tf.reduce_sum(t, 1)"),
    "reduce_sum_axes_keepdims": ({"t": T}, "tf.reduce_sum(t, [0, 2], keepdims=True)"),
    "reduce_sum_unknown_rank": ({"t": {"value": T, "shape": None}}, "tf.reduce_sum(t)"),
    "reduce_sum_unknown_dims": ({"t": {"value": T, "shape": [None, 5, None]}}, "tf.reduce_sum(t, axis=-1)"),
    "reduce_sum_scalar": ({"x": np.float64(2.5)}, "tf.reduce_sum(x)"),
    "reduce_sum_named": ({"t": T}, "tf.reduce_sum(t, 0, name='total')"),
    "reduce_mean": ({"t": T}, "tf.reduce_mean(t, [1, 2])"),
    "reduce_max_min": ({"t": T}, "(tf.reduce_max(t, 0), tf.reduce_min(t))"),
    "reduce_prod": ({"x": F}, "tf.reduce_prod(x)"),
    "reduce_any_all": ({"p": P}, "(tf.reduce_any(p), tf.reduce_all(p, keepdims=True))"),
    "reduce_int": ({"a": A}, "tf.reduce_sum(a, 0)"),
    "reduce_logsumexp": ({"t": T}, "tf.reduce_logsumexp(t * 100.0, 1)"),
    "reduce_logsumexp_all_keepdims": ({"t": T}, "tf.reduce_logsumexp(t, keepdims=True)"),
    "matmul_transpose_b": ({"t": T}, "tf.matmul(t[0], t[1], transpose_b=True)"),
    "matmul_transpose_a": ({"t": T}, "tf.matmul(t[0], t[1], transpose_a=True)"),
    "matmul_batch_adjoint": ({"t": T}, "tf.matmul(t, t, adjoint_b=True)"),
    "matmul_batch_transpose": ({"t": T}, "tf.matmul(t, t, transpose_a=True, name='mm')"),
    "matmul_complex_adjoint": ({"z": np.outer(Z, Z + 1j)}, "tf.matmul(z, z, adjoint_a=True)"),
    # TF 2's top-level array and math functions by their names
    "shape_known": ({"t": T}, "tf.shape(t)"), "shape_unknown": ({"t": {"value": T, "shape": [None, 5, 6]}}, "tf.shape(t)"),
    "size_rank": ({"t": {"value": T, "shape": [None, 5, 6]}}, "(tf.size(t), tf.rank(t), tf.size(t[0]))"),
    "concat": ({"x": F, "y": G}, "tf.concat([x, y], 0)"), "concat_one": ({"x": F}, "tf.concat([x], 1)"),
    "stack": ({"x": F, "y": G}, "tf.stack([x, y])"), "stack_axis": ({"x": F, "y": G}, "tf.stack([x, y], axis=-1)"),
    "stack_values": ({"x": F[0, 0]}, "tf.stack([x, 2.0, [x, 1.0][0]])"),
    "stack_nested": ({"x": F[0, 0]}, "tf.stack([[x, 2.0], [3.0, 4.0]])"),
    "unstack": ({"t": T}, "tuple(tf.unstack(t, axis=1))"),
    "cast": ({"x": F}, "tf.cast(x, tf.int32)"), "cast_same": ({"x": F}, "tf.cast(x, tf.float32) * 2"),
    "cast_value": ({"x": F}, "x + tf.cast(3, tf.float32)"),
    "transpose": ({"t": T}, "tf.transpose(t)"), "transpose_perm": ({"t": T}, "tf.transpose(t, [1, 0, 2])"),
    "transpose_unknown": ({"t": {"value": T, "shape": None}}, "tf.transpose(t)"),
    "transpose_conjugate": ({"z": np.outer(Z, Z + 1j)}, "tf.transpose(z, conjugate=True)"),
    "zeros_ones": ({"x": F}, "(tf.zeros([2, 3]) + x, tf.ones((2, 3), tf.int32), tf.zeros(4, tf.bool))"),
    "zeros_big": ({"x": F}, "tf.ones([1001])[:30] + tf.reduce_sum(tf.zeros([40, 30]), 0)"),
    "zeros_tensor_shape": ({"a": np.array([2, 3], np.int32)}, "tf.ones(a) * 3"),
    "zeros_like": ({"t": T}, "(tf.zeros_like(t), tf.ones_like(t, dtype=tf.int64))"),
    "ones_like_unknown": ({"t": {"value": T, "shape": [None, 5, 6]}}, "(tf.ones_like(t), tf.zeros_like(t, tf.int32))"),
    "expand_squeeze": ({"t": T}, "tf.squeeze(tf.expand_dims(t, 1), 1)"),
    "squeeze_all": ({"x": F[:1]}, "tf.squeeze(x)"),
    "split": ({"t": T}, "tuple(tf.split(t, 2))"), "split_sizes": ({"t": T}, "tuple(tf.split(t, [1, 2, 3], axis=2))"),
    "where_select": ({"x": F, "y": G}, "tf.where(x > y, x, y)"), "where_coords": ({"x": F}, "tf.where(x > 0)"),
    "where_broadcast": ({"x": F}, "tf.where(x > 0, x, 0.0)"),
    "argmax_argmin": ({"t": T}, "(tf.argmax(t), tf.argmin(t, 2, output_type=tf.int32))"),
    "one_hot": ({"i": np.array([0, 2, 1], np.int32)}, "(tf.one_hot(i, 3), tf.one_hot(i, 4, 5.0, -1.0, axis=0))"),
    "range": ({"a": np.int32(5)}, "(tf.range(a), tf.range(2, 10, 3), tf.range(1.5, a), tf.range(0, 1, 0.25, dtype=tf.float64))"),
    "add_n": ({"x": F, "y": G}, "(tf.add_n([x, y, x]), tf.add_n([y]), tf.add_n([x], name='one'))"),
    "add_etc": ({"x": F, "y": G}, "(tf.add(x, 1), tf.multiply(x, y), tf.subtract(x, y), tf.divide(x, y), tf.divide(x, 2, name='half'))"),
    "abs_round": ({"x": F, "z": Z}, "(tf.abs(x), tf.abs(z), tf.round(x * 3))"),
    "clip_by_value": ({"x": F}, "tf.clip_by_value(x, -0.5, 0.5)"),
    "raw_named": ({"x": F, "y": G}, "tf.maximum(tf.exp(x), tf.sqrt(tf.square(y))) + tf.reshape(tf.tile(x, [1, 2]), [2, 6])[:, :3]"),
}
# TF 2's tf.math / tf.linalg / tf.random namespaces (bridge/api/namespaces.py): every name, its nodes
_U = np.linspace(0.15, 0.85, 6, dtype=np.float32).reshape(2, 3)
_UNARY = ["acos", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "digamma", "erf", "erfc", "exp", "expm1",
          "floor", "is_finite", "is_inf", "is_nan", "lgamma", "log", "log1p", "negative", "reciprocal", "rint",
          "rsqrt", "sign", "sin", "sinh", "softplus", "sqrt", "square", "tan", "tanh", "sigmoid", "bessel_i0e",
          "bessel_i1e", "abs", "round", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
          "reduce_logsumexp", "argmax", "argmin", "softmax", "log_softmax"]
_BINARY = ["atan2", "maximum", "minimum", "pow", "squared_difference", "xdivy", "xlogy", "xlog1py", "equal",
           "not_equal", "less", "less_equal", "greater", "greater_equal", "floormod", "igamma", "igammac", "add",
           "multiply", "subtract", "divide"]
EXPRESSIONS.update({f"math_{n}": ({"x": _U}, f"tf.math.{n}(x)") for n in _UNARY})
EXPRESSIONS.update({f"math_{n}": ({"x": _U, "y": _U[::-1] + 0.5}, f"tf.math.{n}(x, y)") for n in _BINARY})
EXPRESSIONS.update({
    "math_acosh": ({"x": _U + 1}, "tf.math.acosh(x)"), "math_zeta": ({"x": _U + 1.5, "y": _U}, "tf.math.zeta(x, y)"),
    "math_polygamma": ({"a": np.ones((2, 3), np.float32), "x": _U}, "tf.math.polygamma(a, x)"),
    "math_betainc": ({"a": _U + 1, "b": _U[::-1] + 1, "x": _U}, "tf.math.betainc(a, b, x)"),
    "math_logical": ({"p": P, "q": Q}, "(tf.math.logical_and(p, q), tf.math.logical_or(p, q), tf.math.logical_not(p))"),
    "math_add_n": ({"x": _U, "y": _U}, "tf.math.add_n([x, y])"),
    "math_reduce_any_all": ({"p": P}, "(tf.math.reduce_any(p), tf.math.reduce_all(p))"),
    "math_segments": ({"x": _U.T.copy(), "i": np.array([0, 0, 1], np.int32)},
                      "(tf.math.segment_sum(x, i), tf.math.segment_mean(x, i), tf.math.segment_max(x, i), "
                      "tf.math.segment_min(x, i), tf.math.segment_prod(x, i))"),
    "math_unsorted_segments": ({"x": _U.T.copy(), "i": np.array([1, 0, 1], np.int32)},
                               "(tf.math.unsorted_segment_sum(x, i, 3), tf.math.unsorted_segment_max(x, i, 3), "
                               "tf.math.unsorted_segment_min(x, i, 3), tf.math.unsorted_segment_prod(x, i, 2))"),
    "linalg": ({"m": np.array([[4.0, 1.0], [1.0, 3.0]]), "v": np.array([[1.0], [2.0]])},
               "(tf.linalg.inv(m), tf.linalg.det(m), tf.linalg.cholesky(m), tf.linalg.solve(m, v), "
               "tf.linalg.qr(m)[0], tf.linalg.band_part(m, 0, -1), tf.linalg.matmul(m, v, transpose_a=True))"),
})
GRAD = {k for k, (inputs, expr) in EXPRESSIONS.items() if expr.startswith(("t[", "(x", "boolean_mask(", "tf.reduce_sum(t", "tf.reduce_mean",
                                                                                 "tf.reduce_logsumexp", "tf.reduce_prod",
                                                                                 "(tf.reduce_max", "tf.matmul(t", "tf.concat", "tf.stack([x, y]",
                                                                                 "tuple(tf.unstack", "tf.transpose(t",
                                                                                 "tf.squeeze", "tuple(tf.split",
                                                                                 "tf.where(x > y", "tf.clip_by_value",
                                                                                 "tf.maximum", "(tf.add_n",
                                                                                 "(tf.add(", "tf.where(x > 0, x"))} | {"chain"}

# Expressions TF refuses to build (TypeError or ValueError): so must the bridge.
REFUSED = {
    "int_plus_float": ({"a": A}, "a + 2.5"), "float_plus_int_tensor": ({"x": F, "a": A}, "x + a"),
    "compare_dtypes": ({"x": F, "a": A}, "x < a"), "bitwise_float": ({"x": F, "y": G}, "x & y"),
    "invert_float": ({"x": F}, "~x"), "float_index": ({"t": T}, "t[1.5]"),
"float_tensor_index": ({"t": T, "x": F}, "t[x]"),
    "truediv_bool": ({"p": P}, "p / p"), "matmul_dtypes": ({"x": F, "d": D}, "x @ d"),
    "mask_scalar": ({"t": T}, "t[True]"), "mask_shape": ({"t": T, "m": Q[:3]}, "t[m]"),
    "mask_unknown_rank": ({"t": T, "m": {"value": P, "shape": None}}, "t[m]"),
}


def _request() -> dict:
    cases = [{"id": k, "inputs": inputs, "expr": expr, "grad": k in GRAD}
             for k, (inputs, expr) in EXPRESSIONS.items()]
    cases += [{"id": k, "inputs": inputs, "expr": expr} for k, (inputs, expr) in REFUSED.items()]
    return {"cases": cases}


def _placeholders(inputs: dict) -> tuple[dict, dict]:
    ns, feed = {"np": np, "boolean_mask": bridge.boolean_mask, "tf": bridge}, {}
    for name, spec in inputs.items():
        value, shape = (spec["value"], spec["shape"]) if isinstance(spec, dict) else (spec, np.shape(spec))
        arr = np.asarray(value)
        dtype = bridge.string if arr.dtype == object else bridge.as_dtype(arr.dtype)
        ph = bridge.placeholder(dtype, None if shape is None else list(shape), name=name)
        ns[name], feed[ph] = ph, arr
    return ns, feed


def _weights(shape: tuple, dtype) -> np.ndarray:  # as build_expressions
    n = int(np.prod(shape, dtype=np.int64))
    return (np.arange(1, n + 1, dtype=np.float64) % 7 + 1).reshape(shape).astype(dtype)


@pytest.fixture(scope="module")
def golden(oracle) -> dict:
    return oracle("build_expressions", _request())


@pytest.fixture(scope="module")
def built() -> dict:
    """Every expression built by the bridge into one graph, each in a scope
    named by its id (as the oracle does), with its feeds and outputs."""
    g = bridge.Graph()
    cases = {}
    with g.as_default():
        for k, (inputs, expr) in EXPRESSIONS.items():
            with bridge.name_scope(k):
                ns, feed = _placeholders(inputs)
                out = eval(expr, ns)
                outs = list(out) if isinstance(out, tuple) else [out]
                cases[k] = {"outputs": outs, "feed": feed, "ns": ns}
    return {"graph": g, "cases": cases}


@pytest.fixture(scope="module")
def bridge_nodes(built, oracle) -> list:
    """The bridge's graph as TF reads it back (import_check describes it like the golden graph)."""
    imported = oracle("import_check", {"graph_def": built["graph"].as_graph_def()})["imported"]
    assert not isinstance(imported, str), imported
    return imported


def _by_case(nodes: list, case: str) -> dict:
    prefix, grad = f"{case}/", f"{case}/grad/"
    return {n["name"]: (n["op"], n["inputs"], {k: v.tolist() if isinstance(v, np.ndarray) else v
                                               for k, v in n["attrs"].items()})
            for n in nodes if n["name"].startswith(prefix) and not n["name"].startswith(grad)}


@pytest.mark.parametrize("case", list(EXPRESSIONS))
def test_graph_matches_tensorflow(case, golden, built, bridge_nodes):
    """Same nodes as TF Python builds: names, op types, inputs and attributes."""
    assert "error" not in golden["cases"][case], golden["cases"][case]
    want, got = _by_case(golden["nodes"], case), _by_case(bridge_nodes, case)
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], name
    assert [o.name for o in built["cases"][case]["outputs"]] == golden["cases"][case]["outputs"]


@pytest.mark.parametrize("case", list(EXPRESSIONS))
def test_values_match_tensorflow(case, golden, built):
    entry, mine = golden["cases"][case], built["cases"][case]
    with bridge.Session(built["graph"]) as sess:
        values = sess.run(mine["outputs"], mine["feed"])
    for got, want in zip(values, entry["values"], strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype == object:
            assert got.tolist() == want.tolist()
            continue
        np.testing.assert_allclose(got, want, rtol=1e-6)   # complex values: real and imaginary parts


@pytest.mark.parametrize("case", sorted(GRAD))
def test_slice_gradients_match_tensorflow(case, golden, built):
    """StridedSlice (and the arithmetic around it) is differentiable: d(sum(out * w))/dx as TF's."""
    entry, mine = golden["cases"][case], built["cases"][case]
    g = built["graph"]
    ns = mine["ns"]
    xs = [ns[n] for n in EXPRESSIONS[case][0] if ns[n].dtype.is_floating]
    ys = [y for y in mine["outputs"] if y.dtype.is_floating]
    with bridge.Session(g) as sess:
        shapes = [v.shape for v in sess.run(ys, mine["feed"])]
    with g.as_default(), bridge.name_scope(f"{case}/grad/"):
        gys = [bridge.constant(_weights(s, y.dtype.as_numpy_dtype)) for s, y in zip(shapes, ys, strict=True)]
        grads = bridge.gradients(ys, xs, grad_ys=gys)
    with bridge.Session(g) as sess:
        for got, want in zip(grads, entry["grads"], strict=True):
            np.testing.assert_allclose(sess.run(got, mine["feed"]), want, rtol=1e-6)


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_like_tensorflow(case, golden):
    entry = golden["cases"][case]
    assert "error" in entry, f"TF built {case}"
    kind = entry["error"].split(":")[0]
    inputs, expr = REFUSED[case]
    g = bridge.Graph()
    with g.as_default():
        ns, _ = _placeholders(inputs)
        with pytest.raises((TypeError, ValueError)) as info:
            eval(expr, ns)
    assert type(info.value).__name__ == kind, (entry["error"], info.value)


BINARY = [  # operator, op type, numpy
    (operator.add, "AddV2", np.add), (operator.sub, "Sub", np.subtract), (operator.mul, "Mul", np.multiply),
    (operator.truediv, "RealDiv", np.divide), (operator.matmul, "MatMul", np.matmul),
    (operator.pow, "Pow", lambda a, b: np.abs(a) ** b), (operator.floordiv, "FloorDiv", np.floor_divide),
    (operator.mod, "FloorMod", np.mod),
]


@pytest.mark.parametrize("op, op_type, expected", BINARY, ids=[b[1] for b in BINARY])
def test_binary_operators_and_their_reflections(op, op_type, expected):
    x = np.abs(X) if op_type == "Pow" else X
    g = bridge.Graph()
    with g.as_default():
        a = bridge.constant(x)
        b = bridge.constant(Y)
        # Output op Output, Output op array, and reflected: list op Output, array op Output
        outs = [op(a, b), op(a, Y), op(x.tolist(), b), op(x, b)]
    assert {out.op.type for out in outs} == {op_type}
    with bridge.Session(g) as sess:
        for got in sess.run(outs):
            np.testing.assert_allclose(got, expected(x, Y), rtol=1e-15)


def test_unary_operators():
    g = bridge.Graph()
    with g.as_default():
        a = bridge.constant(X)
        neg, absolute = -a, abs(a)
    assert (neg.op.type, absolute.op.type) == ("Neg", "Abs")
    with bridge.Session(g) as sess:
        got_neg, got_abs = sess.run([neg, absolute])
    np.testing.assert_array_equal(got_neg, -X)
    np.testing.assert_array_equal(got_abs, np.abs(X))


def test_equality_is_identity_as_in_tf1_graph_mode():
    """``==`` compares tensors, not values (TF1 graph mode; ops.equal compares values)."""
    g = bridge.Graph()
    with g.as_default():
        a, b = bridge.constant(1.0), bridge.constant(1.0)
    assert (a == a) is True and (a == b) is False and (a != b) is True
    assert len({a, b, bridge.Output(a.op, 0)}) == 2   # hashable, the same tensor twice is one


def test_graph_tensors_are_not_python_bools_nor_sized():
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [3, 2])
        with pytest.raises(TypeError, match="Python bool"):
            bool(x < 1.0)
        with pytest.raises(TypeError, match="len"):
            len(x)
        with pytest.raises(TypeError, match="iterating"):
            list(x)               # TF's graph mode refuses it too (and x[i] never raises IndexError)


def test_comparison_in_while_loop_condition():
    g = bridge.Graph()
    with g.as_default():
        i0 = bridge.constant(0)
        x0 = bridge.constant(1.0)
        i, x = bridge.while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2.0), [i0, x0])
    with bridge.Session(g) as sess:
        assert sess.run([i, x]) == [5, 32.0]


def test_every_operator_is_installed_on_output():
    for name, fn in OPERATORS.items():
        assert getattr(bridge.Output, name) is fn, name


def test_numpy_defers_to_outputs():
    """``array * x`` is one graph op, not numpy multiplying each element by x."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(X)
        for y in (Y * x, Y @ x, np.float64(2.0) * x, np.abs(Y) ** x, 2.0 ** x, Y // x, Y % x, Y < x):
            assert isinstance(y, bridge.Output), type(y)
        with pytest.raises(TypeError):
            np.add(Y, x)  # a ufunc on an Output: refused, never an object array


def test_tf_functions_refuse_what_tf_refuses_with_tfs_messages():
    """The refusals of bridge/ops/math_ops.py and array_ops.py, each with TF's wording."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [2, 3], name="x")
        u = bridge.placeholder(bridge.float32, None, name="u")
        cases = [
            (lambda: bridge.reduce_sum(x, 0, reduction_indices=1), ValueError, "Cannot specify both 'axis'"),
            (lambda: bridge.reduce_sum(x, keepdims=True, keep_dims=True), ValueError, "Cannot specify both 'keepdims'"),
            (lambda: bridge.matmul(x, x, transpose_a=True, adjoint_a=True), ValueError, "Only one of `transpose_a`"),
            (lambda: bridge.matmul(x, x, transpose_b=True, adjoint_b=True), ValueError, "Only one of `transpose_b`"),
            (lambda: bridge.unstack(u), ValueError, "Cannot infer argument `num`"),
            (lambda: bridge.unstack(x, axis=2), ValueError, "Argument `axis` = 2 not in range [-2, 2)"),
            (lambda: bridge.stack([x, x], axis=3), ValueError, "Argument `axis` = 3 not in range [-3, 3)"),
            (lambda: bridge.where(x > 0, x), ValueError, "x and y must both be non-None or both be None"),
            (lambda: bridge.one_hot([0, 1], 2, on_value=bridge.constant(1.0), dtype=bridge.float64), TypeError,
             "dtype float32 of on_value does not match dtype parameter float64"),
            (lambda: bridge.one_hot([0, 1], 2, on_value=1.0, off_value=0), TypeError,
             "of on_value does not match dtype int32 of off_value"),
            (lambda: bridge.split(x, bridge.constant(2)), ValueError, "Rank-0 tensors are not supported"),
            (lambda: bridge.range(bridge.constant(True)), TypeError, "not one of int32"),
            (lambda: bridge.add_n([]), ValueError, "Inputs must be an iterable of at least one"),
            (lambda: bridge.math.no_such_function, AttributeError, "tf.math.no_such_function is not in the bridge"),
        ]
        for build, kind, message in cases:
            with pytest.raises(kind) as info:
                build()
            assert message in str(info.value), (message, str(info.value))
