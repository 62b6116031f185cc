"""Building a nested build spec (import_check's format) into a graph, the
same way for stock TensorFlow (the oracle, ``import_check``) and for the
bridge (``tests/framework/test_scopes.py``): both graph APIs have TF's scope names,
so only how a node is made differs.  Imports neither TensorFlow nor bridge.
"""
from __future__ import annotations

import contextlib
from typing import Any


class SpecBuilder:
    """Builds a list of items (nodes and scopes) into ``self.graph``, recording
    each node's operation in ``self.ids``.  Subclasses make the nodes."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.ids: dict[str, Any] = {}

    def node(self, item: dict) -> None:
        raise NotImplementedError

    def build(self, items: list) -> None:
        with self.graph.as_default():
            for item in items:
                if "body" in item:
                    self.scope(item)
                else:
                    self.node(item)

    def scope(self, item: dict) -> None:
        """Enter the scopes ``item`` names, in the format's order, and build its body."""
        g = self.graph
        with contextlib.ExitStack() as stack:
            if "name_scope" in item:
                stack.enter_context(g.name_scope(item["name_scope"]))
            if "device" in item:
                stack.enter_context(g.device(item["device"]))
            if "colocate_with" in item:
                stack.enter_context(g.colocate_with(self.ids[item["colocate_with"]]))
            if "control_dependencies" in item:
                deps = item["control_dependencies"]
                stack.enter_context(g.control_dependencies(
                    None if deps is None else [self.ids[d] for d in deps]))
            self.build(item["body"])
