"""Server: one task of a TensorFlow cluster, in this process (TF_NewServer).

TensorFlow's gRPC server has **no authentication**: whoever reaches its port
can run any op on it, reading and writing files included.  TensorFlow 2.21
binds it to every interface of the machine ("0.0.0.0:<port>", whatever host
the cluster names), so keep its ports behind a firewall or on a private
network (README, "Distributed").

TensorFlow cannot stop a started gRPC server inside a running process (its
GrpcServer::Stop is unimplemented): a server serves until its process ends.
Run servers in processes of their own (``tfbridge server``), which end on
SIGTERM.
"""
from __future__ import annotations

import errno
import socket
import threading
from typing import Any, Mapping, Optional, Union

from bridge.framework import _proto as pb
from bridge.framework._lib import ffi, lib
from bridge.framework.errors import OpError, UnimplementedError, check, status
from bridge.framework.session import SessionConfig

from .cluster import ClusterSpec

__all__ = ["Server", "ServerError", "server_def", "default_session_config", "collective_group_leader"]


class ServerError(RuntimeError):
    """A server that cannot be made or started, saying why (port in use, ...)."""


def collective_group_leader(cluster: ClusterSpec) -> Optional[str]:
    """The task that leads collective groups: task 0 of "chief" if the cluster
    has that job, else of "worker" (as TF's multi-worker strategies choose)."""
    for job in ("chief", "worker"):
        if job in cluster.jobs and 0 in cluster.task_indices(job):
            return f"/job:{job}/replica:0/task:0"
    return None


def config_bytes(config: Union[SessionConfig, dict, bytes, None]) -> bytes:
    """ConfigProto bytes of a SessionConfig, its dict, bytes or None."""
    if config is None:
        return b""
    if isinstance(config, dict):
        config = SessionConfig(**config)
    if isinstance(config, SessionConfig):
        return config.to_proto()
    return bytes(config)


def default_session_config(cluster: ClusterSpec, config: Union[SessionConfig, dict, bytes, None] = None) -> bytes:
    """The servers' default session ConfigProto: ``config`` with
    ``experimental.collective_group_leader`` set (ConfigProto.experimental = 16,
    collective_group_leader = 1), without which ``CollectiveReduceV2`` across
    workers waits forever for a leader."""
    out = config_bytes(config)
    leader = collective_group_leader(cluster)
    if leader is not None and b"collective_group_leader" not in out:
        out += pb.field_bytes(16, pb.field_bytes(1, leader))
    return out


def server_def(cluster: Union[ClusterSpec, Mapping[str, Any]], job_name: str, task_index: int,
               config: Union[SessionConfig, dict, bytes, None] = None, protocol: str = "grpc",
               port: int = 0) -> bytes:
    """The serialized ``tensorflow.ServerDef`` (tensorflow_server.proto: cluster = 1,
    job_name = 2, task_index = 3, default_session_config = 4, protocol = 5, port = 6)."""
    cluster = ClusterSpec(cluster)
    cluster.task_address(job_name, task_index)  # names the job and task if absent
    out = (pb.field_bytes(1, cluster.as_cluster_def()) + pb.field_bytes(2, job_name)
           + pb.field_varint(3, task_index) + pb.field_bytes(4, default_session_config(cluster, config))
           + pb.field_bytes(5, protocol))
    if port:
        out += pb.field_varint(6, port)
    return out


def _port_in_use(address: str) -> Optional[str]:
    """Why ``address``'s port cannot be bound here (None if it can)."""
    _, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return None
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # SO_REUSEADDR: connections in TIME_WAIT do not count; a listener does
    # (gRPC listens with SO_REUSEPORT and would share the port silently).
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("0.0.0.0", int(port)))  # where TensorFlow binds
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"port {port} is already in use (another server, or another program, listens on it)"
        return f"port {port} cannot be bound: {exc.strerror}"
    finally:
        probe.close()
    return None


class Server:
    """A task of a cluster served from this process, as TF's ``tf.distribute.Server``:
    ``Server(cluster, job_name, task_index, config=None, start=True)``.

    ``cluster``: a ClusterSpec (or its dict).  ``config``: the default
    session config of sessions this server masters (a SessionConfig, its
    dict or ConfigProto bytes); the collective group leader is added.
    """

    def __init__(self, cluster: Union[ClusterSpec, Mapping[str, Any]], job_name: str, task_index: int = 0,
                 config: Union[SessionConfig, dict, bytes, None] = None, start: bool = True,
                 protocol: str = "grpc"):
        self.cluster = ClusterSpec(cluster)
        self.job_name, self.task_index = job_name, int(task_index)
        try:
            self.address = self.cluster.task_address(job_name, self.task_index)
        except ValueError as exc:
            raise ServerError(f"cannot serve /job:{job_name}/task:{task_index}: {exc}") from None
        self.server_def = server_def(self.cluster, job_name, self.task_index, config, protocol)
        self._lock = threading.Lock()
        self._started = self._stopped = False
        # TF_NewServer binds the port already (gRPC's BuildAndStart), with
        # SO_REUSEPORT: a port some other server holds would be shared silently.
        busy = _port_in_use(self.address)
        if busy:
            raise ServerError(f"cannot start /job:{job_name}/task:{task_index} ({self.address}): {busy}")
        s = status()
        ptr = lib.TF_NewServer(self.server_def, len(self.server_def), s.ptr)
        try:
            check(s, f"creating the server of /job:{job_name}/task:{task_index}")
        except OpError as exc:
            raise ServerError(self._explain(str(exc))) from None
        # Never TF_DeleteServer: deleting a started gRPC server aborts the
        # process (its destructor CHECKs a Stop that TF does not implement), as
        # TF Python's Server leaks it too.
        self._ptr = ptr
        if start:
            self.start()

    @property
    def device(self) -> str:
        return f"/job:{self.job_name}/replica:0/task:{self.task_index}"

    def _explain(self, message: str) -> str:
        return f"cannot start /job:{self.job_name}/task:{self.task_index} ({self.address}): {message}"

    def start(self) -> None:
        """Start serving (idempotent).  A port already in use raises ServerError saying so."""
        with self._lock:
            if self._started:
                return
            s = status()
            lib.TF_ServerStart(self._ptr, s.ptr)
            try:
                check(s, f"starting /job:{self.job_name}/task:{self.task_index}")
            except OpError as exc:
                raise ServerError(self._explain(str(exc))) from None
            self._started = True

    def join(self) -> None:
        """Block until the server stops (for a started gRPC server: until the process ends)."""
        s = status()
        lib.TF_ServerJoin(self._ptr, s.ptr)
        check(s, "joining the server")

    def stop(self) -> bool:
        """Stop serving.  Returns False where TensorFlow cannot: a started gRPC
        server serves until its process ends (TF's GrpcServer::Stop is
        unimplemented; TF Python's Server ignores that too)."""
        with self._lock:
            if self._stopped:
                return True
            s = status()
            lib.TF_ServerStop(self._ptr, s.ptr)
            try:
                check(s, "stopping the server")
            except UnimplementedError:
                return False
            self._stopped = True
            return True

    @property
    def target(self) -> str:
        """The session target of this server, "grpc://localhost:<port>"."""
        return ffi.string(lib.TF_ServerTarget(self._ptr)).decode()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<bridge.distribute.Server {self.device} at {self.address}>"
