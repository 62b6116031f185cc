"""Gradient cases checked against stock TensorFlow: one module per op family.

Each family module (``math.py``, ``linalg.py``, ...; listed in
:data:`FAMILIES`) holds ``CASES``, a list of :class:`GradCase`, and while
issue #16 is open ``PENDING``, the op types of the family still without a case.  A case names
the op type whose gradient it tests and builds a small forward graph around
it with ``bridge.ops``; ``tests/grad/test_parity.py`` then, for every float
dtype of the case:

1. builds the graph in the bridge: one float64 (complex128) placeholder per
   float input, cast to the dtype under test (so float16 and bfloat16 need no
   numpy support), the case's ``build``, and placeholders for the upstream
   gradients ``grad_ys`` and the second-order directions ``vs``;
2. sends that GraphDef to the oracle (``tests/oracle/graph_gradients.py``),
   which differentiates the *same nodes* with TF Python's ``tf.gradients``;
3. differentiates it with ``bridge.gradients`` and compares: first order
   ``d(sum grad_ys*ys)/dxs`` and second order ``d(sum_i sum(g_i*v_i))/dxs``.

Where TF's gradient is None the bridge's must be None too; where TF has a
value the bridge must have the same value.  A dtype for which stock TF has
no CPU kernel is skipped, saying so; an op type without any CPU kernel
(:data:`NO_CPU_KERNEL`) is compared by structure instead: both sides must give
the same xs a gradient, built from the same op types (past :data:`PLUMBING`).
"""
from __future__ import annotations

import dataclasses
import importlib
import zlib
from typing import Any, Callable, Optional, Sequence

import numpy as np

#: The family modules, in the order tests run them.
FAMILIES = ("math", "special", "linalg", "fft", "array", "nn", "image", "sparse", "control", "state")

FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16", "complex128", "complex64")

#: Op types stock TF has no CPU kernel for in any dtype (device collectives, DTensor, cuDNN,
#: some CSR ops): their cases are compared by structure, the only check a CPU can make.  A
#: dtype another op type lacks a kernel for is skipped: that op type runs in its other dtypes.
NO_CPU_KERNEL = frozenset({
    "AllToAll", "CollectivePermute", "CrossReplicaSum", "TPUEmbeddingActivations",
    "NcclAllReduce", "NcclBroadcast", "NcclReduce",
    "XlaClusterOutput", "XlaSpmdFullToShardShape", "XlaSpmdShardToFullShape",
    "CopyToMesh", "CopyToMeshGrad", "Relayout", "RelayoutLike",
    "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CTCLossV2",
    "SparseMatrixAdd", "SparseMatrixSoftmax", "SparseMatrixMul",
})

#: Relative (and absolute, scaled by the largest expected magnitude) tolerance per dtype.
TOLERANCE = {"float64": 1e-10, "complex128": 1e-10, "float32": 2e-4, "complex64": 2e-4,
             "float16": 3e-2, "bfloat16": 6e-2}


@dataclasses.dataclass(frozen=True)
class GradCase:
    """One forward graph around ``op``, differentiated on both sides.

    ``build(*xs)`` adds the graph to the default graph and returns its ys (an
    Output or a list; non-float ys are left out of the objective).  ``xs`` are
    the float and complex ``inputs``, each cast to the dtype under test
    (complex inputs need a complex dtype and real ones a real dtype); the other
    inputs are fed unchanged and passed to ``build`` too.  ``wrt`` selects
    which inputs are differentiated (default: every float/complex one).

    ``dtypes``: the dtypes to run, or "auto": every float dtype the OpDef's
    ``dtype_attr`` allows (real ones for real inputs, complex ones for complex
    inputs).  ``second``: also compare second order (skipped where TF has none).
    ``rtol`` overrides :data:`TOLERANCE` (for ill-conditioned math).
    ``variables``: inputs made resource variables (holding the input, cast to
    the dtype under test): ``build`` gets, and the gradient is taken with
    respect to, the variable's handle (read after it is assigned).
    ``raises``: TF's registered gradient raises for this graph (PreventGradient,
    the gradients TF leaves NotImplemented): a :class:`Raises` naming TF's
    error and the bridge's, both checked.
    """

    op: str
    build: Callable[..., Any]
    inputs: Sequence[Any]
    dtypes: Any = "auto"
    wrt: Optional[Sequence[int]] = None
    second: bool = True
    label: str = ""
    dtype_attr: str = "T"
    rtol: Optional[float] = None
    variables: Sequence[int] = ()
    raises: Optional["Raises"] = None

    def differentiated(self) -> list[int]:
        if self.wrt is not None:
            return list(self.wrt)
        return [i for i, v in enumerate(self.inputs) if np.asarray(v).dtype.kind in "fc"]

    def dtype_list(self) -> list[str]:
        if self.dtypes != "auto":
            return list(self.dtypes)
        from bridge.framework.opdef import op_def
        complex_inputs = any(np.asarray(self.inputs[i]).dtype.kind == "c" for i in self.differentiated())
        try:
            allowed = op_def(self.op).attr(self.dtype_attr).allowed_values
        except (KeyError, ValueError):
            allowed = None
        names = [d.name for d in allowed] if allowed else list(FLOAT_DTYPES)
        keep = [n for n in FLOAT_DTYPES if n in names and n.startswith("complex") == complex_inputs]
        return keep or ["complex128" if complex_inputs else "float64"]

    def id(self, dtype: str) -> str:
        return f"{self.op}{'-' + self.label if self.label else ''}-{dtype}"


#: The bridge's refusal of an op type without a gradient (``.format(op_type)``; a regular expression).
NO_GRADIENT = r"^No gradient defined for operation '{0}' \(op type: {0}\)\. Register one in Python:"


@dataclasses.dataclass(frozen=True)
class Raises:
    """How both sides refuse a case's gradient.  ``tf``: the start of stock TF's
    error, ``"Type: message"`` (the oracle's answer); ``bridge``: the type the
    bridge raises, and ``match``, a regular expression its message must contain."""

    tf: str
    bridge: type
    match: str


def case(op: str, build: Callable[..., Any], *inputs: Any, **options: Any) -> GradCase:
    """Shorthand: ``case("Cholesky", lambda x: ops.cholesky(spd(x)), rand(3, 3))``."""
    return GradCase(op, build, tuple(inputs), **options)


def load_family(name: str) -> list[GradCase]:
    """The CASES of family module ``name`` ([] if it does not exist yet).

    Its input values come from a generator seeded by the family's name, so
    they do not depend on which families were loaded before (and the oracle's
    cached answers stay valid when one family runs alone)."""
    global _RNG
    _RNG = rng(zlib.crc32(name.encode()))
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{name}":
            return []
        raise
    return list(module.CASES)


def load_pending(name: str) -> frozenset[str]:
    """Family ``name``'s PENDING: op types of it that have no case yet (issue #16)."""
    load_family(name)
    module = importlib.import_module(f"{__name__}.{name}")
    return frozenset(getattr(module, "PENDING", ()))


# --- input values -----------------------------------------------------------------------------

def rng(seed: int = 20261124) -> np.random.Generator:
    return np.random.default_rng(seed)


_RNG = rng()


def signed(*shape: int, low: float = 0.15, high: float = 1.2) -> np.ndarray:
    """Random values of either sign, away from 0 (where Abs, Relu, ... have kinks)."""
    x = _RNG.uniform(low, high, shape) * _RNG.choice([-1.0, 1.0], shape)
    return x.astype(np.float64)


def positive(*shape: int, low: float = 0.2, high: float = 0.9) -> np.ndarray:
    return _RNG.uniform(low, high, shape).astype(np.float64)


def cplx(*shape: int) -> np.ndarray:
    return (signed(*shape) + 1j * signed(*shape)).astype(np.complex128)


def i32(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.int32)


def i64(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.int64)


# --- building a case (bridge side) ----------------------------------------------------------

@dataclasses.dataclass
class Built:
    """A case built for one dtype: the graph, names the oracle needs, and the bridge's Outputs."""
    graph: Any
    graph_def: bytes
    xs: list
    ys: list
    grad_ys: list
    vs: list
    feed_by_name: dict
    feed: dict
    structural: bool = False  # no CPU kernel: compare the gradient graphs' op types, not values


def _wide(dtype: str) -> str:
    return "complex128" if dtype.startswith("complex") else "float64"


def build_case(c: GradCase, dtype: str, seed: int) -> Built:
    """Build ``c`` for ``dtype`` into a new bridge graph (forward part, grad_ys, vs)."""
    import bridge
    from bridge import ops

    r = rng(seed)
    graph = bridge.Graph()
    feed_by_name: dict = {}
    feed: dict = {}

    def fed(value: np.ndarray, name: str):
        ph = bridge.placeholder(bridge.as_dtype(value.dtype.name if value.dtype.kind != "U" else "string"),
                                value.shape, name=name)
        feed_by_name[ph.name] = value
        feed[ph] = value
        return ph

    wrt = set(c.differentiated())
    with graph.as_default():
        args, xs = [], []
        for i, v in enumerate(c.inputs):
            arr = np.asarray(v)
            if i in wrt or arr.dtype.kind in "fc":
                wide = arr.astype(_wide(dtype)) if arr.dtype.kind in "fc" else arr
                ph = fed(wide, f"x{i}_value")
                x = ops.cast(ph, DstT=bridge.as_dtype(dtype), name=f"x{i}") if arr.dtype.kind in "fc" else ph
                if i in c.variables:
                    x = _variable(x, f"var{i}")
                args.append(x)
                if i in wrt:
                    xs.append(x)
            else:
                args.append(fed(arr, f"in{i}"))
        result = c.build(*args)
        ys = [result] if isinstance(result, bridge.Output) else list(result)
        ys = [y for y in ys if y.dtype.is_floating or y.dtype.is_complex]
        grad_ys, vs = [], []
        # The upstream gradients need the ys' shapes: run the forward graph once.
        # Without a CPU kernel, static shapes do, and the case is compared by structure.
        structural = False
        try:
            with bridge.Session(graph) as s:
                shapes = [np.shape(v) for v in (s.run(ys, feed) if ys else [])]
        except bridge.errors.OpError as exc:
            if (c.op not in NO_CPU_KERNEL or not _no_kernel(str(exc))
                    or any(y.shape.unknown_rank or None in tuple(y.shape) for y in ys)):
                raise
            structural = True
            shapes = [tuple(y.shape) for y in ys]
        for k, (y, shape) in enumerate(zip(ys, shapes, strict=True)):
            g = r.uniform(-1, 1, shape)
            if y.dtype.is_complex:
                g = g + 1j * r.uniform(-1, 1, shape)
            g = g.astype(_wide(y.dtype.name))
            grad_ys.append(ops.cast(fed(g, f"gy{k}_value"), DstT=y.dtype, name=f"gy{k}"))
        for k, x in enumerate(xs):
            arr = np.asarray(c.inputs[c.differentiated()[k]])
            v = r.uniform(-1, 1, arr.shape)
            if x.dtype.is_complex:
                v = v + 1j * r.uniform(-1, 1, arr.shape)
            v_dtype = bridge.as_dtype(dtype) if x.dtype.name == "resource" else x.dtype
            vs.append(ops.cast(fed(v.astype(_wide(dtype)), f"v{k}_value"), DstT=v_dtype, name=f"v{k}"))
    return Built(graph, graph.as_graph_def(), xs, ys, grad_ys, vs, feed_by_name, feed, structural)


def _no_kernel(message: str) -> bool:
    """Whether a run failed because TF has no CPU kernel for an op of the graph."""
    return ("No OpKernel" in message or "has constraint on attr" in message
            or "kernel" in message.lower() and "registered" in message.lower())


def _variable(value, name: str):
    """A resource variable's handle, passed through an Identity that runs after it is assigned ``value``."""
    import bridge
    from bridge import ops
    handle = ops.var_handle_op(dtype=value.dtype, shape=value.shape, shared_name=name, name=name)
    assign = ops.assign_variable_op(handle, value, name=f"{name}_assign")
    with bridge.control_dependencies([assign]):
        return ops.identity(handle, name=f"{name}_handle")


def oracle_request(c: GradCase, built: Built) -> dict:
    return {"graph_def": built.graph_def,
            "xs": [x.name for x in built.xs],
            "ys": [y.name for y in built.ys],
            "grad_ys": [g.name for g in built.grad_ys],
            "vs": [v.name for v in built.vs] if c.second else None,
            # (a variable's gradient has the dtype of its value, which its v has)
            "fetch_dtype": {x.name: _wide((v if x.dtype.name == "resource" else x).dtype.name)
                            for x, v in zip(built.xs, built.vs, strict=True)},
            "feed": built.feed_by_name,
            "structural": built.structural}


#: Op types either side may add around a gradient (seeds, shapes and their
#: pieces, sums of contributions, casts): a structural comparison looks past them.
PLUMBING = frozenset({"Identity", "NoOp", "Const", "Shape", "ShapeN", "Fill", "ZerosLike", "OnesLike",
                      "AddN", "Reshape", "Cast", "Pack", "StridedSlice"})


def bridge_gradient_types(built: Built) -> tuple[list[bool], set[str]]:
    """(which xs get a gradient, the op types the first-order gradient adds), for a structural case."""
    import bridge

    graph = built.graph
    before = {op.name for op in graph.get_operations()}
    with graph.as_default():
        first = bridge.gradients(built.ys, built.xs, grad_ys=built.grad_ys)
    types = {op.type for op in graph.get_operations() if op.name not in before}
    return [g is not None for g in first], types - PLUMBING


def bridge_gradients(c: GradCase, built: Built) -> tuple[list, Any]:
    """(first-order values, second-order values or an error string), as the oracle returns them."""
    import bridge
    from bridge import ops

    graph = built.graph

    def fetchable(grads):
        return [None if g is None else (g if g.dtype.name == _wide(g.dtype.name)
                                        else ops.cast(g, DstT=bridge.as_dtype(_wide(g.dtype.name))))
                for g in grads]

    with graph.as_default():
        # IndexedSlices (gathers) densified, as the oracle's tf.convert_to_tensor
        # (and TF's ops, for the second order).
        first = [bridge.convert_to_tensor(g) for g in bridge.gradients(built.ys, built.xs, grad_ys=built.grad_ys)]
        second = None
        if c.second:
            parts = [ops.sum(ops.reshape(ops.mul(g, v), [-1]), 0)
                     for g, v in zip(first, built.vs, strict=True) if g is not None]
            if parts:
                z = ops.add_n(parts) if len(parts) > 1 else parts[0]
                try:
                    second = [bridge.convert_to_tensor(g) for g in bridge.gradients(z, built.xs)]
                except Exception as exc:  # compared with the oracle's own failure
                    second = f"{type(exc).__name__}: {exc}"
        first_f = fetchable(first)
        second_f = fetchable(second) if isinstance(second, list) else second
    with bridge.Session(graph) as s:
        def run(grads):
            wanted = [g for g in grads if g is not None]
            got = iter(s.run(wanted, built.feed) if wanted else [])
            return [None if g is None else np.asarray(next(got)) for g in grads]
        first_v = run(first_f)
        second_v = run(second_f) if isinstance(second_f, list) else second_f
    return first_v, second_v


def assert_close(got: Any, want: Any, dtype: str, what: str, rtol: Optional[float] = None) -> None:
    """Aligned lists of arrays/None: None where TF has None, values within tolerance elsewhere."""
    tol = rtol if rtol is not None else TOLERANCE[dtype]
    assert len(got) == len(want), f"{what}: {len(got)} gradients, TF has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            assert g is None, f"{what}, x{k}: TF's gradient is None, the bridge's is a value"
            continue
        assert g is not None, f"{what}, x{k}: TF has a gradient, the bridge None"
        w = np.asarray(w)
        scale = float(np.nanmax(np.abs(w))) if w.size and not np.all(np.isnan(w)) else 1.0
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol * max(scale, 1e-3),
                                   err_msg=f"{what}, x{k}")
