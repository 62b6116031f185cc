"""bridge.ops over the whole registry: a function per op with the signature
its OpDef implies, the module's bookkeeping, generation caching, and the
errors raised before the C API."""
from __future__ import annotations

import builtins
import inspect
import json
import keyword
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import dtypes, errors, op_library, opdef
from bridge.op_helpers import TF_DEFAULT

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ops():
    from bridge import ops
    return ops


@pytest.fixture(scope="module")
def registry() -> list[opdef.OpDef]:
    skip = op_library.library_op_names()  # ops of libraries loaded by other tests live elsewhere
    return [op for op in opdef.registry_op_defs() if op.name not in skip]


# --- the whole registry ------------------------------------------------------------

def _python_name(name: str, taken: set) -> str:
    """The rename rule, restated from the running Python's own lists."""
    reserved = set(keyword.kwlist) | {n for n in dir(builtins) if n.islower() and not n.startswith("_")} | {"name"}
    while name in reserved or name in taken:
        name += "_"
    return name


def _same_default(actual, attr: opdef.AttrDef) -> bool:
    want, kind = attr.default, attr.type
    if kind == "tensor" or (kind in ("list(tensor)", "list(func)") and want):
        return actual is TF_DEFAULT
    if kind == "shape":
        return actual is None if want.unknown_rank else actual == tuple(want)
    if kind == "list(shape)":
        return list(actual) == [None if s.unknown_rank else tuple(s) for s in want]
    if kind == "float":
        return (math.isnan(want) and math.isnan(actual)) or np.float32(actual) == np.float32(want)
    if kind == "list(float)":
        return np.array_equal(np.float32(actual), np.float32(want))
    if kind == "string":
        return (actual.encode() if isinstance(actual, str) else actual) == want
    if kind == "list(string)":
        return [a.encode() if isinstance(a, str) else a for a in actual] == want
    if kind.startswith("list("):
        return isinstance(actual, tuple) and list(actual) == want
    return type(actual) is type(want) and actual == want


def test_every_op_has_a_function(ops, registry) -> None:
    assert len(registry) > 1500
    assert sorted(ops.OP_TYPES.values()) == sorted(op.name for op in registry)
    assert len(set(ops.OP_TYPES)) == len(ops.OP_TYPES)
    for fn_name in ops.OP_TYPES:
        assert fn_name.isidentifier() and not keyword.iskeyword(fn_name), fn_name
        assert callable(getattr(ops, fn_name)), fn_name


def test_every_signature_matches_its_op_def(ops, registry) -> None:
    """Inputs positional in OpDef order; then keyword-only: required attrs,
    attrs with their defaults, name=None; inferred attrs absent."""
    by_op = {v: k for k, v in ops.OP_TYPES.items()}
    P = inspect.Parameter
    problems = []
    for op in registry:
        fn = getattr(ops, by_op[op.name])
        params = list(inspect.signature(fn).parameters.values())
        inferred = {a for arg in op.input_args for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a}
        attrs = [a for a in op.attrs if a.name not in inferred]
        taken: set = set()
        names = []  # inputs first, then attrs, each renamed against the names before it
        for n in [a.name for a in op.input_args] + [a.name for a in attrs]:
            py = _python_name(n, taken)
            taken.add(py)
            names.append(py)
        in_names = names[:len(op.input_args)]
        attr_names = dict(zip([a.name for a in attrs], names[len(op.input_args):]))
        required = [a for a in attrs if not a.has_default]
        optional = [a for a in attrs if a.has_default]
        want = ([(n, P.POSITIONAL_OR_KEYWORD) for n in in_names]
                + [(attr_names[a.name], P.KEYWORD_ONLY) for a in required + optional] + [("name", P.KEYWORD_ONLY)])
        got = [(p.name, p.kind) for p in params]
        if got != want:
            problems.append(f"{op.name}: {got} != {want}")
            continue
        for p in params[:len(in_names) + len(required)]:
            if p.default is not P.empty:
                problems.append(f"{op.name}.{p.name} should have no default")
        for a, p in zip(optional, params[len(in_names) + len(required):-1]):
            if not _same_default(p.default, a):
                problems.append(f"{op.name}.{p.name}: default {p.default!r} != {a.default!r}")
        if params[-1].default is not None:
            problems.append(f"{op.name}: name default is not None")
        doc = fn.__doc__ or ""
        if f"``{op.name}``" not in doc or (op.summary and inspect.cleandoc(op.summary)[:40] not in doc):
            problems.append(f"{op.name}: docstring lacks the op type or summary")
    assert not problems, f"{len(problems)} mismatches, first ones:\n" + "\n".join(problems[:20])


def test_module_bookkeeping(ops) -> None:
    assert ops.OP_TYPES["mat_mul"] == "MatMul"
    assert ops.OP_TYPES["add_v2"] == "AddV2"
    assert ops.OP_TYPES["bias_add_grad"] == "BiasAddGrad"
    assert ops.OP_TYPES["tensor_array_v3"] == "TensorArrayV3"
    assert ops.OP_TYPES["if_"] == "If" and "if_" in ops.RENAMED
    assert {"assert_", "for_", "while_"} <= set(ops.RENAMED)
    assert ops.COLLISIONS == {}  # TF 2.21's registry has none; the rule is tested with made-up ops
    assert ops.mat_mul.__module__ == "bridge.ops"
    # Builtin names stay functions (bridge.ops.abs) but star-imports cannot shadow them.
    assert ops.OP_TYPES["abs"] == "Abs" and "abs" not in ops.__all__ and "range" not in ops.__all__
    assert "mat_mul" in ops.__all__ and not any(n.startswith("_") for n in ops.__all__)
    assert ops._arg is getattr(ops, "_arg") and ops.OP_TYPES["_arg"] == "_Arg"


def test_import_bridge_does_not_import_ops() -> None:
    code = "import sys, bridge; print(json.dumps([m for m in sys.modules if m.startswith('bridge.op')]))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


_TIMING = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import bridge
    bridge._lib.load()
    t1 = time.perf_counter()
    import bridge.ops
    t2 = time.perf_counter()
    print(json.dumps({"tf": t1 - t0, "ops": t2 - t1, "file": bridge.ops.add_v2.__code__.co_filename}))
""")


def test_generated_once_then_cached(tmp_path) -> None:
    """A fresh cache generates the module once (atomically); later imports load it."""
    env = dict(os.environ, TFBRIDGE_CACHE_DIR=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")

    def run() -> dict:
        out = subprocess.run([sys.executable, "-c", _TIMING], capture_output=True, text=True, cwd=REPO,
                             env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold = run()
    files = sorted(p.name for p in (tmp_path / "ops").iterdir())
    assert len(files) == 2 and files[0].endswith(".bin") and files[1].endswith(".py"), files
    source = tmp_path / "ops" / files[1]
    assert cold["file"] == str(source)
    stamp = source.stat().st_mtime_ns
    warm = run()
    assert source.stat().st_mtime_ns == stamp and sorted(p.name for p in (tmp_path / "ops").iterdir()) == files
    print(f"\nimport bridge.ops: cold {cold['ops']:.3f} s, warm {warm['ops']:.3f} s "
          f"(TF libraries: {warm['tf']:.3f} s)")
    assert warm["ops"] < 0.5 * cold["ops"]


# --- conversion --------------------------------------------------------------------

def test_python_values_take_the_type_of_outputs(ops) -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(np.ones(3, np.float64), name="x")
        assert ops.add_v2(x, 1).dtype == dtypes.float64      # the 1 becomes float64
        assert ops.add_v2(2, x).dtype == dtypes.float64      # whichever side the Output is
        assert ops.add_v2(np.int64(2), 3).dtype == dtypes.int64   # numpy decides before Python
        assert ops.add_v2(1, 2).dtype == dtypes.int32        # TF's Python defaults
        assert ops.add_v2(1.5, 2).dtype == dtypes.float32
        assert ops.add_v2(2**40, 1).dtype == dtypes.int64
        assert ops.concat_v2([x, [5.0]], 0).dtype == dtypes.float64
        r = ops.range(0, 5, 1)                               # Tidx default int32
        assert r.dtype == dtypes.int32
        assert ops.cumsum([1.0, 2.0], 0).dtype == dtypes.float32
        axis = g.get_operation_by_name("ConcatV2/axis").get_attr("dtype")
        assert axis == dtypes.int32
        s = ops.string_join([["a", "b"], "c"], separator="-")
        assert s.dtype == dtypes.string
    with bridge.Session(g) as sess:
        assert sess.run(s).tolist() == [b"a-c", b"b-c"]
        assert sess.run(r).tolist() == [0, 1, 2, 3, 4]


def test_output_packaging(ops) -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(np.arange(6.0).reshape(2, 3), name="x")
        assert isinstance(ops.identity(x), bridge.Output)
        parts = ops.split(1, x, num_split=3)
        assert isinstance(parts, list) and len(parts) == 3
        u = ops.unique_with_counts([1, 1, 2])
        assert type(u).__name__ == "UniqueWithCounts" and u._fields == ("y", "idx", "count")
        n = ops.identity_n([x, 1])
        assert isinstance(n, list) and [o.dtype for o in n] == [dtypes.float64, dtypes.int32]
        assert isinstance(ops.no_op(), bridge.Operation)
        sh = ops.shape_n([x, x, x])
        assert len(sh) == 3
    with bridge.Session(g) as sess:
        assert sess.run(u).count.tolist() == [2, 1]


# --- errors before the C API ---------------------------------------------------------

@pytest.fixture()
def graph():
    g = bridge.Graph()
    with g.as_default():
        yield g


def _op_types(g) -> list[str]:
    return [op.type for op in g]


def test_wrong_number_of_inputs(ops, graph) -> None:
    x = bridge.constant([1.0], name="x")
    with pytest.raises(TypeError, match="add_v2"):
        ops.add_v2(x)
    with pytest.raises(TypeError, match="add_v2"):
        ops.add_v2(x, x, x)


def test_missing_required_attribute(ops, graph) -> None:
    with pytest.raises(TypeError, match=r"placeholder\(\) missing 1 required keyword-only argument: 'dtype'"):
        ops.placeholder()
    with pytest.raises(TypeError, match="Placeholder: attribute 'dtype'"):
        ops.placeholder(dtype=None)
    with pytest.raises(TypeError, match="Placeholder: attribute 'dtype'"):
        ops.placeholder(dtype="no-such-type")
    assert _op_types(graph) == []


def test_value_that_cannot_become_the_dtype(ops, graph) -> None:
    x = bridge.constant([1.0, 2.0], name="x")
    with pytest.raises(TypeError, match=r"AddV2: input 'y': cannot convert 'abc' to float32"):
        ops.add_v2(x, "abc")
    with pytest.raises(TypeError, match=r"Cast: input 'x'"):
        ops.cast(object(), DstT=dtypes.float32)
    with pytest.raises(TypeError, match="AddV2: input 'y'.*bridge.ops.pack"):
        ops.add_v2(x, [x, 1.0])
    assert "AddV2" not in _op_types(graph)


def test_type_outside_allowed_values(ops, graph) -> None:
    s = bridge.constant(np.array([b"a"], dtype=object), name="s")
    with pytest.raises(TypeError, match=r"Sqrt: input 'x' has type string, but T must be one of .*float32"):
        ops.sqrt(s)
    with pytest.raises(TypeError, match=r"Sqrt: input 'x' has type int32"):
        ops.sqrt(4)  # as in TensorFlow: a Python int is int32, and Sqrt takes no ints
    with pytest.raises(TypeError, match="Unique: attribute 'out_idx' must be one of int32, int64; got float32"):
        ops.unique([1, 2], out_idx=dtypes.float32)
    x = bridge.constant([[1.0]], name="x")
    with pytest.raises(ValueError, match="Conv2D: attribute 'padding' must be one of"):
        ops.conv2d(x, x, strides=[1, 1, 1, 1], padding="SIDEWAYS")
    assert _op_types(graph) == ["Const", "Const"]  # s and x: attributes are checked before any conversion


def test_dtype_mismatch_between_outputs(ops, graph) -> None:
    a = bridge.constant(np.ones(2, np.float32), name="a")
    b = bridge.constant(np.ones(2, np.float64), name="b")
    with pytest.raises(TypeError, match="AddV2: input 'y' must be float32, but 'b:0' is float64"):
        ops.add_v2(a, b)
    with pytest.raises(TypeError, match="MatMul: input 'b' must be float32"):
        ops.mat_mul(a, b)
    with pytest.raises(TypeError, match="Split: input 'split_dim' must be int32"):
        ops.split(bridge.constant(np.int64(0), name="i"), a, num_split=2)


def test_list_inputs_and_attribute_kinds(ops, graph) -> None:
    x = bridge.constant([1.0], name="x")
    with pytest.raises(ValueError, match="ConcatV2: input 'values' needs at least 2 tensors, got 1"):
        ops.concat_v2([x], 0)
    with pytest.raises(TypeError, match="AddN: input 'inputs' takes a list of tensors"):
        ops.add_n(x)
    with pytest.raises(TypeError, match="Split: attribute 'num_split' needs an int, got 2.5"):
        ops.split(0, x, num_split=2.5)
    with pytest.raises(ValueError, match="Split: attribute 'num_split' must be at least 1, got 0"):
        ops.split(0, x, num_split=0)
    with pytest.raises(TypeError, match="Conv2D: attribute 'strides' .* needs a list"):
        ops.conv2d(x, x, strides=1, padding="SAME")
    with pytest.raises(ValueError, match="DynamicStitch: input 'data' has 1 tensors, but an earlier input"):
        ops.dynamic_stitch([[0], [1]], [x])
    assert "ConcatV2" not in _op_types(graph) and "Split" not in _op_types(graph)


def test_inputs_from_two_graphs(ops) -> None:
    g1, g2 = bridge.Graph(), bridge.Graph()
    with g1.as_default():
        a = bridge.constant([1.0], name="a")
    with g2.as_default():
        b = bridge.constant([1.0], name="b")
    with pytest.raises(ValueError, match="AddV2: input 'y' .* belongs to another graph"):
        ops.add_v2(a, b)


def test_op_goes_to_the_graph_of_its_inputs(ops) -> None:
    g = bridge.Graph()
    with g.as_default():
        a = bridge.constant([1.0], name="a")
    y = ops.add_v2(a, 2.0)  # outside the block: still a's graph, and the 2.0 too
    assert y.graph is g and [op.name for op in g] == ["a", "AddV2/y", "AddV2"]


def test_reference_inputs(ops, graph) -> None:
    v = ops.variable_v2(shape=[2], dtype=dtypes.float32)
    init = ops.assign(v, [1.0, 2.0])
    with pytest.raises(TypeError, match="Assign: input 'ref' needs a reference tensor"):
        ops.assign([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(TypeError, match="Assign: input 'ref' needs a reference tensor"):
        ops.assign(ops.identity(v), [3.0, 4.0])
    added = ops.assign_add(v, [10.0, 10.0])
    with bridge.Session(graph) as sess:
        sess.run(init)
        assert sess.run(added).tolist() == [11.0, 12.0]


def test_tensorflow_errors_name_the_op(ops, graph) -> None:
    a = bridge.constant(np.ones((2, 3), np.float32), name="a")
    with pytest.raises(errors.InvalidArgumentError, match=r"'MatMul' \(MatMul\).*Dimensions must be equal"):
        ops.mat_mul(a, a)


def test_old_generated_modules_are_pruned(tmp_path) -> None:
    from bridge import opgen
    folder = tmp_path / "ops"
    folder.mkdir()
    for i in range(7):
        for name in (f"registry-{i:04d}.py", f"registry-{i:04d}.cpython-311.bin"):
            (folder / name).write_text("")
            os.utime(folder / name, (1000 + i, 1000 + i))
    (folder / "library_x-0000.py").write_text("")  # another kind: untouched
    opgen._prune(folder / "registry-0006.py")
    left = sorted(p.name for p in folder.iterdir())
    assert left == ["library_x-0000.py"] + [f"registry-{i:04d}{ext}" for i in range(3, 7)
                                            for ext in (".cpython-311.bin", ".py")]
