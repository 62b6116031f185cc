"""bridge.distribute without servers: ClusterSpec from every source, bad
inputs, the ServerDef, device functions, replica_device_setter and the
placement of gradients."""
from __future__ import annotations

import json

import numpy as np
import pytest

import bridge
from bridge import distribute
from bridge.distribute import ClusterSpec, ClusterSpecError, expand_hostlist
from bridge.framework import _proto as pb

CLUSTER = {"ps": ["h0:2222", "h1:2222"], "worker": ["h2:2222", "h3:2222", "h4:2222"]}


# --- ClusterSpec ----------------------------------------------------------------------

def test_cluster_spec_has_tfs_api():
    c = ClusterSpec(CLUSTER)
    assert c.jobs == ["ps", "worker"]
    assert c.num_tasks("worker") == 3 and c.task_indices("ps") == [0, 1]
    assert c.task_address("worker", 2) == "h4:2222"
    assert c.as_dict() == CLUSTER
    assert ClusterSpec(c) == c and ClusterSpec.from_dict(CLUSTER) == c
    assert ClusterSpec(c.as_cluster_def()) == c  # the ClusterDef round-trips
    sparse = ClusterSpec({"worker": {1: "a:1", 3: "b:2"}})
    assert sparse.as_dict() == {"worker": {1: "a:1", 3: "b:2"}}
    assert sparse.job_tasks("worker") == [None, "a:1", None, "b:2"]
    with pytest.raises(ValueError, match="no task with index 0 in job 'worker'"):
        sparse.task_address("worker", 0)
    with pytest.raises(ValueError, match="no such job in the cluster: 'chief'"):
        c.num_tasks("chief")


def test_cluster_def_is_tfs_wire_format():
    """ClusterDef: job = 1 { name = 1, tasks = 2 (map<int32, string>: key 1, value 2) }."""
    data = ClusterSpec({"worker": ["a:1", "b:2"]}).as_cluster_def()
    (job,) = pb.fields(data)[1]
    fields = pb.fields(bytes(job))
    assert bytes(fields[1][0]) == b"worker"
    entries = [pb.fields(bytes(e)) for e in fields[2]]
    assert [(e[1][0], bytes(e[2][0])) for e in entries] == [(0, b"a:1"), (1, b"b:2")]


@pytest.mark.parametrize("cluster, fragment", [
    ("h:1", "expected a dict"),
    ({"1job": ["h:1"]}, "job name '1job'"),
    ({"worker": ["h"]}, "task 0 of job 'worker' has address 'h'"),
    ({"worker": ["h:99999"]}, "port from 0 to 65535"),
    ({"worker": [5]}, "has address 5"),
    ({"worker": {"x": "h:1"}}, "task index 'x'"),
    ({"worker": 3}, "maps to 3;"),
    ({"ps": ["h:1"], "worker": ["h:1"]}, "'h:1' is given twice"),
])
def test_bad_clusters_say_what_is_wrong(cluster, fragment):
    with pytest.raises(ClusterSpecError, match="cluster: .*" + fragment.replace("(", r"\(")):
        ClusterSpec(cluster)


def test_cluster_from_json_file_plain_or_tf_config_form(tmp_path):
    plain = tmp_path / "c.json"
    plain.write_text(json.dumps(CLUSTER))
    assert ClusterSpec.from_json(plain) == ClusterSpec(CLUSTER)
    tf_form = tmp_path / "tf.json"
    tf_form.write_text(json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 1}}))
    assert ClusterSpec.from_json(tf_form) == ClusterSpec(CLUSTER)
    bad = tmp_path / "bad.json"
    bad.write_text('{"worker": ["h:1",]}')
    with pytest.raises(ClusterSpecError, match=f"cluster file {bad}: not valid JSON: .* line 1"):
        ClusterSpec.from_json(bad)
    bad.write_text('{"worker": ["h1"]}')
    with pytest.raises(ClusterSpecError, match=f"cluster file {bad}: task 0 of job 'worker' has address 'h1'"):
        ClusterSpec.from_json(bad)
    with pytest.raises(ClusterSpecError, match="cannot be read"):
        ClusterSpec.from_json(tmp_path / "missing.json")


def test_cluster_from_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "ps", "index": 1}}))
    assert ClusterSpec.from_tf_config() == ClusterSpec(CLUSTER)
    assert distribute.tf_config_task() == ("ps", 1)
    monkeypatch.setenv("TF_CONFIG", '{"task": {"type": "ps"}}')
    with pytest.raises(ClusterSpecError, match='TF_CONFIG has no "cluster"'):
        ClusterSpec.from_tf_config()
    monkeypatch.setenv("TF_CONFIG", "{nope")
    with pytest.raises(ClusterSpecError, match="TF_CONFIG: not valid JSON"):
        ClusterSpec.from_tf_config()
    monkeypatch.delenv("TF_CONFIG")
    with pytest.raises(ClusterSpecError, match="TF_CONFIG is not set"):
        ClusterSpec.from_tf_config()


@pytest.mark.parametrize("hostlist, expected", [
    ("node1", ["node1"]),
    ("n[01-03,07]", ["n01", "n02", "n03", "n07"]),
    ("a[8-10],b", ["a8", "a9", "a10", "b"]),
    ("rack[1-2]-n[0-1]", ["rack1-n0", "rack1-n1", "rack2-n0", "rack2-n1"]),
    ("gpu[1-2]-ib,login", ["gpu1-ib", "gpu2-ib", "login"]),
])
def test_slurm_hostlists_expand(hostlist, expected):
    assert expand_hostlist(hostlist) == expected


@pytest.mark.parametrize("hostlist, fragment", [
    ("n[1-", "'\\[' without '\\]'"), ("n1]", "'\\]' without '\\['"), ("n[a-b]", "'a-b'"),
    ("n[3-1]", "goes down"), ("a,,b", "empty host name"),
])
def test_bad_slurm_hostlists(hostlist, fragment):
    with pytest.raises(ClusterSpecError, match=fragment):
        expand_hostlist(hostlist)


def _slurm_env(rank, nodelist="cn[01-02]", per_node="2(x2)", ntasks="4"):
    return {"SLURM_PROCID": str(rank), "SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": per_node,
            "SLURM_NTASKS": ntasks, "SLURM_JOB_NODELIST": "ignored[1-9]"}


def test_cluster_from_slurm_as_tfs_resolver_lays_it_out():
    env = _slurm_env(2)
    spec = ClusterSpec.from_slurm({"ps": 1, "worker": -1}, port_base=9000, environ=env)
    # Tasks fill the nodes in rank order, ports from the base; jobs take ranks in sorted order.
    assert spec.as_dict() == {"ps": ["cn01:9000"], "worker": ["cn01:9001", "cn02:9000", "cn02:9001"]}
    assert distribute.slurm_task({"ps": 1, "worker": -1}, environ=env) == ("worker", 1)
    assert ClusterSpec.from_slurm(environ=env).as_dict() == {
        "worker": ["cn01:8888", "cn01:8889", "cn02:8888", "cn02:8889"]}
    uneven = _slurm_env(0, "a,b[1-2]", "1,2(x2)", "5")
    assert ClusterSpec.from_slurm(environ=uneven).as_dict() == {
        "worker": ["a:8888", "b1:8888", "b1:8889", "b2:8888", "b2:8889"]}


@pytest.mark.parametrize("env, jobs, fragment", [
    ({}, None, "not running under SLURM: none of SLURM_PROCID"),
    (_slurm_env(9), None, "SLURM_PROCID=9 is not one of the 4 tasks"),
    (_slurm_env(0, per_node="2"), None, "describes 1 nodes, but the node list has 2"),
    (_slurm_env(0, per_node="x"), None, "'x' is not 'N' or 'N\\(xK\\)'"),
    (_slurm_env(0, ntasks="5"), None, "SLURM_NTASKS=5 but"),
    (_slurm_env(0), {"ps": 1, "worker": 1}, "need 2 tasks, but the SLURM step has 4"),
    (_slurm_env(0), {"ps": -1, "worker": -1}, "only one job may take the remaining"),
])
def test_bad_slurm_environments(env, jobs, fragment):
    with pytest.raises(ClusterSpecError, match=fragment):
        ClusterSpec.from_slurm(jobs, environ=env)


# --- ServerDef --------------------------------------------------------------------------

def test_server_def_fields_and_collective_leader():
    data = distribute.server_def(CLUSTER, "worker", 1, config=bridge.SessionConfig(intra_op_parallelism_threads=2))
    f = pb.fields(data)
    assert ClusterSpec(bytes(f[1][0])) == ClusterSpec(CLUSTER)
    assert bytes(f[2][0]) == b"worker" and f[3][0] == 1 and bytes(f[5][0]) == b"grpc"
    config = pb.fields(bytes(f[4][0]))
    assert config[2] == [2]  # intra_op_parallelism_threads kept
    experimental = pb.fields(bytes(config[16][0]))
    assert bytes(experimental[1][0]) == b"/job:worker/replica:0/task:0"  # collective_group_leader
    chief = distribute.default_session_config(ClusterSpec({"chief": ["c:1"], "worker": ["w:1"]}))
    assert b"/job:chief/replica:0/task:0" in chief
    with pytest.raises(ValueError, match="no task with index 7"):
        distribute.server_def(CLUSTER, "worker", 7)


# --- device functions and replica_device_setter --------------------------------------------

def _devices(g):
    return {op.name: op.device for op in g.get_operations()}


def test_device_functions_apply_inside_out_as_in_tf():
    seen = []

    def to_gpu_job(op):
        seen.append((op.type, op.device))
        return "/job:gpu" + op.device if op.type == "Mul" else op.device

    g = bridge.Graph()
    with g.as_default():
        with bridge.device("/task:3"), bridge.device(to_gpu_job), bridge.device("/cpu:0"):
            x = bridge.constant(1.0, name="x")
            y = bridge.ops.mul(x, x, name="y")
            with bridge.device(None):
                z = bridge.ops.neg(y, name="z")
    d = _devices(g)
    assert d["x"] == "/task:3/device:CPU:0"                # the function kept it, the outer string merged
    assert d["y"] == "/job:gpu/task:3/device:CPU:0"
    assert d["z"] == ""
    assert seen == [("Const", "/device:CPU:0"), ("Mul", "/device:CPU:0")]  # it saw the inner scopes' device


def test_replica_device_setter_round_robin_and_merging():
    g = bridge.Graph()
    with g.as_default(), bridge.device(distribute.replica_device_setter(cluster=CLUSTER)):
        vs = [bridge.Variable(np.zeros(2), name=f"v{i}") for i in range(3)]
        y = vs[0].value() + vs[1].value()
        with bridge.device("/job:worker/task:2/cpu:0"):
            z = bridge.ops.neg(y, name="z")
            pinned = bridge.Variable(1.0, name="pinned")
    d = _devices(g)
    assert [d[f"v{i}"] for i in range(3)] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    # As TF's resource variables: the initializer and the read follow the handle.
    assert d["v1/Assign"] == d["v1/Read/ReadVariableOp"] == "/job:ps/task:1"
    assert d[y.op.name] == "/job:worker"
    assert d["z"] == "/job:worker/task:2/device:CPU:0"
    # A job set by an inner scope wins (merge_devices): TF keeps its job and takes no ps task.
    assert d["pinned"] == "/job:worker/task:2/device:CPU:0"
    assert distribute.replica_device_setter(cluster={"worker": ["h:1"]}) is None
    assert distribute.replica_device_setter() is None
    fn = distribute.replica_device_setter(ps_tasks=2, merge_devices=False, ps_ops=["Neg"])
    g = bridge.Graph()
    with g.as_default(), bridge.device(fn):
        a = bridge.ops.neg(bridge.constant(1.0, name="c"), name="a")
        with bridge.device("/job:mine"):
            b = bridge.ops.neg(a, name="b")
    d = _devices(g)
    assert (d["c"], d["a"], d["b"]) == ("/job:worker", "/job:ps/task:0", "/job:mine")


def test_greedy_load_balancing_by_bytes():
    strategy = distribute.GreedyLoadBalancingStrategy(2, distribute.byte_size_load_fn)
    g = bridge.Graph()
    with g.as_default(), bridge.device(distribute.replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        big = bridge.Variable(np.zeros((100, 10)), name="big")          # 8000 bytes -> ps 0
        small = [bridge.Variable(np.zeros(10, np.float32), name=f"s{i}") for i in range(3)]  # 40 bytes each -> ps 1
        last = bridge.Variable(np.zeros((2000,)), name="last")          # ps 1 still lighter
    d = _devices(g)
    assert d["big"] == "/job:ps/task:0"
    assert [d[f"s{i}"] for i in range(3)] == ["/job:ps/task:1"] * 3
    assert d["last"] == "/job:ps/task:1"
    assert strategy.loads == [8000, 120 + 16000]


def test_gradient_ops_get_the_device_scope_or_their_ops_device():
    """No gradient op gets device '' inside a device scope (TF's C++ builder
    places nothing itself); with colocate_gradients_with_ops each gradient op
    sits with the op it differentiates."""
    for colocate in (False, True):
        g = bridge.Graph()
        with g.as_default():
            with bridge.device(distribute.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")):
                x = bridge.placeholder(bridge.float64, [None, 3], name="x")
                w = bridge.Variable(np.ones((3, 2)), name="w")
                with bridge.device("/job:worker/task:1"):
                    h = bridge.ops.tanh(bridge.ops.mat_mul(x, w.value()), name="h")
                loss = bridge.ops.sum(h * h, [0, 1], name="loss")
                opt = bridge.train.GradientDescentOptimizer(0.1)
                grads = opt.compute_gradients(loss, colocate_gradients_with_ops=colocate)
        grad_ops = [op for op in g.get_operations() if op.name.startswith("gradients")]
        assert grad_ops and all(op.device for op in grad_ops), [op.name for op in grad_ops if not op.device]
        by_name = {op.name: op.device for op in grad_ops}
        if colocate:
            tanh_grad = next(n for n in by_name if n.startswith("gradients/h_grad/"))
            matmul_grad = next(n for n in by_name if n.startswith("gradients/MatMul_grad/"))
            assert by_name[tanh_grad] == by_name[matmul_grad] == "/job:worker/task:1"
            assert g.get_operation_by_name(matmul_grad).get_attr("_class") == [b"loc:@MatMul"]
            assert g.get_operation_by_name("gradients/Fill").device == "/job:worker/task:0"  # with loss
        else:
            assert set(by_name.values()) == {"/job:worker/task:0"}
        assert grads[0][0] is not None
