"""Logical plan -> dataflow nodes.

Each logical relation becomes one operator, split into ``shards`` node shards when
it is stateful and keyed (aggregates by group, joins by join key, readers by lookup
key), with sharders inserted where the partitioning changes (``sharding.py``).
Identical sub-plans are built once and shared by every view that contains them: plan
relations are immutable values, so the planner memoizes on the relation itself. A
view's reader is its own.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Callable, cast

from sql_frontend import plan as lp
from sql_frontend.expr import Col

from ..graph import Graph, Node
from ..ops import (
    Aggregate,
    Base,
    Distinct,
    Extremum,
    Filter,
    Join,
    Operator,
    Project,
    Reader,
    SetOp,
    TopK,
    Union,
    Values,
)
from ..ops.project import keeps_columns
from .poison import count_probe, divides, keep_key_columns
from .sharding import ANY, Exchanges, Stream, identity


class Planner:
    def __init__(self, graph: Graph, shards: int, on_add: Callable[[Node], None]) -> None:
        self.graph = graph
        self.shards = shards
        self.on_add = on_add
        self.memo: dict[object, Stream] = {}
        self.bases: dict[str, Stream] = {}
        self.exchanges = Exchanges(graph, shards, self.new_node)
        self.fresh: set[str] = set()

    # ------------------------------------------------------------ nodes

    def new_node(self, make: Operator | Callable[[], Operator],
                 parents_per_shard: list[list[str]], sharded: bool | None = None,
                 **attrs) -> list[str]:
        """Create one node per entry of ``parents_per_shard``; returns their ids."""
        # What each port receives, for Spark lineage recovery (recovery/spark.py): one
        # (logical relation, partition columns of that stream or None) per port.
        inputs = attrs.pop("inputs", None)
        num = self.graph.new_number()
        n = len(parents_per_shard)
        sharded = n > 1 if sharded is None else sharded
        ids = []
        for i, parents in enumerate(parents_per_shard):
            op = make() if callable(make) and not isinstance(make, Operator) else make
            shard = i if sharded else None
            parents = self._distinct_parents(parents, shard)
            nid = f"n{num}.{i}" if sharded else f"n{num}"
            node = self.graph.add(Node(nid, op, shard, parents, **attrs))
            node.inputs = inputs
            self.fresh.add(nid)
            self.on_add(node)
            ids.append(nid)
        return ids

    def _distinct_parents(self, parents: list[str], shard: int | None) -> list[str]:
        """A node may not have the same parent on two ports (a self-join, a UNION ALL of a
        query with itself): later repeats go through a pass-through node."""
        out: list[str] = []
        for p in parents:
            if p in out:
                num = self.graph.new_number()
                nid = f"n{num}" if shard is None else f"n{num}.{shard}"
                width = self._width_of(p)
                node = self.graph.add(Node(nid, identity(width), shard, [p]))
                self.fresh.add(nid)
                self.on_add(node)
                p = nid
            out.append(p)
        return out

    def _width_of(self, node_id: str) -> int:
        for s in list(self.memo.values()) + list(self.bases.values()):
            if node_id in s.sources:
                return s.width
        for s in self.exchanges.memo.values():
            if node_id in s.sources:
                return s.width
        raise KeyError(node_id)

    def take_fresh(self) -> set[str]:
        fresh, self.fresh = self.fresh, set()
        return fresh

    # ------------------------------------------------------------ tables and views

    def add_table(self, schema) -> str:
        ids = self.new_node(Base(schema), [[]], sharded=False, table=schema.name)
        self.bases[schema.name.lower()] = Stream((ids[0],), None, len(schema.columns))
        return ids[0]

    def add_view(self, name: str, query: lp.Query) -> list[str]:
        root, probe = keep_key_columns(query)   # (a read by key finds its poisoned rows)
        # (a range view's reader keeps a sorted index over the column of its bounds)
        ranged = query.bounds[0].column if query.bounds else None
        width = len(root.columns)
        pg = bool(query.key) and divides(root)  # (its reads by key see markers: ops/reader.py)
        if isinstance(root, lp.Project) and self.shards == 1 and root not in self.memo:
            # the SELECT list applied by the reader itself: no project node, one hop less
            # (sharded, the reader's partition would have to be mapped through it)
            s = self.exchanges.gather(self.build(root.input))
            keeps = keeps_columns(root.exprs, s.width)
            return self.new_node(
                lambda: Reader(query.key, query.visible, width, query.order,
                               None if keeps else Project(root.exprs), pg, probe,
                               range_column=ranged),
                [[s.sources[0]]], sharded=False, view=name, inputs=((root.input, None),))
        s = self.build(root)
        if query.key and self.shards > 1:
            s = self.exchanges.partition(s, query.key)
        else:
            s = self.exchanges.gather(s)
        return self.new_node(lambda: Reader(query.key, query.visible, width, query.order,
                                            None, pg, probe, range_column=ranged),
                             [[src] for src in s.sources], sharded=s.sharded, view=name,
                             inputs=((root, s.partition),))

    def owned(self, node_ids: Iterable[str]) -> list[str]:
        """What ``remove(node_ids)`` removes, changing nothing: ``node_ids`` (those in the
        graph without children: readers) and, upstream, every node but a base all of
        whose children are among them; children before their parents."""
        own: dict[str, None] = {}           # (ordered: children first)
        todo = list(node_ids)
        while todo:
            nid = todo.pop()
            if nid in own or nid not in self.graph:
                continue
            node = self.graph[nid]
            if node.kind == "base" or not all(c in own for c in node.children):
                continue                    # (seen again when its last child is taken)
            own[nid] = None
            todo.extend(dict.fromkeys(node.parents))
        return list(own)

    def remove(self, node_ids: list[str], on_remove: Callable[[str], None]) -> None:
        """Remove ``node_ids`` and every node left without children (bases stay):
        ``owned``, children first."""
        removed = self.owned(node_ids)
        for nid in removed:
            self.graph.remove(nid)
            on_remove(nid)
        gone = set(removed)
        for k in [k for k, v in self.memo.items() if not gone.isdisjoint(v.sources)]:
            del self.memo[k]                # (in place: rebuilding rehashes every plan)
        self.exchanges.forget(gone)

    def drop_table(self, name: str) -> str:
        s = self.bases.pop(name.lower())
        return s.sources[0]

    # ------------------------------------------------------------ relations

    def build(self, rel) -> Stream:
        if isinstance(rel, lp.Scan):
            return self.bases[rel.table.lower()]
        s = self.memo.get(rel)
        if s is None:
            s = self.memo[rel] = getattr(self, "_" + type(rel).__name__.lower())(rel)
        return s

    def _per_shard(self, make, s: Stream, partition, width: int, input_rel=None) -> Stream:
        ids = self.new_node(make, [[src] for src in s.sources], sharded=s.sharded,
                            inputs=((input_rel, s.partition),))
        return Stream(tuple(ids), partition, width)

    def _filter(self, rel: lp.Filter) -> Stream:
        s = self.build(rel.input)
        return self._per_shard(lambda: Filter(rel.predicate, rel.keep), s, s.partition, s.width,
                               rel.input)

    def _project(self, rel: lp.Project) -> Stream:
        s = self.build(rel.input)
        if keeps_columns(rel.exprs, s.width):
            return s        # every column in place (only names change): no node, no hop
        partition = s.partition
        if isinstance(partition, tuple):
            where = {e.index: i for i, e in reversed(list(enumerate(rel.exprs)))
                     if isinstance(e, Col)}
            partition = tuple(where[c] for c in partition) if all(
                c in where for c in partition) else ANY
        return self._per_shard(lambda: Project(rel.exprs), s, partition, len(rel.exprs), rel.input)

    def _join(self, rel: lp.Join) -> Stream:
        left, right = self.build(rel.left), self.build(rel.right)
        lw, rw = left.width, right.width
        poison = divides(rel)           # (rows of markers passed on: ops/join.py)
        make = lambda: Join(rel.kind, rel.left_keys, rel.right_keys, lw, rw,  # noqa: E731
                            poison, rel.keep)
        if self.shards > 1 and rel.left_keys:
            left = self.exchanges.partition(left, rel.left_keys)
            right = self.exchanges.partition(right, rel.right_keys)
            ids = self.new_node(make, [[l, r] for l, r in zip(left.sources, right.sources)],
                                inputs=((rel.left, left.partition), (rel.right, right.partition)))
            return Stream(tuple(ids), rel.left_keys, lw + rw)
        left, right = self.exchanges.gather(left), self.exchanges.gather(right)
        ids = self.new_node(make, [[left.sources[0], right.sources[0]]],
                            inputs=((rel.left, None), (rel.right, None)))
        return Stream(tuple(ids), None, lw + rw)

    def _aggregate(self, rel: lp.Aggregate) -> Stream:
        s = self.build(rel.input)
        cls = Extremum if rel.aggs and all(a.func in ("min", "max") for a in rel.aggs) else Aggregate
        if cls is Aggregate and divides(rel.input):    # (COUNT sees the marker: poison.py)
            pg, probe = True, count_probe(rel.input)
            make = lambda: Aggregate(rel.group_by, rel.aggs, pg, probe)  # noqa: E731
        else:
            make = lambda: cls(rel.group_by, rel.aggs)  # noqa: E731
        width = len(rel.columns)
        if self.shards > 1 and rel.group_by:
            s = self.exchanges.partition(s, rel.group_by, subset_ok=True)
            # (partitioned on key columns: a tuple)
            out_partition = tuple(rel.group_by.index(c)
                                  for c in cast("tuple[int, ...]", s.partition))
            return self._per_shard(make, s, out_partition, width, rel.input)
        s = self.exchanges.gather(s)
        return self._per_shard(make, s, None, width, rel.input)

    def _distinct(self, rel: lp.Distinct) -> Stream:
        s = self.build(rel.input)
        if self.shards > 1:
            if not isinstance(s.partition, tuple):
                s = self.exchanges.partition(s, tuple(range(s.width)))
            return self._per_shard(Distinct, s, s.partition, s.width, rel.input)
        return self._per_shard(Distinct, s, None, s.width, rel.input)

    def _union_(self, rel: lp.Union_) -> Stream:
        inputs = [self.build(i) for i in rel.inputs]
        width = len(rel.columns)
        first = inputs[0]
        if (self.shards > 1 and isinstance(first.partition, tuple)
                and all(i.partition == first.partition for i in inputs)):
            parents = [[i.sources[k] for i in inputs] for k in range(self.shards)]
            ids = self.new_node(Union, parents, sharded=True,
                                inputs=tuple((r, i.partition) for r, i in zip(rel.inputs, inputs)))
            return Stream(tuple(ids), first.partition, width)
        gathered = [self.exchanges.gather(i).sources[0] for i in inputs]
        ids = self.new_node(Union, [gathered], inputs=tuple((r, None) for r in rel.inputs))
        return Stream(tuple(ids), None, width)

    def _topk(self, rel: lp.TopK) -> Stream:
        s = self.build(rel.input)
        pg = divides(rel.input)         # (a row of markers is never cut: ops/topk.py)
        make = lambda: TopK(rel.order, rel.limit, rel.offset, rel.partition, pg)  # noqa: E731
        if self.shards > 1 and rel.partition:
            s = self.exchanges.partition(s, rel.partition, subset_ok=True)
            return self._per_shard(make, s, s.partition, s.width, rel.input)
        s = self.exchanges.gather(s)
        return self._per_shard(make, s, None, s.width, rel.input)

    # ------------------------------------------------------------ added for SQL coverage

    def _values(self, rel: lp.Values) -> Stream:
        ids = self.new_node(Values(rel.rows), [[]], sharded=False, inputs=())
        return Stream((ids[0],), None, len(rel.columns))

    def _setop(self, rel: lp.SetOp) -> Stream:
        left, right = self.build(rel.left), self.build(rel.right)
        width = len(rel.columns)
        make = lambda: SetOp(rel.kind)  # noqa: E731
        inputs = ((rel.left, None), (rel.right, None))
        if self.shards > 1:
            key = tuple(range(width))
            if key:
                left = self.exchanges.partition(left, key)
                right = self.exchanges.partition(right, key)
                ids = self.new_node(make, [[a, b] for a, b in zip(left.sources, right.sources)],
                                    inputs=((rel.left, key), (rel.right, key)))
                return Stream(tuple(ids), key, width)
        left, right = self.exchanges.gather(left), self.exchanges.gather(right)
        ids = self.new_node(make, [[left.sources[0], right.sources[0]]], inputs=inputs)
        return Stream(tuple(ids), None, width)
