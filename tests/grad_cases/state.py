"""Gradient cases: reads of resource variables (ReadVariableOp, ResourceGather, ...), py_func, and device collectives (TPU, NCCL, XLA, DTensor)."""
from __future__ import annotations

from bridge import ops  # noqa: F401

from . import case, cplx, i32, i64, positive, signed  # noqa: F401

CASES = [
]

#: Op types of this family TF differentiates that have no case yet (issue #16, shrinking to empty).
PENDING = frozenset({
    "AllToAll", "CollectivePermute", "CopyToMesh", "CopyToMeshGrad", "CrossReplicaSum",
    "EagerPyFunc", "NcclAllReduce", "NcclBroadcast", "NcclReduce", "ReadVariableOp", "Relayout",
    "RelayoutLike", "ResourceGather", "TPUEmbeddingActivations", "XlaClusterOutput",
    "XlaSharding", "XlaSpmdFullToShardShape", "XlaSpmdShardToFullShape",
})
