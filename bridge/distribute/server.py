"""Server: one task of a TensorFlow cluster, in this process (TF_NewServer).

TensorFlow's gRPC server has **no authentication and no encryption**:
whoever reaches its port can run any op on it, reading and writing files
included.  TensorFlow 2.21 binds it to every interface of the machine
(``[::]:<port>``, whatever host the cluster names); a Server here listens on
its task's own host instead (``bridge.distribute.listen``), every interface
only when asked (``host="0.0.0.0"``).  Keep the ports of servers on other
hosts behind a firewall or a tunnel (docs/guides/distributed.md).

TensorFlow cannot stop a started gRPC server inside a running process (its
GrpcServer::Stop is unimplemented): a server serves until its process ends.
Run servers in processes of their own (``tfbridge server``), which end on
SIGTERM.
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Mapping, Optional, Union

from bridge.framework import _proto as pb
from bridge.framework._lib import ffi, lib
from bridge.framework.errors import OpError, UnimplementedError, check, status
from bridge.framework.session import SessionConfig

from . import listen
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


_creating = threading.Lock()  # one server made at a time: a port-0 rule covers any port meanwhile


class Server:
    """A task of a cluster served from this process, as TF's ``tf.distribute.Server``:
    ``Server(cluster, job_name, task_index, config=None, start=True)``.

    ``cluster``: a ClusterSpec (or its dict).  ``config``: the default
    session config of sessions this server masters (a SessionConfig, its
    dict or ConfigProto bytes); the collective group leader is added.
    ``host``: where to listen, default the task's own host in ``cluster``
    (``localhost``: 127.0.0.1; a name: its first IPv4 address, else IPv6);
    ``"0.0.0.0"`` (or ``"::"``) listens on every interface, as TensorFlow
    alone would.  ``listening`` says where it listens.
    """

    def __init__(self, cluster: Union[ClusterSpec, Mapping[str, Any]], job_name: str, task_index: int = 0,
                 config: Union[SessionConfig, dict, bytes, None] = None, start: bool = True,
                 protocol: str = "grpc", host: Optional[str] = None):
        self.cluster = ClusterSpec(cluster)
        self.job_name, self.task_index = job_name, int(task_index)
        try:
            self.address = self.cluster.task_address(job_name, self.task_index)
        except ValueError as exc:
            raise ServerError(f"cannot serve /job:{job_name}/task:{task_index}: {exc}") from None
        self.server_def = server_def(self.cluster, job_name, self.task_index, config, protocol)
        self._lock = threading.Lock()
        self._started = self._stopped = False
        task_host, _, port_text = self.address.rpartition(":")
        port = int(port_text)
        try:
            where = listen.listen_address(task_host if host is None else host)
        except listen.ListenError as exc:
            raise ServerError(self._explain(str(exc))) from None
        if where.note:
            warnings.warn(where.note, RuntimeWarning, stacklevel=2)
        # TF_NewServer binds the port already (gRPC's BuildAndStart), where
        # SO_REUSEPORT would share a port some other server holds silently.
        busy = listen.port_in_use(port, where)
        if busy:
            raise ServerError(self._explain(busy))
        rule = port or listen.ANY_PORT
        ptr = None
        with _creating:
            try:
                if not where.everywhere:
                    listen.guard_port(rule, where)
                s = status()
                ptr = lib.TF_NewServer(self.server_def, len(self.server_def), s.ptr)
                check(s, f"creating the server of /job:{job_name}/task:{task_index}")
                if not where.everywhere:
                    self._check_guarded(rule, where)
            except listen.ListenError as exc:
                raise ServerError(self._explain(str(exc))) from None
            except OpError as exc:
                raise ServerError(self._explain(str(exc) + self._bind_failure(rule, where))) from None
            finally:
                if rule == listen.ANY_PORT or ptr is None:
                    listen.release_port(rule)
        # Never TF_DeleteServer: deleting a started gRPC server aborts the
        # process (its destructor CHECKs a Stop that TF does not implement), as
        # TF Python's Server leaks it too.
        self._ptr = ptr
        self.listen_address = where
        self.listening = where.show(port or int(self.target.rpartition(":")[2]))
        if start:
            self.start()

    @staticmethod
    def _bind_failure(rule: int, where: listen.ListenAddress) -> str:
        """What the listen guard saw of a failed bind ("" if nothing)."""
        if where.everywhere:
            return ""
        hits, last = listen.guard_hits(rule)
        return f" (binding {where.ip}: {listen.describe_errno(last)})" if hits > 0 and last else ""

    def _check_guarded(self, rule: int, where: listen.ListenAddress) -> None:
        hits, last = listen.guard_hits(rule)
        if hits <= 0 or last:
            # Unreachable unless TensorFlow binds by other means than its
            # `bind` entries: a server that listens everywhere must not
            # pass for one that does not.
            raise listen.ListenError(
                f"TensorFlow's server did not bind through the listen guard ({hits} guarded binds, last "
                f"{listen.describe_errno(last) if last else 'ok'}): it may listen on every interface; this "
                "process must end to stop it")

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
        return f"<bridge.distribute.Server {self.device} at {self.address}, listening on {self.listening}>"
