"""Strategies, a message simulator and a diff decoder shared by the tree-clock tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from treeclock import ReferenceTreeClocks, TreeClocks

MAX_NODES = 7
MAX_PARENTS = 3


@st.composite
def dags(draw, min_nodes: int = 1, max_nodes: int = MAX_NODES):
    """A random DAG as ``{node: parents}`` with non-consecutive ids.

    Nodes are added in a random topological order and each picks up to three
    earlier nodes as parents, in a random order, so diamonds (two paths from
    one node to another) and shortcut edges (a node feeding both a child and
    a grandchild) come up often.
    """
    n = draw(st.integers(min_nodes, max_nodes))
    ids = draw(st.lists(st.integers(0, 500), min_size=n, max_size=n, unique=True))
    graph = {}
    for i, node in enumerate(ids):
        earlier = ids[:i]
        # sampled_from draws evenly (integers() leans toward 0, and we want diamonds).
        k = draw(st.sampled_from(range(min(MAX_PARENTS, len(earlier)) + 1)))
        parents = draw(st.permutations(earlier).map(lambda p, k=k: tuple(p[:k]))) if k else ()
        graph[node] = parents
    return graph


def edges_of(graph: dict) -> list:
    """Every way a node can receive: ``(receiver, parent)``, parent None for a source's input."""
    out = []
    for node, parents in graph.items():
        if not parents:
            out.append((node, None))
        out.extend((node, p) for p in parents)
    return out


@st.composite
def scenarios(draw, max_messages: int = 25):
    """A graph, a depth in 1..4 and a sequence of receipts along its edges."""
    graph = draw(dags())
    depth = draw(st.sampled_from([1, 2, 3, 4]))
    edges = edges_of(graph)
    picks = draw(st.lists(st.integers(0, len(edges) - 1), max_size=max_messages))
    return graph, depth, [edges[i] for i in picks]


class Run:
    """Every node's clock, diff log and last diff after a message sequence."""

    def __init__(self, tc, graph, messages, *, combined: bool):
        self.tc = tc
        self.clocks = {n: tc.zero(n) for n in graph}
        self.logs = {n: tc.new_log(n) for n in graph}
        # A node that never received sends an all-zero diff.
        self.last = {n: tc.zero(n) for n in graph}
        self.diffs = []  # (receiver, diff) per message, in order
        self.history = []  # (receiver, clock before, clock after)
        for receiver, parent in messages:
            carried = None if parent is None else self.last[parent]
            before = self.clocks[receiver].copy()
            if combined:
                diff = tc.receive(receiver, parent, carried, self.clocks[receiver], self.logs[receiver])
            else:
                t = tc.time_at(receiver, self.clocks[receiver], (receiver,)) + 1
                diff = tc.make_diff(receiver, parent, carried, t)
                tc.merge_into(receiver, self.clocks[receiver], diff)
                self.logs[receiver].append(diff)
            self.last[receiver] = diff
            self.diffs.append((receiver, diff))
            self.history.append((receiver, before, self.clocks[receiver].copy()))


def both(graph, depth):
    return TreeClocks(graph, depth), ReferenceTreeClocks(graph, depth)


def children_of(graph: dict) -> dict:
    kids = {n: [] for n in graph}
    for node, parents in graph.items():
        for p in parents:
            kids[p].append(node)
    return kids


def shapes(graph: dict) -> list:
    """Labels for hypothesis.event: which interesting shapes a graph has."""
    out = []
    for node, parents in graph.items():
        grand = [g for p in parents for g in graph[p]]
        if any(g in parents for g in grand):
            out.append("shortcut")
        if len(grand) != len(set(grand)):
            out.append("diamond")
    return sorted(set(out))


def diff_of(tc: TreeClocks, node: int, path: tuple) -> np.ndarray:
    """The diff array a path stands for, in ``node``'s layout: the one row that
    ``apply_paths`` writes for it into a scratch log (it raises as that does)."""
    clock, log = tc.zero(node), tc.new_log(node, 1)
    tc.apply_paths(node, tuple(path), clock, log)
    return log[0].copy()
