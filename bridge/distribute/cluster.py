"""ClusterSpec: the jobs and tasks of a TensorFlow cluster, with TF's API.

A cluster comes from a dict (``{"ps": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]}``,
a job may also be ``{task_index: address}`` for sparse jobs), a JSON file
(that dict, or TF_CONFIG's ``{"cluster": {...}, "task": {...}}``),
the ``TF_CONFIG`` environment variable, or SLURM's environment
(``SLURM_PROCID``, ``SLURM_STEP_NODELIST``/``SLURM_JOB_NODELIST`` with its
bracket syntax, tasks per node, ports counted from a base port).  Every
malformed input raises :class:`ClusterSpecError` (a ``ValueError``) saying
where and what, in one line (``bridge.distribute.checks``: task indices fit
TF's int32, hosts are names or IP literals, two spellings of one address
are one task, files and lists are bounded).
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Union

from bridge.framework import _proto as pb

from .checks import (MAX_TASKS, ClusterSpecError, address_keys, check_address, check_job_name, load_json,
                     path_text, read_cluster_file, show, task_index)
from .slurm import expand_hostlist, slurm_layout

__all__ = ["ClusterSpec", "ClusterSpecError", "expand_hostlist", "tf_config_task", "slurm_task"]


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
        count = 0
        for job, tasks in cluster.items():
            check_job_name(job, _where)
            if isinstance(tasks, str):
                tasks = [tasks]
            if isinstance(tasks, (Mapping, list, tuple)):
                count += len(tasks)
                if count > MAX_TASKS:
                    raise ClusterSpecError(f"{_where}: more than {MAX_TASKS} tasks")
            if isinstance(tasks, Mapping):
                parsed: dict[int, str] = {}
                for index, address in tasks.items():
                    i = task_index(index, f"{_where}: job '{job}': task index")
                    if i in parsed:
                        raise ClusterSpecError(f"{_where}: job '{job}' has task {i} twice (index {show(index)})")
                    parsed[i] = check_address(job, i, address, _where)
            elif isinstance(tasks, (list, tuple)):
                parsed = {i: check_address(job, i, a, _where) for i, a in enumerate(tasks)}
            else:
                raise ClusterSpecError(f"{_where}: job '{job}' maps to {show(tasks)}; expected a list "
                                       "of 'host:port' addresses or a dict of task index -> address")
            self._jobs[job] = dict(sorted(parsed.items()))
        seen: dict[tuple[str, int], tuple[str, str]] = {}
        for job, tasks in self._jobs.items():
            for i, address in tasks.items():
                for key in sorted(address_keys(address)):
                    other = seen.get(key)
                    if other is not None and other[1] == address:
                        raise ClusterSpecError(f"{_where}: address '{address}' is given twice ({other[0]} and "
                                               f"/job:{job}/task:{i}); each task needs its own port")
                    if other is not None:
                        host = f"[{key[0]}]" if ":" in key[0] else key[0]
                        raise ClusterSpecError(f"{_where}: '{other[1]}' of {other[0]} and '{address}' of "
                                               f"/job:{job}/task:{i} are one address ({host}:{key[1]}); each "
                                               "task needs its own port")
                for key in address_keys(address):
                    seen[key] = (f"/job:{job}/task:{i}", address)

    # --- sources ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, cluster: Mapping[str, Any]) -> "ClusterSpec":
        return cls(cluster)

    @classmethod
    def from_json(cls, path: Union[str, os.PathLike]) -> "ClusterSpec":
        """A JSON file holding the cluster dict, or TF_CONFIG's form (its "cluster")."""
        where = f"cluster file {path_text(path)}"
        text = read_cluster_file(path, where)
        return cls(_cluster_part(load_json(text, where), where), _where=where)

    @classmethod
    def from_tf_config(cls, value: Optional[str] = None) -> "ClusterSpec":
        """The cluster of TF_CONFIG (``value``, else the environment variable)."""
        config = _tf_config(value)
        if not isinstance(config.get("cluster"), Mapping):
            raise ClusterSpecError('TF_CONFIG has no "cluster" entry' if "cluster" not in config else
                                   f'TF_CONFIG\'s "cluster" is {show(config["cluster"])}, not an object')
        return cls(config["cluster"], _where="TF_CONFIG's cluster")

    @classmethod
    def from_slurm(cls, jobs: Optional[Mapping[str, int]] = None, port_base: int = 8888,
                   environ: Optional[Mapping[str, str]] = None) -> "ClusterSpec":
        """The cluster of the SLURM step this process runs in, as TF's
        SlurmClusterResolver lays it out: one task per SLURM task, the tasks of
        each node on ports ``port_base``, ``port_base + 1``, ...; ranks fill
        the jobs in sorted name order (``jobs``: name -> number of tasks; default
        every task a "worker"; one job may be -1, taking the remaining tasks)."""
        return cls(slurm_layout(jobs, port_base, environ)[0], _where="SLURM's environment")

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
    data = load_json(value, "TF_CONFIG")
    if not isinstance(data, dict):
        raise ClusterSpecError(f"TF_CONFIG: expected a JSON object, got {show(data)}")
    return data


def tf_config_task(value: Optional[str] = None) -> tuple[str, int]:
    """TF_CONFIG's task: (type, index); the index defaults to 0, as TF's."""
    task = _tf_config(value).get("task")
    if not isinstance(task, dict) or "type" not in task:
        raise ClusterSpecError('TF_CONFIG has no "task": {"type": ..., "index": ...} entry')
    job = check_job_name(task["type"], 'TF_CONFIG\'s task "type"')
    return job, task_index(task.get("index", 0), 'TF_CONFIG\'s task "index"')


# --- SLURM ---------------------------------------------------------------------

def slurm_task(jobs: Optional[Mapping[str, int]] = None,
               environ: Optional[Mapping[str, str]] = None) -> tuple[str, int]:
    """This SLURM task's (job, index) in :meth:`ClusterSpec.from_slurm`'s cluster."""
    _, job, index = slurm_layout(jobs, 8888, environ)
    return job, index
