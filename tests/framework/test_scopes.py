"""Name scopes, control dependencies, devices and colocation, as TensorFlow writes them.

Each scenario is a nested build spec (the import_check oracle's format).
Stock TensorFlow builds it in its own process; the bridge builds the same
spec here with the generated op functions and the graph's context managers.
The bridge's GraphDef must then hold the same nodes: names, op types, data
and control inputs, devices, and attributes (``_class`` for colocation),
both as written (decoded here) and as TensorFlow reads it back.
"""
from __future__ import annotations

import numpy as np
import pytest

import bridge
from bridge.ops import opgen
from bridge.framework.graph_def import parse_graph_def
from oracle._build_spec import SpecBuilder

f32 = np.float32


def ph(id_: str, shape=(2, 2)) -> dict:
    return {"op": "Placeholder", "id": id_, "name": id_, "attrs": {"dtype": f32, "shape": list(shape)}}


def node(op: str, id_: str, *inputs, name: str | None = None, **attrs) -> dict:
    item = {"op": op, "id": id_, "inputs": list(inputs), "attrs": attrs}
    if name is not None:
        item["name"] = name
    return item


SCENARIOS = {
    "name_scopes": [
        ph("a"), ph("v", (4,)),
        {"name_scope": "outer", "body": [
            {"name_scope": "inner", "body": [
                node("MatMul", "m1", "a", "a"),            # outer/inner/MatMul
                node("MatMul", "m2", "a", "a"),            # outer/inner/MatMul_1
            ]},
            {"name_scope": "inner", "body": [              # outer/inner_1
                node("MatMul", "m3", "a", "a"),
            ]},
            node("AddV2", "s1", "m1", "m3", name="sum"),
            node("AddV2", "s2", "m1", "m3", name="sum"),   # outer/sum_1
            node("Identity", "i1", "s1", name="inner"),    # a name taken by a scope: inner_2
            node("AddN", "n1", ["m1", "m2", "m3"]),
        ]},
        {"name_scope": "outer/inner/", "body": [         # re-entered exactly
            node("Identity", "i2", "m2"),
        ]},
        {"name_scope": "outer", "body": [node("Identity", "i3", "a")]},   # outer_1/Identity
        node("Identity", "i4", "a", name="Outer"),         # names are unique case-insensitively
        node("Identity", "i5", "a", name="a_1"),
        node("Identity", "i6", "a", name="a"),             # a and a_1 taken: a_2
        {"name_scope": "x", "body": [
            {"name_scope": "", "body": [node("Identity", "i7", "a")]},   # back at the root
        ]},
        {"name_scope": "deep", "body": [{"name_scope": "er", "body": [{"name_scope": "est", "body": [
            node("Unique", "u", "v"),
            node("Split", "sp", "cst", "a", num_split=2),
        ]}]}]},
    ],
    "control_dependencies": [
        ph("a"), ph("b"),
        {"control_dependencies": ["a"], "body": [
            node("Identity", "c1", "b"),                   # ^a
            node("Identity", "c2", "c1"),                  # fed by c1 (made inside): no ^a
            {"control_dependencies": ["b"], "body": [
                node("Identity", "c3", "a"),               # ^b only: a is already an input
                node("AddV2", "c4", "a", "b"),             # both are inputs: none
                node("NoOp", "c5"),                        # ^a, ^b
            ]},
            {"control_dependencies": None, "body": [
                node("Identity", "c6", "b"),               # cleared
                {"control_dependencies": ["c1"], "body": [node("Identity", "c7", "a")]},
            ]},
        ]},
        {"control_dependencies": ["c1", "c2", "c1"], "body": [
            {"name_scope": "s", "body": [node("MatMul", "c8", "a", "b")]},
        ]},
    ],
    "devices": [
        ph("a"),
        {"device": "/cpu:0", "body": [
            node("Identity", "d1", "a"),
            {"device": "/device:CPU:0", "body": [node("Identity", "d2", "a")]},
            {"device": None, "body": [node("Identity", "d3", "a")]},
        ]},
        {"device": "/job:localhost/replica:0/task:0/device:CPU:0", "body": [node("Identity", "d4", "a")]},
        {"name_scope": "scoped", "device": "/CPU:0", "body": [node("Identity", "d5", "a")]},
        {"device": "/job:worker/gpu:1", "body": [            # nested scopes merge field by field
            {"device": "/task:3", "body": [
                node("Identity", "d6", "a"),
                {"device": "/device:CPU:*", "body": [node("Identity", "d7", "a")]},
            ]},
        ]},
    ],
    "colocation": [
        ph("a"), ph("b"),
        {"colocate_with": "a", "body": [
            node("Identity", "k1", "b"),                   # _class: loc:@a
            node("AddV2", "k2", "a", "b"),
        ]},
        {"device": "/device:CPU:0", "body": [ph("p")]},
        {"colocate_with": "p", "body": [node("Identity", "k3", "b")]},   # takes p's device too
        {"device": "/job:worker", "body": [
            {"colocate_with": "a", "body": [node("Identity", "k4", "b")]},   # outer device dropped
            {"colocate_with": "p", "body": [
                {"device": "/device:GPU:0", "body": [node("Identity", "k5", "b")]},   # p's device wins
            ]},
        ]},
        {"colocate_with": "a", "body": [{"colocate_with": "b", "body": [node("Identity", "k6", "a")]}]},
        {"colocate_with": "k1", "body": [node("Identity", "k7", "a")]},   # k1's group: loc:@a
    ],
}

# Split's split_dim must be an int32 scalar: the one Const of the specs.
_CONST = {"op": "Const", "id": "cst", "name": "cst", "value": np.int32(0)}
SCENARIOS["name_scopes"].insert(1, _CONST)


# --- building a spec with the bridge -------------------------------------------------

class _BridgeBuilder(SpecBuilder):
    def __init__(self) -> None:
        from bridge import ops
        super().__init__(bridge.Graph())
        self.ops = ops
        self.fn = {v: k for k, v in ops.OP_TYPES.items()}

    def ref(self, ref: str):
        name, _, index = ref.partition(":")
        op = self.ids[name]
        return op.output(int(index or 0))

    def node(self, item: dict) -> None:
        op_type = item["op"]
        if op_type == "Const":
            out = bridge.constant(item["value"], name=item["name"])
            self.ids[item["id"]] = out.op
            return
        op_def = _op_defs()[op_type]
        names = opgen.param_names(op_def)
        inputs = [[self.ref(r) for r in ref] if isinstance(ref, list) else self.ref(ref)
                  for ref in item.get("inputs", [])]
        attrs = {names[k]: v for k, v in (item.get("attrs") or {}).items()}
        result = getattr(self.ops, self.fn[op_type])(*inputs, name=item.get("name"), **attrs)
        while isinstance(result, (list, tuple)):
            result = result[0]
        self.ids[item["id"]] = result if isinstance(result, bridge.Operation) else result.op


_OP_DEFS: dict = {}


def _op_defs() -> dict:
    if not _OP_DEFS:
        from bridge.framework.opdef import registry_op_defs
        _OP_DEFS.update((op.name, op) for op in registry_op_defs())
    return _OP_DEFS


def _raw_nodes(graph_def: bytes) -> dict:
    """name -> (op, inputs with control inputs sorted, device), as the bridge wrote them."""
    return {n.name: (n.op, _sorted_controls(n.inputs), n.device) for n in parse_graph_def(graph_def)}


def _sorted_controls(inputs: list) -> list:
    data = [i for i in inputs if not i.startswith("^")]
    return data + sorted(i for i in inputs if i.startswith("^"))


#: TF's Python layer marks ops used in control_dependencies with this attr,
#: for MLIR-bridge telemetry, after they were created; the C API cannot change
#: an existing op's attrs, and nothing at run time reads it.
_PYTHON_ONLY_ATTRS = {"_has_manual_control_dependencies"}


def _comparable(nodes: list) -> dict:
    out = {}
    for n in nodes:
        attrs = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in n["attrs"].items()
                 if k not in _PYTHON_ONLY_ATTRS}
        out[n["name"]] = (n["op"], _sorted_controls(n["inputs"]), n["device"], attrs)
    return out


@pytest.fixture(scope="module")
def tensorflow_graphs(oracle) -> dict:
    return {key: oracle("import_check", {"build": spec}) for key, spec in SCENARIOS.items()}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_graph_def_matches_tensorflow(scenario: str, tensorflow_graphs, oracle) -> None:
    b = _BridgeBuilder()
    b.build(SCENARIOS[scenario])
    tf = tensorflow_graphs[scenario]
    ours_def = b.graph.as_graph_def()

    # The same ids map to the same op names.
    assert {k: op.name for k, op in b.ids.items()} == tf["ids"]
    # Written exactly as TensorFlow writes them: names, op types, inputs, devices.
    want_raw = {n["name"]: (n["op"], _sorted_controls(n["inputs"]), n["device"]) for n in tf["built"]}
    assert _raw_nodes(ours_def) == want_raw
    # And read back by TensorFlow into the same nodes, attributes included.
    imported = oracle("import_check", {"graph_def": ours_def})["imported"]
    assert not isinstance(imported, str), imported
    assert _comparable(imported) == _comparable(tf["built"])


def test_converted_inputs_are_named_inside_the_op() -> None:
    """Python values become Consts named "<op>/<input>" (list items "<input>_<i>"),
    as TensorFlow's op_def_library names them, and the op keeps its own name."""
    from bridge import ops
    g = bridge.Graph()
    with g.as_default():
        a = bridge.placeholder(bridge.float32, [2], name="a")
        with g.name_scope("outer"):
            ops.add_v2(a, 1.0)
            ops.add_v2(a, 2.0)
            ops.concat_v2([a, [3.0, 4.0], a], 0, name="cat")
            with g.control_dependencies([a]):
                ops.mul(a, 3.0, name="scaled")
    nodes = {n.name: n for n in parse_graph_def(g.as_graph_def())}
    assert list(nodes) == ["a", "outer/AddV2/y", "outer/AddV2", "outer/AddV2_1/y", "outer/AddV2_1",
                           "outer/cat/values_1", "outer/cat/axis", "outer/cat", "outer/scaled/y", "outer/scaled"]
    assert nodes["outer/cat"].inputs == ["a", "outer/cat/values_1", "a", "outer/cat/axis"]
    # In a control_dependencies block the Const gets the dependency; the op,
    # fed by an op made inside the block, does not need it.
    assert nodes["outer/scaled/y"].inputs == ["^a"]
    assert nodes["outer/scaled"].inputs == ["a", "outer/scaled/y"]
