"""Where partitioning changes, insert the nodes that move rows to the right shard.

A ``Stream`` is a logical operator's output as its consumers see it: one source node
per shard (or a single one, unsharded), and the columns it is partitioned on. A
consumer that needs another partitioning gets a sharder in front (Noria's union +
sharder when the stream was already sharded on something else).
"""
from __future__ import annotations

from dataclasses import dataclass

from sql_frontend.expr import Col

from ..graph import Graph
from ..ops import Project, Sharder, Union

ANY = "any"     # sharded, on columns the planner no longer knows


@dataclass(frozen=True)
class Stream:
    sources: tuple[str, ...]                 # node id feeding shard i (one entry: unsharded)
    partition: tuple[int, ...] | str | None  # key columns, ANY, or None when unsharded
    width: int                               # number of columns

    @property
    def sharded(self) -> bool:
        return self.partition is not None


class Exchanges:
    """Builds (and reuses) the sharders and merging unions between streams."""

    def __init__(self, graph: Graph, shards: int, new_node) -> None:
        self.graph = graph
        self.shards = shards
        self.new_node = new_node        # callable(op, parents_per_shard) -> list of node ids
        self.memo: dict[tuple, Stream] = {}

    def gather(self, s: Stream) -> Stream:
        """The stream as one unsharded source."""
        if not s.sharded:
            return s
        key = ("gather", s.sources)
        if key not in self.memo:
            ids = self.new_node(Union(), [list(dict.fromkeys(s.sources))])
            self.memo[key] = Stream((ids[0],), None, s.width)
        return self.memo[key]

    def partition(self, s: Stream, key: tuple[int, ...], subset_ok: bool = False) -> Stream:
        """The stream split into ``shards`` parts on ``key``."""
        if isinstance(s.partition, tuple) and (
                s.partition == key or (subset_ok and s.partition and set(s.partition) <= set(key))):
            return s
        memo_key = ("partition", s.sources, key)
        if memo_key not in self.memo:
            source = self.gather(s)
            ids = self.new_node(Sharder(key, self.shards), [[source.sources[0]]])
            self.memo[memo_key] = Stream((ids[0],) * self.shards, key, s.width)
        return self.memo[memo_key]

    def forget(self, removed: set[str]) -> None:
        self.memo = {k: v for k, v in self.memo.items()
                     if not (set(v.sources) & removed)}


def identity(width: int) -> Project:
    """A pass-through, used so that no node has the same parent on two ports."""
    return Project(tuple(Col(i, None) for i in range(width)))  # type: ignore[arg-type]
