"""ClusterSpec: the jobs and tasks of a TensorFlow cluster, with TF's API.

A cluster comes from a dict (``{"ps": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]}``,
a job may also be ``{task_index: address}`` for sparse jobs), a JSON file
(that dict, or TF_CONFIG's ``{"cluster": {...}, "task": {...}}``),
the ``TF_CONFIG`` environment variable, or SLURM's environment
(``SLURM_PROCID``, ``SLURM_STEP_NODELIST``/``SLURM_JOB_NODELIST`` with its
bracket syntax, tasks per node, ports counted from a base port).  Every
malformed input raises :class:`ClusterSpecError` (a ``ValueError``) saying
where and what.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from bridge.framework import _proto as pb

__all__ = ["ClusterSpec", "ClusterSpecError", "expand_hostlist", "tf_config_task", "slurm_task"]

_JOB_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class ClusterSpecError(ValueError):
    """A cluster description that cannot be used, saying where and why."""


def _check_address(job: str, index: int, address: Any, where: str) -> str:
    if not isinstance(address, str) or not address:
        raise ClusterSpecError(f"{where}: task {index} of job '{job}' has address {address!r}; "
                               "expected a 'host:port' string")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ClusterSpecError(f"{where}: task {index} of job '{job}' has address '{address}'; "
                               "expected 'host:port' with a port from 0 to 65535")
    return address


class ClusterSpec:
    """TensorFlow's ``tf.train.ClusterSpec``: job name -> task index -> "host:port"."""

    def __init__(self, cluster: Union["ClusterSpec", Mapping[str, Any], None] = None, *, _where: str = "cluster"):
        self._jobs: dict[str, dict[int, str]] = {}
        if cluster is None:
            return
        if isinstance(cluster, ClusterSpec):
            self._jobs = {job: dict(tasks) for job, tasks in cluster._jobs.items()}
            return
        if isinstance(cluster, (bytes, bytearray)):
            self._jobs = _parse_cluster_def(bytes(cluster))
            return
        if not isinstance(cluster, Mapping):
            raise ClusterSpecError(f"{_where}: expected a dict of job name -> list (or dict) of 'host:port' "
                                   f"addresses, got {type(cluster).__name__}")
        for job, tasks in cluster.items():
            if not isinstance(job, str) or not _JOB_NAME.match(job):
                raise ClusterSpecError(f"{_where}: job name {job!r} is not a name TensorFlow accepts "
                                       "(a letter, then letters, digits or '_')")
            if isinstance(tasks, str):
                tasks = [tasks]
            if isinstance(tasks, Mapping):
                parsed = {}
                for index, address in tasks.items():
                    try:
                        i = int(index)
                    except (TypeError, ValueError):
                        raise ClusterSpecError(f"{_where}: job '{job}' has task index {index!r}; expected an "
                                               "integer") from None
                    if i < 0:
                        raise ClusterSpecError(f"{_where}: job '{job}' has a negative task index {i}")
                    parsed[i] = _check_address(job, i, address, _where)
            elif isinstance(tasks, (list, tuple)):
                parsed = {i: _check_address(job, i, a, _where) for i, a in enumerate(tasks)}
            else:
                raise ClusterSpecError(f"{_where}: job '{job}' maps to {type(tasks).__name__}; expected a list "
                                       "of 'host:port' addresses or a dict of task index -> address")
            self._jobs[job] = dict(sorted(parsed.items()))
        seen: dict[str, str] = {}
        for job, tasks in self._jobs.items():
            for i, address in tasks.items():
                other = seen.get(address)
                if other is not None:
                    raise ClusterSpecError(f"{_where}: address '{address}' is given twice ({other} and "
                                           f"/job:{job}/task:{i}); each task needs its own port")
                seen[address] = f"/job:{job}/task:{i}"

    # --- sources ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, cluster: Mapping[str, Any]) -> "ClusterSpec":
        return cls(cluster)

    @classmethod
    def from_json(cls, path: Union[str, os.PathLike]) -> "ClusterSpec":
        """A JSON file holding the cluster dict, or TF_CONFIG's form (its "cluster")."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ClusterSpecError(f"cluster file {path}: cannot be read ({exc.strerror or exc})") from None
        return cls(_cluster_part(_load_json(text, f"cluster file {path}"), f"cluster file {path}"),
                   _where=f"cluster file {path}")

    @classmethod
    def from_tf_config(cls, value: Optional[str] = None) -> "ClusterSpec":
        """The cluster of TF_CONFIG (``value``, else the environment variable)."""
        config = _tf_config(value)
        if "cluster" not in config:
            raise ClusterSpecError('TF_CONFIG has no "cluster" entry')
        return cls(config["cluster"], _where="TF_CONFIG's cluster")

    @classmethod
    def from_slurm(cls, jobs: Optional[Mapping[str, int]] = None, port_base: int = 8888,
                   environ: Optional[Mapping[str, str]] = None) -> "ClusterSpec":
        """The cluster of the SLURM step this process runs in, as TF's
        SlurmClusterResolver lays it out: one task per SLURM task, the tasks of
        each node on ports ``port_base``, ``port_base + 1``, ...; ranks fill
        the jobs in sorted name order (``jobs``: name -> number of tasks; default
        every task a "worker"; one job may be -1, taking the remaining tasks)."""
        return _slurm(jobs, port_base, environ)[0]

    # --- TF's API --------------------------------------------------------------
    @property
    def jobs(self) -> list[str]:
        return sorted(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        return len(self._tasks(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return list(self._tasks(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._tasks(job_name)
        if task_index not in tasks:
            raise ValueError(f"no task with index {task_index} in job '{job_name}' (it has tasks "
                             f"{sorted(tasks)})")
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list[Optional[str]]:
        """The addresses of a job's tasks by index (None for a gap in a sparse job)."""
        tasks = self._tasks(job_name)
        return [tasks.get(i) for i in range(max(tasks) + 1)] if tasks else []

    def as_dict(self) -> dict[str, Union[list[str], dict[int, str]]]:
        """Each job as a list when its indices are 0..n-1, else as a dict (as TF)."""
        out: dict[str, Union[list[str], dict[int, str]]] = {}
        for job in self.jobs:
            tasks = self._jobs[job]
            out[job] = list(tasks.values()) if list(tasks) == list(range(len(tasks))) else dict(tasks)
        return out

    def as_cluster_def(self) -> bytes:
        """The serialized ``tensorflow.ClusterDef`` (cluster.proto: job = 1; JobDef
        name = 1, tasks = 2, a map<int32, string>)."""
        out = b""
        for job in self.jobs:
            body = pb.field_bytes(1, job)
            for index, address in self._jobs[job].items():
                body += pb.field_bytes(2, pb.field_varint(1, index) + pb.field_bytes(2, address))
            out += pb.field_bytes(1, body)
        return out

    def tasks(self) -> list[tuple[str, int]]:
        """Every (job, task index), jobs sorted."""
        return [(job, i) for job in self.jobs for i in self._jobs[job]]

    def device(self, job_name: str, task_index: int) -> str:
        self.task_address(job_name, task_index)
        return f"/job:{job_name}/replica:0/task:{task_index}"

    def _tasks(self, job_name: str) -> dict[int, str]:
        try:
            return self._jobs[job_name]
        except KeyError:
            raise ValueError(f"no such job in the cluster: '{job_name}' (jobs: {', '.join(self.jobs) or 'none'})") \
                from None

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"


def _parse_cluster_def(data: bytes) -> dict[str, dict[int, str]]:
    jobs: dict[str, dict[int, str]] = {}
    for job in pb.fields(data).get(1, []):
        f = pb.fields(bytes(job))
        name = pb.text(f.get(1, [b""])[-1])
        tasks = {}
        for entry in f.get(2, []):
            e = pb.fields(bytes(entry))
            tasks[pb.as_signed(e.get(1, [0])[-1])] = pb.text(e.get(2, [b""])[-1])
        jobs[name] = dict(sorted(tasks.items()))
    return jobs


def _load_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterSpecError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") \
            from None


def _cluster_part(data: Any, where: str) -> Any:
    if isinstance(data, dict) and "cluster" in data and isinstance(data["cluster"], dict):
        return data["cluster"]
    if not isinstance(data, dict):
        raise ClusterSpecError(f"{where}: expected a JSON object of job name -> addresses (or TF_CONFIG's "
                               f'{{"cluster": ...}}), got {type(data).__name__}')
    return data


def _tf_config(value: Optional[str]) -> dict:
    if value is None:
        value = os.environ.get("TF_CONFIG")
        if value is None:
            raise ClusterSpecError("TF_CONFIG is not set")
    data = _load_json(value, "TF_CONFIG")
    if not isinstance(data, dict):
        raise ClusterSpecError(f"TF_CONFIG: expected a JSON object, got {type(data).__name__}")
    return data


def tf_config_task(value: Optional[str] = None) -> tuple[str, int]:
    """TF_CONFIG's task: (type, index)."""
    task = _tf_config(value).get("task")
    if not isinstance(task, dict) or "type" not in task:
        raise ClusterSpecError('TF_CONFIG has no "task": {"type": ..., "index": ...} entry')
    try:
        return str(task["type"]), int(task.get("index", 0))
    except (TypeError, ValueError):
        raise ClusterSpecError(f"TF_CONFIG's task index {task.get('index')!r} is not an integer") from None


# --- SLURM ---------------------------------------------------------------------

def expand_hostlist(hostlist: str) -> list[str]:
    """SLURM's compressed host list: ``"n[01-03,07],gpu[1-2]-ib,login"`` ->
    ``["n01", "n02", "n03", "n07", "gpu1-ib", "gpu2-ib", "login"]`` (zero
    padding kept, several bracket groups in one name multiply)."""
    names: list[str] = []
    for part in _split_top_level(hostlist.strip(), hostlist):
        names.extend(_expand_one(part, hostlist))
    return names


def _split_top_level(text: str, whole: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
            if depth > 1:
                raise ClusterSpecError(f"SLURM node list '{whole}': nested '['")
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise ClusterSpecError(f"SLURM node list '{whole}': ']' without '['")
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ClusterSpecError(f"SLURM node list '{whole}': '[' without ']'")
    parts.append(text[start:])
    if any(not p for p in parts):
        raise ClusterSpecError(f"SLURM node list '{whole}': empty host name")
    return parts


def _expand_one(name: str, whole: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", name)
    if m is None:
        return [name]
    head, tail = name[:m.start()], name[m.end():]
    out = []
    for rng in m.group(1).split(","):
        lo, sep, hi = rng.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ClusterSpecError(f"SLURM node list '{whole}': '{rng}' in '[{m.group(1)}]' is not a number or "
                                   "a range 'a-b'")
        if not sep:
            values, width = [lo], len(lo)
        else:
            a, b = int(lo), int(hi)
            if b < a:
                raise ClusterSpecError(f"SLURM node list '{whole}': range '{rng}' goes down")
            width = len(lo) if lo.startswith("0") else 0
            values = [str(v).zfill(width) for v in range(a, b + 1)]
        for v in values:
            out.extend(_expand_one(head + v + tail, whole))
    return out


def _tasks_per_node(text: str, nodes: int, where: str) -> list[int]:
    """SLURM's ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if m is None:
            raise ClusterSpecError(f"{where}='{text}': '{part}' is not 'N' or 'N(xK)'")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    if len(counts) != nodes:
        raise ClusterSpecError(f"{where}='{text}' describes {len(counts)} nodes, but the node list has {nodes}")
    return counts


def _env(environ: Mapping[str, str], *names: str) -> tuple[str, str]:
    for name in names:
        value = environ.get(name)
        if value:
            return name, value
    raise ClusterSpecError(f"not running under SLURM: none of {', '.join(names)} is set")


def _slurm(jobs: Optional[Mapping[str, int]], port_base: int,
           environ: Optional[Mapping[str, str]]) -> tuple[ClusterSpec, str, int]:
    env = os.environ if environ is None else environ
    _, rank_text = _env(env, "SLURM_PROCID")
    list_var, nodelist = _env(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    nodes = expand_hostlist(nodelist)
    try:
        rank = int(rank_text)
    except ValueError:
        raise ClusterSpecError(f"SLURM_PROCID='{rank_text}' is not an integer") from None
    per_var = next((n for n in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if env.get(n)), None)
    if per_var is not None:
        per_node = _tasks_per_node(env[per_var], len(nodes), per_var)
    elif env.get("SLURM_NTASKS_PER_NODE"):
        per_node = [int(env["SLURM_NTASKS_PER_NODE"])] * len(nodes)
    else:
        per_node = [1] * len(nodes)
    addresses = [f"{host}:{port_base + k}" for host, n in zip(nodes, per_node) for k in range(n)]
    total = len(addresses)
    if env.get("SLURM_NTASKS") and int(env["SLURM_NTASKS"]) != total:
        raise ClusterSpecError(f"SLURM_NTASKS={env['SLURM_NTASKS']} but {list_var} and the tasks per node give "
                               f"{total} tasks")
    if not 0 <= rank < total:
        raise ClusterSpecError(f"SLURM_PROCID={rank} is not one of the {total} tasks of {list_var}='{nodelist}'")
    if port_base < 1 or port_base + max(per_node) - 1 > 65535:
        raise ClusterSpecError(f"port base {port_base} gives ports outside 1-65535")
    jobs = dict(jobs) if jobs else {"worker": total}
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
    return ClusterSpec(cluster, _where="SLURM's environment"), mine[0], mine[1]


def slurm_task(jobs: Optional[Mapping[str, int]] = None,
               environ: Optional[Mapping[str, str]] = None) -> tuple[str, int]:
    """This SLURM task's (job, index) in :meth:`ClusterSpec.from_slurm`'s cluster."""
    _, job, index = _slurm(jobs, 8888, environ)
    return job, index
