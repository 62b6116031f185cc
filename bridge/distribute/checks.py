"""Checks of cluster input (files, TF_CONFIG, SLURM's variables, the command line).

Whatever comes in, a cluster description either parses into values
TensorFlow takes (job names, task indices that fit TF's int32, host names or
IP literals, ports) or raises :class:`ClusterSpecError` naming the input and
what is wrong, in one line of bounded length, within bounded memory and time:
files are read up to :data:`MAX_FILE_BYTES`, a cluster has at most
:data:`MAX_TASKS` tasks, numbers are ASCII digits.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
from typing import Any, Optional, Union

__all__ = ["ClusterSpecError", "MAX_TASKS", "MAX_FILE_BYTES", "MAX_TASK_INDEX", "show", "check_job_name",
           "task_index", "ascii_int", "host_problem", "path_text", "check_address", "address_keys", "read_cluster_file",
           "load_json"]

#: The most tasks a cluster may have (a SLURM node list, a file).
MAX_TASKS = 100_000
#: The largest cluster file or TF_CONFIG read, in bytes.
MAX_FILE_BYTES = 16 * 2**20
#: TensorFlow keeps task indices in an int32 (ClusterDef's map<int32, string>).
MAX_TASK_INDEX = 2**31 - 1

_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_DIGITS = re.compile(r"[0-9]+")
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_LOCALHOST = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


class ClusterSpecError(ValueError):
    """A cluster description that cannot be used, saying where and why."""


def show(value: Any, limit: int = 60) -> str:
    """``value`` quoted for a one-line message: escapes for anything unprintable, at most ``limit`` characters."""
    if isinstance(value, str):
        quoted = repr(value[:limit + 1])  # repr escapes what is unprintable: always one line
        if len(value) > limit or len(quoted) > limit:
            quoted = f"{quoted[:limit]}... ({len(value)} characters)"
        return quoted
    return _json_text(value)[:limit]


def _json_text(value: Any) -> str:
    if isinstance(value, JsonNumber):
        return value.text if len(value.text) < 200 else value.text[:200]
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value) if not isinstance(value, int) or value.bit_length() < 600 else "a huge integer"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return f"an object of {len(value)} entries"
    return type(value).__name__


def check_job_name(job: Any, where: str) -> str:
    if not isinstance(job, str) or not _JOB_NAME.fullmatch(job) or len(job) > 200:
        raise ClusterSpecError(f"{where}: job name {show(job)} is not a name TensorFlow accepts "
                               "(a letter, then letters, digits or '_')")
    return job


def ascii_int(text: Any, what: str, low: int, high: int) -> int:
    """``text`` (a str of ASCII digits, optionally '-', or an int) as an int from ``low`` to ``high``."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and len(text) <= 30 and _DIGITS.fullmatch(text.lstrip("-")) \
            and text.count("-") <= 1 and not text.endswith("-"):
        value = int(text)
    else:
        raise ClusterSpecError(f"{what} {show(text)} is not an integer (ASCII digits)")
    if not low <= value <= high:
        raise ClusterSpecError(f"{what} {show(text)} is out of range ({low} to {high})")
    return value


def task_index(value: Any, what: str) -> int:
    """A task index: an int or a string of ASCII digits, 0 to 2^31 - 1 (TF's int32)."""
    if isinstance(value, str) and value.startswith("-"):
        raise ClusterSpecError(f"{what} {show(value)} is negative")
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise ClusterSpecError(f"{what} {value} is negative")
    return ascii_int(value, what, 0, MAX_TASK_INDEX)


def host_problem(host: str, bare_ipv6: bool = False) -> Optional[str]:
    """Why ``host`` is not a host name or IP literal TensorFlow can use (None if it is).
    IPv6 literals go in brackets (``[::1]``); ``bare_ipv6`` also takes ``::1``."""
    if not host:
        return "the host is empty"
    if len(host) > 255:
        return f"the host has {len(host)} characters (at most 255)"
    if host.startswith("[") and host.endswith("]"):
        inner = host[1:-1]
        address, _, zone = inner.partition("%")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return f"{show(host)} is not an IPv6 address in brackets"
        if "%" in inner and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", zone):
            return f"{show(host)} has a bad IPv6 zone"
        return None
    if bare_ipv6 and re.fullmatch(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(%[A-Za-z0-9_.-]+)?", host):
        return host_problem(f"[{host}]")
    if _HOST_NAME.fullmatch(host) and host.isascii():
        if re.fullmatch(r"[0-9.]+", host):
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                return f"{show(host)} is neither an IPv4 address nor a host name"
        return None
    if not host.isascii():
        return f"{show(host)} is not an ASCII host name (write an internationalised name in its xn-- form)"
    return f"{show(host)} is not a host name (letters, digits, '-', '_' and dots) or an IP address"


def check_address(job: str, index: int, address: Any, where: str) -> str:
    """``host:port`` of a task, checked (the host a name or an IP literal, the port 0 to 65535)."""
    if not isinstance(address, str) or not address:
        raise ClusterSpecError(f"{where}: task {index} of job '{job}' has address {show(address)}; "
                               "expected a 'host:port' string")
    host, sep, port = address.rpartition(":")
    if not sep or not _DIGITS.fullmatch(port) or len(port) > 5 or int(port) > 65535:
        raise ClusterSpecError(f"{where}: task {index} of job '{job}' has address {show(address)}; "
                               "expected 'host:port' with a port from 0 to 65535")
    problem = host_problem(host)
    if problem is None and ":" in host and not host.startswith("["):
        problem = f"IPv6 address {show(host)} must be in brackets, as '[{host}]:{port}'"
    if problem:
        raise ClusterSpecError(f"{where}: task {index} of job '{job}' has address {show(address)}: {problem}")
    return address


def address_keys(address: str) -> set[tuple[str, int]]:
    """The (host, port) pairs an address may reach, without DNS: an IP literal
    in one spelling, ``localhost`` as 127.0.0.1 and ::1, other names lowercased.
    Two tasks sharing a pair are the same task (``localhost:P``, ``127.0.0.1:P``)."""
    host, _, port_text = address.rpartition(":")
    port = int(port_text)
    name = host.strip("[]").split("%", 1)[0].lower().rstrip(".")
    if name in _LOCALHOST:
        return {("127.0.0.1", port), ("::1", port)}
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return {(name, port)}
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return {(str(ip), port)}


def path_text(path: Union[str, bytes, os.PathLike]) -> str:
    """A file name for a one-line message: as is when printable, else quoted with escapes."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    return text if text.isprintable() and len(text) <= 300 else show(text, 300)


# --- reading ------------------------------------------------------------------------------

def read_cluster_file(path: Union[str, os.PathLike], where: str) -> str:
    """A cluster file's text: a regular file of at most MAX_FILE_BYTES of UTF-8
    (a FIFO or device is refused without blocking on it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ClusterSpecError(f"{where}: cannot be read ({reason})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                    else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                    else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
            raise ClusterSpecError(f"{where}: is {kind}, not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise ClusterSpecError(f"{where}: has {info.st_size} bytes; a cluster file has at most "
                                   f"{MAX_FILE_BYTES} ({MAX_FILE_BYTES // 2**20} MiB)")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:  # it grew while being read
            raise ClusterSpecError(f"{where}: has more than {MAX_FILE_BYTES} bytes")
    except OSError as exc:
        raise ClusterSpecError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return decode_text(b"".join(chunks), where)


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 text (a UTF-8 BOM allowed); UTF-16/32 and binary data refused, naming the first bad byte."""
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                      (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(bom):
            raise ClusterSpecError(f"{where}: is {name} text; save it as UTF-8 (JSON)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ClusterSpecError(f"{where}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                               f"{exc.start}); a cluster is JSON in UTF-8") from None


class JsonNumber:
    """A JSON number that is not an integer (``1.5``, ``1e400``), kept as written so messages show it."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def load_json(text: str, where: str) -> Any:
    """``text`` as JSON: objects with unique keys, integers of at most 30 digits,
    other numbers as :class:`JsonNumber`; NaN and Infinity refused."""
    if len(text) > MAX_FILE_BYTES:
        raise ClusterSpecError(f"{where}: has {len(text)} characters; at most {MAX_FILE_BYTES}")

    def pairs(items: list) -> dict:
        out: dict = {}
        for key, value in items:
            if key in out:
                raise ClusterSpecError(f"{where}: key {show(key)} appears twice in one JSON object")
            out[key] = value
        return out

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > 30:
            raise ClusterSpecError(f"{where}: the number {show(digits)} has more than 30 digits")
        return int(digits)

    def constant(name: str) -> None:
        raise ClusterSpecError(f"{where}: {name} is not JSON")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_int=integer, parse_float=JsonNumber,
                          parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise ClusterSpecError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") \
            from None
    except RecursionError:
        raise ClusterSpecError(f"{where}: JSON nested too deeply") from None
