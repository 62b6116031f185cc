"""Gradients of device collectives and layouts (TPU, NCCL, XLA sharding, DTensor), and EagerPyFunc.

After TF's tpu_ops.py, nccl_ops.py, tf2xla/python/xla.py, jit/ops/xla_ops_grad.py,
dtensor/python/api.py and script_ops.py.  Most of these ops have no CPU
kernel: their gradients are built as TF builds them and run where the
forward ops run.
"""
from __future__ import annotations

from bridge.framework import dtypes
from bridge.framework.graph import Operation, Output, get_default_graph
from ._helpers import _const, _op
from .registry import RegisterGradient


# --- TPU collectives ---------------------------------------------------------------------

@RegisterGradient("AllToAll")
def _all_to_all_grad(op: Operation, grad: Output) -> list:
    # Another all-to-all with the split and concat dimensions swapped.
    attrs = dict(concat_dimension=op.get_attr("split_dimension"),
                        split_dimension=op.get_attr("concat_dimension"), split_count=op.get_attr("split_count"))
    return [_op("AllToAll", [grad, op.inputs[1]], attrs), None]


@RegisterGradient("CrossReplicaSum")
def _cross_replica_sum_grad(op: Operation, grad: Output) -> list:
    return [_op("CrossReplicaSum", [grad, op.inputs[1]]), None]


@RegisterGradient("CollectivePermute")
def _collective_permute_grad(op: Operation, grad: Output) -> list:
    # The permutation backwards: each (source, target) pair reversed.
    pairs = _op("StridedSlice", [op.inputs[1], _const([0, 0], dtypes.int32, name="begin"),
                                 _const([0, 0], dtypes.int32, name="end"),
                                 _const([1, -1], dtypes.int32, name="strides")],
                {"begin_mask": 3, "end_mask": 3})  # pairs[:, ::-1], as TF's
    return [_op("CollectivePermute", [grad, pairs]), None]


@RegisterGradient("TPUEmbeddingActivations")
def _embedding_activations_grad(op: Operation, grad: Output) -> list:
    """Saves the activations' gradient in the graph collection the TPU embedding's
    optimizer reads (``tpu_embedding_gradients_table_<table_id>``, set up by it)."""
    table_id, lookup_id = op.get_attr("table_id"), op.get_attr("lookup_id")
    table = op.graph.collections.get(f"tpu_embedding_gradients_table_{table_id}")
    if not table:
        raise RuntimeError(f"operation '{op.name}' (TPUEmbeddingActivations): no graph collection "
                           f"'tpu_embedding_gradients_table_{table_id}' to save its gradient in (the TPU "
                           "embedding sets it up in training mode)")
    if not 0 <= lookup_id < len(table):
        raise RuntimeError(f"operation '{op.name}' (TPUEmbeddingActivations): lookup_id {lookup_id} is "
                           f"outside [0, {len(table)})")
    if table[lookup_id] is not None:
        raise RuntimeError(f"operation '{op.name}' (TPUEmbeddingActivations): duplicate gradients for "
                           f"table_id {table_id}, lookup_id {lookup_id}")
    table[lookup_id] = _op("Identity", [grad])
    # As TF: zeros of the inputs' (static) shapes, float32.
    return [_op("Fill", [_const(list(t.shape), dtypes.int32, name="shape"), _const(0.0, dtypes.float32)])
            for t in op.inputs]


# --- NCCL --------------------------------------------------------------------------------

def _str_attr(op: Operation, name: str) -> str:
    value = op.get_attr(name)
    return value.decode() if isinstance(value, bytes) else value


def _sum_only(op: Operation) -> None:
    reduction = _str_attr(op, "reduction")
    if reduction != "sum":
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type}) except "
                          f"for reduction=\"sum\" (it has \"{reduction}\")")


@RegisterGradient("NcclAllReduce")
def _nccl_all_reduce_grad(op: Operation, grad: Output) -> list:
    _sum_only(op)
    with get_default_graph().device(op.device):
        attrs = dict(reduction="sum", num_devices=op.get_attr("num_devices"),
                            shared_name=_str_attr(op, "shared_name") + "_grad")
        return [_op("NcclAllReduce", [grad], attrs)]


@RegisterGradient("NcclReduce")
def _nccl_reduce_grad(op: Operation, grad: Output) -> list:
    _sum_only(op)
    with get_default_graph().device(op.device):
        result = _op("NcclBroadcast", [grad], {"shape": grad.shape})
    return [result] * op.num_inputs


@RegisterGradient("NcclBroadcast")
def _nccl_broadcast_grad(op: Operation, grad: Output) -> list:
    # The broadcast's consumers' gradients (on their devices), summed by one NcclReduce instead of AddN.
    parts = list(grad.op.inputs) if grad.op.type == "AddN" else [grad]
    with get_default_graph().device(op.device):
        return [_op("NcclReduce", [parts], dict(reduction="sum"))]


# --- XLA ---------------------------------------------------------------------------------

@RegisterGradient("XlaSharding")
def _xla_sharding_grad(op: Operation, grad: Output) -> list:
    sharding = op.get_attr("sharding")
    attrs = {"sharding": sharding, "unspecified_dims": op.get_attr("unspecified_dims"), "_XlaSharding": sharding}
    return [_op("XlaSharding", [grad], attrs)]


@RegisterGradient("XlaSpmdFullToShardShape")
def _full_to_shard_grad(op: Operation, grad: Output) -> list:
    shape = op.inputs[0].shape
    if shape.unknown_rank:
        raise LookupError(f"operation '{op.name}' (XlaSpmdFullToShardShape): its gradient needs the "
                          "input's rank (TF's too)")
    attrs = dict(manual_sharding=op.get_attr("manual_sharding"), dim=op.get_attr("dim"),
                        unspecified_dims=list(op.get_attr("unspecified_dims")))
    attrs["full_shape"] = shape
    return [_op("XlaSpmdShardToFullShape", [grad], attrs)]


@RegisterGradient("XlaSpmdShardToFullShape")
def _shard_to_full_grad(op: Operation, grad: Output) -> list:
    attrs = dict(manual_sharding=op.get_attr("manual_sharding"), dim=op.get_attr("dim"),
                        unspecified_dims=list(op.get_attr("unspecified_dims")))
    return [_op("XlaSpmdFullToShardShape", [grad], attrs)]


@RegisterGradient("XlaClusterOutput")
def _xla_cluster_output_grad(op: Operation, grad: Output) -> list:
    raise LookupError(f"operation '{op.name}' (XlaClusterOutput): gradients of a graph in xla.compile() "
                      "are prohibited (as in TensorFlow); compute them inside the compiled function")


# --- DTensor -----------------------------------------------------------------------------

@RegisterGradient("Relayout")
def _relayout_grad(op: Operation, grad: Output) -> list:
    return [_op("RelayoutLike", [grad, op.inputs[0]])]


@RegisterGradient("RelayoutLike")
def _relayout_like_grad(op: Operation, grad: Output) -> list:
    return [_op("RelayoutLike", [grad, op.inputs[0]]), None]


@RegisterGradient("CopyToMesh")
def _copy_to_mesh_grad(op: Operation, grad: Output) -> list:
    return [_op("CopyToMeshGrad", [grad, op.inputs[0]])]


@RegisterGradient("CopyToMeshGrad")
def _copy_to_mesh_grad_grad(op: Operation, grad: Output) -> list:
    return [_op("CopyToMeshGrad", [grad, op.inputs[0]]), None]


# --- py_func -----------------------------------------------------------------------------

@RegisterGradient("EagerPyFunc")
def _eager_py_func_grad(op: Operation, *grads: Output) -> list:
    # TF's gradient replays the Python function's tape, kept by TF Python's py_func registry
    # under the op's token: a graph built by the bridge has no such function to replay.
    raise LookupError(f"operation '{op.name}' (EagerPyFunc, token {op.get_attr('token')!r}): its gradient "
                      "replays a Python function's tape that only TensorFlow Python's tf.py_function "
                      "keeps, so the bridge cannot build it")
