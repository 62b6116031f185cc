"""Hostile cluster input (files, TF_CONFIG, SLURM's variables, the command
line): every malformed input is a ClusterSpecError naming it, in one line,
within bounded memory and time, and `tfbridge server` prints that line and
exits 1 (no traceback, no abort, no hang).  Then a bounded fuzz run of the
same sources (hypothesis)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.distribute import ClusterSpec, ClusterSpecError, expand_hostlist, slurm_task, tf_config_task

from support.cluster import REPO, child_env

CLUSTER_OK = {"ps": ["localhost:2222"], "worker": ["localhost:2223"]}
SLURM_OK = {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "1",
            "SLURM_NTASKS": "1"}
TF_CONFIG_OK = {"cluster": CLUSTER_OK, "task": {"type": "worker", "index": 0}}

#: Runs `tfbridge server` (bridge.cli.main) once per case in one child process:
#: (exit status, stdout, stderr, seconds) each, or the exception that escaped.
_RUNNER = textwrap.dedent("""
    import contextlib, io, json, os, sys, time, traceback
    from bridge.cli import main
    results = []
    for argv, env in json.loads(sys.stdin.read()):
        saved = dict(os.environ)
        for name in [n for n in os.environ if n.startswith("SLURM_") or n == "TF_CONFIG"]:
            del os.environ[name]
        os.environ.update(env)
        out, err = io.StringIO(), io.StringIO()
        t0 = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(["server", *argv])
            except SystemExit as exc:
                rc = exc.code
            except BaseException:
                rc = "escaped: " + traceback.format_exc(limit=1)
        results.append([rc, out.getvalue(), err.getvalue(), time.monotonic() - t0])
        os.environ.clear()
        os.environ.update(saved)
    print(json.dumps(results))
""")


def _cases(tmp_path):
    """(name, argv, environment, the one line expected after 'tfbridge server: ')."""
    def file(name, data):
        path = tmp_path / name
        path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
        return str(path)

    def tf_config(value):
        return value if isinstance(value, str) else json.dumps(value)

    big = tmp_path / "huge.json"
    with open(big, "wb") as f:
        f.truncate(6 * 2**30)  # sparse: 6 GB that occupy nothing
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases = []

    def add(name, argv, env, line):
        cases.append((name, argv, env, line))

    f = file("index31.json", {"worker": {"2147483648": "localhost:2222"}})
    add("index 2^31", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: job 'worker': task index '2147483648' is out of range (0 to 2147483647)")
    f = file("index32.json", {"worker": {"0": "localhost:2222", "4294967296": "localhost:2223"}})
    add("index 2^32 wraps to 0", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: job 'worker': task index '4294967296' is out of range (0 to 2147483647)")
    add("--task 2^31", ["--cluster", file("ok.json", CLUSTER_OK), "--job", "worker", "--task", "2147483648"], {},
        "--task '2147483648' is out of range (0 to 2147483647)")
    add("--task in Arabic-Indic digits", ["--cluster", file("ok.json", CLUSTER_OK), "--job", "worker",
                                          "--task", "\u0660"], {}, "--task '\u0660' is not an integer (ASCII digits)")
    f = file("binary.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    add("binary file", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: is not UTF-8 text (byte 0x89 at offset 0); a cluster is JSON in UTF-8")
    f = file("utf16.json", json.dumps(CLUSTER_OK).encode("utf-16"))
    add("UTF-16 file", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: is UTF-16 text; save it as UTF-8 (JSON)")
    f = file("deep.json", b"[" * 200_000)
    add("deep JSON", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: JSON nested too deeply")
    f = file("digits.json", {"worker": {"\u0663": "localhost:2222"}})
    add("non-ASCII index", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: job 'worker': task index '\u0663' is not an integer (ASCII digits)")
    f = file("port.json", {"worker": ["localhost:\u0662\u0662"]})
    add("non-ASCII port", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: task 0 of job 'worker' has address 'localhost:\u0662\u0662'; expected 'host:port' "
        "with a port from 0 to 65535")
    f = file("float.json", {"worker": {"1.5": "localhost:2222"}})
    add("index 1.5 in a file", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: job 'worker': task index '1.5' is not an integer (ASCII digits)")
    f = file("nul.json", {"worker": ["a\u0000b:2222"]})
    add("host with a NUL", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: task 0 of job 'worker' has address 'a\\x00b:2222': 'a\\x00b' is not a host name "
        "(letters, digits, '-', '_' and dots) or an IP address")
    f = file("newline.json", {"worker": ["a\nb:2222"]})
    add("host with a newline", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: task 0 of job 'worker' has address 'a\\nb:2222': 'a\\nb' is not a host name "
        "(letters, digits, '-', '_' and dots) or an IP address")
    f = file("nan.json", b'{"worker": {"0": "localhost:2222"}, "x": NaN}')
    add("NaN", ["--cluster", f, "--job", "worker", "--task", "0"], {}, f"cluster file {f}: NaN is not JSON")
    f = file("twice.json", b'{"worker": ["localhost:2222"], "worker": ["localhost:2223"]}')
    add("a job twice", ["--cluster", f, "--job", "worker", "--task", "0"], {},
        f"cluster file {f}: key 'worker' appears twice in one JSON object")
    add("6 GB file", ["--cluster", str(big), "--job", "worker", "--task", "0"], {},
        f"cluster file {big}: has {6 * 2**30} bytes; a cluster file has at most 16777216 (16 MiB)")
    add("FIFO", ["--cluster", str(fifo), "--job", "worker", "--task", "0"], {},
        f"cluster file {fifo}: is a FIFO, not a regular file")
    add("folder", ["--cluster", str(tmp_path), "--job", "worker", "--task", "0"], {},
        f"cluster file {tmp_path}: is a folder, not a regular file")
    add("--host 'a b:c'", ["--cluster", file("ok.json", CLUSTER_OK), "--job", "worker", "--task", "0",
                           "--host", "a b:c"], {},
        "--host 'a b:c': 'a b:c' is not a host name (letters, digits, '-', '_' and dots) or an IP address (a host "
        "name or IP address, without a port; 0.0.0.0 listens on every interface)")
    add("TF_CONFIG 1e400", ["--cluster", "TF_CONFIG"],
        {"TF_CONFIG": tf_config('{"cluster": {"worker": ["localhost:2222"]}, '
                                '"task": {"type": "worker", "index": 1e400}}')},
        "TF_CONFIG's task \"index\" 1e400 is not an integer (ASCII digits)")
    add("TF_CONFIG type null", ["--cluster", "TF_CONFIG"],
        {"TF_CONFIG": tf_config({"cluster": CLUSTER_OK, "task": {"type": None, "index": 0}})},
        "TF_CONFIG's task \"type\": job name null is not a name TensorFlow accepts (a letter, then letters, digits "
        "or '_')")
    add("TF_CONFIG index 1.5", ["--cluster", "TF_CONFIG"],
        {"TF_CONFIG": tf_config({"cluster": CLUSTER_OK, "task": {"type": "worker", "index": 1.5}})},
        "TF_CONFIG's task \"index\" 1.5 is not an integer (ASCII digits)")
    add("TF_CONFIG deep", ["--cluster", "TF_CONFIG"], {"TF_CONFIG": "{\"a\":" * 100_000},
        "TF_CONFIG: JSON nested too deeply")
    add("TF_CONFIG index true", ["--cluster", "TF_CONFIG"],
        {"TF_CONFIG": tf_config({"cluster": CLUSTER_OK, "task": {"type": "worker", "index": True}})},
        "TF_CONFIG's task \"index\" true is not an integer (ASCII digits)")
    add("SLURM_NTASKS=abc", ["--cluster", "SLURM"], dict(SLURM_OK, SLURM_NTASKS="abc"),
        "SLURM_NTASKS 'abc' is not an integer (ASCII digits)")
    add("SLURM_PROCID non-ASCII", ["--cluster", "SLURM"], dict(SLURM_OK, SLURM_PROCID="\u0660"),
        "SLURM_PROCID '\u0660' is not an integer (ASCII digits)")
    add("cn[0-999999999]", ["--cluster", "SLURM"], dict(SLURM_OK, SLURM_STEP_NODELIST="cn[0-999999999]"),
        "SLURM node list 'cn[0-999999999]' names more than 100000 hosts")
    add("tasks per node 99999999(x99999999)", ["--cluster", "SLURM"],
        dict(SLURM_OK, SLURM_STEP_TASKS_PER_NODE="99999999(x99999999)"),
        "SLURM_STEP_TASKS_PER_NODE='99999999(x99999999)' describes more nodes than the node list's 1")
    add("SLURM_NTASKS_PER_NODE=abc", ["--cluster", "SLURM"],
        {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS_PER_NODE": "abc"},
        "SLURM_NTASKS_PER_NODE 'abc' is not an integer (ASCII digits)")
    add("SLURM node with a space", ["--cluster", "SLURM"], dict(SLURM_OK, SLURM_STEP_NODELIST="a b"),
        "SLURM node list 'a b': 'a b' is not a host name (letters, digits, '-', '_' and dots) or an IP address")
    add("--port-base abc", ["--cluster", "SLURM", "--port-base", "abc"], SLURM_OK,
        "--port-base 'abc' is not an integer (ASCII digits)")
    add("--slurm-jobs ps=x", ["--cluster", "SLURM", "--slurm-jobs", "ps=x"], SLURM_OK,
        "--slurm-jobs: the count of 'ps' 'x' is not an integer (ASCII digits)")
    return cases


def test_tfbridge_server_refuses_every_hostile_input_in_one_line(tmp_path):
    cases = _cases(tmp_path)
    done = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps([c[1:3] for c in cases]),
                          capture_output=True, text=True, timeout=120, env=child_env(), cwd=str(REPO))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    wrong = {}
    for (name, _, _, line), (rc, out, err, seconds) in zip(cases, results, strict=True):
        expected = (1, "", f"tfbridge server: {line}\n")
        if (rc, out, err) != expected or seconds > 5.0:
            wrong[name] = ((rc, out, err, round(seconds, 2)), expected)
    assert wrong == {}


# --- fuzzing: whatever comes in, a ClusterSpec TF can take or one ClusterSpecError line ---------------

_JOB = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}")


def _held(spec: ClusterSpec) -> None:
    """What a ClusterSpec that was accepted holds: job names, indices TF's
    int32 takes, ASCII 'host:port' addresses without spaces or control
    characters, ports up to 65535; and its ClusterDef round-trips."""
    for job in spec.jobs:
        assert _JOB.fullmatch(job), job
        for index in spec.task_indices(job):
            assert 0 <= index < 2**31, index
            address = spec.task_address(job, index)
            assert _ADDRESS.fullmatch(address) and int(address.rpartition(":")[2]) <= 65535, address
    assert ClusterSpec(spec.as_cluster_def()) == spec


def _outcome(make):
    t0 = time.monotonic()
    try:
        result = make()
    except ClusterSpecError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) <= 1000, message
        result = None
    assert time.monotonic() - t0 < 2.0
    return result


_pieces = st.sampled_from(["localhost", "127.0.0.1", "[::1]", "::1", "h", "n01", "a b", "\x00", "\n", "\u0663",
                           ":", "2222", "65536", "-1", "2147483648", "4294967296", "1e400", "1.5", "[", "]",
                           "cn[0-999999999]", "x" * 300, "\ufeff", "\udcff", "%eth0"])
_text = st.one_of(st.text(max_size=40), st.lists(_pieces, max_size=6).map("".join))
_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text),
                     lambda inner: st.one_of(st.lists(inner, max_size=4),
                                             st.dictionaries(_text, inner, max_size=4)), max_leaves=12)
_jobs = st.dictionaries(st.one_of(st.sampled_from(["ps", "worker", "chief"]), _text),
                        st.one_of(st.lists(_text, max_size=4), st.dictionaries(_text, _text, max_size=4), _json),
                        max_size=3)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.one_of(_jobs.map(json.dumps), _json.map(json.dumps), st.binary(max_size=200),
                      _jobs.map(lambda j: json.dumps(j).encode("utf-16"))))
def test_fuzz_cluster_files(tmp_path_factory, data):
    path = tmp_path_factory.getbasetemp() / "fuzz.json"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    spec = _outcome(lambda: ClusterSpec.from_json(path))
    if spec is not None:
        _held(spec)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cluster=_jobs, task=st.one_of(_json, st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["ps", "worker"]), _json)},
    optional={"index": st.one_of(st.integers(-2, 2**33), st.floats(), _pieces, _json)})))
def test_fuzz_tf_config(cluster, task):
    value = json.dumps({"cluster": cluster, "task": task})
    spec = _outcome(lambda: ClusterSpec.from_tf_config(value))
    if spec is not None:
        _held(spec)
    job_index = _outcome(lambda: tf_config_task(value))
    if job_index is not None:  # taken as written: no None read as "None", no 1.5 read as 1
        assert _JOB.fullmatch(job_index[0]) and 0 <= job_index[1] < 2**31, job_index
        assert task["type"] == job_index[0], (task, job_index)
        index = task.get("index", 0)
        assert (type(index) is int and index == job_index[1]) or (
            isinstance(index, str) and index.isascii() and index.isdigit() and int(index) == job_index[1]), task


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(env=st.fixed_dictionaries({}, optional={
    name: _text for name in ("SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                             "SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS")}),
       jobs=st.one_of(st.none(), st.dictionaries(_text, st.integers(-3, 5), max_size=3)),
       port_base=st.integers(-5, 70000))
def test_fuzz_slurm_environment(env, jobs, port_base):
    env = {k: v.replace("\x00", "") for k, v in env.items()}  # an environment holds no NUL
    spec = _outcome(lambda: ClusterSpec.from_slurm(jobs, port_base=port_base, environ=env))
    if spec is not None:
        _held(spec)
        job, index = slurm_task(jobs, environ=env)
        assert index in spec.task_indices(job)
    if env.get("SLURM_STEP_NODELIST"):
        hosts = _outcome(lambda: expand_hostlist(env["SLURM_STEP_NODELIST"]))
        assert hosts is None or len(hosts) <= 100_000
