"""Shared plumbing for the oracle scripts (run under stock TensorFlow only).

Every oracle script is started by ``tests/support/oracle.py`` as::

    python tests/oracle/<script>.py REQUEST.pkl RESPONSE.pkl OUT_DIR

It reads a pickled request (a dict, or None), computes a pickled dict
response, and may write files into OUT_DIR.  This module is the only place
that knows that protocol, and it also holds the helpers that turn the test
suite's plain-data case descriptions (op type, numpy inputs, attrs) into
raw ops (what ``tf.raw_ops`` builds), which eval_ops and eval_gradients share.

These scripts run in their own process: they may ``import tensorflow``.
The pytest process never imports this module.
"""
from __future__ import annotations

import os
import pickle
import random
import sys
from pathlib import Path
from typing import Any, Callable

# Quiet TF's start-up chatter: on failure the client shows the stderr tail,
# which should be the traceback, not oneDNN banners.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_library, op_def_registry  # noqa: E402

# Deprecation notices for the v1 APIs these scripts use on purpose.
tf.get_logger().setLevel("ERROR")

SEED = 1234

#: Single-threaded sessions: reductions then sum in one fixed order, so the
#: expected values do not wobble between runs (and cached values stay valid).
SESSION_CONFIG = tf.compat.v1.ConfigProto(
    intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def seed_everything(seed: int = SEED) -> None:
    """Fix every RNG an oracle might touch, for reproducible outputs."""
    random.seed(seed)
    np.random.seed(seed)
    tf.random.set_seed(seed)


def main(handler: Callable[[Any, Path], dict]) -> None:
    """Run ``handler(request, out_dir) -> dict`` under the client protocol.

    With no arguments (a developer running the script by hand) the request is
    None and files go to ./oracle-out, and a summary is printed.
    """
    if len(sys.argv) == 4:
        req_path, resp_path, out_dir = sys.argv[1:4]
        with open(req_path, "rb") as f:
            request = pickle.load(f)
    elif len(sys.argv) == 1:
        request, resp_path, out_dir = None, None, "oracle-out"
    else:
        sys.exit(f"usage: {sys.argv[0]} [REQUEST.pkl RESPONSE.pkl OUT_DIR]")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    seed_everything()
    response = handler(request, out)
    if not isinstance(response, dict):
        raise TypeError(f"oracle handler returned {type(response).__name__}, not dict")
    response.setdefault("tf_version", tf.__version__)
    if resp_path is None:
        print({k: type(v).__name__ for k, v in response.items()})
        return
    # Write then rename: the client must never read a half-written response.
    tmp = resp_path + ".part"
    with open(tmp, "wb") as f:
        pickle.dump(response, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, resp_path)


def import_graph(serialized: bytes) -> tf.Graph:
    """A new graph holding the serialized GraphDef (from the bridge), imported without a prefix."""
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(serialized)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return graph


def error_string(exc: BaseException) -> str:
    """A compact 'ErrorType: message' for a case that TF rejected."""
    msg = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {msg.strip()[:2000]}"


# ---------------------------------------------------------------------------
# Building one op from a plain-data case
# ---------------------------------------------------------------------------

def to_dtype(value: Any) -> tf.DType:
    """tf.DType from a numpy dtype/type, a dtype name ("float32") or a DType."""
    if isinstance(value, tf.DType):
        return value
    if isinstance(value, str):
        if value in ("string", "str", "bytes"):
            return tf.string
        return tf.as_dtype(value)
    dt = np.dtype(value)
    if dt.kind in "OSU":
        return tf.string
    return tf.as_dtype(dt)


def to_array(value: Any) -> np.ndarray:
    """numpy array from a test input; str/bytes arrays become object arrays of bytes."""
    arr = np.asarray(value)
    if arr.dtype.kind in "SU" or (arr.dtype.kind == "O" and arr.size and
                                   isinstance(arr.flat[0], (str, bytes))):
        flat = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.ravel().tolist()]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(arr.shape)
    return arr


def to_numpy(value: Any) -> np.ndarray:
    """Normalise a Session.run result to an ndarray (0-d results come back as scalars)."""
    return np.asarray(value)


def _convert_attr(value: Any, attr_type: str) -> Any:
    """Test-side attr value -> what _apply_op_helper accepts for that attr type."""
    if attr_type == "type":
        return to_dtype(value)
    if attr_type == "list(type)":
        return [to_dtype(v) for v in value]
    if attr_type == "tensor":
        return tf.make_tensor_proto(to_array(value))
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _same_attr(given: Any, actual: Any, attr_type: str) -> bool:
    """Does an attr the test gave equal the one TF inferred from the inputs?"""
    if attr_type == "type":
        return to_dtype(given) == actual
    if attr_type == "list(type)":
        return [to_dtype(g) for g in given] == list(actual)
    return given == actual


def get_op_def(op_type: str):
    """The registered OpDef of ``op_type`` (ValueError when TF has no such op)."""
    op_def = op_def_registry.get(op_type)
    if op_def is None:
        raise ValueError(f"unknown op type {op_type!r}")
    return op_def


def is_list_arg(arg) -> bool:
    """Is this OpDef input/output a list (N x T, or a list of types)?"""
    return bool(arg.number_attr or arg.type_list_attr)


def apply_op(op_type: str, inputs: list, attrs: dict | None = None,
             name: str | None = None) -> tf.Operation:
    """Add one ``op_type`` op to the default graph, as tf.raw_ops.<op_type> would.

    ``inputs`` holds tensors in OpDef input order (a list of tensors for a
    list input).  This calls op_def_library._apply_op_helper, the function
    every raw_ops wrapper calls in graph mode, because it takes the OpDef's
    own input and attr names; the raw_ops keywords are ApiDef renames (Split's
    "split_dim" is raw_ops' "axis"), which the test cases should not need to
    know.  Attrs TF infers from the inputs (T, N, ...) cannot be passed; when
    given they are checked against what TF inferred instead, so a case never
    silently runs with a type other than the one asked for.
    """
    op_def = get_op_def(op_type)
    if len(inputs) != len(op_def.input_arg):
        raise ValueError(f"{op_type} takes {len(op_def.input_arg)} inputs "
                         f"({[a.name for a in op_def.input_arg]}), got {len(inputs)}")
    kwargs: dict = {}
    for arg, value in zip(op_def.input_arg, inputs, strict=True):
        if is_list_arg(arg) != isinstance(value, (list, tuple)):
            raise ValueError(f"input {arg.name!r} of {op_type} "
                             + ("is a list input: pass a list" if is_list_arg(arg)
                                else "takes one tensor, not a list"))
        kwargs[arg.name] = list(value) if is_list_arg(arg) else value

    inferred = {a for arg in op_def.input_arg
                for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a}
    attr_defs = {a.name: a for a in op_def.attr}
    attrs = dict(attrs or {})
    for attr, value in attrs.items():
        if attr not in attr_defs:
            raise ValueError(f"{op_type} has no attr {attr!r} (has {sorted(attr_defs)})")
    for attr, attr_def in attr_defs.items():
        if attr in inferred:
            continue
        if attr in attrs:
            kwargs[attr] = _convert_attr(attrs[attr], attr_def.type)
        elif attr_def.HasField("default_value"):
            kwargs[attr] = None  # _apply_op_helper's spelling of "use the OpDef default"

    op = op_def_library._apply_op_helper(op_type, name=name or op_type, **kwargs)[2]
    for attr, value in attrs.items():
        if attr in inferred and not _same_attr(value, op.get_attr(attr), attr_defs[attr].type):
            raise ValueError(f"attr {attr}={value!r} given, but TF inferred "
                             f"{op.get_attr(attr)!r} from the inputs")
    return op


class BuiltOp:
    """One op built from a case: the op, its input tensors (nested like the
    case's inputs) and the feed dict for the placeholders."""

    def __init__(self, op: tf.Operation, inputs: list, feed: dict):
        self.op = op
        self.inputs = inputs
        self.feed = feed


def build_op(case: dict, graph: tf.Graph) -> BuiltOp:
    """Build ``case`` (op, inputs, attrs[, mode, name]) into ``graph``.

    ``inputs`` is a list in OpDef input order (an entry is an array, or a
    list of arrays for a list input such as ConcatV2's ``values``), or a dict
    keyed by OpDef input name.  ``mode`` is "placeholder" (default: each
    input is a Placeholder of the array's exact shape, fed at run time) or
    "const" (inputs become Const ops; use it for ops whose shape function
    needs constant inputs).
    """
    op_type = case["op"]
    op_def = get_op_def(op_type)
    mode = case.get("mode", "placeholder")
    if mode not in ("placeholder", "const"):
        raise ValueError(f"mode must be 'placeholder' or 'const', not {mode!r}")
    raw_inputs = case.get("inputs", [])
    if isinstance(raw_inputs, dict):
        raw_inputs = [raw_inputs[arg.name] for arg in op_def.input_arg]

    feed: dict = {}

    def make_input(value: Any, name: str) -> tf.Tensor:
        arr = to_array(value)
        dtype = to_dtype(arr.dtype)
        if mode == "const":
            return tf.constant(arr, dtype=dtype, name=name)
        ph = tf.compat.v1.placeholder(dtype, shape=arr.shape, name=name)
        feed[ph] = arr
        return ph

    with graph.as_default():
        inputs: list = []
        for arg, value in zip(op_def.input_arg, raw_inputs, strict=True):
            if is_list_arg(arg) and isinstance(value, (list, tuple)):
                inputs.append([make_input(v, f"{arg.name}_{i}") for i, v in enumerate(value)])
            else:  # apply_op reports a list/non-list mismatch
                inputs.append(make_input(value, arg.name))
        inputs.extend(raw_inputs[len(op_def.input_arg):])  # let apply_op count them
        op = apply_op(op_type, inputs, case.get("attrs"), case.get("name"))
    return BuiltOp(op, inputs, feed)
