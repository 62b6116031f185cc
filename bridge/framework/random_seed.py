"""Graph-level and op-level random seeds, with TensorFlow's rules (tf.compat.v1).

Every random op (RandomStandardNormal, TruncatedNormal, RandomUniform, ...)
takes two seed attributes, ``seed`` and ``seed2``; :func:`get_seed` derives
them from the graph-level seed (:func:`set_random_seed`) and the op's own
seed exactly as ``tf.compat.v1.get_seed`` does:

=================  ===========  =====================================================
graph seed         op seed      (seed, seed2)
=================  ===========  =====================================================
set                None         (graph seed, n): n counts such requests per graph
set                given        (graph seed, op seed)
not set            given        (DEFAULT_GRAPH_SEED = 87654321, op seed)
not set            None         (None, None): the op gets 0, 0, fresh values each run
=================  ===========  =====================================================

Seeds are reduced modulo 2**31 - 1, and (0, 0), which TensorFlow's kernels
read as "not seeded", becomes (0, 2**31 - 1).  The per-graph counter starts
at 0 in every graph, so the same graph seed and the same construction give
the same values in a new graph and a new session.  TF's own counter works
the same way (``random_seed._graph_to_seed_dict``), and TF's Philox kernels
give the same numbers for the same (seed, seed2): a bridge graph and a TF
graph that ask for seeds in the same order draw identical values.
"""
from __future__ import annotations

import weakref
from typing import Optional

from .graph import Graph, get_default_graph

__all__ = ["DEFAULT_GRAPH_SEED", "get_seed", "set_random_seed"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2 ** 31 - 1

# Op seeds handed out per graph when only the graph seed is set (TF keeps
# the same weak dictionary).
_graph_to_seed_dict: "weakref.WeakKeyDictionary[Graph, int]" = weakref.WeakKeyDictionary()


def set_random_seed(seed: Optional[int], graph: Optional[Graph] = None) -> None:
    """Set the graph-level random seed of ``graph`` (the default graph), as
    ``tf.compat.v1.set_random_seed``; None clears it."""
    if seed is not None and not isinstance(seed, int):
        raise TypeError(f"set_random_seed: seed must be an int or None, not {type(seed).__name__}")
    (graph or get_default_graph()).seed = seed


def _truncate_seed(seed: int) -> int:
    return int(seed) % _MAXINT32  # Truncate to fit into 32-bit integer


def _graph_seed(graph: Graph) -> Optional[int]:
    # A function body (FuncGraph) inherits the seed of the graph it is traced in, as in TF.
    g: Optional[Graph] = graph
    while g is not None:
        if g.seed is not None:
            return g.seed
        g = getattr(g, "outer_graph", None)
    return None


def get_seed(op_seed: Optional[int], graph: Optional[Graph] = None) -> tuple[Optional[int], Optional[int]]:
    """``(seed, seed2)`` for a random op with op-level seed ``op_seed`` in
    ``graph`` (the default graph): ``tf.compat.v1.get_seed``'s rules (module docstring)."""
    graph = graph or get_default_graph()
    global_seed = _graph_seed(graph)
    if global_seed is not None:
        if op_seed is None:
            op_seed = _graph_to_seed_dict.setdefault(graph, 0)
            _graph_to_seed_dict[graph] += 1
        seeds: tuple = (_truncate_seed(global_seed), _truncate_seed(op_seed))
    elif op_seed is not None:
        seeds = (DEFAULT_GRAPH_SEED, _truncate_seed(op_seed))
    else:
        seeds = (None, None)
    if seeds == (0, 0):
        return (0, _MAXINT32)
    return seeds


def op_seed_attrs(op_seed: Optional[int], graph: Optional[Graph] = None) -> dict:
    """The ``seed`` and ``seed2`` keyword arguments of a random op function."""
    seed, seed2 = get_seed(op_seed, graph)
    return {"seed": seed or 0, "seed2": seed2 or 0}
