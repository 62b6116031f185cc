"""What the tasks of a cluster answer: a TCP connection to each (does a server
run there?), a trivial run on it (does it answer?), and which tasks a run
needs (the devices of the part of the graph it runs)."""
from __future__ import annotations

import socket
import threading
import time
from typing import Any, Iterable, Optional

from bridge.framework import _proto as pb
from bridge.framework.device import device_fields
from bridge.framework.errors import DeadlineExceededError, OpError
from bridge.framework.graph import Graph
from bridge.framework.session import Session as _Session

from .cluster import ClusterSpec

__all__ = ["probe", "probe_task", "probe_tasks", "answering", "task_device", "tasks_of", "run_closure",
           "pruned_graph_def"]

ACCEPTS = "accepts connections"
REFUSES = "refuses connections: no server is running there"


def task_device(job: str, index: Optional[int]) -> str:
    return f"/job:{job}" if index is None else f"/job:{job}/task:{index}"


def tasks_of(filters: Iterable[str], cluster: ClusterSpec, own: tuple[str, int]) -> list[tuple[str, int]]:
    """The (job, index) tasks device filters cover (a job alone: all its tasks), ``own`` included."""
    tasks = {own}
    for f in filters:
        job, _, index, _, _ = device_fields(f)
        if job in cluster.jobs:
            tasks.update((job, i) for i in ([index] if index is not None else cluster.task_indices(job)))
    return sorted(tasks)


def probe(address: str, timeout: float = 0.5) -> str:
    """What a TCP connection to ``address`` says about the task there."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return ACCEPTS
    except ConnectionRefusedError:
        return REFUSES
    except OSError as exc:
        return f"cannot be reached ({exc.strerror or exc})"


def probe_task(job: str, index: int, address: str, budget: float) -> str:
    """Whether the task's server answers a trivial run within ``budget`` seconds."""
    said = probe(address, budget)
    if said != ACCEPTS:
        return said
    from bridge.framework.builders import constant

    device = f"/job:{job}/task:{index}"
    g = Graph()
    with g.as_default(), g.device(device):
        c = constant(0.0, name="probe")
    proto = pb.field_varint(11, max(1, round(budget * 1000))) + pb.field_bytes(4, device)
    try:
        sess = _Session(g, config=proto, target=f"grpc://{address}")
        try:
            sess.run(c, timeout=budget)
        finally:
            sess.close()
    except DeadlineExceededError:
        return f"accepts connections but does not answer within {budget:g} s: stopped, stalled or overloaded"
    except OpError as exc:
        return f"answers, with an error: {exc.message.splitlines()[0]}"
    return "answers"


def probe_tasks(tasks: list, cluster: ClusterSpec, budget: float = 0.5) -> dict:
    """_probe_task for each (job, index), in parallel threads, all within about ``budget`` seconds."""
    results: dict = {}

    def probe(job: str, index: int) -> None:
        try:
            results[(job, index)] = probe_task(job, index, cluster.task_address(job, index), budget)
        except Exception as exc:  # noqa: BLE001 - a diagnosis must never fail the error it explains
            results[(job, index)] = f"could not be probed ({exc})"

    threads = [threading.Thread(target=probe, args=t, daemon=True) for t in tasks]
    for t in threads:
        t.start()
    end = time.monotonic() + budget + 0.5
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    return {t: results.get(t, f"does not answer within {budget:g} s") for t in tasks}



def answering(tasks: list, cluster: ClusterSpec, timeout: float = 0.5) -> dict:
    """For each (job, index), whether its address accepts a TCP connection
    (in parallel threads, all within about ``timeout`` seconds)."""
    said = {}

    def one(task: tuple) -> None:
        said[task] = probe(cluster.task_address(*task), timeout) == ACCEPTS

    threads = [threading.Thread(target=one, args=(t,), daemon=True) for t in tasks]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout + 0.2
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    return {t: said.get(t, False) for t in tasks}


def run_closure(graph: Graph, outputs: Iterable[Any], targets: Iterable[Any]) -> tuple[frozenset, set[str]]:
    """(the names of the operations, their devices) a run of ``outputs`` and
    ``targets`` needs: from them back through inputs, control inputs and
    colocation (``_class``: an operation placed with another needs that one
    in its graph, and counts with its device)."""
    stack = [out.op for out in outputs] + list(targets)
    seen: set[str] = set()
    devices: set[str] = set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.device:
            devices.add(op.device)
        try:
            groups = op.get_attr("_class")
        except (ValueError, KeyError, OpError):
            groups = []
        for group in groups:
            name = group.decode() if isinstance(group, bytes) else str(group)
            if name.startswith("loc:@"):
                try:
                    stack.append(graph.get_operation_by_name(name[5:]))
                except OpError:
                    continue
        stack.extend(inp.op for inp in op.inputs)
        stack.extend(op.control_inputs)
    return frozenset(seen), devices


def pruned_graph_def(graph: Graph, names: frozenset) -> bytes:
    """The graph's GraphDef with only the nodes named ``names`` (its function
    library and versions kept)."""
    out = []
    for number, wire, value in pb.iter_fields(graph.as_graph_def()):
        if wire == pb.VARINT:
            out.append(pb.field_varint(number, value))
            continue
        if wire != pb.LEN:
            raise ValueError(f"GraphDef field {number} has wire type {wire}")
        if number == 1:  # GraphDef.node: NodeDef.name is field 1
            name = next((pb.text(v) for n, _, v in pb.iter_fields(bytes(value)) if n == 1), "")
            if name not in names:
                continue
        out.append(pb.field_bytes(number, bytes(value)))
    return b"".join(out)
