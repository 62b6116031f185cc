"""Where a task's server listens: its own host, not every interface.

TensorFlow 2.21's gRPC server binds ``[::]:<port>`` whatever host its
ServerDef names, and no ServerDef or gRPC option changes that.  The bridge
changes the one call that decides it: ``listen_guard.c`` (built once into
the cache with the C compiler, ``$CC`` else cc, gcc or clang) rewrites the
``bind`` entries of the TensorFlow libraries' global offset tables, and a
wildcard bind of a guarded port then binds the task's own address instead.
Other libraries, Python's sockets among them, keep libc's ``bind``.

:func:`listen_address` says which address a task's host means here:

- an IP literal (``127.0.0.1``, ``::1``, ``[::1]``): itself;
- ``localhost``: 127.0.0.1;
- a name: what the resolver gives, the first IPv4 address, else the first
  IPv6 one (a name with several addresses listens on one; ``--host`` names
  another);
- ``0.0.0.0``, ``::`` or ``[::]``: every interface (TensorFlow's own bind),
  only when asked for by name.
"""
from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

__all__ = ["ListenAddress", "ListenError", "listen_address", "guard_port", "release_port", "guard_hits",
           "WILDCARD_HOSTS", "RESOLVE_TIMEOUT", "ANY_PORT", "port_in_use", "choose_address"]

#: Hosts that mean "every interface": TensorFlow binds as it always does.
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]")
#: Seconds a host name may take to resolve before the server refuses to start.
RESOLVE_TIMEOUT = 10.0
_LOCALHOST_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_SOURCE = Path(__file__).resolve().parent / "listen_guard.c"
_TF_LIBRARIES = ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2", "libtensorflow.so.2")


class ListenError(RuntimeError):
    """The server cannot listen where its task's host says, saying why."""


@dataclass(frozen=True)
class ListenAddress:
    """Where a server listens: ``ip`` (None: every interface), its family, IPv6 scope."""
    host: str
    ip: Optional[str]
    family: int = 0
    scope_id: int = 0
    note: str = ""   # what a user should know about the choice (several addresses, a loopback name)

    @property
    def everywhere(self) -> bool:
        return self.ip is None

    def show(self, port: int) -> str:
        """``127.0.0.1:2222``, ``[::1]:2222``, ``[::]:2222`` (every interface)."""
        if self.ip is None:
            return f"[::]:{port} (every interface)"
        return f"[{self.ip}]:{port}" if self.family == socket.AF_INET6 else f"{self.ip}:{port}"


def _literal(host: str) -> Optional[ipaddress._BaseAddress]:
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    scope = None
    if "%" in text:
        text, scope = text.split("%", 1)
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if scope is not None and ip.version != 6:
        return None
    return ip


def _resolve(host: str, timeout: float) -> list:
    """getaddrinfo's answers for ``host``, waited for at most ``timeout`` seconds."""
    answers: list = []
    failure: list = []

    def run() -> None:
        try:
            answers.extend(socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            failure.append(exc)

    worker = threading.Thread(target=run, daemon=True, name="bridge-resolve")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise ListenError(f"host '{host}' did not resolve within {timeout:g} s")
    if failure:
        exc = failure[0]
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ListenError(f"host '{host}' does not resolve here ({reason})")
    return answers


def listen_address(host: str, timeout: float = RESOLVE_TIMEOUT) -> ListenAddress:
    """The address a server for a task on ``host`` listens on (see the module docstring)."""
    if host in WILDCARD_HOSTS:
        return ListenAddress(host, None)
    if host.lower().rstrip(".") in _LOCALHOST_NAMES:
        return ListenAddress(host, "127.0.0.1", socket.AF_INET)
    ip = _literal(host)
    if ip is not None:
        if ip.is_unspecified:
            return ListenAddress(host, None)
        if ip.version == 4:
            return ListenAddress(host, str(ip), socket.AF_INET)
        zone = host.strip("[]").partition("%")[2]
        try:
            scope = int(zone) if zone.isascii() and zone.isdigit() else socket.if_nametoindex(zone) if zone else 0
        except OSError:
            raise ListenError(f"host '{host}': this machine has no network interface '{zone}'") from None
        return ListenAddress(host, str(ip), socket.AF_INET6, scope)
    return choose_address(host, _resolve(host, timeout))


def choose_address(host: str, answers: list) -> ListenAddress:
    """Of getaddrinfo's ``answers`` for ``host``, the address to listen on (the
    first IPv4 one, else the first IPv6 one), with a note when the name has
    several addresses or a loopback one."""
    v4 = [a[4] for a in answers if a[0] == socket.AF_INET]
    v6 = [a[4] for a in answers if a[0] == socket.AF_INET6]
    if not v4 and not v6:
        raise ListenError(f"host '{host}' resolves to no IPv4 or IPv6 address here")
    if v4:
        chosen = ListenAddress(host, v4[0][0], socket.AF_INET)
    else:
        chosen = ListenAddress(host, v6[0][0].split("%", 1)[0], socket.AF_INET6, v6[0][3])
    notes = []
    found = list(dict.fromkeys(a[4][0].split("%", 1)[0] for a in answers if a[0] in (socket.AF_INET,
                                                                                    socket.AF_INET6)))
    if len(found) > 1:
        notes.append(f"host '{host}' resolves to {', '.join(found)}: the server listens on {chosen.ip} alone "
                     "(--host names another address, 0.0.0.0 every interface)")
    if ipaddress.ip_address(chosen.ip).is_loopback:
        notes.append(f"host '{host}' resolves to {chosen.ip} here, a loopback address: other machines cannot "
                     "reach this task (name its address with --host, or correct /etc/hosts)")
    return ListenAddress(chosen.host, chosen.ip, chosen.family, chosen.scope_id, "; ".join(notes))


# --- the guard library ----------------------------------------------------------------

_lock = threading.Lock()
_guard: Optional[ctypes.CDLL] = None


def _compiler() -> str:
    names = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise ListenError(f"no C compiler was found (looked for {', '.join(names)}) to build the bridge's "
                      "listen guard, which keeps TensorFlow's server off the other interfaces: install one "
                      "(Debian: apt-get install gcc) or set CC")


def _build(target: Path) -> None:
    """Compile listen_guard.c into ``target`` (written whole or not at all)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    command = [_compiler(), "-shared", "-fPIC", "-O2", "-Wall", "-o", str(tmp), str(_SOURCE), "-lpthread"]
    try:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, LC_ALL="C"), timeout=120)
        if proc.returncode != 0:
            raise ListenError(f"building the listen guard failed ({' '.join(command)}, exit "
                              f"{proc.returncode}):\n{proc.stdout.strip()}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _library() -> ctypes.CDLL:
    """The guard library, built on first use (into the cache, or a temporary folder
    where the cache cannot be written), its bind slots put into TF's libraries."""
    global _guard
    with _lock:
        if _guard is not None:
            return _guard
        from bridge.framework._lib import load
        from bridge.platform import cache

        load()  # the TF libraries must be loaded for their slots to be patched
        source = _SOURCE.read_bytes()
        key = cache.Key("listen_guard", source, os.uname().machine).hexdigest()
        path = cache.root() / "listen-guard" / key / "liblisten_guard.so"
        if not path.is_file():
            try:
                _build(path)
            except OSError:
                path = Path(tempfile.mkdtemp(prefix="bridge-listen-guard-")) / "liblisten_guard.so"
                _build(path)
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        lib.tfb_guard_set.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        lib.tfb_guard_set.restype = ctypes.c_int
        lib.tfb_guard_hits.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        lib.tfb_guard_hits.restype = ctypes.c_long
        lib.tfb_guard_patch.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        lib.tfb_guard_patch.restype = ctypes.c_int
        patched = 0
        for name in _TF_LIBRARIES:
            objects = ctypes.c_int(0)
            slots = lib.tfb_guard_patch(("/" + name).encode(), ctypes.byref(objects))
            if slots < 0:
                raise ListenError(f"the listen guard could not patch {name}: {os.strerror(-slots)}")
            patched += slots
        if patched == 0:
            raise ListenError("the listen guard found no `bind` of TensorFlow's libraries to guard "
                              f"(looked in {', '.join(_TF_LIBRARIES)})")
        _guard = lib
        return lib


#: The rule of a server asking for port 0 (any free port): every wildcard bind without a rule of its own.
ANY_PORT = -1


def guard_port(port: int, where: ListenAddress) -> None:
    """From now on, a wildcard bind of ``port`` (ANY_PORT: of any port) by
    TensorFlow binds ``where`` instead."""
    lib = _library()
    packed = socket.inet_pton(where.family, where.ip)
    if lib.tfb_guard_set(port, where.family, packed, where.scope_id) != 0:
        raise ListenError(f"the listen guard holds no more ports (port {port})")


def release_port(port: int) -> None:
    """Forget ``port``'s rule (its server failed to start)."""
    if _guard is not None:
        _guard.tfb_guard_set(port, 0, None, 0)


def guard_hits(port: int) -> tuple[int, int]:
    """(how many wildcard binds of ``port`` were redirected, errno of the last: 0 if it succeeded)."""
    last = ctypes.c_int(0)
    hits = _library().tfb_guard_hits(port, ctypes.byref(last))
    return hits, last.value


def describe_errno(code: int) -> str:
    return f"{errno.errorcode.get(code, code)}: {os.strerror(code)}"


def _probe_bind(family: int, address: tuple, v6only: bool = False) -> Optional[OSError]:
    probe = socket.socket(family, socket.SOCK_STREAM)
    # SO_REUSEADDR: connections in TIME_WAIT do not count; a listener does.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if v6only:
        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        probe.bind(address)
    except OSError as exc:
        return exc
    finally:
        probe.close()
    return None


def port_in_use(port: int, where: ListenAddress) -> Optional[str]:
    """Why a server cannot listen on ``port`` at ``where`` (None if it can).

    A listener on the port anywhere on the machine counts, IPv4 or IPv6
    (``[::1]:P`` included): a client resolving the task's name may reach
    either family, and TensorFlow's own bind (every interface) would share
    it silently where gRPC sets SO_REUSEPORT.  The task's own address must
    also be one of this machine's."""
    if port == 0:
        return None
    if where.ip is not None:
        try:
            exc = _probe_bind(where.family, (where.ip, port, 0, where.scope_id) if where.family == socket.AF_INET6
                              else (where.ip, port))
        except OSError as family_missing:  # no socket of that family here
            return f"{where.show(port)} cannot be bound here: {family_missing.strerror}"
        if exc is not None and exc.errno == errno.EADDRNOTAVAIL:
            return (f"{where.ip} (from host '{where.host}') is not an address of this machine: start the task "
                    "on that machine, or name an address of this one with --host")
        if exc is not None and exc.errno != errno.EADDRINUSE:
            return f"{where.show(port)} cannot be bound: {exc.strerror}"
        if exc is not None:
            return f"port {port} is already in use on {where.ip} (another server, or another program, listens on it)"
    for family, address, v6only in ((socket.AF_INET, ("0.0.0.0", port), False),
                                    (socket.AF_INET6, ("::", port, 0, 0), True)):
        try:
            exc = _probe_bind(family, address, v6only)
        except OSError:  # this machine has no IPv6 (or no IPv4)
            continue
        if exc is None or exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            continue
        if exc.errno == errno.EADDRINUSE:
            kind = "IPv4" if family == socket.AF_INET else "IPv6"
            return (f"port {port} is already in use ({kind}: another server, or another program, listens on "
                    "it)")
        return f"port {port} cannot be bound: {exc.strerror}"
    return None
