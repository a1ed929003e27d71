"""The dataflow graph: node shards and the edges between them.

A node here is one shard of one operator (an unsharded operator is a single node with
``shard`` None). Nodes know their parents in port order: a join's parents are
[left, right]. Runtimes hold the mutable per-node state (inbox, time, clock); the
graph holds only structure, so it can be shown (``db.graph()``) and planned over.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .ops.operator import Operator

if TYPE_CHECKING:  # pragma: no cover
    from sql_frontend.plan import Rel


@dataclass(eq=False)
class Node:
    id: str
    op: Operator
    shard: int | None = None
    parents: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    view: str | None = None           # the view a reader serves
    table: str | None = None          # the table a base node holds
    num: int = 0                      # small int id, for tree clocks (set by Graph.add)
    #: per port, (the logical relation it receives, that stream's partition: key
    #: columns, ANY or None), for Spark lineage recovery; set by the planner, else None
    inputs: tuple[tuple[Rel, tuple[int, ...] | str | None], ...] | None = field(
        default=None, init=False, repr=False)

    @property
    def kind(self) -> str:
        return self.op.kind

    def describe(self) -> dict:
        return {"id": self.id, "kind": self.kind, "shard": self.shard,
                "stateful": self.op.stateful, "parents": list(self.parents),
                "children": list(self.children), "view": self.view,
                "partial": bool(getattr(self.op, "partial", False))}


class Graph:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._next = 0
        self._nums = 0
        self.version = 0        # bumped by every change, for what domains derive from it

    def new_number(self) -> int:
        self._next += 1
        return self._next

    @property
    def last_number(self) -> int:
        """The highest node number given out so far."""
        return self._next

    def number_after(self, n: int) -> None:
        """Give out node numbers above ``n`` from now on (a restarted cluster's, whose
        old workers still hold nodes numbered up to ``n``: runtime/cluster/restart.py)."""
        self._next = max(self._next, n)

    def number_from(self, n: int) -> None:
        """Give out node numbers above ``n`` from now on, below any given already: a
        restarted cluster's controller keeping its workers' nodes builds them again
        with the numbers they had (runtime/cluster/restart.py); only on a graph that
        holds no node yet."""
        assert not self.nodes, "number_from on a graph that holds nodes"
        self._next = n

    def add(self, node: Node) -> Node:
        assert node.id not in self.nodes, node.id
        self._nums += 1
        node.num = self._nums
        self.nodes[node.id] = node
        self.version += 1
        for p in node.parents:
            self.nodes[p].children.append(node.id)
        return node

    def remove(self, node_id: str) -> None:
        node = self.nodes.pop(node_id)
        self.version += 1
        assert not node.children, f"{node_id} still has children {node.children}"
        for p in node.parents:
            if p in self.nodes:
                self.nodes[p].children.remove(node_id)

    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def parents_by_num(self) -> dict[int, tuple[int, ...]]:
        """The graph as tree clocks see it: node number -> parent numbers, in port order."""
        return {n.num: tuple(self.nodes[p].num for p in n.parents) for n in self.nodes.values()}

    def descendants(self, node_id: str) -> list[str]:
        """``node_id`` and everything downstream of it, in topological order."""
        seen = {node_id}
        stack = [node_id]
        while stack:
            for c in self.nodes[stack.pop()].children:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return [n for n in self.topological() if n in seen]

    def topological(self) -> list[str]:
        """Every node id, parents before children; ties in insertion order (deterministic)."""
        indeg = {n: len(set(node.parents)) for n, node in self.nodes.items()}
        ready = [n for n, d in indeg.items() if d == 0]
        out: list[str] = []
        i = 0
        while i < len(ready):
            n = ready[i]
            i += 1
            out.append(n)
            for c in dict.fromkeys(self.nodes[n].children):
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        return out
