"""Where servers listen (docs/guides/distributed.md, "Security"): on their task's
own host, IPv4 or IPv6, every interface only when asked; ports in use in
either family refused; two spellings of one address refused as one task.

TensorFlow alone listens on [::]:<port> whatever the cluster says: each
listening set below is read from /proc/net/tcp and /proc/net/tcp6, and a
connection to another loopback address (127.0.0.2, or the other family)
must be refused.
"""
from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bridge
from bridge import distribute

from support.cluster import REPO, ServerProcess, child_env, free_port, listening_addresses, server_command

#: (the task's host in the cluster file, --host, where it must listen, addresses that must connect,
#: addresses that must be refused)
CASES = [
    ("localhost", None, "::ffff:127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "::1"]),
    ("127.0.0.1", None, "::ffff:127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "::1"]),
    ("[::1]", None, "::1", ["::1"], ["127.0.0.1"]),
    ("localhost", "::1", "::1", ["::1"], ["127.0.0.1"]),
    ("localhost", "127.0.0.2", "::ffff:127.0.0.2", ["127.0.0.2"], ["127.0.0.1", "::1"]),
    ("localhost", "0.0.0.0", "::", ["127.0.0.1", "127.0.0.2", "::1"], []),
]


def _connects(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except ConnectionRefusedError:
        return False


def _show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _free_port_both_families() -> int:
    while True:
        port = free_port()
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", port))
            return port


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One `tfbridge server` per case, started at once, stopped when the module ends."""
    folder = tmp_path_factory.mktemp("listen")
    started = []
    try:
        for n, (host, flag, *_rest) in enumerate(CASES):
            port = _free_port_both_families()
            path = folder / f"cluster_{n}.json"
            path.write_text(json.dumps({"worker": [f"{host}:{port}"]}))
            extra = ["--host", flag] if flag else []
            started.append((port, ServerProcess(server_command(path, "worker", 0, extra=extra),
                                                folder / f"server_{n}.log")))
        for port, server in started:
            assert server.wait_ready(60) is not None, server.stderr()
        yield started
    finally:
        for _, server in started:
            server.stop()


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{h}-host={f}" for h, f, *_ in CASES])
def test_a_server_listens_on_its_tasks_host_only(servers, case):
    host, flag, expected, reachable, refused = CASES[case]
    port, server = servers[case]
    shown = "[::]:%d (every interface)" % port if expected == "::" else _show(
        expected.removeprefix("::ffff:"), port)
    assert server.ready_line == (f"tfbridge server: ready /job:worker/task:0 target grpc://{host}:{port} address "
                                 f"{host}:{port} listening {shown} pid {server.pid}\n")
    assert listening_addresses(port) == {expected}
    assert [a for a in reachable if not _connects(a, port)] == []
    assert [a for a in refused if _connects(a, port)] == []
    assert server.stderr() == ""


def test_a_cluster_on_ipv6_loopback_runs_a_graph(servers):
    """The [::1] task serves runs: a session on it from this process."""
    port, _ = servers[2]
    spec = distribute.ClusterSpec({"worker": [f"[::1]:{port}"]})
    g = bridge.Graph()
    with g.as_default(), bridge.device("/job:worker/task:0"):
        x = bridge.constant(np.arange(4.0))
        y = x * x
    with distribute.Session(spec, ("worker", 0), graph=g, timeout=20) as sess:
        np.testing.assert_array_equal(sess.run(y), np.arange(4.0) ** 2)


_IN_PROCESS = textwrap.dedent("""
    import json, sys, warnings
    from bridge import distribute
    ports = json.loads(sys.argv[1])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = distribute.Server({"worker": [f"[::1]:{ports[0]}", f"localhost:{ports[1]}"]}, "worker", 0)
        b = distribute.Server({"worker": [f"[::1]:{ports[0]}", f"localhost:{ports[1]}"]}, "worker", 1)
        c = distribute.Server({"local": ["localhost:0"]}, "local", 0)
    print(json.dumps([a.listening, b.listening, c.listening, c.target]), flush=True)
    sys.stdin.read()
""")


def test_distribute_server_listens_on_its_host_in_any_process(tmp_path):
    """distribute.Server in a user's process, port 0 included (any free port)."""
    ports = [_free_port_both_families(), _free_port_both_families()]
    proc = subprocess.Popen([sys.executable, "-c", _IN_PROCESS, json.dumps(ports)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                            cwd=str(REPO))
    try:
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)[1]
        a, b, c, target = json.loads(line)
        any_port = int(target.rpartition(":")[2])
        assert (a, b, c) == (f"[::1]:{ports[0]}", f"127.0.0.1:{ports[1]}", f"127.0.0.1:{any_port}")
        assert listening_addresses(ports[0]) == {"::1"}
        assert listening_addresses(ports[1]) == {"::ffff:127.0.0.1"}
        assert listening_addresses(any_port) == {"::ffff:127.0.0.1"}
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_without_a_c_compiler_a_server_refuses_rather_than_listen_everywhere(tmp_path):
    """The guard is built on first use: with no compiler (and nothing in the
    cache) the server does not start, saying why, and nothing listens."""
    port = free_port()
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"worker": [f"localhost:{port}"]}))
    env = dict(child_env(), CC=str(tmp_path / "no-such-cc"), TFBRIDGE_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(server_command(path, "worker", 0), capture_output=True, text=True, timeout=60, env=env,
                          cwd=str(REPO))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"tfbridge server: cannot start /job:worker/task:0 (localhost:{port}): no C compiler "
                           f"was found (looked for {tmp_path / 'no-such-cc'}) to build the bridge's listen guard, "
                           "which keeps TensorFlow's server off the other interfaces: install one (Debian: "
                           "apt-get install gcc) or set CC\n")
    assert listening_addresses(port) == set()


def test_a_host_that_is_not_this_machines_is_refused_before_tensorflow_binds():
    with pytest.raises(distribute.ServerError) as info:
        distribute.Server({"worker": ["192.0.2.1:7"]}, "worker", 0)
    assert str(info.value) == ("cannot start /job:worker/task:0 (192.0.2.1:7): 192.0.2.1 (from host '192.0.2.1') "
                               "is not an address of this machine: start the task on that machine, or name an "
                               "address of this one with --host")


# --- ports in use, in either family ------------------------------------------------------------

@pytest.mark.parametrize("family, address", [(socket.AF_INET6, "::1"), (socket.AF_INET6, "::"),
                                             (socket.AF_INET, "127.0.0.1")])
def test_a_port_in_use_in_either_family_is_refused(tmp_path, family, address):
    with socket.socket(family, socket.SOCK_STREAM) as busy:
        if family == socket.AF_INET6:
            busy.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        busy.bind((address, 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = tmp_path / "c.json"
        path.write_text(json.dumps({"worker": [f"localhost:{port}"]}))
        done = subprocess.run(server_command(path, "worker", 0), capture_output=True, text=True, timeout=60,
                              env=child_env(), cwd=str(REPO))
    assert (done.returncode, done.stdout) == (1, "")
    reason = (f"already in use on 127.0.0.1 (" if family == socket.AF_INET else "already in use (IPv6: ")
    assert done.stderr == (f"tfbridge server: cannot start /job:worker/task:0 (localhost:{port}): port {port} is "
                           f"{reason}another server, or another program, listens on it)\n")


@pytest.mark.parametrize("first, second, same", [
    ("localhost", "127.0.0.1", "127.0.0.1"), ("[::1]", "localhost", "[::1]"), ("LocalHost.", "[::1]", "[::1]"),
    ("node1", "NODE1", "node1"), ("[::ffff:127.0.0.1]", "127.0.0.1", "127.0.0.1"),
])
def test_two_spellings_of_one_address_are_one_task(first, second, same):
    with pytest.raises(distribute.ClusterSpecError) as info:
        distribute.ClusterSpec({"ps": [f"{first}:2222"], "worker": [f"{second}:2222"]})
    assert str(info.value) == (f"cluster: '{first}:2222' of /job:ps/task:0 and '{second}:2222' of "
                               f"/job:worker/task:0 are one address ({same}:2222); each task needs its own port")
    # Different ports, or different addresses of one family, are different tasks.
    distribute.ClusterSpec({"ps": [f"{first}:2222"], "worker": [f"{second}:2223"]})
    distribute.ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.2:2222", "[::1]:2223"]})


def test_tfbridge_server_refuses_a_file_with_two_spellings_of_one_address(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"worker": ["localhost:2222", "127.0.0.1:2222"]}))
    done = subprocess.run(server_command(path, "worker", 1), capture_output=True, text=True, timeout=60,
                          env=child_env(), cwd=str(REPO))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"tfbridge server: cluster file {path}: 'localhost:2222' of /job:worker/task:0 and "
                           "'127.0.0.1:2222' of /job:worker/task:1 are one address (127.0.0.1:2222); each task "
                           "needs its own port\n")


# --- which address a host means ------------------------------------------------------------------

def test_a_name_with_several_addresses_listens_on_the_first_ipv4_one_and_says_so():
    from bridge.distribute import listen

    answers = [(socket.AF_INET6, 1, 6, "", ("2001:db8::5", 0, 0, 0)), (socket.AF_INET, 1, 6, "", ("10.0.0.5", 0)),
               (socket.AF_INET, 1, 6, "", ("10.0.1.5", 0))]
    where = listen.choose_address("n01", answers)
    assert (where.ip, where.family) == ("10.0.0.5", socket.AF_INET)
    assert where.note == ("host 'n01' resolves to 2001:db8::5, 10.0.0.5, 10.0.1.5: the server listens on 10.0.0.5 "
                          "alone (--host names another address, 0.0.0.0 every interface)")
    only_v6 = listen.choose_address("n02", answers[:1])
    assert (only_v6.ip, only_v6.family, only_v6.note) == ("2001:db8::5", socket.AF_INET6, "")


def test_a_machine_name_that_resolves_to_loopback_is_noted():
    """Debian's /etc/hosts maps the machine's own name to 127.0.1.1: other machines could not reach it."""
    from bridge.distribute import listen

    answers = [(socket.AF_INET, 1, 6, "", ("127.0.1.1", 0))]
    assert listen.choose_address("vm", answers).note == (
        "host 'vm' resolves to 127.0.1.1 here, a loopback address: other machines cannot reach this task (name "
        "its address with --host, or correct /etc/hosts)")
    assert listen.listen_address("localhost") == listen.ListenAddress("localhost", "127.0.0.1", socket.AF_INET)
    assert listen.listen_address("[::1]").ip == "::1" and listen.listen_address("::").everywhere
