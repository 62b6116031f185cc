"""Gradient cases: reads of resource variables (ReadVariableOp, ResourceGather, ...), py_func, and device collectives (TPU, NCCL, XLA, DTensor)."""
from __future__ import annotations

import bridge
from bridge import ops

from . import Raises, case, cplx, i32, i64, positive, signed  # noqa: F401


def _dtype(handle):
    """The dtype of the variable behind ``handle`` (the harness's VarHandleOp, through an Identity)."""
    op = handle.op
    while op.type != "VarHandleOp":
        op = op.inputs[0].op
    return op.get_attr("dtype")


def _read(h):
    return ops.read_variable_op(h, dtype=_dtype(h))


def _gather(h, idx, **attrs):
    return ops.resource_gather(h, idx, dtype=_dtype(h), **attrs)


def _gather_nd(h, idx):
    return ops.resource_gather_nd(h, idx, dtype=_dtype(h))


def _attr(op_type, attrs, types, *inputs):
    from bridge.framework.graph import get_default_graph
    return get_default_graph().create_op(op_type, list(inputs), attrs=attrs, attr_types=types).output(0)


_ONE_REPLICA = i32([[0]])


def _on_gpu(build):
    with bridge.device("/device:GPU:0"):
        return build()


CASES = [
    # Two reads of one variable, nonlinear (a second order), and a float input besides it.
    case("ReadVariableOp", lambda h, x: ops.mul(ops.mul(_read(h), _read(h)), x), signed(2, 3), signed(2, 3),
         variables=(0,), dtype_attr="dtype"),
    case("ReadVariableOp", lambda h: ops.mul(_read(h), _read(h)), cplx(3), variables=(0,), dtype_attr="dtype",
         label="complex"),
    # Rows gathered twice add up; the gather times the read makes a second order.
    case("ResourceGather", lambda h, k: ops.mul(_gather(h, k), ops.gather_v2(_read(h), k, 0)),
         signed(4, 3), i32([2, 0, 2]), variables=(0,), dtype_attr="dtype"),
    case("ResourceGather", lambda h, k: ops.square(_gather(h, k)), signed(4, 2, 3), i64([[3, 1], [1, 1]]),
         variables=(0,), dtype_attr="dtype", label="int64-matrix-indices"),
    case("ResourceGather", lambda h, k: _gather(h, k), signed(5), i32(2), variables=(0,), dtype_attr="dtype",
         label="scalar-index"),
    case("ResourceGatherNd", lambda h, k: ops.square(_gather_nd(h, k)), signed(4, 3), i32([[2, 1], [0, 0], [2, 1]]),
         variables=(0,), dtype_attr="dtype"),
    case("ResourceGatherNd", lambda h, k: ops.square(_gather_nd(h, k)), signed(4, 3), i64([[2], [0], [2]]),
         variables=(0,), dtype_attr="dtype", label="rows"),

    # EagerPyFunc is on tests/grad/test_parity.py's EXCLUDED (no kernel in the C library).
    # Device collectives: no CPU kernel (the cases skip), gradients built as TF's.
    case("AllToAll", lambda x, g: ops.square(ops.all_to_all(x, g, concat_dimension=0, split_dimension=1,
                                                            split_count=1)), signed(2, 3), _ONE_REPLICA),
    case("CrossReplicaSum", lambda x, g: ops.square(ops.cross_replica_sum(x, g)), signed(2, 3), _ONE_REPLICA),
    case("CollectivePermute", lambda x, p: ops.square(ops.collective_permute(x, p)), signed(2, 3), i32([[0, 0]])),
    case("TPUEmbeddingActivations", lambda v, a: ops.square(ops.tpu_embedding_activations(v, a, table_id=0,
                                                                                          lookup_id=0)),
         signed(1), signed(2, 3), dtypes=["float32"],
         raises=Raises("RuntimeError: Gradients for TPUEmbedding have been generated in non-training mode.",
                       RuntimeError, r"^operation 'TPUEmbeddingActivations' \(TPUEmbeddingActivations\): no graph "
                                     r"collection 'tpu_embedding_gradients_table_0' to save its gradient in")),
    # NCCL's gradients need the ops on devices (TF checks each gradient's device).
    case("NcclAllReduce", lambda x: _on_gpu(lambda: ops.square(ops.nccl_all_reduce(
        x, reduction="sum", num_devices=1, shared_name="c"))), signed(2, 3)),
    case("NcclReduce", lambda x: _on_gpu(lambda: ops.square(ops.nccl_reduce([x], reduction="sum"))), signed(2, 3)),
    case("NcclBroadcast", lambda x: _on_gpu(lambda: ops.square(ops.nccl_broadcast(x, shape=[2, 3]))),
         signed(2, 3)),
    case("XlaSharding", lambda x: ops.square(ops.xla_sharding(x, sharding="")), signed(2, 3)),
    case("XlaSpmdFullToShardShape", lambda x: ops.square(ops.xla_spmd_full_to_shard_shape(
        x, manual_sharding="", dim=-1)), signed(2, 3)),
    # This one has a CPU kernel, but its gradient (XlaSpmdFullToShardShape) has none, on either
    # side: the graph holds one of those too, so that the case skips like the others.
    case("XlaSpmdShardToFullShape", lambda x: [ops.square(ops.xla_spmd_shard_to_full_shape(
        x, manual_sharding="", full_shape=[2, 3], dim=-1)), ops.xla_spmd_full_to_shard_shape(
        x, manual_sharding="", dim=-1)], signed(2, 3)),
    # TF's gradients of these raise outside a TPU training loop / inside xla.compile; so do the bridge's.
    case("XlaClusterOutput", lambda x: ops.square(ops.xla_cluster_output(x)), signed(2, 3), dtypes=["float64"],
         raises=Raises("RuntimeError: Gradient computation of graph in xla.compile() is prohibited", LookupError,
                       r"^operation 'XlaClusterOutput' \(XlaClusterOutput\): gradients of a graph in xla.compile\(\) "
                       r"are prohibited")),
    case("Relayout", lambda x: ops.square(ops.relayout(x, layout="")), signed(2, 3)),
    case("RelayoutLike", lambda x, y: ops.square(ops.relayout_like(x, y)), signed(2, 3), signed(2, 3), wrt=[0]),
    case("CopyToMesh", lambda x: ops.square(ops.copy_to_mesh(x, mesh="")), signed(2, 3)),
    case("CopyToMeshGrad", lambda x, y: ops.square(ops.copy_to_mesh_grad(x, y)), signed(2, 3), signed(2, 3),
         wrt=[0]),
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset()
