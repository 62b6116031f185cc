"""The recipe for a cluster on an untrusted network
(docs/guides/distributed.md, "Security"), tested on loopback: every server listens on
localhost only, and every connection between tasks goes through a
mutual-TLS tunnel (socat, one self-signed certificate shared by the
cluster's machines: a peer without it is refused).

One machine stands in for three: each task gets its own cluster file in
which the other tasks are local tunnel ports (on real machines every file
is the same, the ports being distinct across the cluster); TensorFlow
reaches the other tasks through its own process's cluster file only.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess

import numpy as np
import pytest

from bridge import distribute

from support.cluster import ServerProcess, free_port, listening_addresses, server_command
from support.distributed import local_trajectory, replicated_model, run_steps

TASKS = [("ps", 0), ("worker", 0), ("worker", 1)]


def _socat(*args):
    return subprocess.Popen(["socat", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _listening(port):
    return listening_addresses(port) != set()


@pytest.fixture(scope="module")
def tunnelled(tmp_path_factory):
    if shutil.which("socat") is None or shutil.which("openssl") is None:
        pytest.skip("socat or openssl is not installed (make setup installs socat; Debian: apt-get install socat)")
    folder = tmp_path_factory.mktemp("tunnels")
    # The cluster's certificate: self-signed, so it is its own CA; every machine holds node.pem.
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(folder / "node.key"), "-out", str(folder / "node.crt"), "-days", "2",
                    "-subj", "/CN=tfcluster"], check=True, capture_output=True, timeout=60)
    (folder / "node.pem").write_bytes((folder / "node.key").read_bytes() + (folder / "node.crt").read_bytes())
    tls = f"cert={folder / 'node.pem'},cafile={folder / 'node.crt'},verify=1"
    server_port = {t: free_port() for t in TASKS}
    tls_port = {t: free_port() for t in TASKS}
    tunnel_port = {(a, b): free_port() for a in TASKS for b in TASKS if a != b}
    children, servers = [], {}
    try:
        for t in TASKS:   # each machine: its task's TLS entry, to its server on loopback
            children.append(_socat(f"OPENSSL-LISTEN:{tls_port[t]},bind=127.0.0.1,reuseaddr,fork,{tls}",
                                   f"TCP:127.0.0.1:{server_port[t]}"))
        for (a, b), port in tunnel_port.items():   # on a's machine, b's task through the tunnel
            children.append(_socat(f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork",
                                   f"OPENSSL:127.0.0.1:{tls_port[b]},{tls},commonname=tfcluster"))
        specs = {}
        for a in TASKS:
            spec = {}
            for b in TASKS:
                spec.setdefault(b[0], []).append(f"localhost:{server_port[b] if a == b else tunnel_port[(a, b)]}")
            specs[a] = distribute.ClusterSpec(spec)
            path = folder / f"cluster_{a[0]}{a[1]}.json"
            path.write_text(json.dumps(specs[a].as_dict()))
            servers[a] = ServerProcess(server_command(path, *a), folder / f"server_{a[0]}{a[1]}.log")
        for a, server in servers.items():
            assert server.wait_ready(60) is not None, server.stderr()
        assert all(_listening(p) for p in list(tls_port.values()) + list(tunnel_port.values()))
        yield specs, server_port, tls_port, folder
    finally:
        for server in servers.values():
            server.stop()
        for child in children:
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.communicate(timeout=10)


def test_replicated_training_through_tls_tunnels_equals_the_local_run(tunnelled):
    specs, server_port, _, _ = tunnelled
    for t in TASKS:   # the servers themselves: loopback only
        assert listening_addresses(server_port[t]) == {"::ffff:127.0.0.1"}
    spec = specs[("worker", 0)]   # the client runs on worker 0's machine, with its cluster file
    g, rep, xs, ys, init, _ = replicated_model(spec)
    with distribute.Session(spec, ("worker", 0), graph=g, timeout=30.0) as sess:
        sess.run(init)
        remote = run_steps(sess, rep, xs, ys, steps=4)
    np.testing.assert_array_equal(remote, local_trajectory(steps=4))


def test_a_peer_without_the_clusters_certificate_is_refused(tunnelled):
    _, _, tls_port, folder = tunnelled
    context = ssl.create_default_context(cafile=str(folder / "node.crt"))
    context.check_hostname = False
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        with socket.create_connection(("127.0.0.1", tls_port[("worker", 0)]), timeout=10) as raw:
            with context.wrap_socket(raw) as tls:
                tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")   # gRPC's first bytes
                if not tls.recv(1):
                    raise ConnectionResetError("closed without an answer")
