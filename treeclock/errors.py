"""The one error type of the package, and the graph checks both versions share.

Every mistake a caller can make (a node the graph does not have, a diff from a
node that is not a parent, an array of the wrong shape, corrupt bytes) raises
:class:`TreeClockError`. It subclasses :class:`ValueError` so code that already
catches bad values keeps working, and it is its own type so recovery code can
tell "the clock data is unusable" apart from bugs elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["TreeClockError", "normalize_graph", "check_depth", "MAX_NODE_ID"]

#: Node ids are written as unsigned 32-bit numbers in the encoded header.
MAX_NODE_ID = 2**31 - 1
#: A depth above this makes clocks of more than a few thousand entries on any
#: graph with fan-in of 2 or more; it is almost certainly a mistake.
MAX_DEPTH = 16


class TreeClockError(ValueError):
    """Bad input to a tree-clock operation: the result would be a wrong clock."""


def _check_id(value: object, what: str) -> int:
    # bool is an int subclass; True as a node id is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TreeClockError(f"{what} must be an int node id, got {value!r}")
    if not 0 <= value <= MAX_NODE_ID:
        raise TreeClockError(f"{what} {value} is out of range 0..{MAX_NODE_ID}")
    return int(value)


def check_depth(depth: object) -> int:
    """Return ``depth`` as an int, or raise if it is not in 1..MAX_DEPTH."""
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise TreeClockError(f"depth must be an int, got {depth!r}")
    if not 1 <= depth <= MAX_DEPTH:
        raise TreeClockError(f"depth must be in 1..{MAX_DEPTH}, got {depth}")
    return depth


def normalize_graph(parents: Mapping[int, Iterable[int]]) -> dict[int, tuple[int, ...]]:
    """Check a ``node -> tuple of parents`` mapping and return a clean copy.

    The graph must be a DAG whose every parent is itself a key (sources map to
    an empty tuple), with no parent listed twice: the clock has exactly one
    subtree per incoming edge, so a duplicate would make two entries for the
    same path.
    """
    if not isinstance(parents, Mapping):
        raise TreeClockError(
            f"graph must be a mapping node -> tuple of parents, got {type(parents).__name__}"
        )
    graph: dict[int, tuple[int, ...]] = {}
    for node, ps in parents.items():
        node = _check_id(node, "node")
        if isinstance(ps, (str, bytes)) or not hasattr(ps, "__iter__"):
            raise TreeClockError(f"parents of node {node} must be a tuple of node ids, got {ps!r}")
        ps = tuple(_check_id(p, f"parent of node {node}") for p in ps)
        if len(set(ps)) != len(ps):
            raise TreeClockError(f"node {node} lists a parent twice: {ps}")
        graph[node] = ps
    for node, ps in graph.items():
        for p in ps:
            if p not in graph:
                raise TreeClockError(
                    f"parent {p} of node {node} is not in the graph "
                    f"(list every source with an empty tuple of parents)"
                )
    # Cycle check (iterative DFS, colours: 0 new, 1 on stack, 2 done).
    colour = dict.fromkeys(graph, 0)
    for start in graph:
        if colour[start]:
            continue
        stack = [(start, iter(graph[start]))]
        colour[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
            elif colour[nxt] == 1:
                raise TreeClockError(f"graph has a cycle through node {nxt}: a dataflow must be a DAG")
            elif colour[nxt] == 0:
                colour[nxt] = 1
                stack.append((nxt, iter(graph[nxt])))
    return graph
