"""A cluster from SLURM's environment, laid out as TF's SlurmClusterResolver.

``SLURM_PROCID``, the node list (``SLURM_STEP_NODELIST``, else
``SLURM_JOB_NODELIST`` or ``SLURM_NODELIST``, with its bracket syntax), the
tasks per node (``SLURM_STEP_TASKS_PER_NODE``/``SLURM_TASKS_PER_NODE``'s
``2(x3),1``, else ``SLURM_NTASKS_PER_NODE``), checked against
``SLURM_NTASKS``.  Every value is checked (ASCII integers, host names, at
most :data:`~bridge.distribute.checks.MAX_TASKS` tasks, counted before any
list is made), so a hostile environment is a ClusterSpecError, never a
MemoryError or a hang.
"""
from __future__ import annotations

import itertools
import os
import re
from typing import Mapping, Optional

from .checks import MAX_TASKS, ClusterSpecError, ascii_int, check_job_name, host_problem, show

__all__ = ["expand_hostlist", "slurm_layout"]

#: The longest SLURM variable read, in characters.
MAX_VARIABLE = 1 << 20


def expand_hostlist(hostlist: str) -> list[str]:
    """SLURM's compressed host list: ``"n[01-03,07],gpu[1-2]-ib,login"`` ->
    ``["n01", "n02", "n03", "n07", "gpu1-ib", "gpu2-ib", "login"]`` (zero
    padding kept, several bracket groups in one name multiply).  At most
    MAX_TASKS names; each must be a host name."""
    if not isinstance(hostlist, str) or len(hostlist) > MAX_VARIABLE:
        raise ClusterSpecError(f"SLURM node list {show(hostlist)}: longer than {MAX_VARIABLE} characters")
    names: list[str] = []
    for part in _split_top_level(hostlist.strip(), hostlist):
        groups = _groups(part, hostlist)
        count = 1
        for values in groups:
            if isinstance(values, list):
                count *= len(values)
        if len(names) + count > MAX_TASKS:
            raise ClusterSpecError(f"SLURM node list {show(hostlist)} names more than {MAX_TASKS} hosts")
        for combination in itertools.product(*[g if isinstance(g, list) else [g] for g in groups]):
            name = "".join(combination)
            problem = host_problem(name)
            if problem:
                raise ClusterSpecError(f"SLURM node list {show(hostlist)}: {problem}")
            names.append(name)
    return names


def _split_top_level(text: str, whole: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
            if depth > 1:
                raise ClusterSpecError(f"SLURM node list {show(whole)}: nested '['")
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise ClusterSpecError(f"SLURM node list {show(whole)}: ']' without '['")
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ClusterSpecError(f"SLURM node list {show(whole)}: '[' without ']'")
    parts.append(text[start:])
    if any(not p for p in parts):
        raise ClusterSpecError(f"SLURM node list {show(whole)}: empty host name")
    return parts


def _groups(name: str, whole: str) -> list:
    """``name`` as literal strings and lists of values (one per bracket group), sizes checked first."""
    out: list = []
    for piece in re.split(r"(\[[^\]]*\])", name):
        if not (piece.startswith("[") and piece.endswith("]")):
            if piece:
                out.append(piece)
            continue
        inner, values, total = piece[1:-1], [], 0
        for rng in inner.split(","):
            lo, sep, hi = rng.partition("-")
            if not re.fullmatch(r"[0-9]{1,12}", lo) or (sep and not re.fullmatch(r"[0-9]{1,12}", hi)):
                raise ClusterSpecError(f"SLURM node list {show(whole)}: {show(rng)} in {show(piece)} is not a "
                                       "number or a range 'a-b'")
            a, b = int(lo), int(hi) if sep else int(lo)
            if b < a:
                raise ClusterSpecError(f"SLURM node list {show(whole)}: range {show(rng)} goes down")
            total += b - a + 1
            if total > MAX_TASKS:
                raise ClusterSpecError(f"SLURM node list {show(whole)} names more than {MAX_TASKS} hosts")
            width = len(lo) if sep and lo.startswith("0") else (len(lo) if not sep else 0)
            values.extend(str(v).zfill(width) for v in range(a, b + 1))
        out.append(values)
    return out


def _tasks_per_node(text: str, nodes: int, where: str) -> list[int]:
    """SLURM's ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"([0-9]{1,9})(?:\(x([0-9]{1,9})\))?", part.strip())
        if m is None:
            raise ClusterSpecError(f"{where}={show(text)}: {show(part)} is not 'N' or 'N(xK)'")
        repeat = int(m.group(2) or 1)
        if len(counts) + repeat > nodes:
            raise ClusterSpecError(f"{where}={show(text)} describes more nodes than the node list's {nodes}")
        counts.extend([int(m.group(1))] * repeat)
    if len(counts) != nodes:
        raise ClusterSpecError(f"{where}={show(text)} describes {len(counts)} nodes, but the node list has {nodes}")
    return counts


def _env(environ: Mapping[str, str], *names: str) -> tuple[str, str]:
    for name in names:
        value = environ.get(name)
        if value:
            if len(value) > MAX_VARIABLE:
                raise ClusterSpecError(f"{name} has {len(value)} characters (at most {MAX_VARIABLE})")
            return name, value
    raise ClusterSpecError(f"not running under SLURM: none of {', '.join(names)} is set")


def slurm_layout(jobs: Optional[Mapping[str, int]], port_base: int,
                 environ: Optional[Mapping[str, str]]) -> tuple[dict, str, int]:
    """(job -> addresses, this task's job, its index) of the SLURM step."""
    env = os.environ if environ is None else environ
    _, rank_text = _env(env, "SLURM_PROCID")
    list_var, nodelist = _env(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    nodes = expand_hostlist(nodelist)
    rank = ascii_int(rank_text, "SLURM_PROCID", 0, MAX_TASKS - 1)
    port_base = ascii_int(port_base, "the port base", 1, 65535)
    per_var = next((n for n in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if env.get(n)), None)
    if per_var is not None:
        per_node = _tasks_per_node(_env(env, per_var)[1], len(nodes), per_var)
    elif env.get("SLURM_NTASKS_PER_NODE"):
        per_node = [ascii_int(_env(env, "SLURM_NTASKS_PER_NODE")[1], "SLURM_NTASKS_PER_NODE", 1,
                              MAX_TASKS)] * len(nodes)
    else:
        per_node = [1] * len(nodes)
    total = sum(per_node)
    if total > MAX_TASKS:
        raise ClusterSpecError(f"{per_var or 'SLURM_NTASKS_PER_NODE'} and {list_var} give {total} tasks "
                               f"(at most {MAX_TASKS})")
    if env.get("SLURM_NTASKS"):
        ntasks = ascii_int(_env(env, "SLURM_NTASKS")[1], "SLURM_NTASKS", 1, 2**31 - 1)
        if ntasks != total:
            raise ClusterSpecError(f"SLURM_NTASKS={ntasks} but {list_var} and the tasks per node give "
                                   f"{total} tasks")
    if not 0 <= rank < total:
        raise ClusterSpecError(f"SLURM_PROCID={rank} is not one of the {total} tasks of {list_var}="
                               f"{show(nodelist)}")
    if port_base + max(per_node, default=1) - 1 > 65535:
        raise ClusterSpecError(f"port base {port_base} gives ports outside 1-65535")
    addresses = [f"{host}:{port_base + k}" for host, n in zip(nodes, per_node) for k in range(n)]
    jobs = dict(jobs) if jobs else {"worker": total}
    for name, n in jobs.items():
        check_job_name(name, "SLURM jobs")
        ascii_int(n, f"SLURM job '{name}''s task count", -1, MAX_TASKS)
    rest = [j for j, n in jobs.items() if n == -1]
    if len(rest) > 1:
        raise ClusterSpecError(f"SLURM jobs {dict(jobs)}: only one job may take the remaining tasks (-1)")
    fixed = sum(n for n in jobs.values() if n != -1)
    if rest:
        jobs[rest[0]] = total - fixed
    if any(n < 0 for n in jobs.values()) or sum(jobs.values()) != total:
        raise ClusterSpecError(f"SLURM jobs {dict(jobs)} need {sum(max(n, 0) for n in jobs.values())} tasks, "
                               f"but the SLURM step has {total}")
    cluster, start, mine = {}, 0, None
    for job in sorted(jobs):
        n = jobs[job]
        cluster[job] = addresses[start:start + n]
        if start <= rank < start + n:
            mine = (job, rank - start)
        start += n
    assert mine is not None
    return cluster, mine[0], mine[1]
