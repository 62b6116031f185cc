"""bridge.framework.opdef.op_def: one op type's OpDef, looked up once per graph."""
from __future__ import annotations

import pytest

import bridge
from bridge import errors
from bridge.framework import opdef
from bridge.ops.op_library import is_registered


def test_matches_the_registry_and_is_cached() -> None:
    add_n = opdef.op_def("AddN")
    assert add_n == {op.name: op for op in opdef.registry_op_defs()}["AddN"]
    assert add_n.inferred_attrs == {"N", "T"}
    assert opdef.op_def("AddN") is add_n


def test_per_graph_lookup_knows_the_graphs_functions() -> None:
    graph = bridge.Graph()
    with graph.as_default():
        @bridge.function
        def double(x):
            return x * 2.0

        call = double(bridge.constant(1.0)).op
    definition = opdef.op_def(call.type, graph)
    assert definition.name == call.type and len(definition.input_args) == 1
    assert opdef.op_def(call.type, graph) is definition
    with pytest.raises(errors.NotFoundError, match=call.type):
        opdef.op_def(call.type, bridge.Graph())


def test_unknown_op_type_is_not_found_and_not_cached() -> None:
    with pytest.raises(errors.NotFoundError, match="NoSuchOpForLookup"):
        opdef.op_def("NoSuchOpForLookup")
    assert "NoSuchOpForLookup" not in opdef._registered
    assert not is_registered("NoSuchOpForLookup")
    assert is_registered("MatMul")
