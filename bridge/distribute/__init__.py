"""Distributed TensorFlow: cluster specs, servers, placement, sessions and synchronous in-graph replication (issue #26)."""
from __future__ import annotations

from .cluster import ClusterSpec, ClusterSpecError, expand_hostlist, slurm_task, tf_config_task
from .server import Server, ServerError, default_session_config, server_def
from .placement import GreedyLoadBalancingStrategy, STANDARD_PS_OPS, byte_size_load_fn, replica_device_setter
from .session import Session, chief_task
from .replicate import Replicated, average_gradients, replicate
